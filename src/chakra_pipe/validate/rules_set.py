"""Cross-rank rules (chakra-format.md §9, items 24–25): what makes a rank set hang in a simulator.

A collective completes only when every member of its communicator group issues it, so members must
issue the same ordered sequence of collectives with equal type and size (divergent ranks hang
ASTRA-sim, astra-sim issue #339). A send completes only when its peer posts the matching receive.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

import numpy as np

from ..et import schema
from ..et.graph import TraceGraph
from ..et.traceset import WORLD_PG_NAMES
from .findings import ERROR, Finding
from .rules_file import COMM_REQUIRED, INT_KIND_NUMBERS, FileResult, id_list


@dataclass(frozen=True)
class RankView:
    """One rank as the cross-rank rules see it."""

    rank: int
    file: str
    graph: TraceGraph
    result: FileResult


@dataclass(frozen=True)
class Collective:
    node: int  # node id
    comm_type: int
    comm_size: int

    def describe(self) -> str:
        name = schema.COMM_TYPE_NAMES.get(self.comm_type, f"comm_type {self.comm_type}")
        return f"{name} of {self.comm_size} B (node {self.node})"


def group_members(
    ranks: list[RankView], comm_groups: dict[int, list[int]] | None, findings: list[Finding]
) -> dict[str, list[int]]:
    """Members of every communicator group by ``pg_name``: the comm-group file wins over METADATA.

    METADATA groups are read from the ranks in rank order; an empty ``ranks`` list means all ranks,
    as in ASTRA-sim. A rank whose METADATA defines a name differently from an earlier rank is an
    error (the ranks would build different groups and hang on their first collective).
    """
    world = list(range(len(ranks)))
    groups: dict[str, list[int]] = {}
    defined_by: dict[str, int] = {}
    for view in ranks:
        for name, members in view.result.metadata_groups.items():
            members = list(members) or world
            if name not in groups:
                groups[name], defined_by[name] = members, view.rank
            elif groups[name] != members:
                findings.append(
                    Finding(
                        view.file,
                        None,
                        "group-members",
                        ERROR,
                        f"METADATA defines group {name!r} as ranks {id_list(members)} but rank "
                        f"{defined_by[name]} defines it as {id_list(groups[name])}",
                    )
                )
    for name, members in groups.items():
        absent = [r for r in members if r >= len(ranks)]
        if absent:
            view = ranks[defined_by[name]]
            findings.append(
                Finding(
                    view.file,
                    None,
                    "incomplete-set",
                    ERROR,
                    f"incomplete rank set: METADATA group {name!r} lists rank(s) {id_list(absent)} "
                    f"but the set has {len(ranks)} rank file(s); its collectives could never "
                    "complete",
                )
            )
    for gid, members in (comm_groups or {}).items():
        groups[str(gid)] = list(members)
    for name in WORLD_PG_NAMES:
        groups[name] = world
    return groups


def collective_sequences(view: RankView) -> dict[str, list[Collective]]:
    """COMM_COLL nodes of one rank by group name, in the rank's issue order."""
    g = view.graph
    order = view.result.issue_order
    coll = order[g.types[order] == schema.COMM_COLL_NODE]
    ctype, csize = g.int_attr("comm_type", -1), g.int_attr("comm_size", -1)
    seqs: dict[str, list[Collective]] = defaultdict(list)
    for i in coll.tolist():
        name = g.pg_name.get(i, "")
        seqs["" if name in WORLD_PG_NAMES else name].append(Collective(int(g.ids[i]), int(ctype[i]), int(csize[i])))
    return seqs


def check_collectives(
    ranks: list[RankView], comm_groups: dict[int, list[int]] | None, groups_file: str
) -> list[Finding]:
    findings: list[Finding] = []
    n = len(ranks)
    groups = group_members(ranks, comm_groups, findings)
    seqs = [collective_sequences(v) for v in ranks]
    for name, members in sorted(groups.items(), key=lambda kv: (len(kv[0]), kv[0])):
        if name == "0":
            continue  # same group as ""
        label = "the world group" if name == "" else f"group {name!r}"
        outside = [m for m in members if m >= n]
        if outside:
            findings.append(
                Finding(
                    groups_file,
                    None,
                    "group-members",
                    ERROR,
                    f"{label} lists ranks {id_list(outside)} outside the {n}-rank set",
                )
            )
        members = [m for m in members if m < n]
        member_set = set(members)
        for view, seq in zip(ranks, seqs):
            if seq.get(name) and view.rank not in member_set:
                first = seq[name][0]
                findings.append(
                    Finding(
                        view.file,
                        first.node,
                        "group-members",
                        ERROR,
                        f"rank {view.rank} issues {len(seq[name])} collectives in {label}, "
                        f"which does not include it (members {id_list(members)})",
                    )
                )
        if not members:
            continue
        ref_rank = members[0]
        ref = seqs[ref_rank].get(name, [])
        for r in members[1:]:
            mine = seqs[r].get(name, [])
            problem = _divergence(mine, ref, ref_rank)
            if problem:
                node, text = problem
                findings.append(
                    Finding(
                        ranks[r].file,
                        node,
                        "collective-mismatch",
                        ERROR,
                        f"{label}: {text} (members {id_list(members)} must issue the same "
                        "collectives in the same order, or the simulation hangs)",
                    )
                )
    return findings


def _divergence(mine: list[Collective], ref: list[Collective], ref_rank: int) -> tuple[int | None, str] | None:
    for k, (a, b) in enumerate(zip(mine, ref)):
        if (a.comm_type, a.comm_size) != (b.comm_type, b.comm_size):
            return a.node, f"collective #{k + 1} is {a.describe()} here but {b.describe()} on rank {ref_rank}"
    if len(mine) != len(ref):
        k = min(len(mine), len(ref))
        node = mine[k].node if len(mine) > k else None
        extra = (
            f"first extra: {mine[k].describe()}"
            if len(mine) > k
            else f"first missing: {ref[k].describe()} on rank {ref_rank}"
        )
        return node, f"{len(mine)} collectives here but {len(ref)} on rank {ref_rank}; {extra}"
    return None


def check_point_to_point(ranks: list[RankView]) -> list[Finding]:
    """Pair every send (src, dst, tag, size) with a receive on the peer, in issue order."""
    n = len(ranks)
    sends: dict[tuple[int, int, int, int], list[tuple[RankView, int]]] = defaultdict(list)
    recvs: dict[tuple[int, int, int, int], list[tuple[RankView, int]]] = defaultdict(list)
    for view in ranks:
        g = view.graph
        order = view.result.issue_order
        types = g.types[order]
        src, dst = g.int_attr("comm_src", view.rank), g.int_attr("comm_dst", view.rank)
        tag, size = g.int_attr("comm_tag", 0), g.int_attr("comm_size", 0)
        for t, bucket in ((schema.COMM_SEND_NODE, sends), (schema.COMM_RECV_NODE, recvs)):
            # Nodes lacking an attribute are comm-node errors already; pairing them adds noise.
            usable = np.logical_and.reduce([np.isin(g.attr_kind[a][order], INT_KIND_NUMBERS) for a in COMM_REQUIRED[t]])
            for i in order[(types == t) & usable].tolist():
                key = (view.rank, int(dst[i])) if t == schema.COMM_SEND_NODE else (int(src[i]), view.rank)
                bucket[(*key, int(tag[i]), int(size[i]))].append((view, i))
    findings: list[Finding] = []
    for pair in sorted(set(sends) | set(recvs)):
        s, r = sends.get(pair, []), recvs.get(pair, [])
        src, dst, tag, size = pair  # type: ignore[assignment]
        for view, i in s[len(r) :]:
            where = f"rank {dst}" if 0 <= dst < n else f"rank {dst}, which is not in the {n}-rank set"
            findings.append(
                Finding(
                    view.file,
                    int(view.graph.ids[i]),
                    "p2p-unmatched",
                    ERROR,
                    f"send to {where} (tag {tag}, {size} B) has no matching recv there",
                )
            )
        for view, i in r[len(s) :]:
            where = f"rank {src}" if 0 <= src < n else f"rank {src}, which is not in the {n}-rank set"
            findings.append(
                Finding(
                    view.file,
                    int(view.graph.ids[i]),
                    "p2p-unmatched",
                    ERROR,
                    f"recv from {where} (tag {tag}, {size} B) has no matching send there",
                )
            )
    return findings
