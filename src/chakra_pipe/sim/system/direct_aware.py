"""The receives of a direct phase on the congestion-aware network: FIFO links, all members at once.

``direct_fast.py`` turns a direct phase's receives into every member's exit (order statistics over
them, the all-reduce's fixed point); on the unaware network a receive is the peer's send plus a
fixed delay. Here each message crosses FIFO links (an uplink and a downlink through a switch, one
pair link on a fully-connected network), so a receive depends on every message queued before it on
those links: the network evaluates the whole window at once (``network.batch_links``, whose class
says why the per-link cumulative maximum is the FIFO recurrence) and checks that the order it
assumes is the message path's, else :class:`LinkConflict` and ``simulate`` reruns message by message.

What the event path does that this reproduces: member ``i`` offers its window's P−1 messages at one
ns, receiver after receiver (send ``j`` to ring offset ``±(j+1)``), so its uplink takes them in that
order; every other link takes them by arrival. An all-reduce's all-gather sends follow its
reduce-scatter receives, and are evaluated from the links' state after the reduce-scatter half (its
fixed point in ``direct_fast._all_gather`` may evaluate them several times from that state); the
links must then take every all-gather message after every reduce-scatter one (``after``), else
:class:`LinkConflict`. Only the final evaluation is left on the links (:meth:`FifoReceives.done`).

Several chunks of one collective started in one pass (every chunk active) send their windows back to
back from each member: :func:`outcome_chunks` evaluates them as one batch (an all-reduce's all-gather
halves as a second one). With fewer active chunks than splits a queue admits chunks one by one, so
they start apart: a complete phase is held until the ns before its earliest possible exit
(:func:`earliest_exit`), the chunks completing meanwhile join it, and the batch is evaluated with each
chunk's own starts, the links' order checks deciding as between any two phases.
"""

from __future__ import annotations

import numpy as np

from .direct_fast import FastDirect, _Layout, _layout, _outcome, _plan_key
from .phase_fast import FastPathDeclined


def outcome(coord, first: FastDirect, starts: list[int], plan_key: tuple) -> tuple[int, tuple[list, list]]:
    """``(base, (times, delays))``: each member's exit registration at ``base + time``; the links advance."""
    lay = _layout(coord, first)
    base, (hit,) = _kept(coord, first, starts, FifoReceives.links_of(coord, first, lay), [lay.flat], plan_key)
    return base, hit


def _kept(coord, first: FastDirect, starts: list, links, index: list[np.ndarray], plan_key: tuple):
    """``(base, [(times, delays)] per chunk of index)``, times relative to ``base``; the links advance.

    When every link of the batch is idle by its first send (free, and its last message arrived
    before it), the links' state changes nothing (each link's cumulative maximum starts at or after
    its free time, every order check passes) and the recurrence is max-plus: the outcome and the
    state it leaves shift with the starts, so they are kept per ring, plan, number of chunks and
    relative start pattern, as on the unaware network (an LLM step's phases repeat thousands of
    times). Links still busy (a staggered chunk sent while an earlier chunk's messages hold them)
    enter the same max-plus recurrence through their state, every time of which shifts with the
    starts too: such an outcome is kept per relative start pattern and state relative to the
    earliest start (mixtral t2d8 ep4 with 2 of 4 chunks active: 802 busy batches, 11 distinct). An
    evaluation that declines or conflicts raises before anything is kept."""
    # one list per chunk for a batch of chunks; plain ints: a phase has a few members, and a kept
    # outcome is looked up thousands of times a step
    flat = [t for chunk in starts for t in chunk] if isinstance(starts[0], list) else starts
    base = min(flat)
    rel = tuple(t - base for t in flat)
    key: tuple = ("direct-aware-outcome", first.ring.key, first.direction, plan_key, len(index), rel)
    state = None
    if not links.idle_at(base + _first_delay(coord, first, plan_key)):
        state = links.state()
        key += (b"".join(np.concatenate((f - base, o - base, last)).tobytes() for f, o, last in state),)
    hit = coord.cache.get(key)
    if hit is None:
        receives = FifoReceives(_layout(coord, first), links, links.state() if state is None else state, index)
        out = [([t - base for t in times], delays) for times, delays in _outcome(coord, first, starts, receives)]
        end = links.kept(receives.final, -base)
        hit = coord.cached(key, lambda: (out, end))
    else:
        hit = hit[0]
        links.restore(hit[1], base)
    return base, hit[0]


def _first_delay(coord, first: FastDirect, plan_key: tuple) -> int:
    """``E``: the memory-bus delay of a phase's first packets, after which its window leaves."""
    return int(coord.cached(plan_key, lambda: first.packet_plan(first.parallel_reduce + first.stream_count))[0][0])


def earliest_exit(coord, algos: list[FastDirect]) -> int:
    """A lower bound on the first ns the evaluation of this phase — alone or in a batch with chunks
    that start later — schedules anything at: every exit is registered at (or after) one of the
    member's receives, which come no earlier than its peer's send (start + E) plus the shortest
    transit of a message over idle links (``FifoBatchLinks.transit``), so no earlier than
    ``min(start) + E + transit``."""
    first = algos[0]
    links = FifoReceives.links_of(coord, first, _layout(coord, first))
    return min(a.start_ns for a in algos) + _first_delay(coord, first, _plan_key(first)) + links.transit


def outcome_chunks(coord, chunks: list[list[FastDirect]]) -> tuple[int, list[tuple[list, list]]]:
    """``(base, [(times, delays)] per chunk)``, exits at ``base + time``, for the phases of several
    chunks of one collective evaluated together (``coord.chunks``: every chunk in one pass, or, with
    ``coord.stagger``, the chunks completing while the first is held; in the order of ``chunks``,
    member 0's start order); the links advance, and on idle links the outcome is kept as one phase's
    (``_kept``, per relative start pattern of every chunk).

    Why it is exact. Each phase registers its window's memory-bus hops as it starts; so at its start
    + E the member sends that chunk's window, receiver after receiver, and chunks it started at one ns
    one after the other in their start order (same-tick callbacks run in registration order): one row
    of ``K·(P−1)`` messages per member, chunk by chunk, each chunk's at its own start + E, which is how
    ``FifoBatchLinks`` orders a sender's messages on its links (by time, at one ns in row order). So a
    member that started two chunks at one ns in another order than member 0 declines below. Every
    other order on a link is by arrival, and two senders' messages reaching a link at one ns raise
    ``LinkConflict`` as for one window. The chunks' receives are matched by their own streams' tags
    (each posted at its own chunk's send), so once the batch's arrivals are known each chunk is the
    one-window outcome of its own receives. An all-reduce's
    all-gather halves are sent as each chunk's reduce-scatter receives come: they are one batch too
    (every chunk's sends in one row per member, by time), evaluated from the links' state after every
    chunk's reduce-scatter messages, which they must reach each link after (``after``, else
    ``LinkConflict``: on a switch each uplink sends them behind all of its reduce-scatter messages);
    their fixed point is joint (``direct_fast._all_gather``). Two chunks' all-gather sends leaving a
    member at one ns go in the order of their generals' events, not modelled: declined too
    (``FastPathDeclined``: the run is redone with direct phases message by message)."""
    first = chunks[0][0]
    starts = [[a.start_ns for a in algos] for algos in chunks]  # plain ints: a few chunks of a few members
    for c in range(1, len(chunks)):  # chunks c' < c sending at one ns from a member: in their start order
        later = chunks[c]
        for earlier in chunks[:c]:
            if any(a.start_ns == b.start_ns and a.start_seq > b.start_seq for a, b in zip(earlier, later)):
                raise FastPathDeclined("direct phases: a member started two chunks of one collective in another order")
    lay = _layout(coord, first)
    k, p, sign = len(chunks), first.ring.size, int(lay.sign)
    ring, size = first.ring, first.msg_size
    links = coord.cached(
        ("direct-links", ring.key, sign, size, k), lambda: _links(coord.network, ring.members, sign, size, k)
    )
    index = coord.cached(("direct-chunk-index", p, sign, k), lambda: _chunk_index(lay, k))
    return _kept(coord, first, starts, links, index, _plan_key(first))


def _chunk_index(lay: _Layout, k: int) -> list[np.ndarray]:
    """Per chunk ``c``: where member ``d``'s receive ``j`` is in a batch of ``k`` windows (row: the
    peer ``lay.src[d, j]``, column: chunk ``c``'s send ``j`` of that peer)."""
    half = lay.flat.shape[1]
    cols = lay.flat - lay.src.astype(np.int64) * half  # send j of the peer: j
    rows = lay.src.astype(np.int64) * (k * half)
    return [rows + c * half + cols for c in range(k)]


class FifoReceives:
    """``direct_fast._ClosedReceives``' interface over the aware network's FIFO links, for one phase
    or the chunks of one collective sent as one batch (``index``: per chunk, where each member's
    receives are in the batch; one phase's is ``lay.flat``). Results are lists, one per chunk."""

    def __init__(self, lay: _Layout, links, state: list, index: list[np.ndarray]):
        self.lay, self.links, self.index = lay, links, index
        self._state = state  # the links before the phase, then after its reduce-scatter half
        self.final = state  # the links after the last evaluation, left on them by ``done``
        self._recv1: list[np.ndarray] = []
        self._sends: np.ndarray | None = None  # the all-gather sends last evaluated (several chunks)

    @staticmethod
    def links_of(coord, first: FastDirect, lay: _Layout):
        """The network's batch links of this phase's shape (built once per ring, direction and size)."""
        ring, sign = first.ring, int(lay.sign)
        key = ("direct-links", ring.key, sign, first.msg_size)
        return coord.cached(key, lambda: _links(coord.network, ring.members, sign, first.msg_size, 1))

    def _sorted(self, sent: np.ndarray, posted: list[np.ndarray], after: bool) -> tuple[list[np.ndarray], list]:
        """Each chunk's receives per member, sorted: its peer's message's arrival, not before posting."""
        arrived, state = self.links.arrive(sent, self._state, after)
        out = []
        for index, post in zip(self.index, posted):
            recv = np.take(arrived, index)  # row d: the message of lay.src[d, j]'s send j
            np.maximum(recv, post, out=recv)
            recv.sort(axis=1)
            out.append(recv)
        return out, state

    def first(self, sent: np.ndarray) -> list[np.ndarray]:
        """``sent``: each member's send time (one phase), or one row of them per chunk (a batch of
        chunks: member i's row of the batch is chunk 0's window, then chunk 1's, ...)."""
        rows = sent if sent.ndim == 2 else sent[None, :]
        window = np.repeat(rows.T, self.lay.flat.shape[1], axis=1)
        recv, self._state = self._sorted(window, [row[:, None] for row in rows], False)
        self.final = self._state
        self._recv1 = [r.copy() for r in recv]  # the all-reduce's fixed point may need them after consuming them
        return recv

    def again(self) -> list[np.ndarray]:
        return [r.copy() for r in self._recv1]

    def second(self, sends: list[np.ndarray]) -> list[np.ndarray]:
        batch = sends[0] if len(sends) == 1 else np.concatenate(sends, axis=1)
        if len(sends) > 1:
            self._sends = batch
        recv, self.final = self._sorted(batch, sends, True)
        return recv

    def done(self) -> None:
        if self._sends is not None:
            _one_chunk_per_ns(self._sends, len(self.index))
        self.links.store(self.final)


def _one_chunk_per_ns(sends: np.ndarray, k: int) -> None:
    """Decline when two chunks' all-gather sends leave one member at one ns: their order on its
    uplink is that of their generals' events, which the batch (chunk by chunk at a tie) does not
    model."""
    order = np.argsort(sends, axis=1, kind="stable")
    times = np.take_along_axis(sends, order, axis=1)
    chunk = order // (sends.shape[1] // k)
    if ((times[:, 1:] == times[:, :-1]) & (chunk[:, 1:] != chunk[:, :-1])).any():
        raise FastPathDeclined("direct all-reduce: two chunks' all-gather sends leave a member at one ns")


def _links(network, members: list[int], sign: int, size: int, chunks: int):
    """The network's batch links of ``chunks`` phases at once: member ``i``'s send ``j`` of each goes
    to ring offset ``sign·(j+1)``, chunk after chunk."""
    p = len(members)
    receivers = [[members[(i + sign * (j + 1)) % p] for j in range(p - 1)] * chunks for i in range(p)]
    return network.batch_links(members, receivers, size)
