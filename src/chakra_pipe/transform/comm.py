"""``comm --scale F [--type …]`` (compression, another precision) and ``comm --drop`` (ideal network).

Scaling rewrites ``comm_size`` of the selected collectives and point-to-point nodes; both ends of a
send/recv and all members of a group scale alike, so the set stays matched. Dropping removes every
communication node and hands its dependencies to its dependents, so communication costs exactly
nothing (a 0-byte collective would still cost ASTRA-sim's minimum chunks, and a placeholder node
the simulator's 1 ns minimum).
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

from ..errors import InputError
from ..et import schema
from ..et.attrs import INT_KINDS, get_int
from ..et.collectives import BY_TYPE, COLLECTIVES
from .numbers import scale_int
from .rankset import RankSet
from .stats import COMM_NODE_TYPES

P2P_TYPES = {"send": schema.COMM_SEND_NODE, "recv": schema.COMM_RECV_NODE}
COLLECTIVE_TYPES = {c.key: c.comm_type for c in COLLECTIVES}
TYPE_CHOICES = sorted([*COLLECTIVE_TYPES, *P2P_TYPES])


def comm_kind(node) -> str | None:
    """``all_reduce``/…/``send``/``recv`` of a communication node, None for any other node."""
    if node.type == schema.COMM_COLL_NODE:
        kind = get_int(node, "comm_type")
        known = None if kind is None else BY_TYPE.get(kind)
        return known.key if known else str(kind).lower()
    return next((k for k, t in P2P_TYPES.items() if t == node.type), None)


def set_int_attr(node, name: str, value: int) -> None:
    """Overwrite the ``name`` attribute consumers read (the first of that name, ``attrs.get_int``) in
    its own integer kind; KeyError when it is absent or not a non-bool integer."""
    for attr in node.attr:
        if attr.name == name:
            kind = attr.WhichOneof("value")
            if kind in INT_KINDS and kind != "bool_val":
                setattr(attr, kind, value)
                return
            break
    raise KeyError(name)


@dataclass(frozen=True)
class CommScaleOp:
    """Scale ``comm_size`` of the communication nodes of ``types`` (all when empty)."""

    scale: Fraction
    types: tuple[str, ...] = ()

    name = "comm"

    def apply(self, rs: RankSet) -> int:
        unknown = [t for t in self.types if t not in TYPE_CHOICES]
        if unknown:
            raise InputError(
                f"unknown communication type {unknown[0]!r} (choose from {', '.join(TYPE_CHOICES)})", where="--type"
            )
        touched = 0
        for nodes in rs.nodes:
            for node in nodes:
                kind = comm_kind(node)
                size = get_int(node, "comm_size")
                if kind is None or size is None or (self.types and kind not in self.types):
                    continue
                # A non-empty message stays non-empty: a 0-byte all-gather is invalid input.
                set_int_attr(
                    node, "comm_size", max(1, scale_int(size, self.scale, f"node {node.id} comm_size")) if size else 0
                )
                touched += 1
        return touched


def drop_nodes(nodes: list, drop: set[int]) -> list:
    """``nodes`` without the ids in ``drop``; each dependent inherits the dropped nodes' dependencies.

    A data dependency on a dropped node becomes data dependencies on what that node waited for (its
    control dependencies stay control ones); resolution is transitive, so chains of dropped nodes
    collapse. Nodes are in any order, so dropped nodes are resolved on demand (memoised).
    """
    by_id = {n.id: n for n in nodes}
    resolved: dict[int, tuple[list[int], list[int]]] = {}

    def inherit(nid: int) -> tuple[list[int], list[int]]:
        if nid in resolved:
            return resolved[nid]
        stack = [nid]
        while stack:  # iterative post-order: long comm chains must not hit the recursion limit
            cur = stack[-1]
            pending = [
                d
                for d in (*by_id[cur].data_deps, *by_id[cur].ctrl_deps)
                if d in drop and d in by_id and d not in resolved and d not in stack
            ]
            if pending:
                stack.append(pending[0])
                continue
            stack.pop()
            data, ctrl = _resolve(by_id[cur], drop, resolved, by_id)
            resolved[cur] = (data, ctrl)
        return resolved[nid]

    out = []
    for n in nodes:
        if n.id in drop:
            continue
        for d in (*n.data_deps, *n.ctrl_deps):
            if d in drop and d in by_id:
                inherit(d)
        data, ctrl = _resolve(n, drop, resolved, by_id)
        del n.data_deps[:]
        n.data_deps.extend(data)
        del n.ctrl_deps[:]
        n.ctrl_deps.extend(ctrl)
        out.append(n)
    return out


def _resolve(node, drop: set[int], resolved: dict, by_id: dict) -> tuple[list[int], list[int]]:
    data: list[int] = []
    ctrl: list[int] = []
    for d in node.data_deps:
        if d in drop and d in by_id:
            data.extend(resolved[d][0])
            ctrl.extend(resolved[d][1])
        else:
            data.append(d)
    for d in node.ctrl_deps:
        if d in drop and d in by_id:
            ctrl.extend(resolved[d][0] + resolved[d][1])
        else:
            ctrl.append(d)
    data = list(dict.fromkeys(data))
    kept = set(data)
    return data, [c for c in dict.fromkeys(ctrl) if c not in kept]


@dataclass(frozen=True)
class CommDropOp:
    """Remove every collective, send and receive (the ideal-network bound)."""

    name = "comm"

    def apply(self, rs: RankSet) -> int:
        touched = 0
        for rank, nodes in enumerate(rs.nodes):
            drop = {n.id for n in nodes if n.type in COMM_NODE_TYPES}
            if drop:
                rs.nodes[rank] = drop_nodes(nodes, drop)
                touched += len(drop)
        return touched
