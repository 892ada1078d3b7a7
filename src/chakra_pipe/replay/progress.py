"""Pre-flight proof that a replay can finish: an untimed run of every rank's issue rules.

Per-group sequence checks cannot see cross-group cycles (rank 0 issues group A then group B, rank 1
the reverse) or receives that wait on their own sends; a real run would sit in them until
``--timeout``. This check plays the replay's rules without time: compute, CPU and no-op nodes finish
once ready; the comm slot walks its static order; a send finishes when issued (receives are
pre-posted, so data lands on arrival, as in ASTRA-sim); a receive finishes once ready and its
matching send was issued; a collective finishes when every member has it at the head of its comm
slot. Progress only ever enables more progress, so the order of events does not matter: if this
run gets stuck, every real run does, and the error names each rank's blocking node.
"""

from __future__ import annotations

from collections import defaultdict, deque

from ..errors import StuckError
from .plan import ACT_COLL, ACT_RECV, ACT_SEND, SLOT_COMM, RankPlan, topological_order


def check_progress(ranks: list[RankPlan], groups: dict[str, tuple[int, ...]]) -> None:
    """Raise :class:`StuckError` when the rank set cannot run to completion."""
    channel_pos, coll_seq = _sequence_numbers(ranks)
    waiting = [[len(p) for p in rp.parents] for rp in ranks]
    finished = [[False] * len(rp) for rp in ranks]
    head = [0] * len(ranks)
    sent: dict[tuple, int] = defaultdict(int)
    parked_recv: dict[tuple, dict[int, tuple[int, int]]] = defaultdict(dict)
    arrived: dict[tuple, set[int]] = defaultdict(set)
    done_queue: deque[tuple[int, int]] = deque()
    to_advance: deque[int] = deque(range(len(ranks)))

    def ready(r: int, i: int) -> None:
        rp = ranks[r]
        if rp.slots[i] == SLOT_COMM:
            to_advance.append(r)
        elif rp.actions[i] == ACT_RECV:
            ch, k = channel_pos[r][i]
            if sent[ch] > k:
                done_queue.append((r, i))
            else:
                parked_recv[ch][k] = (r, i)
        else:
            done_queue.append((r, i))

    def advance(r: int) -> None:
        rp, order = ranks[r], ranks[r].comm_order
        while head[r] < len(order) and waiting[r][order[head[r]]] == 0:
            i = order[head[r]]
            if rp.actions[i] == ACT_COLL:
                key = coll_seq[r][i]
                if r in arrived[key]:
                    return  # already waiting here
                arrived[key].add(r)
                members = groups[key[0]]
                if len(arrived[key]) < len(members):
                    return
                for m in members:  # every member is at this collective: it completes everywhere
                    done_queue.append((m, ranks[m].comm_order[head[m]]))
                    head[m] += 1
                    if m != r:
                        to_advance.append(m)
                continue
            head[r] += 1
            done_queue.append((r, i))
            if rp.actions[i] == ACT_SEND:
                ch, k = channel_pos[r][i]
                sent[ch] += 1
                parked = parked_recv[ch].pop(k, None)
                if parked is not None:
                    done_queue.append(parked)

    for r, rp in enumerate(ranks):
        for i in range(len(rp)):
            if waiting[r][i] == 0 and rp.slots[i] != SLOT_COMM:
                ready(r, i)
    while done_queue or to_advance:
        while done_queue:
            r, i = done_queue.popleft()
            if finished[r][i]:
                continue
            finished[r][i] = True
            for c in ranks[r].children[i]:
                waiting[r][c] -= 1
                if waiting[r][c] == 0:
                    ready(r, c)
        while to_advance and not done_queue:
            advance(to_advance.popleft())
    stuck = {r: _blocking(rp, finished[r], waiting[r], head[r]) for r, rp in enumerate(ranks) if not all(finished[r])}
    if stuck:
        parts = [f"rank {r} at {ranks[r].describe(i)}" for r, i in stuck.items()]
        raise StuckError(
            "the replay cannot finish (communication waits on itself across ranks): " + "; ".join(parts),
            stuck={r: [ranks[r].ids[i]] for r, i in stuck.items()},
            file=ranks[min(stuck)].file,
        )


def _blocking(rp: RankPlan, finished: list[bool], waiting: list[int], head: int) -> int:
    """The node a stuck rank waits in: its comm head if issuable, else a ready receive, else the head."""
    order = rp.comm_order
    if head < len(order) and waiting[order[head]] == 0:
        return order[head]
    for i in range(len(rp)):
        if not finished[i] and waiting[i] == 0:
            return i
    return order[head] if head < len(order) else next(i for i in range(len(rp)) if not finished[i])


def _sequence_numbers(ranks: list[RankPlan]):
    """Per node: p2p (channel, k-th message on it) and collective (group, k-th collective on it)."""
    channel_pos: list[dict[int, tuple[tuple, int]]] = []
    coll_seq: list[dict[int, tuple[str, int]]] = []
    for rp in ranks:
        counts: dict[tuple, int] = defaultdict(int)
        pos: dict[int, tuple[tuple, int]] = {}
        for i in topological_order(rp):
            spec = rp.comm.get(i)
            if spec is None or spec.kind not in (ACT_SEND, ACT_RECV):
                continue
            ch = (rp.rank, spec.peer, spec.tag) if spec.kind == ACT_SEND else (spec.peer, rp.rank, spec.tag)
            pos[i] = (ch, counts[ch])
            counts[ch] += 1
        seq: dict[int, tuple[str, int]] = {}
        per_group: dict[str, int] = defaultdict(int)
        for i in rp.comm_order:
            spec = rp.comm.get(i)
            if spec is not None and spec.kind == ACT_COLL:
                seq[i] = (spec.group, per_group[spec.group])
                per_group[spec.group] += 1
        channel_pos.append(pos)
        coll_seq.append(seq)
    return channel_pos, coll_seq
