"""Congestion-aware backend: directed links as FIFO store-and-forward servers (spec §4.2).

A message that finds its link free holds it for ``floor(S / B')`` ns and reaches the next device at
``t + floor(L + S / B')``; messages that find it busy wait in FIFO order and start when the link
frees. Upstream supports one dimension only; here a multi-dimensional network routes dimension by
dimension (lowest differing dimension first), each dimension with its own links — this extension is
documented in the README because ASTRA-sim itself would refuse such a run.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable

import numpy as np

from .common import LinkConflict, Network, bytes_per_ns
from .switch import SWITCH
from .topology import route

# a link's ``sender`` after a point-to-point message of a checked run (``check_order``, and the
# symmetric engine's message path): never a ring sender
POINT_TO_POINT = -3


class _Link:
    """One directed link: FIFO, store-and-forward. ``times`` is the link model, used by both paths."""

    __slots__ = ("latency", "bw", "pending", "free_at", "free_seq", "sender", "offered", "past", "sized")

    def __init__(self, latency: float, bw: float):
        self.latency, self.bw = latency, bw
        self.pending: deque | None = None  # made on first wait: a deque per link cost 0.7 MiB at 1,024 NPUs
        self.free_at = 0  # when the link takes its next message (both paths)
        self.free_seq = 0  # message path: the same-time place of the event that frees it (EventQueue.reserve)
        self.sender = -1  # ring fast path: the NPU whose message the link carried last (-1: none yet)
        self.offered = 0  # ring fast path: when that message reached the link
        self.past: list[tuple[int, int | None, int, int]] | None = None  # tree fast path: see take_kept
        self.sized: dict[int, tuple[int, int]] = {}  # ``times`` per message size

    def times(self, size: int) -> tuple[int, int]:
        """(ns until a message of ``size`` bytes reaches the next device, ns it holds the link); kept
        per size: a link carries a few sizes, each thousands of times."""
        hit = self.sized.get(size)
        if hit is None:
            hit = self.sized[size] = (int(self.latency + size / self.bw), int(size / self.bw))
        return hit


def smallest_period(seq: list, step: int = 1) -> int:
    """The smallest multiple ``q`` of ``step`` that divides ``len(seq)`` with ``seq[q:] == seq[:len − q]``
    (element ``i`` equals element ``i mod q``); ``len(seq)`` when none is smaller."""
    p = len(seq)
    return next((q for q in range(step, p, step) if p % q == 0 and seq[q:] == seq[: p - q]), p)


def _bound(link: _Link, sender: int) -> int:
    """The earliest ns ``link`` may take a ring phase's first message from ``sender``: any time on an
    unused link; after the last message's arrival when that was the same sender's or a point-to-point
    send's (the FIFO then orders by arrival, and the phase declines while messages are queued); after
    the link frees otherwise (another sender's ring message, whose order the recurrence cannot time)."""
    if link.sender == -1:
        return 0
    return link.offered + 1 if link.sender in (sender, POINT_TO_POINT) else link.free_at


PAST = 6  # messages a link remembers for the tree fast path (take_kept)


def take_kept(link: _Link, latency: int, hold: int, t: int, sender: int) -> int:
    """Take ``sender``'s message reaching ``link`` at ``t`` behind every message it took before and
    return when it reaches the next device (the FIFO recurrence on the link itself, for the aware
    tree fast path, :class:`FifoTreeLinks`, which calls it in the order the link takes its
    messages), remembering the link's last :data:`PAST` messages as (arrival, start, end, sender)
    for :func:`insert_kept`. What is remembered is a gapless tail of
    the link's FIFO order: it is kept only while its last entry is the link's last message (a link
    that another path or the message path used since starts it over from the link's state, whose
    last message's start is unknown; with ``hold`` > 0 no other message leaves the link in the
    state of the last entry)."""
    past, free = link.past, link.free_at
    if past:
        last = past[-1]
        if last[2] != free or last[0] != link.offered or last[3] != link.sender:
            past = None
    if not past:
        past = link.past = [(link.offered, None, free, link.sender)]  # its start unknown: never a successor
    start = t if t > free else free
    link.offered, link.free_at, link.sender = t, start + hold, sender
    past.append((t, start, start + hold, sender))
    if len(past) > PAST:
        del past[0]
    return start + latency


def insert_kept(link: _Link, latency: int, hold: int, t: int, sender: int) -> int:
    """A message reaching ``link`` at ``t``, before messages the link took already (evaluated ahead of
    the clock by an earlier phase), placed in the FIFO order where it belongs: exact when the link
    remembers the messages around it (:func:`take_kept`) and it leaves before the next one would
    start, so that no message already taken moves; else :class:`LinkConflict`. Its predecessor's end
    is when it starts at the earliest; the link's last message and state stay as they are."""
    past = link.past
    if (
        link.pending
        or hold <= 0
        or not past
        or past[-1] != (link.offered, past[-1][1], link.free_at, link.sender)
        or t <= past[0][0]
    ):
        raise LinkConflict("a batch of messages reaches a link out of the order it is evaluated in")
    j = next(k for k, m in enumerate(past) if m[0] >= t)
    if past[j][0] == t:
        raise LinkConflict("two senders' messages reach a link at the same ns")
    start = max(t, past[j - 1][2])
    if past[j][1] is None or max(past[j][0], start + hold) != past[j][1]:  # the next message would start later
        raise LinkConflict("a batch of messages reaches a link out of the order it is evaluated in")
    past.insert(j, (t, start, start + hold, sender))
    if len(past) > PAST:
        del past[0]
    return start + latency


Hop = tuple[_Link, int, int]  # (link, ns until the next device, ns it holds the link)


class FifoTreeLinks:
    """The FIFO links of one double-binary-tree phase (``system/tree_aware.py`` asks for them through
    :meth:`CongestionAwareNetwork.tree_links` and times the messages in the order each link takes
    them): per member index, its message up to its parent and its parent's message down to it, each
    as (the sender's hops, the receiver's last hop). Built once per (tree, size). The one-pass
    evaluation needs every hop but the last to be a link of the sender and the last one of the
    receiver, no link shared by two members: true of the networks ``simulate`` admits the path on
    (1-D switch, fully connected); the build still checks it (:class:`LinkConflict`, a rerun
    message by message) so that admitting another network can never time a shared link wrongly."""

    __slots__ = ("members", "parent", "_up", "_down", "_used")

    def __init__(self, hops: Callable[[int, int], list[Hop]], members: list[int], parent: list[int]):
        owner: dict[int, tuple[str, int]] = {}

        def own(link: _Link, side: str, npu: int) -> None:
            if owner.setdefault(id(link), (side, npu)) != (side, npu):
                raise LinkConflict("a double-binary-tree phase's link is shared by two members' messages")

        def split(src: int, dst: int) -> tuple[list[Hop], Hop]:
            path = hops(src, dst)
            if not path:
                raise LinkConflict("a double-binary-tree message with an empty route")
            for link, *_ in path[:-1]:
                own(link, "send", src)
            own(path[-1][0], "receive", dst)
            return path[:-1], path[-1]

        self.members, self.parent = members, parent  # ``members``: what PhaseCoordinator.cached counts
        root: tuple[list[Hop], Hop | None] = ([], None)
        self._up = [root if p < 0 else split(members[i], members[p]) for i, p in enumerate(parent)]
        self._down = [root if p < 0 else split(members[p], members[i]) for i, p in enumerate(parent)]
        self._used: set[int] = set()

    def begin(self) -> None:
        """A new phase: each link's first message is again placed against what earlier phases left."""
        self._used = set()

    def sent_up(self, c: int, t: int) -> int:
        """When member ``c``'s message up, sent at ``t``, reaches its last hop (its parent's link)."""
        npu = self.members[c]
        for hop in self._up[c][0]:
            t = self._take(hop, t, npu)
        return t

    def arrive_up(self, c: int, t: int) -> int:
        """When member ``c``'s message, at its parent's link at ``t``, reaches the parent."""
        return self._take(self._up[c][1], t, self.members[c])  # type: ignore[arg-type]  # c has a parent

    def down(self, c: int, t: int) -> int:
        """When the message member ``c``'s parent sends it at ``t`` arrives."""
        npu = self.members[self.parent[c]]
        sender, last = self._down[c]
        for hop in sender:
            t = self._take(hop, t, npu)
        return self._take(last, t, npu)  # type: ignore[arg-type]  # c has a parent

    def _take(self, hop: Hop, t: int, npu: int) -> int:
        """When ``npu``'s message reaching ``hop``'s link at ``t`` reaches the next device. The phase's
        first message on a link comes after what earlier phases left there or is placed among the
        messages they took ahead of the clock (:func:`insert_kept`: the next chunk's tree overtakes
        the last one's tail); later ones follow this phase's own (:func:`take_kept`)."""
        link, latency, hold = hop
        key = id(link)
        if key not in self._used:
            if link.pending or (t <= link.offered and link.sender != -1):
                return insert_kept(link, latency, hold, t, npu)
            self._used.add(key)
        return take_kept(link, latency, hold, t, npu)


class FifoRingLinks:
    """The hops of one ring phase on FIFO links, for every member at once (the fast path's recurrence).

    Member ``i``'s message crosses its path's links in order; on each ``start = max(ready, free_at)``,
    the link is busy until ``start + hold`` and the message reaches the next device at
    ``start + latency``. Paths may differ in length (a sub-group ring on a Ring topology). No two
    messages share a link: a shared link raises :class:`LinkConflict` here, except where two paths
    carry *one* message — the same sender (``senders``, or per hop ``hop_senders``) on the same hop
    index. That happens only in the symmetric engine, whose links are canonical links standing for
    a whole orbit (``sim/symmetric.py``): there each such entry keeps its own copy of the link's
    state, the copies must see the same arrival times (checked at every step, else
    ``LinkConflict``) and so evolve identically. Link free times carry over from phase to phase
    through the links themselves.

    Exact when, on every link, the messages are evaluated in the order they reach it, which is
    verified as the phases run: a phase whose first message on a link arrives before another
    sender's last evaluated message has left it, or no later than the same sender's last evaluated
    one, raises :class:`LinkConflict`. After the first, a phase's messages on a link arrive in order
    (each send follows a receive). The same sender's come in order by construction under
    ``simulate.aware_fast_path_is_exact``'s preconditions (an NPU runs one ring phase at a time per
    dimension — or, with several chunks of a collective in flight, their phases held and evaluated
    together in chunk order, ``RingCoordinator._batch`` / ``_flush``, checked with ``queued`` —,
    phases of different dimensions cross different dimension groups' links, and every
    path from one NPU to a given link shares the links before it; a sub-group or ``one*`` ring
    crossing a dimension another phase runs on is checked here like another sender); between senders (an NPU's
    downlink carries its TP and its DP predecessor's messages through a switch) it is a matter of
    timing. Reaching a link at the very ns another sender's message leaves it is no conflict: the
    message starts at that ns whichever event runs first.
    """

    def __init__(
        self, paths: list[list[_Link]], size: int, senders: list[int], hop_senders: list[list[int]] | None = None
    ):
        if hop_senders is None:
            hop_senders = [[s] * len(path) for s, path in zip(senders, paths)]
        hops = max(map(len, paths), default=0)
        self._twins = self._same_messages(paths, hop_senders, hops)
        self._twin_members = [  # the same pairs as member indices, for the list path
            [] if tw is None else [(paths_who[a], paths_who[b]) for a, b in zip(tw[0].tolist(), tw[1].tolist())]
            for tw, paths_who in zip(self._twins, ([i for i, p in enumerate(paths) if len(p) > j] for j in range(hops)))
        ]
        # hop j: the members whose path has a j-th link, and those links
        self._who = [
            np.asarray([i for i, path in enumerate(paths) if len(path) > j], dtype=np.int64) for j in range(hops)
        ]
        self._who_lists = [who.tolist() for who in self._who]
        self._hops = [[path[j] for path in paths if len(path) > j] for j in range(hops)]
        self._senders = [[hop_senders[i][j] for i in who.tolist()] for j, who in enumerate(self._who)]
        times = [[link.times(size) for link in hop] for hop in self._hops]
        self._latency = [[t[0] for t in hop] for hop in times]
        self._hold = [[t[1] for t in hop] for hop in times]
        transit = [0] * len(paths)
        for who, latency in zip(self._who_lists, self._latency):
            for i, t in zip(who, latency):
                transit[i] += t
        # the shortest member's path from send to arrival on idle links (a lower bound on every hop
        # of the phase: the held chunk batches' due time, ``RingCoordinator._earliest_exit``)
        self.transit = min(transit, default=0)
        # per link: (member, ns from its send to reaching that link on idle links), for ``earliest``
        self._reach: dict[int, list[tuple[int, int]]] = {}
        for i, path in enumerate(paths):
            before = 0
            for link in path:
                self._reach.setdefault(id(link), []).append((i, before))
                before += link.times(size)[0]
        self._latency_a = [np.asarray(x, dtype=np.int64) for x in self._latency]
        self._hold_a = [np.asarray(x, dtype=np.int64) for x in self._hold]
        self._arrays = True
        self.period = self._period(paths, hop_senders)
        # one path for every member; ``copies`` also relies on hold ≤ latency, which ``_Link.times``
        # gives (latency + size/bw against size/bw, latency ≥ 0 by the config's checks)
        self.one_message = self.period == 1
        # one_message: the one path's (link, sender, latency, hold) per hop and its latency, for ``copies``
        self._path = [
            (h[0], s[0], lat[0], hold[0])
            for h, s, lat, hold in zip(self._hops, self._senders, self._latency, self._hold)
            if self.one_message
        ]
        self._total_latency = sum(latency for _, _, latency, _ in self._path)
        self._members = (paths, size, senders, hop_senders)  # for ``reduced``
        self._reduced: dict[int, FifoRingLinks] = {}
        self._free: list = []
        self._ready: list = []  # per hop: when the phase's latest messages reached the links
        self._bound: list | None = None  # per hop: the earliest ns each link may take the phase's first message

    def _same_messages(self, paths: list[list[_Link]], hop_senders: list[list[int]], hops: int) -> list:
        """Per hop, ``(later, first)`` positions (among the members that have that hop) whose link is
        one already used at that hop by the same sender; raises :class:`LinkConflict` for any other
        sharing (two messages on one link, which the recurrence cannot order)."""
        seen: dict[int, tuple[int, int, int]] = {}  # id(link) -> (hop, sender, position in hop)
        twins: list[tuple[list[int], list[int]]] = [([], []) for _ in range(hops)]
        count = [0] * hops
        for i, path in enumerate(paths):
            for j, link in enumerate(path):
                n = count[j]
                count[j] += 1
                first = seen.setdefault(id(link), (j, hop_senders[i][j], n))
                if first[2] == n and first[0] == j:
                    continue
                if first[:2] != (j, hop_senders[i][j]):
                    raise LinkConflict("two messages of one ring phase cross one link")
                twins[j][0].append(n)
                twins[j][1].append(first[2])
        return [(np.asarray(a, dtype=np.int64), np.asarray(b, dtype=np.int64)) if a else None for a, b in twins]

    @staticmethod
    def _period(paths: list[list[_Link]], hop_senders: list[list[int]]) -> int:
        """The smallest ``q`` dividing the member count such that member ``i`` crosses the same links,
        hop by hop, with the same full-engine senders as member ``i mod q`` (the member count when
        none is smaller). Above 1 only in the symmetric engine, where members of one class share
        canonical links: a DP ring whose members fall in ``q`` classes, ``i`` and ``i + q`` being images
        of each other (``sim/symmetric.py``)."""
        return smallest_period([(tuple(map(id, path)), tuple(s)) for path, s in zip(paths, hop_senders)])

    def earliest(self, link: _Link, sends: list[int]) -> int | None:
        """A lower bound on when a phase whose members send their first messages at ``sends`` (ring
        order) reaches ``link``: a member's first message crosses the links before it on its path, each
        taking at least its latency (waiting for a link only adds), and its later messages are sent
        later. None when no member's path crosses it."""
        reach = self._reach.get(id(link))
        return None if reach is None else min(sends[i] + before for i, before in reach)

    def common_period(self, starts: list[int]) -> int:
        """The smallest multiple of ``period`` that divides the member count and is a period of the
        members' ``starts`` too (the member count when none is smaller): the ``q`` of :meth:`reduced`."""
        return smallest_period(starts, self.period)

    def reduced(self, q: int) -> FifoRingLinks:
        """The links of members ``0 … q−1`` only (``q`` a multiple of ``period`` dividing the member
        count): a phase whose start times have period ``q`` is that smaller ring's recurrence, member
        ``i`` taking the results of ``i mod q`` (``RingCoordinator.recurrence`` says why)."""
        links = self._reduced.get(q)
        if links is None:
            paths, size, senders, hop_senders = self._members
            links = self._reduced[q] = FifoRingLinks(paths[:q], size, senders[:q], hop_senders[:q])
        return links

    def copies(self, sent: int, gaps: int, steps: int) -> int:
        """The last arrival of a phase of ``steps`` ≥ 1 steps whose messages are all copies of one
        (``one_message``, all members starting together): ``sent`` is step 1's send, ``gaps`` the sum of
        the delays between a receive and the next send (``Σ_{1≤k<S} d_k``). Leaves the links as
        :meth:`begin` … :meth:`end` would, with the same :class:`LinkConflict` checks.

        Why it is exact: the copies enter the recurrence with equal send times, cross one canonical
        link per hop whose per-entry states start equal, so every entry computes the same values at
        every step (what ``arrive`` checks on twins), and the recurrence is that of one message
        stream on one path. Step 1 meets the links' carried-over free times. From step 2 on no link
        is ever busy: with ``start_j`` the step's start on hop ``j``, the link frees at ``start_j +
        hold_j ≤ start_j + latency_j ≤ recv`` (later hops only add) ``≤ send_{k+1}``, the next
        step's ready time on hop 0, and on hop ``j`` too (its ready time is at least the send). So
        ``recv_k = send_k + Λ`` (``Λ = Σ_j latency_j``) for ``k ≥ 2``, ``send_{k+1} = recv_k + d_k``,
        and ``recv_S = recv_1 + gaps + (S−1)·Λ``; the last step leaves hop ``j`` offered and started at
        ``send_S + Σ_{i<j} latency_i``, free ``hold_j`` later.
        """
        path = self._path
        for link, _, _, _ in path:
            if link.pending:
                raise LinkConflict("a ring phase reaches a link with messages queued on the message path")
        t = sent
        for link, s, latency, hold in path:
            if t < _bound(link, s):
                raise LinkConflict("ring messages reach a link out of the order the phases are evaluated in")
            start = t if t > link.free_at else link.free_at
            link.offered, link.free_at, link.sender = t, start + hold, s
            t = start + latency
        if steps == 1:
            return t
        send = t + gaps + (steps - 2) * self._total_latency  # send_S
        for link, _, latency, hold in path:
            link.offered, link.free_at = send, send + hold
            send += latency
        return send

    def begin(self, arrays: bool = True) -> None:
        """Load the links' free times; ``arrays``: step with numpy (large rings) or plain lists (small
        rings, where array calls cost more than the few members they update). A link with messages
        queued on the message path declines (its ``free_at`` does not cover them)."""
        if any(link.pending for hop in self._hops for link in hop):
            raise LinkConflict("a ring phase reaches a link with messages queued on the message path")
        self._arrays = arrays
        self._free = [[link.free_at for link in hop] for hop in self._hops]
        self._ready = [[link.offered for link in hop] for hop in self._hops]
        self._bound = [
            [_bound(link, s) for link, s in zip(hop, senders)] for hop, senders in zip(self._hops, self._senders)
        ]
        if arrays:
            self._free = [np.asarray(free, dtype=np.int64) for free in self._free]
            self._ready = [np.asarray(ready, dtype=np.int64) for ready in self._ready]
            self._bound = [np.asarray(bound, dtype=np.int64) for bound in self._bound]

    def arrive(self, sent, queued: bool = False, tied=False):
        """Arrival time at each member of the messages its predecessor sent at ``sent`` (an int64
        array, or a list after ``begin(arrays=False)``).

        Raises :class:`LinkConflict` when the phase's first message on a link comes too early for the
        link's last evaluated one (see the class). ``queued`` (several chunks of one collective
        evaluated together, ``RingCoordinator._flush``): these messages follow, on every link, the ones
        the previous call put there, and each must reach its link later than its predecessor there;
        ``tied`` (one bool, or one per member, as ``sent``): on the first link of that member's path at
        the same ns is allowed too (sends the event path makes at one ns in the order of the calls,
        ``RingCoordinator._flush`` says when); else :class:`LinkConflict`."""
        bound = self._bound
        self._bound = None  # checked on the phase's first message on each link only
        if not self._arrays:
            return self._arrive_lists(sent, bound, queued, tied)
        t = sent.copy()
        for j, free in enumerate(self._free):
            who = self._who[j]
            ready = t[who]
            if queued:
                before = self._ready[j]
                early = np.where(tied, ready < before, ready <= before) if j == 0 else ready <= before
                if early.any():
                    raise LinkConflict("a chunk's ring message reaches a link no later than the chunk before")
            self._ready[j] = ready
            if bound is not None and (ready < bound[j]).any():
                raise LinkConflict("ring messages reach a link out of the order the phases are evaluated in")
            twins = self._twins[j]
            if twins is not None and (ready[twins[0]] != ready[twins[1]]).any():
                raise LinkConflict("the copies of one message reach its link at different times")
            start = np.maximum(ready, free)
            self._free[j] = start + self._hold_a[j]
            t[who] = start + self._latency_a[j]
        return t

    def _arrive_lists(self, sent: list[int], bound: list | None, queued: bool, tied) -> list[int]:
        t = list(sent)
        for j, free in enumerate(self._free):
            hold, latency, offered = self._hold[j], self._latency[j], self._ready[j]
            first = None if bound is None else bound[j]
            ties = tied if isinstance(tied, list) else [tied] * len(t)
            for a, b in self._twin_members[j]:
                if t[a] != t[b]:
                    raise LinkConflict("the copies of one message reach its link at different times")
            for n, i in enumerate(self._who_lists[j]):
                ready, f = t[i], free[n]
                if first is not None and ready < first[n]:
                    raise LinkConflict("ring messages reach a link out of the order the phases are evaluated in")
                if queued and ready < offered[n] + (0 if j == 0 and ties[i] else 1):
                    raise LinkConflict("a chunk's ring message reaches a link no later than the chunk before")
                offered[n] = ready
                if ready < f:
                    ready = f
                free[n] = ready + hold[n]
                t[i] = ready + latency[n]
        return t

    def relative_state(self, base: int) -> tuple[int, ...] | None:
        """Every link's (free time, last arrival) less ``base`` and last sender, hop by hop; None when
        one has messages queued on the message path (``RingCoordinator._kept_aware``)."""
        out: list[int] = []
        for hop in self._hops:
            for link in hop:
                if link.pending:
                    return None
                out += (link.free_at - base, link.offered - base, link.sender)
        return tuple(out)

    def restore(self, state: tuple[int, ...], base: int) -> None:
        """Leave the links as :meth:`relative_state` read them, shifted by ``base``."""
        values = iter(state)
        for hop in self._hops:
            for link, free, offered, sender in zip(hop, values, values, values):
                link.free_at, link.offered, link.sender = free + base, offered + base, sender

    def end(self) -> None:
        for hop, free, ready, senders in zip(self._hops, self._free, self._ready, self._senders):
            if self._arrays:
                free, ready = free.tolist(), ready.tolist()
            for link, f, r, s in zip(hop, free, ready, senders):
                link.free_at = f
                link.offered = r
                link.sender = s


class FifoBatchLinks:
    """The hops of a batch of messages on FIFO links, evaluated at once (the aware direct fast path).

    Row ``i`` of the batch is one sender's ``K`` messages in the order it offers them (program order:
    ``sys/direct_fast.py`` sends a direct phase's window at one ns, receiver after receiver), each to
    its own destination. On every link a message starts at ``max(ready, free)`` and holds the link
    ``hold`` ns; with the messages of a link sorted by the time they reach it and one hold per link,
    the FIFO recurrence has a closed form per link::

        start_k = k·hold + max(free_0, max_{m ≤ k}(ready_m − m·hold))

    (unrolling ``start_k = max(ready_k, start_{k−1} + hold)``), a cumulative maximum along each link's
    row: every hop of every message in a few array operations instead of one event per hop.

    Exact when every link takes the batch's messages in the order they reach it, which the message path
    does except at a tie: two messages reaching one link at the same ns go in the order of their
    events. The same sender's tie in its program order (its sends at one ns run in that order, and
    one path keeps it hop by hop); two senders' tie is the global event sequence, not modelled:
    :class:`LinkConflict`, and ``simulate`` reruns message by message. Across batches the links carry
    over as for the ring recurrence: a batch's first message on a link must come no earlier than
    :func:`_bound` allows (after the last evaluated message, and after it has left when that was
    another sender's), and a link with messages queued on the message path declines. A batch that
    continues the one before (``after``: the all-gather half of a direct all-reduce behind its
    reduce-scatter half) must reach each link strictly after the previous batch's last message there.

    Built for topologies where each link carries the same number of the batch's messages (a switch's
    up- and downlinks, a fully-connected network's pair links); another layout raises
    :class:`LinkConflict` when built (``simulate`` admits the fast path on those two only).
    """

    def __init__(self, hops: list[tuple[list[_Link], np.ndarray]], size: int, senders: list[int], cols: int):
        """``hops[j]``: the links at hop ``j`` and, per message (``row · cols + k``, row ``i`` sent by
        ``senders[i]``), the index of its ``j``-th link among them (−1: its path is shorter)."""
        self.members = senders  # one entry per sender: what PhaseCoordinator.cached counts
        self._hops: list[tuple] = []
        seen: dict[int, int] = {}
        sender_of = np.repeat(np.asarray(senders, dtype=np.int64), cols)
        # each link carries one message of the batch (a halving-doubling step): ``send`` steps each
        # message's path on the links themselves, in plain Python
        self._single: dict[int, list[tuple[_Link, int, int]]] | None = {}
        self._senders = sender_of.tolist()
        # the shortest time any message of the batch takes from its send to its destination, on idle
        # links (waiting for a link only adds): a lower bound on every receive's distance from the
        # earliest send (``direct_aware.earliest_exit``); hops some message skips count nothing
        self.transit = sum(
            min(link.times(size)[0] for link in links) for links, link_of in hops if links and (link_of >= 0).all()
        )
        for j, (links, link_of) in enumerate(hops):
            for link in links:
                if seen.setdefault(id(link), j) != j:
                    raise LinkConflict("a link lies at two hops of one batch of messages")
            msgs = np.flatnonzero(link_of >= 0)
            counts = np.bincount(link_of[msgs], minlength=len(links))
            if (counts != counts[0]).any():
                raise LinkConflict("the links of a batch carry different numbers of its messages")
            times = [link.times(size) for link in links]
            if counts[0] != 1:
                self._single = None
            elif self._single is not None:  # hop j of message m: (link, latency, hold)
                for m, n in zip(msgs.tolist(), link_of[msgs].tolist()):
                    self._single.setdefault(m, []).append((links[n], times[n][0], times[n][1]))
            self._hops.append(
                (
                    links,
                    msgs,
                    link_of[msgs],
                    sender_of[msgs],
                    np.asarray([t[0] for t in times], dtype=np.int64)[:, None],
                    np.asarray([t[1] for t in times], dtype=np.int64)[:, None],
                )
            )

    @classmethod
    def from_paths(cls, paths: list[list[list[_Link]]], size: int, senders: list[int]) -> FifoBatchLinks:
        """The batch of ``paths[i][k]`` (sender ``i``'s ``k``-th message's links, in order)."""
        cols = len(paths[0]) if paths else 0
        flat = [path for row in paths for path in row]
        hops = []
        for j in range(max(map(len, flat), default=0)):
            index: dict[int, int] = {}
            links: list[_Link] = []
            link_of = np.full(len(flat), -1, dtype=np.int64)
            for m, path in enumerate(flat):
                if len(path) > j:
                    link = path[j]
                    n = index.setdefault(id(link), len(links))
                    if n == len(links):
                        links.append(link)
                    link_of[m] = n
            hops.append((links, link_of))
        return cls(hops, size, senders, cols)

    def state(self) -> list[tuple[np.ndarray, np.ndarray, np.ndarray]]:
        """Per hop, each link's (free time, last arrival, last sender) as the links hold them now."""
        out = []
        for links, *_ in self._hops:
            if any(link.pending for link in links):
                raise LinkConflict("a batch of messages reaches a link with messages queued on the message path")
            out.append(
                (
                    np.asarray([link.free_at for link in links], dtype=np.int64),
                    np.asarray([link.offered for link in links], dtype=np.int64),
                    np.asarray([link.sender for link in links], dtype=np.int64),
                )
            )
        return out

    def send(self, sent: list[int]) -> list[int]:
        """Arrival of each message (one per row, ``sent`` its send time) when every link carries one
        message of the batch, advancing the links themselves: with no link shared inside the batch,
        each message meets only the links' carried-over state, checked as :meth:`arrive` does
        (:func:`_bound`, queued message-path messages) — a few list operations per message where the
        array path costs ~0.3 ms a batch of eight."""
        single = self._single
        if single is None:
            raise TypeError("send() needs a batch with one message per link")
        out = []
        for m, (t, s) in enumerate(zip(sent, self._senders)):
            for link, latency, hold in single.get(m, ()):
                if link.pending:
                    raise LinkConflict("a batch of messages reaches a link with messages queued on the message path")
                if t < _bound(link, s):
                    raise LinkConflict("a batch of messages reaches a link out of the order it is evaluated in")
                start = t if t > link.free_at else link.free_at
                link.offered, link.free_at, link.sender = t, start + hold, s
                t = start + latency
            out.append(t)
        return out

    def _stored(self) -> list[list[_Link]]:
        """Per hop, the links :meth:`state` reads and :meth:`store` writes, in their order."""
        return [links for links, *_ in self._hops]

    def idle_at(self, t: int) -> bool:
        """Whether every link is free by ``t`` and took its last message before ``t``: then a batch
        whose messages all reach their links from ``t`` on does not depend on their state. Read from
        the links themselves (a kept outcome needs no :meth:`state` arrays), raising as :meth:`state`
        does when one has messages queued on the message path."""
        idle = True
        for links in self._stored():
            for link in links:
                if link.pending:
                    raise LinkConflict("a batch of messages reaches a link with messages queued on the message path")
                if link.free_at > t or link.offered >= t:
                    idle = False
        return idle

    def kept(self, state: list, c: int) -> list[tuple[list[int], list[int], list[int]]]:
        """What :meth:`store` would write of ``state``, every time moved by ``c`` ns, as lists for
        :meth:`restore` (an outcome kept relative to its starts, stored again at each reuse)."""
        return [((free + c).tolist(), (offered + c).tolist(), last.tolist()) for free, offered, last in state]

    def restore(self, kept: list[tuple[list[int], list[int], list[int]]], c: int) -> None:
        """Leave the links as :meth:`kept` recorded them, every time moved by ``c`` ns: what
        :meth:`store` of that state did (its checks passed then, on the same relative values)."""
        for links, (free, offered, last) in zip(self._stored(), kept):
            for link, f, o, s in zip(links, free, offered, last):
                link.free_at, link.offered, link.sender = f + c, o + c, s

    def arrive(self, sent: np.ndarray, state: list, after: bool = False) -> tuple[np.ndarray, list]:
        """Arrival at its destination of every message of the batch (``sent``: rows × K send times, in
        each row's program order), and the links' state after them; ``state`` (from :meth:`state` or an
        earlier call) is not changed, so an iteration may evaluate a batch again from the same state."""
        t = sent.ravel().copy()
        out = []
        for (links, msgs, link_of, sender, latency, hold), (free, offered, last) in zip(self._hops, state):
            ready = t[msgs]
            order = np.lexsort((msgs, ready, link_of))  # per link by arrival, then program order
            n = len(links)
            r = ready[order].reshape(n, -1)
            s = sender[order].reshape(n, -1)
            if ((r[:, 1:] == r[:, :-1]) & (s[:, 1:] != s[:, :-1])).any():
                raise LinkConflict("two senders' messages reach a link at the same ns")
            if after:
                early = r[:, 0] <= offered
            else:  # _bound, per link
                bound = np.where((last == s[:, 0]) | (last == POINT_TO_POINT), offered + 1, free)
                early = (last != -1) & (r[:, 0] < bound)
            if early.any():
                raise LinkConflict("a batch of messages reaches a link out of the order it is evaluated in")
            k = np.arange(r.shape[1], dtype=np.int64)
            start = np.maximum.accumulate(r - k * hold, axis=1)
            np.maximum(start, free[:, None], out=start)
            start += k * hold
            t[msgs[order]] = (start + latency).ravel()
            out.append((start[:, -1] + hold[:, 0], r[:, -1], s[:, -1]))
        return t.reshape(sent.shape), out

    def store(self, state: list) -> None:
        """Leave the links as the evaluated messages leave them (the ring recurrence's fields)."""
        for (links, *_), (free, offered, last) in zip(self._hops, state):
            for link, f, o, s in zip(links, free.tolist(), offered.tolist(), last.tolist()):
                link.free_at, link.offered, link.sender = f, o, s


class CongestionAwareNetwork(Network):
    # called with the link before a message of the message path reaches it in a checked run: a fast
    # path that holds phases back (``RingCoordinator.settle``) evaluates those crossing it first, so
    # the message meets the link as they leave it
    before_offer: Callable[[_Link], None] | None = None

    def __init__(self, cfg, queue):
        super().__init__(cfg, queue)
        self._bw = [bytes_per_ns(b) for b in cfg.bandwidth]
        self._links: dict[tuple, _Link] = {}
        self._paths: dict[tuple[int, int], list[_Link]] = {}

    def _path(self, src: int, dst: int) -> list[_Link]:
        path = self._paths.get((src, dst))
        if path is None:
            path = self._paths[(src, dst)] = self._route(src, dst)
        return path

    def _route(self, src: int, dst: int) -> list[_Link]:
        cur = self.coords(src)
        target = self.coords(dst)
        links: list[_Link] = []
        for d, p in enumerate(self.dims):
            if cur[d] == target[d]:
                continue
            group = tuple(c if i != d else None for i, c in enumerate(cur))
            devs = route(self.cfg.topology[d], p, cur[d], target[d])
            links.extend(self._link((d, group, a, b)) for a, b in zip(devs, devs[1:]))
            cur[d] = target[d]
        return links

    def _link(self, key: tuple) -> _Link:
        """The link of ``key`` = (dimension, the other coordinates, from device, to device), made on first
        use. The one place a route becomes links: the symmetric engine maps ``key`` to its orbit's
        canonical link here (``sim/symmetric.py``)."""
        link = self._links.get(key)
        if link is None:
            d = key[0]
            link = self._links[key] = _Link(self.cfg.latency[d], self._bw[d])
        return link

    def one_sender_per_link(self, pairs: list[tuple[int, int]]) -> bool:
        """True when no link lies on the paths of two different senders among ``pairs`` (src, dst)."""
        sender_of: dict[int, int] = {}
        for src, dst in pairs:
            for link in self._path(src, dst):
                if sender_of.setdefault(id(link), src) != src:
                    return False
        return True

    def shares_link(self, a: list[tuple[int, int]], b: list[tuple[int, int]]) -> bool:
        """True when some link lies on a path of ``a`` and on a path of ``b`` (lists of (src, dst))."""
        mine = {id(link) for src, dst in a for link in self._path(src, dst)}
        return any(id(link) in mine for src, dst in b for link in self._path(src, dst))

    def ring_links(self, senders: list[int], receivers: list[int], size: int) -> FifoRingLinks:
        return FifoRingLinks([self._path(s, r) for s, r in zip(senders, receivers)], size, senders)

    def hops(self, src: int, dst: int, size: int) -> list[Hop]:
        """``src``'s message of ``size`` bytes to ``dst``: each link of its route with the ns until the
        next device and the ns it holds the link (:meth:`_Link.times`), for :class:`FifoTreeLinks`. On a
        1-D switch the route is the sender's uplink and the receiver's downlink (``_route``'s keys),
        made without routing or keeping the pair's path (a 1,024-member tree phase has 4,092)."""
        if len(self.dims) == 1 and self.cfg.topology[0] == "Switch" and src != dst:
            path = [self._link((0, (None,), src, SWITCH)), self._link((0, (None,), SWITCH, dst))]
        else:
            path = self._path(src, dst)
        return [(link, *link.times(size)) for link in path]

    def tree_links(self, members: list[int], parent: list[int], size: int) -> FifoTreeLinks:
        """The links of a tree phase of ``size`` bytes over ``members`` (``parent[i]`` the index of
        member ``i``'s parent, −1 at the root), timed by the aware tree fast path."""
        return FifoTreeLinks(lambda src, dst: self.hops(src, dst, size), members, parent)

    def batch_links(self, senders: list[int], receivers: list[list[int]], size: int) -> FifoBatchLinks:
        """The hops of ``senders[i]``'s messages to ``receivers[i][0…K−1]`` (``size`` bytes each, in that
        order), evaluated at once: the aware direct fast path asks for these instead of sending."""
        if len(self.dims) == 1 and self.cfg.topology[0] == "Switch":
            # every path is [uplink of the sender, downlink of the receiver] (``_route``'s keys): built
            # from arrays, not from P·(P−1) routes (a 1,024-member window's would hold ~10⁶ lists)
            group = (None,)
            dst = np.asarray(receivers, dtype=np.int64)
            targets, inverse = np.unique(dst, return_inverse=True)
            hops = [
                (
                    [self._link((0, group, s, SWITCH)) for s in senders],
                    np.repeat(np.arange(len(senders)), dst.shape[1]),
                ),
                ([self._link((0, group, SWITCH, r)) for r in targets.tolist()], inverse.ravel().astype(np.int64)),
            ]
            return FifoBatchLinks(hops, size, senders, dst.shape[1])
        paths = [[self._path(s, r) for r in row] for s, row in zip(senders, receivers)]
        return FifoBatchLinks.from_paths(paths, size, senders)

    def _transmit(self, src: int, dst: int, size: int, full: tuple) -> None:
        path = self._path(src, dst)
        if not path:
            self.queue.schedule(self.queue.now, self._arrive, full)
            return
        self._offer(path[0], [size, path, 0, full])

    def check_order(self) -> None:
        """Turn on the message path's run-time order check for runs that also use :class:`FifoRingLinks`
        (``simulate``: the aware ring fast path with pipeline sends beside it).

        The ring recurrence evaluates a phase's messages on a link ahead of the event clock, when the
        phase's last member starts; a message of the message path (a send/receive) then shares the link
        with them. Their order is exact when every link takes its messages in the order they are
        evaluated or offered, which this check and ``FifoRingLinks``' own verify together:

        - a message reaching a link no later than a ring message evaluated there (``sender >= 0``,
          ``now <= offered``) would, on the message path, have gone first or tied with it:
          :class:`LinkConflict`. Reaching it later, it queues behind every evaluated message, and the
          link's ``free_at`` (set by the recurrence) is exactly when it may start;
        - it leaves ``sender = POINT_TO_POINT`` and ``offered = now`` on the link. A ring phase evaluated
          later whose first message reaches the link no later than ``offered`` raises
          :class:`LinkConflict` in ``FifoRingLinks.arrive``; one reaching it later queues behind this
          message, whose hold ``free_at`` covers, since ``begin`` declines a link with messages still
          queued here (``offered <= now``: this message has reached the link by the time the phase is
          evaluated, so it is either holding the link or queued);
        - two message-path messages reaching one link at the same ns: the event path orders them by
          the global event sequence, which the fast path does not reproduce (ring events are scheduled
          when a phase is evaluated): :class:`LinkConflict` too.

        Messages that start at the ns a ring message leaves the link start at that ns in either order;
        the recurrence leaves ``free_seq`` from the link's last message-path start, so a message queued
        behind evaluated ones is started by a free event at ``free_at`` in another place of that ns
        than the event path's, which changes no start time and no link's order: every same-ns meeting
        on a link is refused above. So every link carries the same messages in the same order at the
        same times as on the message path; events of other layers at one ns may run in another order,
        exactly as with the unaware ring fast path. ``simulate`` reruns the whole run message by message
        on any :class:`LinkConflict`, so a run is exact or redone."""
        self._offer = self._offer_checked  # type: ignore[method-assign]

    def _offer_checked(self, link: _Link, msg: list) -> None:
        if self.before_offer is not None:
            self.before_offer(link)
        now = self.queue.now
        if now <= link.offered and link.sender != -1:
            what = "another message" if link.sender == POINT_TO_POINT else "a message a fast path evaluated there"
            raise LinkConflict(f"a point-to-point message reaches a link at {now} ns, with {what} at {link.offered} ns")
        link.sender, link.offered = POINT_TO_POINT, now
        CongestionAwareNetwork._offer(self, link, msg)

    def _offer(self, link: _Link, msg: list) -> None:
        """Start ``msg`` on ``link`` or queue it. The link is held until ``free_at``, and at that ns
        until the event in place ``free_seq`` would run; that event is scheduled only once a message
        waits (``EventQueue.reserve``), which keeps every event's order and drops most of them."""
        pending = link.pending
        if pending:  # its free event is scheduled
            pending.append(msg)
            return
        q = self.queue
        if q.now < link.free_at or (q.now == link.free_at and q.seq < link.free_seq):
            if pending is None:
                pending = link.pending = deque()
            pending.append(msg)
            q.schedule_reserved(link.free_at, link.free_seq, self._free, link)
        else:
            self._start(link, msg)

    def _start(self, link: _Link, msg: list) -> None:
        q = self.queue
        now, size = q.now, msg[0]
        times = link.sized.get(size) or link.times(size)  # the kept times read in place: one call less a hop
        q.schedule(now + times[0], self._hop_done, msg)
        link.free_at = now + times[1]
        link.free_seq = q.reserve()

    def _free(self, link: _Link) -> None:
        pending = link.pending
        self._start(link, pending.popleft())  # type: ignore[union-attr]
        if pending:
            self.queue.schedule_reserved(link.free_at, link.free_seq, self._free, link)

    def _hop_done(self, msg: list) -> None:
        hop = msg[2] = msg[2] + 1
        path = msg[1]
        if hop == len(path):
            self._arrive(msg[3])
        else:
            self._offer(path[hop], msg)
