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
from collections.abc import Hashable
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np

from ..et.graph import TraceGraph
from .comm import COLL, KIND_SEND, SEND, WORLD, CommSpecs
from .file_rules import FileResult
from .groups import GroupTable, id_list
from .problems import ERROR, Finding
from .twins import SameInputs


@dataclass(frozen=True)
class Sequence:
    """One rank's collectives in one group, in issue order, as the rules compare them."""

    records: np.ndarray
    signature: Hashable  # the comm types and sizes: equal for equal sequences, compared in bulk
    change: np.ndarray  # change[k]: collective k+1 differs from collective k (type or size)


@dataclass(frozen=True)
class RankView:
    """One rank as the cross-rank rules see it: its file checks and resolved comm specs."""

    rank: int
    file: str
    graph: TraceGraph
    result: FileResult
    specs: CommSpecs
    # one per analysis (comm._rank_free's): ranks with the same issue order and spec columns share
    # their sequences (:meth:`_by_group`); None computes each rank's own
    shared: SameInputs | None = field(default=None, compare=False, repr=False)

    def node(self, i: int) -> int:
        return int(self.graph.ids[i])

    @cached_property
    def _comm_in_order(self) -> np.ndarray:
        """The records with a comm spec in issue order (one mask of the issue order a rank)."""
        order = self.result.issue_order
        return order[self.specs.pos[order] >= 0]

    @cached_property
    def p2p_in_order(self) -> np.ndarray:
        """The sends and receives in issue order (read-only: shared by ranks with the same inputs)."""
        inputs = (self.result.issue_order, self.specs.pos, self.specs.kind)
        key, hit = self.shared.get("p2p-in-order", inputs) if self.shared is not None else (None, None)
        if hit is not None:
            return hit
        order = self._comm_in_order
        p2p = order[self.specs.kind[self.specs.rows(order)] != COLL]
        p2p.flags.writeable = False
        if self.shared is not None and key is not None:  # key: set exactly when shared is (for mypy)
            self.shared.put(key, inputs, p2p)
        return p2p

    @cached_property
    def sequences(self) -> dict[str, Sequence]:
        """COMM_COLL records by canonical group name, in issue order (one stable sort a rank)."""
        specs, order = self.specs, self.result.issue_order
        if self.shared is None:
            codes, by_label = None, self._by_group(specs.group)
        else:  # a pipeline stage's ranks: the same issue order, spec columns and group pattern
            codes, labels = _ranked(specs.group)
            inputs = (order, specs.pos, specs.kind, specs.comm_type, specs.nbytes)
            key, by_label = self.shared.get("sequences", inputs, labels.astype(np.int32).tobytes())
            if by_label is None:
                by_label = self._by_group(labels)
                self.shared.put(key, inputs, by_label)
        names = specs.names
        if codes is None:
            return {names[label]: seq for label, seq in by_label}
        return {names[codes[label]]: seq for label, seq in by_label}

    def _by_group(self, group_of: np.ndarray) -> list[tuple[int, Sequence]]:
        """``(group label, its sequence)`` in ascending label order, ``group_of`` labelling each
        spec row (its group code, or that code's rank among the rank's codes: the same order).
        The sequences hold no rank's names, codes or ids, so ranks with the same inputs share them."""
        specs, order = self.specs, self._comm_in_order
        rows = specs.rows(order)
        coll = specs.kind[rows] == COLL
        records, rows = order[coll], rows[coll]
        group = group_of[rows]
        perm = np.argsort(group, kind="stable")
        out: list[tuple[int, Sequence]] = []
        for chunk in np.split(perm, np.flatnonzero(np.diff(group[perm])) + 1) if len(perm) else ():
            ct, nb = specs.comm_type[rows[chunk]], specs.nbytes[rows[chunk]]
            signature = (ct.tobytes(), nb.tobytes() if nb.dtype != object else tuple(nb.tolist()))
            change = (ct[1:] != ct[:-1]) | (nb[1:] != nb[:-1])
            mine = records[chunk]
            mine.flags.writeable = change.flags.writeable = False  # shared by the ranks of a memo
            out.append((int(group[chunk[0]]), Sequence(mine, signature, change)))
        return out

    def nbytes(self, i: int) -> int:
        return int(self.specs.nbytes[self.specs.pos[i]])


def _ranked(group: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``np.unique(group, return_inverse=True)`` of group codes (-1: a send or receive, else a group
    number): the distinct codes ascending, and each row's rank among them (the groups' order kept).
    By marking the codes present in a table as long as the largest code, as the codes are small:
    the sort of ``np.unique`` was most of a rank's sequences."""
    shifted = group + 1
    present = np.zeros(int(shifted.max(initial=0)) + 1, dtype=bool)
    present[shifted] = True
    codes = np.flatnonzero(present)
    label = np.zeros(len(present), dtype=np.intp)
    label[codes] = np.arange(len(codes))
    return codes - 1, label[shifted]


def _label(name: str) -> str:
    return "the world group" if name == WORLD else f"group {name!r}"


def reference_rank(members: tuple[int, ...], counts: dict[int, int]) -> int:
    """The member issuing the most collectives of the group; the lowest such rank."""
    return min(members, key=lambda r: (-counts.get(r, 0), r))


def check_collectives(ranks: list[RankView], table: GroupTable) -> list[Finding]:
    """Members of a group issue the same collectives: each member's sequence is compared with the
    reference rank's as a whole (one comparison of their signatures), and only a member whose
    sequence differs is searched for its first divergence."""
    findings: list[Finding] = []
    seqs = [v.sequences for v in ranks]
    outsiders: dict[str, list[RankView]] = defaultdict(list)  # non-members issuing a group's collectives
    member_sets = {name: set(members) for name, members in table.members.items()}
    for view, seq in zip(ranks, seqs):
        for name in seq:
            if view.rank not in member_sets[name]:
                outsiders[name].append(view)
    for name, members in sorted(table.members.items(), key=lambda kv: (len(kv[0]), kv[0])):
        label = _label(name)
        for view in outsiders.get(name, ()):
            records = seqs[view.rank][name].records
            findings.append(
                Finding(
                    view.file,
                    view.node(int(records[0])),
                    "group-members",
                    ERROR,
                    f"rank {view.rank} issues {len(records)} collectives in {label}, "
                    f"which does not include it (members {id_list(members)})",
                )
            )
        of = {r: seqs[r].get(name) for r in members}
        ref_rank = reference_rank(members, {r: len(s.records) for r, s in of.items() if s is not None})
        ref = of[ref_rank]
        for r in members:
            mine = of[r]
            if r == ref_rank or (mine is None and ref is None):
                continue
            if mine is not None and ref is not None and mine.signature == ref.signature:
                continue
            problem = _divergence(ranks[r], _records(mine), ranks[ref_rank], _records(ref))
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


def _records(seq: Sequence | None) -> list[int]:
    return [] if seq is None else seq.records.tolist()


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

    A group's result depends only on the rank's dependency structure, its sends and receives and the
    group's records and signatures, so ranks that share all of them (the ranks of a pipeline stage,
    in different groups of one shape) compute it once.
    """
    findings: list[Finding] = []
    known: dict[tuple, dict[tuple, tuple[int, int]]] = {}
    for view in ranks:
        seqs = {name: seq for name, seq in view.sequences.items() if seq.change.any()}
        if not seqs:
            continue
        p2p = view.p2p_in_order
        key = (
            id(view.result.parents),
            id(view.result.issue_order),
            p2p.tobytes(),
            frozenset(_content(seq) for seq in seqs.values()),
        )
        if key not in known:
            known[key] = _unordered(view, p2p.tolist(), list(seqs.values()))
        found = known[key]
        for name, seq in sorted(seqs.items()):
            hit = found.get(_content(seq))
            if hit is not None:
                k, j = hit
                findings.append(
                    Finding(
                        view.file,
                        view.node(k),
                        "collective-order",
                        ERROR,
                        f"{_label(name)}: {_describe(view, k)} does not depend on "
                        f"{_describe(view, j)}, issued before it here; which of the two "
                        "is issued first depends on timing, so members can pair them differently "
                        "and hang (order them with a ctrl dependency)",
                    )
                )
    return findings


def _content(seq: Sequence) -> tuple:
    return (seq.records.tobytes(), seq.signature)


def _unordered(view: RankView, p2p: list[int], seqs: list[Sequence]) -> dict[tuple, tuple[int, int]]:
    """Per mixed sequence (by :func:`_content`) its first collective that misses an ancestor it
    needs, and the first such ancestor: ``check_collective_order``'s rule on one rank."""
    colls = [seq.records.tolist() for seq in seqs]
    bit = {i: 1 << k for k, i in enumerate([*p2p, *(i for seq in colls for i in seq)])}
    waits = (1 << len(p2p)) - 1  # the bits of the sends and receives
    ptr, parents = view.result.parents.ptr.tolist(), view.result.parents.parents.tolist()
    below: dict[int, int] = {}  # record -> mask of the flagged collectives among its ancestors
    for i in view.result.issue_order.tolist():
        mask = 0
        for p in parents[ptr[i] : ptr[i + 1]]:
            mask |= below.get(p, 0) | bit.get(p, 0)
        if mask:
            below[i] = mask
    found: dict[tuple, tuple[int, int]] = {}
    for seq_obj, seq in zip(seqs, colls):
        change = seq_obj.change.tolist()
        run_start, prev_run = 0, 0
        for k in range(1, len(seq)):
            if change[k - 1]:
                prev_run, run_start = run_start, k
            if run_start == 0:
                continue
            mine = below.get(seq[k], 0)
            missing = [
                j for j in seq[prev_run:run_start] if not mine & bit[j] and (below.get(j, 0) & waits) != (mine & waits)
            ]
            if missing:
                found[_content(seq_obj)] = (seq[k], missing[0])
                break
    return found


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
    counts: dict[tuple[int, int, int, int], int] = defaultdict(int)
    pos: dict[int, tuple[tuple[int, int, int], int]] = {}
    records = view.p2p_in_order
    rows = view.specs.rows(records)
    for i, kind, (src, dst, tag) in zip(
        records.tolist(), view.specs.kind[rows].tolist(), view.specs.channel[rows].tolist()
    ):
        key = (kind, src, dst, tag)
        pos[i] = ((src, dst, tag), counts[key])
        counts[key] += 1
    return pos


def check_point_to_point(ranks: list[RankView]) -> list[Finding]:
    """Pair the k-th send and the k-th receive of every channel ``(src, dst, tag)``.

    The messages of all ranks are sorted by channel in one pass; a channel whose peers are in the
    set, with as many sends as receives, each pair of one size, has nothing to report, and only the
    other channels are walked message by message (in channel order, as the findings are listed).
    """
    n = len(ranks)
    records = [v.p2p_in_order for v in ranks]
    if not sum(len(r) for r in records):
        return []
    rows = [v.specs.rows(r) for v, r in zip(ranks, records)]
    owner = np.repeat(np.arange(n), [len(r) for r in records])
    record = np.concatenate(records)
    kind = np.concatenate([v.specs.kind[w] for v, w in zip(ranks, rows)])
    channel = np.concatenate([v.specs.channel[w] for v, w in zip(ranks, rows)])
    sizes = [v.specs.nbytes[w] for v, w in zip(ranks, rows)]
    nbytes = np.concatenate(sizes, dtype=object if any(x.dtype == object for x in sizes) else np.uint64)
    # by channel, sends before receives, each in rank then issue order: the k-th send of a channel
    # with as many receives sits n_send places before its k-th receive
    order = np.lexsort((np.arange(len(kind)), kind, channel[:, 2], channel[:, 1], channel[:, 0]))
    owner, record, kind, channel, nbytes = owner[order], record[order], kind[order], channel[order], nbytes[order]
    first = np.ones(len(kind), dtype=bool)
    first[1:] = (channel[1:] != channel[:-1]).any(axis=1)
    chan = np.cumsum(first) - 1
    start = np.flatnonzero(first)
    end = np.append(start[1:], len(kind))
    n_send = np.bincount(chan, weights=kind == SEND).astype(np.int64)
    src, dst = channel[start, 0], channel[start, 1]
    dirty = ~((src >= 0) & (src < n) & (dst >= 0) & (dst < n)) | (2 * n_send != end - start)
    sends = np.flatnonzero((kind == SEND) & ~dirty[chan])
    unequal = nbytes[sends] != nbytes[sends + n_send[chan[sends]]]
    dirty[chan[sends[unequal]]] = True
    findings: list[Finding] = []
    for c in np.flatnonzero(dirty).tolist():
        at = range(start[c], end[c])
        s = [(ranks[owner[j]], int(record[j])) for j in at if kind[j] == SEND]
        r = [(ranks[owner[j]], int(record[j])) for j in at if kind[j] != SEND]
        findings += _channel_findings(tuple(channel[start[c]].tolist()), s, r, n)
    return findings


def _channel_findings(
    channel: tuple[int, int, int], s: list[tuple[RankView, int]], r: list[tuple[RankView, int]], n: int
) -> list[Finding]:
    """The problems of one channel: messages to a peer outside the set, pairs of different sizes,
    messages with no partner."""
    src, dst, tag = channel
    if not (0 <= src < n and 0 <= dst < n):  # no partner can exist: one problem per message
        return [_outside(view, i, n) for view, i in s + r]
    findings: list[Finding] = []
    for (sv, si), (rv, ri) in zip(s, r):
        a, b = sv.nbytes(si), rv.nbytes(ri)
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
                f"{what} (tag {tag}, {view.nbytes(i)} B) has no matching {partner} there",
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
