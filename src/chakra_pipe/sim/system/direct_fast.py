"""Fast path for direct phases on the congestion-unaware network (window covering every peer).

With the window ``W = P - 1`` (plain ``direct``) the packet counters of :class:`~.direct.Direct`
reduce exactly to order statistics over each member's receives. Member ``i``'s ``j``-th send goes to
ring offset ``+(j mod (P-1)) + 1`` and its ``j``-th receive comes from offset ``-(j mod (P-1)) - 1``,
whose ``j``-th send it matches. Every packet passes the memory bus (``E``, plus ``Pd`` when the
counters mark it as carrying a reduction) and its return (a "general") frees one send slot, so:

    the W first sends leave at start + E  (the W packets of ``start()``)
    recv_j   = max(send_j[peer] + N(peer -> me), send_j)           (posted when sending)
    general_m = m-th earliest receive + d[W + m]                    (the m-th receive's packet)
    exit      = the last general

An all-reduce sends its P-1 all-gather messages only after all P-1 reduce-scatter receives (time
``R``): all-gather send ``j`` leaves at ``max(g*, j-th earliest general)``, ``g*`` the first general
after ``R``. All-gather generals can overtake late reduce-scatter ones, so that half is a fixed point,
iterated from the reduce-scatter-only upper bound (it settles: every dependency cycle takes >= E ns).
A general at exactly ``R`` would send or not depending on the global event order: then the
evaluation declines (:class:`~.phase_fast.FastPathDeclined`). Windows below P-1 (``direct<W>``) run
message by message.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from .algorithm import AR, PacketCounters
from .direct import Direct
from .phase_fast import FastPathDeclined
from .ring_fast import START_ORDER
from .stream import bus_delay
from .topology import CLOCKWISE

if TYPE_CHECKING:  # numpy.typing costs ~5 ms of every start-up; annotations only need it here
    import numpy.typing as npt


def fast_direct_applies(window: int, members: int) -> bool:
    """The recurrence holds when the window lets every peer's message go at once."""
    return window == -1 or window >= members - 1


class FastDirect(Direct):
    """A :class:`Direct` phase evaluated by the phase coordinator instead of message by message."""

    def start(self) -> None:
        self.start_ns = self.sys.now
        self.start_seq = next(START_ORDER)  # several chunks' windows leave one member in this order
        ring = self.ring
        key = ("direct", ring.key, self.stream.stream_id, self.stream.steps_finished, self.ctype, self.msg_size)
        coord = self.sys.phase_coordinator
        coord.join(key + (self.direction,), ring.index_of(self.id), ring.size, self, lambda a: evaluate(coord, a))

    def packet_plan(self, count: int) -> tuple[np.ndarray, np.ndarray]:
        """Bus (+ reduction) delay and reduction flag of the first ``count`` packets (the counters replayed)."""
        bus = bus_delay(self.sys, self.local)
        pd = self.sys.reduction_delay(self.msg_size)
        counters = PacketCounters()  # a fresh set: the plan is shared by every phase of this shape
        flags = np.fromiter((counters.take(self) for _ in range(count)), dtype=bool, count=count)
        return np.where(flags, bus + pd, bus).astype(np.int64), flags


class _Layout:
    """Index tables of a P-member direct phase in one direction, shared by every phase of that shape."""

    def __init__(self, p: int, sign: int):
        kind = np.dtype(np.int32 if p * p < 2**31 else np.int64)  # half the memory of the largest tables
        cols: npt.NDArray[np.signedinteger] = np.arange(1, p, dtype=kind)[None, :]
        # receive j's peer (its send j comes here), built in the narrow type: no full-size int64 temporaries
        src: npt.NDArray[np.signedinteger] = np.arange(p, dtype=kind)[:, None] - sign * cols
        src %= p
        self.src = src
        # peer's send j in a flattened P x (P-1) matrix
        flat: npt.NDArray[np.signedinteger] = src * kind.type(p - 1)
        flat += cols - 1
        self.flat = flat
        self.rows = np.arange(p)
        self.sign = sign


_NET_ROWS = 64  # members whose delays are computed at once: the closed form's temporaries stay ~0.5 MB


def _net(coord, ring, lay: _Layout, size: int) -> np.ndarray:
    """Network delay of every receive (P x (P-1)), or a 1 x 1 matrix when all are equal (any switch
    or fully-connected dimension), which broadcasts alike in :func:`_recv`.

    Built in blocks of rows: the closed form over the whole matrix held ~8 int64 temporaries of
    8 MB each at 1,024 members, the peak of a direct all-reduce; a uniform matrix is never stored.
    """
    members = np.asarray(ring.members, dtype=np.int64)
    full: np.ndarray | None = None
    value: int | None = None
    for a in range(0, ring.size, _NET_ROWS):
        rows = slice(a, a + _NET_ROWS)
        block = coord.delays(members[lay.src[rows]], members[rows, None], size)
        if full is None:
            if value is None:
                value = int(block.flat[0])
            if (block == value).all():
                continue
            full = np.full(lay.src.shape, value, dtype=np.int64)
        full[rows] = block
    return full if full is not None else np.full((1, 1), value, dtype=np.int64)


def _recv(send: np.ndarray, lay: _Layout, net: np.ndarray) -> np.ndarray:
    """Receive callback times, sorted per member: the peer's matching send plus the network delay, not
    before posting (in place on one fresh matrix: at 1,024 members each is 8 MB). Gathered in blocks
    of rows: ``take`` converts its int32 index to intp first, a full-size copy otherwise."""
    index, posted = (lay.flat, send) if send.ndim == 2 else (lay.src, send[:, None])
    out = np.empty(index.shape, dtype=np.int64)
    for a in range(0, len(out), _NET_ROWS):
        rows = slice(a, a + _NET_ROWS)
        np.take(send, index[rows], out=out[rows])
    out += net
    np.maximum(out, posted, out=out)
    out.sort(axis=1)
    return out


def evaluate(coord, algos: list[FastDirect]) -> None:
    """Schedule every member's exit. The recurrence is max-plus, so shifting every start by ``c``
    shifts every exit by ``c``: the outcome is cached per shape and relative start pattern (LLM steps
    start a group's phases in a few patterns, mostly all at once, thousands of times). On the aware
    network the links' state enters too: ``direct_aware.py``. With several chunks of a collective at
    once (aware, ``coord.chunks``) the phase waits for the other chunks completing in this ns, and
    all are evaluated together (their windows share every uplink): :func:`_evaluate_chunks`; with
    chunks starting at different times (``coord.stagger``) it waits until the ns before any member
    could exit (``direct_aware.earliest_exit``), the chunks completing meanwhile joining it."""
    if coord.chunks:
        first = algos[0]
        stream = first.stream
        key = (id(stream.dataset), first.ring.key, stream.steps_finished, first.ctype, first.msg_size, first.direction)
        due = 0
        if coord.stagger:
            from .direct_aware import earliest_exit

            due = earliest_exit(coord, algos) - 1
        coord.hold(key, algos, lambda chunks: _evaluate_chunks(coord, chunks), due)
        return
    _evaluate_one(coord, algos)


def _evaluate_chunks(coord, chunks: list[list[FastDirect]]) -> None:
    """The chunks' phases of one collective, in the order they started (on member 0): one alone
    as any phase, several as one batch over the FIFO links (``direct_aware.outcome_chunks``)."""
    if len(chunks) == 1:
        _evaluate_one(coord, chunks[0])
        return
    chunks.sort(key=lambda algos: algos[0].start_seq)
    from .direct_aware import outcome_chunks

    base, out = outcome_chunks(coord, chunks)
    for algos, (times, delays) in zip(chunks, out):
        _schedule_exits(coord, algos, base, times, delays)


def _evaluate_one(coord, algos: list[FastDirect]) -> None:
    first = algos[0]
    starts = [a.start_ns for a in algos]
    if coord.aware:
        from .direct_aware import outcome  # only runs whose direct phases cross FIFO links load it

        base, (times, delays) = outcome(coord, first, starts, _plan_key(first))
    else:
        base = min(starts)
        key = ("direct-outcome", first.ring.key, first.direction, _plan_key(first), tuple(s - base for s in starts))
        times, delays = coord.cached(
            key, lambda: _outcome(coord, first, [s - base for s in starts], _ClosedReceives.of(coord, first))[0]
        )
    _schedule_exits(coord, algos, base, times, delays)


def _schedule_exits(coord, algos: list[FastDirect], base: int, times: list[int], delays: list[int]) -> None:
    """Count the phase's messages as evaluated and register each member's exit at ``base + time``."""
    first = algos[0]
    messages = first.ring.size * first.stream_count
    coord.stats.messages += messages
    coord.stats.fast_messages += messages
    for algo, t, delay in zip(algos, times, delays):
        coord.exit_at(algo, base + t, delay)


def _plan_key(first: FastDirect) -> tuple:
    """What a phase's packet plan depends on (``FastDirect.packet_plan``)."""
    w, nzl = first.parallel_reduce, first.non_zero_latency_packets()
    return ("direct-plan", first.ctype, w, nzl, first.local, first.msg_size)


def _layout(coord, first: FastDirect) -> _Layout:
    p, sign = first.ring.size, 1 if first.direction == CLOCKWISE else -1
    return coord.cached(("direct-layout", p, sign), lambda: _Layout(p, sign))


class _ClosedReceives:
    """The receives of a direct phase on the unaware network: the peer's send plus a fixed delay
    (:func:`_recv`); the aware counterpart, over FIFO links, is ``direct_aware.FifoReceives``."""

    def __init__(self, lay: _Layout, net: np.ndarray):
        self.lay, self.net = lay, net
        self._sent: np.ndarray | None = None

    @classmethod
    def of(cls, coord, first: FastDirect) -> _ClosedReceives:
        lay, ring, sign = _layout(coord, first), first.ring, 1 if first.direction == CLOCKWISE else -1
        key = ("direct-net", ring.key, sign, first.msg_size)
        return cls(lay, coord.cached(key, lambda: _net(coord, ring, lay, first.msg_size)))

    def first(self, sent: np.ndarray) -> list[np.ndarray]:
        """The sorted receives of the window sent at ``sent`` (one time per member): one phase's, a
        list of one as a batch of chunks gives one per chunk (``direct_aware``)."""
        self._sent = sent
        return [_recv(sent, self.lay, self.net)]

    def again(self) -> list[np.ndarray]:
        """:meth:`first`'s result once more (recomputed: holding it would cost a matrix at 1,024 members)."""
        assert self._sent is not None
        return [_recv(self._sent, self.lay, self.net)]

    def second(self, sends: list[np.ndarray]) -> list[np.ndarray]:
        """The sorted receives of an all-reduce's all-gather half (``sends``: each member's, in order)."""
        return [_recv(sends[0], self.lay, self.net)]

    def done(self) -> None:
        """The evaluation is final (the aware receives leave their links here)."""


def _outcome(coord, first: FastDirect, starts: list[int], receives) -> list[tuple[list[int], list[int]]]:
    """Each member's exit registration ``(times, delays)``, for members starting at ``starts``: one
    per chunk of ``receives`` (one phase, or the chunks of one collective evaluated as one batch,
    ``direct_aware.outcome_chunks``, where ``starts`` holds one list per chunk; every chunk has
    ``first``'s shape)."""
    p = first.ring.size
    w, half, total = first.parallel_reduce, p - 1, first.stream_count
    d, flags = coord.cached(_plan_key(first), lambda: first.packet_plan(w + total))
    rows = receives.lay.rows
    e = int(d[0])  # the first W packets never carry a reduction
    sent = np.asarray(starts, dtype=np.int64) + e  # all W = P-1 first sends (per chunk: one row each)
    # each member exits in its last general: found half by half, the reduce-scatter half's before
    # its receives become the all-gather's sends (one P x (P-1) matrix fewer at a time)
    rs, ag = slice(w, w + half), slice(w + half, w + 2 * half)
    recv1 = receives.first(sent)
    last = [_last_general(r, d[rs], flags[rs], rows) for r in recv1]
    if first.ctype == AR:
        for c, recv2 in enumerate(_all_gather(recv1, d[rs], d[ag], receives)):
            best, at, processed = last[c]
            g, r, f = _last_general(recv2, d[ag], flags[ag], rows)
            later = g > best  # on a tie the reduce-scatter half's general stays the last one
            last[c] = (best, np.where(later, r, at), np.where(later, f, processed))
    receives.done()
    # a reduction packet's bus-hop callback registers the reduction delay; any other is the last one
    pd = first.sys.reduction_delay(first.msg_size)
    return [(np.where(f, at + e, at).tolist(), np.where(f, pd, e).tolist()) for _, at, f in last]


def _last_general(recv: np.ndarray, d: np.ndarray, flags: np.ndarray, rows: np.ndarray) -> tuple:
    """Per member: the latest general of one half, the receive that made it, and its reduction flag.

    The generals are formed in ``recv`` itself and undone (no 8 MB copy at 1,024 members)."""
    recv += d
    m = np.argmax(recv, axis=1)
    gen = recv[rows, m]
    recv -= d
    return gen, recv[rows, m], flags[m]


def _all_gather(recv1: list[np.ndarray], d1: np.ndarray, d2: np.ndarray, receives) -> list[np.ndarray]:
    """The all-gather receives of an all-reduce (sorted per member), given its reduce-scatter receives;
    one matrix per chunk (chunks evaluated as one batch share the links, so their all-gather halves
    are one fixed point, settled when every chunk's is).

    ``recv1`` is consumed (its matrices become the all-gather sends); ``receives.again()`` gives them
    anew, needed only when the fixed point iterates."""
    used, g_star = [], []
    for one in recv1:
        last = one[:, -1:].copy()
        one += d1
        if (one == last).any():
            raise FastPathDeclined("direct all-reduce: a general at the last reduce-scatter receive's time")
        g_star.append(np.where(one > last, one, np.iinfo(np.int64).max).min(axis=1)[:, None])
        one.sort(axis=1)
        used.append(one)
    half = used[0].shape[1]
    for _ in range(len(used) * (half + 1) + 1):
        # The all-gather sends, in place: the receives depend on ``used`` only through them, so
        # comparing them (not ``used`` itself) ends the iteration at the same receives, one 8 MB
        # matrix fewer at 1,024 members.
        tops = [u[:, -1].copy() for u in used]
        for u, g in zip(used, g_star):
            np.maximum(u, g, out=u)
        recv2 = receives.second(used)
        settled, again = True, None
        for c, (r, top) in enumerate(zip(recv2, tops)):
            r += d2  # the generals, in place; undone before returning
            if not (r.min(axis=1) >= top).all():  # an all-gather general overtakes a reduce-scatter one
                again = receives.again() if again is None else again
                generals1 = again[c]
                generals1 += d1
                merged = np.sort(np.concatenate([generals1, r], axis=1), axis=1)[:, :half]
                settled &= np.array_equal(np.maximum(merged, g_star[c]), used[c])
                used[c] = merged
            r -= d2
        if settled:
            return recv2
    # every dependency cycle takes >= E ns, so this settles; with endpoint-delay 0 it may not: refuse
    raise FastPathDeclined("direct all-reduce: the all-gather recurrence did not settle")
