"""The untimed proof that a rank set can finish: every rank's issue rules played without time.

Per-group sequence checks cannot see cross-group cycles (rank 0 issues group A then group B, rank 1
the reverse) or receives that wait on their own sends. This plays the rules without time: compute,
CPU and no-op nodes finish once ready; the communication slot walks the rank's issue order (the
smallest-id topological order, ASTRA-sim's issue pass order); a send finishes when issued (sends
never wait for receives, as in ASTRA-sim); a receive finishes once ready and the matching send was
issued; a collective finishes when every member has it at the head of its communication slot.
Progress only ever enables more progress, so the order of events does not matter: if this run gets
stuck, the set deadlocks, and the stuck nodes of each rank are those a stuck simulation reports —
the nodes that are ready (or issued) but cannot finish, or, when none is, every unfinished node.
"""

from __future__ import annotations

from collections import defaultdict, deque

import numpy as np

from .comm import COLL, RECV, SEND
from .graphalgo import children_csr
from .set_rules import RankView, channel_positions
from .slots import SLOT_COMM

STUCK_LIST_LIMIT = 20  # stuck node ids listed per rank


def stuck_nodes(
    ranks: list[RankView], slots: list[list[int]], members: dict[str, tuple[int, ...]]
) -> dict[int, list[int]]:
    """``{rank: stuck node ids}`` for the ranks that cannot finish (empty when the set finishes)."""
    n = len(ranks)
    children: list[tuple[list[int], list[int]]] = []  # CSR (ptr, child indices) per rank
    waiting: list[list[int]] = []
    comm_order: list[list[int]] = []
    coll_seq: list[dict[int, tuple[str, int]]] = []
    kinds: list[list[int]] = []  # kind code (comm.KINDS) per record, -1 for records without a spec
    channel_pos = [channel_positions(v) for v in ranks]
    # ranks sharing their parents, slots and specs (byte-identical files, ``twins.py``) share what is
    # derived from them; only the counts the play decrements are per rank
    derived: dict[tuple[int, int, int], tuple] = {}
    for v, slot in zip(ranks, slots):
        p = v.result.parents
        key = (id(p), id(slot), id(v.specs))
        if key not in derived:
            cptr, kids = children_csr(p)
            order = [i for i in v.result.issue_order.tolist() if slot[i] == SLOT_COMM]
            per_group: dict[str, int] = defaultdict(int)
            seq: dict[int, tuple[str, int]] = {}
            specs = v.specs
            kind_of = specs.kind_of
            colls = [i for i in order if kind_of[i] == COLL]
            names = [specs.names[g] for g in specs.group[specs.rows(np.array(colls, dtype=np.int64))].tolist()]
            for i, name in zip(colls, names):
                seq[i] = (name, per_group[name])
                per_group[name] += 1
            derived[key] = ((cptr.tolist(), kids.tolist()), order, seq)
        kids_csr, order, seq = derived[key]
        children.append(kids_csr)
        waiting.append(p.counts().tolist())
        comm_order.append(order)
        coll_seq.append(seq)
        kinds.append(v.specs.kind_of)
    finished = [[False] * len(w) for w in waiting]
    head = [0] * n
    sent: dict[tuple, int] = defaultdict(int)
    parked_recv: dict[tuple, dict[int, tuple[int, int]]] = defaultdict(dict)
    arrived: dict[tuple, set[int]] = defaultdict(set)
    done: deque[tuple[int, int]] = deque()
    to_advance: deque[int] = deque(range(n))

    def ready(r: int, i: int) -> None:
        if slots[r][i] == SLOT_COMM:
            to_advance.append(r)
        elif kinds[r][i] == RECV:
            ch, k = channel_pos[r][i]
            if sent[ch] > k:
                done.append((r, i))
            else:
                parked_recv[ch][k] = (r, i)
        else:
            done.append((r, i))

    def advance(r: int) -> None:
        order = comm_order[r]
        while head[r] < len(order) and waiting[r][order[head[r]]] == 0:
            i = order[head[r]]
            if kinds[r][i] == COLL:
                key = coll_seq[r][i]
                if r in arrived[key]:
                    return  # already waiting here
                arrived[key].add(r)
                group = members[key[0]]
                if len(arrived[key]) < len(group):
                    return
                for m in group:  # every member is at this collective: it completes everywhere
                    done.append((m, comm_order[m][head[m]]))
                    head[m] += 1
                    if m != r:
                        to_advance.append(m)
                continue
            head[r] += 1
            done.append((r, i))
            if kinds[r][i] == SEND:
                ch, k = channel_pos[r][i]
                sent[ch] += 1
                parked = parked_recv[ch].pop(k, None)
                if parked is not None:
                    done.append(parked)

    for r in range(n):
        for i, w in enumerate(waiting[r]):
            if w == 0 and slots[r][i] != SLOT_COMM:
                ready(r, i)
    while done or to_advance:
        while done:
            r, i = done.popleft()
            if finished[r][i]:
                continue
            finished[r][i] = True
            kid_ptr, kid_list = children[r]
            for c in kid_list[kid_ptr[i] : kid_ptr[i + 1]]:
                waiting[r][c] -= 1
                if waiting[r][c] == 0:
                    ready(r, c)
        while to_advance and not done:
            advance(to_advance.popleft())
    stuck: dict[int, list[int]] = {}
    for r, v in enumerate(ranks):
        left = [i for i, f in enumerate(finished[r]) if not f]
        if left:
            front = [i for i in left if waiting[r][i] == 0] or left
            stuck[r] = sorted(v.node(i) for i in front)[:STUCK_LIST_LIMIT]
    return stuck
