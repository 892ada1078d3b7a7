"""``compute --scale F``: a faster or slower device, uniformly or per rank.

Scaling ``duration_micros`` alone would change nothing when the simulator's roofline is on (it times
a node from ``num_ops`` and ``tensor_size``), so both are scaled too: the roofline's operational
intensity is unchanged and its time scales by the same factor.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from fractions import Fraction

from ..digits import is_int_text
from ..errors import InputError
from ..et import schema
from ..et.attrs import INT_KINDS
from ..readfile import read_json
from .numbers import parse_factor, scale_int
from .rankset import RankSet

SCALED_ATTRS = ("num_ops", "tensor_size")


@dataclass(frozen=True)
class NodeFilter:
    """Which compute nodes an op touches: name regex and GPU (COMP) or host (CPU) kind."""

    match: re.Pattern | None = None
    kind: str | None = None  # "COMP" (is_cpu_op false), "CPU" (is_cpu_op true) or None (both)

    def selects(self, node) -> bool:
        if node.type != schema.COMP_NODE:
            return False
        if self.kind is not None and _is_cpu(node) != (self.kind == "CPU"):
            return False
        return self.match is None or self.match.search(node.name) is not None


def _is_cpu(node) -> bool:
    for attr in node.attr:  # the first entry, as every reader (attrs.get_attr)
        if attr.name == "is_cpu_op":
            return bool(getattr(attr, attr.WhichOneof("value") or "bool_val"))
    return False


def compile_regex(text: str | None, where: str) -> re.Pattern | None:
    if text is None:
        return None
    try:
        return re.compile(text)
    except re.error as exc:
        raise InputError(f"bad regular expression {text!r}: {exc}", where=where) from None


def scale_node(node, factor: Fraction) -> None:
    """Scale one compute node's duration and roofline inputs in place (attribute kinds kept)."""
    node.duration_micros = scale_int(node.duration_micros, factor, f"node {node.id} duration_micros")
    for attr in node.attr:
        kind = attr.WhichOneof("value")
        if attr.name in SCALED_ATTRS and kind in INT_KINDS and kind != "bool_val":
            setattr(attr, kind, scale_int(getattr(attr, kind), factor, f"node {node.id} {attr.name}"))


def scale_compute(rs: RankSet, factors: dict[int, Fraction], flt: NodeFilter) -> int:
    """Scale the selected nodes of each rank in ``factors``; returns how many nodes were scaled."""
    touched = 0
    for rank, factor in sorted(factors.items()):
        for node in rs.nodes[rank]:
            if flt.selects(node):
                scale_node(node, factor)
                touched += 1
    return touched


def check_ranks(rs: RankSet, ranks: list[int], where: str) -> None:
    """Refuse ranks the set does not have (one line naming the first)."""
    bad = [r for r in ranks if not 0 <= r < len(rs)]
    if bad:
        raise InputError(f"rank {bad[0]} is not in the set (ranks 0..{len(rs) - 1})", where=where)


def per_rank_factors(path: str) -> dict[int, Fraction]:
    """``{"<rank>": factor}`` from a JSON file; keys must be rank numbers."""
    raw = read_json(path)
    if not isinstance(raw, dict) or not raw:
        raise InputError('expected a non-empty object {"<rank>": factor}', file=path)
    out: dict[int, Fraction] = {}
    for key, value in raw.items():
        if not (isinstance(key, str) and is_int_text(key.strip())):
            raise InputError(f"key {key!r} is not a rank number", file=path)
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise InputError(f"factor {value!r} is not a number", file=path, where=f"rank {key}")
        out[int(key)] = parse_factor(value, f"{path}: rank {key}", allow_zero=True)
    return out


@dataclass(frozen=True)
class ComputeOp:
    """``compute --scale F [--match REGEX] [--type COMP|CPU] [--per-rank FILE]``."""

    scale: Fraction
    flt: NodeFilter
    per_rank: dict[int, Fraction]

    name = "compute"

    def apply(self, rs: RankSet) -> int:
        check_ranks(rs, sorted(self.per_rank), "--per-rank")
        factors = {r: self.scale * self.per_rank.get(r, Fraction(1)) for r in range(len(rs))}
        return scale_compute(rs, {r: f for r, f in factors.items() if f != 1}, self.flt)
