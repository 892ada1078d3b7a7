"""Structural self-check of a converted rank set, run before anything is written.

The validator (``chakra-pipe validate``) is the full rule book; this is the converter's own
guarantee, independent of it: unique ids, every dependency inside the file, acyclic, comm nodes
complete and not CPU ops, and every send matched by a receive on its peer (same tag and size).
A failure here is a converter bug or an input we misread, so it stops the conversion.
"""

from __future__ import annotations

from collections import Counter

from ..et import schema
from ..et.attrs import get_attr, get_int

_COMM = (schema.COMM_COLL_NODE, schema.COMM_SEND_NODE, schema.COMM_RECV_NODE)


def rank_problems(nodes: list) -> list[str]:
    """Problems inside one rank's node list (``node <id>: what``)."""
    problems: list[str] = []
    ids = Counter(n.id for n in nodes)
    problems += [f"node {i}: id used {c} times" for i, c in ids.items() if c > 1]
    parents: dict[int, set[int]] = {}
    for n in nodes:
        data, ctrl = list(n.data_deps), list(n.ctrl_deps)  # read each protobuf list once
        for kind, deps in (("data", data), ("ctrl", ctrl)):
            missing = [d for d in deps if d not in ids]
            if missing:
                problems.append(f"node {n.id}: {kind} dep on {missing[0]} which is not in the file")
            if len(set(deps)) != len(deps) or n.id in deps:
                problems.append(f"node {n.id}: duplicate or self {kind} dep")
        parents[n.id] = set(data) | set(ctrl)
        if n.type in _COMM:
            if get_attr(n, "is_cpu_op", True):
                problems.append(f"node {n.id}: comm node marked is_cpu_op")
            needed = ["comm_size", "pg_name"] + (
                ["comm_type"] if n.type == schema.COMM_COLL_NODE else ["comm_src", "comm_dst", "comm_tag"]
            )
            absent = [a for a in needed if get_attr(n, a, None) is None]
            if absent:
                problems.append(f"node {n.id}: comm node lacks {', '.join(absent)}")
    if not problems:
        stuck = cycle_node(parents)
        if stuck is not None:
            problems.append(f"node {stuck}: dependency cycle")
        elif not nodes:
            problems.append("no nodes")
    return problems


def cycle_node(parents: dict[int, set[int]]) -> int | None:
    """Smallest id left on a cycle of ``{node: parents}`` (None when acyclic).

    Kahn's algorithm, iterative, so deep graphs cannot overflow (chakra issue #189).
    """
    indeg = {i: len(ps) for i, ps in parents.items()}
    children: dict[int, list[int]] = {}
    for i, ps in parents.items():
        for d in ps:
            children.setdefault(d, []).append(i)
    ready = [i for i, d in indeg.items() if d == 0]
    while ready:
        for c in children.get(ready.pop(), ()):
            indeg[c] -= 1
            if indeg[c] == 0:
                ready.append(c)
    stuck = [i for i, d in indeg.items() if d > 0]
    return min(stuck) if stuck else None


def p2p_problems(ranks: list[list]) -> list[str]:
    """Every send (src, dst, tag, size) needs exactly one matching receive on ``dst``, and vice versa."""
    sends: Counter = Counter()
    recvs: Counter = Counter()
    for nodes in ranks:
        for n in nodes:
            if n.type in (schema.COMM_SEND_NODE, schema.COMM_RECV_NODE):
                key = (
                    get_int(n, "comm_src", -1),
                    get_int(n, "comm_dst", -1),
                    get_int(n, "comm_tag", 0),
                    get_int(n, "comm_size", 0),
                )
                (sends if n.type == schema.COMM_SEND_NODE else recvs)[key] += 1
    out = []
    for key in sorted(set(sends) | set(recvs)):
        if sends[key] != recvs[key]:
            src, dst, tag, size = key
            out.append(f"p2p {src}->{dst} tag {tag} size {size}: {sends[key]} send(s) but {recvs[key]} receive(s)")
    return out
