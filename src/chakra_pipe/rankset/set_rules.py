"""Cross-rank matching (chakra-format.md §9, items 24–25): what makes a rank set hang.

A collective completes only when every member of its communicator group issues it, so members must
issue the same ordered sequence of collectives with equal type and size (divergent ranks hang
ASTRA-sim, astra-sim issue #339). A send completes only when its peer posts the matching receive.

One policy each, used by every stage:

* **Reference rank** of a group: the member that issues the most collectives in it (the lowest rank
  among equals). Every other member is compared with it, so a rank that stops early or skips one is
  the rank blamed, not all the others.
* **Channel** of a message: ``(src, dst, tag)``. The k-th send and the k-th receive of a channel (in
  each rank's issue order) pair up; a pair of different sizes, or a message with no partner, is a
  ``p2p-unmatched`` problem on the node that has no (matching) partner; a message whose peer is not
  in the set is a ``p2p-peer`` problem instead (no partner can exist, and ASTRA-sim asserts on it).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from functools import cached_property

from ..et.graph import TraceGraph
from .comm import KIND_COLL, KIND_SEND, WORLD, CommSpec
from .file_rules import FileResult
from .groups import GroupTable, id_list
from .problems import ERROR, Finding


@dataclass(frozen=True)
class RankView:
    """One rank as the cross-rank rules see it: its file checks and resolved comm specs."""

    rank: int
    file: str
    graph: TraceGraph
    result: FileResult
    specs: dict[int, CommSpec]

    def node(self, i: int) -> int:
        return int(self.graph.ids[i])

    def in_order(self, kind: str | None = None) -> list[int]:
        """Records with a comm spec (of ``kind``, or any) in this rank's issue order."""
        specs = self.specs
        return [i for i in self._comm_in_order if kind is None or specs[i].kind == kind]

    @cached_property
    def _comm_in_order(self) -> list[int]:
        """Every rule and the proof ask for these (four walks of the whole issue order a rank)."""
        specs = self.specs
        return [i for i in self.result.issue_order.tolist() if i in specs]


def _label(name: str) -> str:
    return "the world group" if name == WORLD else f"group {name!r}"


def collective_sequences(view: RankView) -> dict[str, list[int]]:
    """COMM_COLL records of one rank by canonical group name, in the rank's issue order."""
    seqs: dict[str, list[int]] = defaultdict(list)
    for i in view.in_order(KIND_COLL):
        seqs[view.specs[i].group].append(i)
    return seqs


def reference_rank(members: tuple[int, ...], counts: dict[int, int]) -> int:
    """The member issuing the most collectives of the group; the lowest such rank."""
    return min(members, key=lambda r: (-counts.get(r, 0), r))


def check_collectives(ranks: list[RankView], table: GroupTable) -> list[Finding]:
    findings: list[Finding] = []
    seqs = [collective_sequences(v) for v in ranks]
    for name, members in sorted(table.members.items(), key=lambda kv: (len(kv[0]), kv[0])):
        label, member_set = _label(name), set(members)
        for view, seq in zip(ranks, seqs):
            if seq.get(name) and view.rank not in member_set:
                findings.append(
                    Finding(
                        view.file,
                        view.node(seq[name][0]),
                        "group-members",
                        ERROR,
                        f"rank {view.rank} issues {len(seq[name])} collectives in {label}, "
                        f"which does not include it (members {id_list(members)})",
                    )
                )
        ref_rank = reference_rank(members, {r: len(seqs[r].get(name, ())) for r in members})
        ref = seqs[ref_rank].get(name, [])
        for r in members:
            if r == ref_rank:
                continue
            problem = _divergence(ranks[r], seqs[r].get(name, []), ranks[ref_rank], ref)
            if problem:
                node, text = problem
                findings.append(
                    Finding(
                        ranks[r].file,
                        node,
                        "collective-mismatch",
                        ERROR,
                        f"{label}: {text} (members {id_list(members)} must issue the same "
                        "collectives in the same order, or the simulation may hang)",
                    )
                )
    return findings


def check_collective_order(ranks: list[RankView]) -> list[Finding]:
    """Collectives of one group that a rank's dependencies leave unordered must be interchangeable.

    Members pair their collectives of a group in the order they *issue* them, and a rank issues two
    collectives its dependencies do not order in whichever order their inputs are ready, which
    depends on timing (a send that completes at once, a receive that waits). Two such collectives
    that differ (type or size) can then pair with different partners on different ranks and hang
    ASTRA-sim and torch alike, while the untimed finish proof sees nothing. So every collective must
    have as ancestors all collectives of its group issued before it with a different type or size.
    Collectives in issue order form runs of one (type, size); it suffices that each collective has
    every member of the run before its own as an ancestor (earlier runs are then ancestors by
    transitivity). Timing can only tell such collectives apart when they wait for different
    point-to-point messages (a send completes when its data leaves, a receive when it arrives, so
    peers see them at different times): two unordered collectives that are both ready at the start,
    or behind the same sends and receives, are issued in id order on every rank, as ASTRA-sim's own
    examples rely on. Ancestor sets are bit masks over the group's collectives and the rank's
    sends and receives, propagated once along the issue order, and only on ranks whose group holds
    two different collectives.
    """
    findings: list[Finding] = []
    for view in ranks:
        seqs = {name: seq for name, seq in collective_sequences(view).items() if _mixed(view, seq)}
        if not seqs:
            continue
        p2p = [i for i in view.in_order() if view.specs[i].kind != KIND_COLL]
        bit = {i: 1 << k for k, i in enumerate([*p2p, *(i for seq in seqs.values() for i in seq)])}
        waits = (1 << len(p2p)) - 1  # the bits of the sends and receives
        ptr, parents = view.result.parents.ptr.tolist(), view.result.parents.parents.tolist()
        below: dict[int, int] = {}  # record -> mask of the flagged collectives among its ancestors
        for i in view.result.issue_order.tolist():
            mask = 0
            for p in parents[ptr[i] : ptr[i + 1]]:
                mask |= below.get(p, 0) | bit.get(p, 0)
            if mask:
                below[i] = mask
        for name, seq in sorted(seqs.items()):
            run_start, prev_run = 0, 0
            for k in range(1, len(seq)):
                if _signature(view, seq[k]) != _signature(view, seq[k - 1]):
                    prev_run, run_start = run_start, k
                if run_start == 0:
                    continue
                mine = below.get(seq[k], 0)
                missing = [
                    j
                    for j in seq[prev_run:run_start]
                    if not mine & bit[j] and (below.get(j, 0) & waits) != (mine & waits)
                ]
                if missing:
                    findings.append(
                        Finding(
                            view.file,
                            view.node(seq[k]),
                            "collective-order",
                            ERROR,
                            f"{_label(name)}: {_describe(view, seq[k])} does not depend on "
                            f"{_describe(view, missing[0])}, issued before it here; which of the two "
                            "is issued first depends on timing, so members can pair them differently "
                            "and hang (order them with a ctrl dependency)",
                        )
                    )
                    break
    return findings


def _signature(view: RankView, i: int) -> tuple[int | None, int]:
    spec = view.specs[i]
    return spec.comm_type, spec.nbytes


def _mixed(view: RankView, seq: list[int]) -> bool:
    return len(seq) > 1 and len({_signature(view, i) for i in seq}) > 1


def _describe(view: RankView, i: int) -> str:
    return f"{view.specs[i].describe()} (node {view.node(i)})"


def _divergence(me: RankView, mine: list[int], ref_view: RankView, ref: list[int]) -> tuple[int | None, str] | None:
    ref_rank = ref_view.rank
    for k, (a, b) in enumerate(zip(mine, ref)):
        sa, sb = me.specs[a], ref_view.specs[b]
        if (sa.comm_type, sa.nbytes) != (sb.comm_type, sb.nbytes):
            return (
                me.node(a),
                f"collective #{k + 1} is {_describe(me, a)} here but {_describe(ref_view, b)} on rank {ref_rank}",
            )
    if len(mine) != len(ref):
        k = min(len(mine), len(ref))
        node = me.node(mine[k]) if len(mine) > k else None
        extra = (
            f"first extra: {_describe(me, mine[k])}"
            if len(mine) > k
            else f"first missing: {_describe(ref_view, ref[k])} on rank {ref_rank}"
        )
        return node, f"{len(mine)} collectives here but {len(ref)} on rank {ref_rank}; {extra}"
    return None


def channel_positions(view: RankView) -> dict[int, tuple[tuple[int, int, int], int]]:
    """Per send/receive record: its channel ``(src, dst, tag)`` and its position k on that channel."""
    counts: dict[tuple[int, int, int], int] = defaultdict(int)
    pos: dict[int, tuple[tuple[int, int, int], int]] = {}
    for i in view.in_order():
        spec = view.specs[i]
        if spec.kind == KIND_COLL:
            continue
        pos[i] = (spec.channel, counts[(spec.kind, *spec.channel)])  # type: ignore[index]
        counts[(spec.kind, *spec.channel)] += 1  # type: ignore[index]
    return pos


def check_point_to_point(ranks: list[RankView]) -> list[Finding]:
    """Pair the k-th send and the k-th receive of every channel ``(src, dst, tag)``."""
    n = len(ranks)
    sends: dict[tuple[int, int, int], list[tuple[RankView, int]]] = defaultdict(list)
    recvs: dict[tuple[int, int, int], list[tuple[RankView, int]]] = defaultdict(list)
    for view in ranks:
        for i in view.in_order():
            spec = view.specs[i]
            if spec.kind != KIND_COLL:
                (sends if spec.kind == KIND_SEND else recvs)[spec.channel].append((view, i))
    findings: list[Finding] = []

    for channel in sorted(set(sends) | set(recvs)):
        s, r = sends.get(channel, []), recvs.get(channel, [])
        src, dst, tag = channel
        if not (0 <= src < n and 0 <= dst < n):  # no partner can exist: one problem per message
            findings += [_outside(view, i, n) for view, i in s + r]
            continue
        for (sv, si), (rv, ri) in zip(s, r):
            a, b = sv.specs[si].nbytes, rv.specs[ri].nbytes
            if a != b:
                findings.append(
                    Finding(
                        sv.file,
                        sv.node(si),
                        "p2p-unmatched",
                        ERROR,
                        f"send to rank {dst} (tag {tag}) of {a} B is received there as {b} B (node {rv.node(ri)})",
                    )
                )
        unmatched = [(v, i, f"send to rank {dst}", "recv") for v, i in s[len(r) :]]
        unmatched += [(v, i, f"recv from rank {src}", "send") for v, i in r[len(s) :]]
        for view, i, what, partner in unmatched:
            findings.append(
                Finding(
                    view.file,
                    view.node(i),
                    "p2p-unmatched",
                    ERROR,
                    f"{what} (tag {tag}, {view.specs[i].nbytes} B) has no matching {partner} there",
                )
            )
    return findings


def _outside(view: RankView, i: int, n: int) -> Finding:
    """``p2p-peer``: a message naming a peer outside the set. ASTRA-sim's network asserts
    ``0 <= dst < npus`` (asserts stay on in its release builds), so no stage can run it; unlike an
    unmatched message, which ASTRA-sim runs, it is refused everywhere."""
    spec = view.specs[i]
    what = f"send to rank {spec.peer}" if spec.kind == KIND_SEND else f"recv from rank {spec.peer}"
    return Finding(
        view.file,
        view.node(i),
        "p2p-peer",
        ERROR,
        f"{what} (tag {spec.tag}, {spec.nbytes} B): rank {spec.peer} is not in the {n}-rank set "
        f"(NPUs 0..{n - 1}; ASTRA-sim's network asserts on it)",
    )
