"""``straggler --ranks R… --delay NS | --slowdown F [--at NODE_REGEX]``: late or slow ranks.

A delay is a host (``is_cpu_op``) COMP node of that duration spliced in front of the program's
roots (or of each node ``--at`` matches): being a host op, the simulator replays its duration even
with the roofline on and does not count it as device compute. A slowdown scales the compute nodes
of those ranks (all, or those ``--at`` matches) exactly like ``compute --scale``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from fractions import Fraction

from ..errors import InputError
from ..et import schema
from ..et.attrs import set_attr
from .compute import NodeFilter, check_ranks, scale_compute
from .rankset import RankSet

DELAY_NAME = "chakra_pipe.straggler.delay"


def delay_micros(ns: int) -> int:
    """Chakra durations are whole µs; a delay that is not would be silently rounded, so refuse it."""
    if ns < 0 or ns % 1000:
        raise InputError(
            f"delay {ns} ns is not a non-negative whole number of µs (Chakra durations are µs)", where="--delay"
        )
    return ns // 1000


def _delay_node(node_id: int, micros: int, deps: list[int]):
    node = schema.Node(id=node_id, name=DELAY_NAME, type=schema.COMP_NODE, duration_micros=micros)
    node.data_deps.extend(deps)
    set_attr(node, "is_cpu_op", True)
    return node


def insert_delays(nodes: list, micros: int, at: re.Pattern | None) -> tuple[list, int]:
    """``nodes`` with delay nodes spliced in; returns the new list and how many nodes now wait on one."""
    next_id = max((n.id for n in nodes), default=-1) + 1
    if at is None:
        roots = [n for n in nodes if not n.data_deps and not n.ctrl_deps and n.type != schema.METADATA_NODE]
        if not roots:
            return nodes, 0
        delay = _delay_node(next_id, micros, [])
        for n in roots:
            n.data_deps.append(delay.id)
        first = nodes.index(roots[0])
        return [*nodes[:first], delay, *nodes[first:]], len(roots)
    out, touched = [], 0
    for n in nodes:
        if at.search(n.name) and n.name != DELAY_NAME:
            delay = _delay_node(next_id, micros, list(n.data_deps))
            next_id += 1
            del n.data_deps[:]
            n.data_deps.append(delay.id)
            out.append(delay)
            touched += 1
        out.append(n)
    return out, touched


@dataclass(frozen=True)
class StragglerOp:
    """Delay (``delay_us``) or slow down (``slowdown``) ``ranks``, optionally only at ``at``."""

    ranks: tuple[int, ...]
    delay_us: int | None
    slowdown: Fraction | None
    at: re.Pattern | None

    name = "straggler"

    def apply(self, rs: RankSet) -> int:
        check_ranks(rs, list(self.ranks), "--ranks")
        if self.slowdown is not None:
            return scale_compute(rs, {r: self.slowdown for r in self.ranks}, NodeFilter(self.at))
        touched = 0
        if not self.delay_us:  # a 0 µs node would still cost the simulator's 1 ns minimum
            return 0
        for r in sorted(set(self.ranks)):
            rs.nodes[r], n = insert_delays(rs.nodes[r], self.delay_us or 0, self.at)
            touched += n
        return touched
