"""Fast path for ring phases: one recurrence per phase over all members, not one event per message.

In a ring phase every NPU alternates "send, wait for the predecessor's message, pass the memory bus
(+ reduction)". With the stateless unaware network the event-by-event behaviour reduces exactly to

    send_1 = start + d_0
    recv_k = max(send_k[pred] + N[pred -> me], send_k)          (a receive is posted when sending)
    send_{k+1} = recv_k + d_k,   exit = recv_S + d_S

where ``d_k`` is the bus delay of the k-th injected packet plus ``Pd`` when that packet carries a
reduction (the same packet counters as :class:`~.algorithm.PacketAlgorithm`). Every rank's exit
depends on every member's start, so the phase is evaluated once the last member has started, over
all members at once (numpy for large rings), and each member's exit is scheduled at its last receive
exactly as the event path would register it.

``send_k[pred] + N`` is the network's business: the coordinator asks it for the phase's hops
(``network.ring_links``) and steps their recurrence, so the link model exists once, in ``network/``.
On the congestion-aware network each message waits for its FIFO links (an uplink then a downlink
through a switch). That is exact when every link takes its messages in the order the phases are
evaluated: ``simulate.aware_fast_path_is_exact`` checks the run's preconditions before it starts (one
queue and one active chunk per dimension, or one chunk per collective, or several chunks of a
collective in flight — evaluated together, :meth:`RingCoordinator._flush`, held until just before
their earliest exit when they start at different times, :meth:`RingCoordinator._batch`, per direction
with several queues, where a ring's two directions cross disjoint links —, ring algorithms only, no ring
putting two of its members' messages on one link; on a multi-dimensional network each phase of a
hierarchical collective is a ring inside one dimension group, over that group's links only), and
the links check while it runs that no two senders' messages meet on one and that point-to-point messages, sent
message by message beside the rings, reach each link after the ring messages already evaluated
there (``network/aware.py``: a ``LinkConflict`` makes ``simulate`` redo the
run message by message). Link free times carry over
from phase to phase on the links.

Every other case (rendezvous, other algorithms, contention the recurrence cannot order) runs
message by message.
"""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np

from .ring import Ring

NUMPY_FROM = 48  # ring size from which array steps beat plain Python
# the order in which ring phases start: two chunks' first sends at one ns go in this order (their sends
# are registered with the same delay when they start, and same-tick callbacks run in registration order)
START_ORDER = itertools.count()
OUTCOME_MEMBERS = 1 << 17  # members of the ring outcomes kept: ~70 bytes each (key and times; aware: + links)


def _weight(outcome: tuple) -> int:
    """What a kept outcome counts against ``OUTCOME_MEMBERS``: its members, and on the aware network
    one more per value of the links' state it keeps (its key holds as many again)."""
    return len(outcome[0]) + (len(outcome[3]) if len(outcome) > 3 else 0)


class RingCoordinator:
    """Collects the members' start times of each ring phase and evaluates it when all have started."""

    def __init__(self, network, queue, stats, aware: bool = False, chunks: bool = False, stagger: bool = False):
        """``chunks`` (aware only): several chunks of one collective may run a phase at once; their
        phases are evaluated together (:meth:`_flush`). ``stagger`` (with ``chunks``): they may also
        start it at different times (a queue admitting chunks one by one, a chunk entering a dimension
        when it leaves the one before), so a batch is held back until just before its earliest
        possible exit (:meth:`_batch`), the network calling :meth:`settle` before any message of the
        message path touches a link."""
        self.network, self.queue, self.stats = network, queue, stats
        self.chunks = chunks
        self.stagger = stagger
        if stagger:
            network.before_offer = self.settle
        self._batches: dict[tuple, list[list[FastRing]]] = {}  # complete phases held, per collective and shape
        self._waiting: dict[tuple, dict[int, FastRing]] = {}
        self._ring_links: dict[tuple, Any] = {}  # network.ring_links results
        self._outcomes: dict[tuple, tuple] = {}  # phases' outcomes, see _shifted and _kept_aware
        self._outcome_members = 0
        self._preds: dict[tuple, tuple[list[int], bool]] = {}  # ring predecessors per ring and direction (``_pred``)
        self.aware = aware

    def join(self, algo: FastRing) -> None:
        ring, stream = algo.ring, algo.stream
        key = (ring.key, stream.stream_id, stream.steps_finished, algo.ctype, algo.msg_size, algo.direction)
        members = self._waiting.get(key)
        if members is None:
            members = self._waiting[key] = {}
        members[ring.index_of(algo.id)] = algo
        if len(members) == ring.size:
            del self._waiting[key]
            algos = [members[i] for i in range(ring.size)]
            if self.chunks:
                self._batch(algos)
            else:
                self._finish(algos, *(self.recurrence(algos) if self.aware else self._shifted(algos)))

    def _batch(self, algos: list[FastRing]) -> None:
        """Hold a complete phase with the other chunks of its collective (the same collective on ring
        member 0, the same step of the chain and phase shape) to evaluate them as one recurrence:
        until the end of this ns when every chunk starts at once (they complete in the same ns), or,
        with chunks in flight at different times (``stagger``), until the ns before any member could
        exit (:meth:`_earliest_exit`) or a message of the message path reaches a link the batch
        crosses (:meth:`settle`), whichever comes first."""
        first = algos[0]
        stream = first.stream
        key = (id(stream.dataset), first.ring.key, stream.steps_finished, first.ctype, first.msg_size, first.direction)
        batch = self._batches.get(key)
        if batch is None:
            batch = self._batches[key] = []
            if not self.stagger:
                self.queue.schedule(self.queue.now, self._flush, key)  # after the events already at this ns
        batch.append(algos)
        if self.stagger:  # until the ns before any of its members could exit (or sooner: settle)
            due = max(self.queue.now, self._earliest_exit(algos) - 1)
            self.queue.schedule(due, self._flush_held, key, batch)

    def _earliest_exit(self, algos: list[FastRing]) -> int:
        """A lower bound on every member's last receive, the first time a phase's outcome is seen
        (its exits are scheduled there): ``recv_k ≥ send_k[pred] + δ`` with ``δ`` the smallest
        message transit over the members' paths with idle links (waiting for a link only adds) and
        ``send_{k+1} = recv_k + d_k``, so by induction ``recv_S ≥ min(start) + Σ_{k<S} d_k + S·δ``
        (``recv_0 = send_1`` when the phase has no step)."""
        first = algos[0]
        steps, d = first.stream_count, first.packet_delays()
        transit = self.links(first.ring, first.msg_size, first.direction).transit
        return min(a.start_ns for a in algos) + sum(d[: max(steps, 1)]) + steps * transit

    def _flush_held(self, key: tuple, batch: list) -> None:
        """A held batch's due time (a no-op when an earlier one, or :meth:`settle`, flushed it)."""
        if self._batches.get(key) is batch:
            self._flush(key)

    def settle(self, link) -> None:
        """Evaluate the held batches that may already have reached ``link``, oldest first: called by
        the network before a message of the message path reaches it, which must meet the link as the
        held phases leave it (the order the links check, ``CongestionAwareNetwork.check_order``).
        Batches that do not cross it share nothing with that message, and batches none of whose
        messages can reach it before this ns (``FifoRingLinks.earliest`` over their chunks' first
        sends; chunks joining later send later still) come after that message on it: both stay held
        for their later chunks. Evaluating such a batch now would place its messages on the link
        ahead of the message that reaches it first, which the link's check then refuses (a rerun);
        held, it queues behind the message when it is evaluated, as on the message path, and if that
        message still waits on the link then, the batch's ``begin`` declines instead."""
        now = self.queue.now
        for key, batch in list(self._batches.items()):
            first = batch[0][0]
            links = self.links(first.ring, first.msg_size, first.direction)
            d0 = first.packet_delays()[0]
            reach = (links.earliest(link, [a.start_ns + d0 for a in algos]) for algos in batch)
            if min((t for t in reach if t is not None), default=now) < now:
                self._flush(key)

    def _flush(self, key: tuple) -> None:
        """Evaluate the chunks batched under ``key`` as one FIFO recurrence (a batch of one chunk is the
        plain :meth:`recurrence`).

        Why it is exact. Under ``simulate``'s preconditions for this case (1-D, one queue with room for
        every chunk) a collective's chunks start their one phase in one ``Sys._start_waiting`` pass,
        in chunk order, and each member's path is its own (one sender per link). So a link carries one
        sender's messages, in the order that member offers them; FIFO serves them in that order, and
        the recurrence serves them step by step, chunk by chunk (step k of chunk c behind step k of
        chunk c−1, step k+1 of the first chunk behind step k of the last). The two orders agree when
        each message reaches each link after the one before it in this order, which
        ``FifoRingLinks.arrive(queued=True)`` checks on every link (else ``LinkConflict`` and
        ``simulate`` reruns message by message). The one exception is a tie on a path's first link:
        two chunks' sends at one ns. The event path then offers them in the order their callbacks run;
        step 1's sends are registered in chunk order in one pass (same-tick callbacks run in
        registration order), and a later send runs in the order of the step before's when the chain
        leading to it is made of same-ns callbacks only: its receive found the message arrived
        strictly before its own send (``clocked``; the match is then scheduled at once, in send
        order). Ties are accepted only where both chunks' chains at the SENDER are such (``tied``: the
        flags of ``pred[i]``, whose sends tie on member ``i``'s first link); a tie involving a
        receive that waited for, or met at the same ns, its message's arrival (whose order against
        the send is the global event sequence) is refused. With the order verified, every start,
        arrival and exit is the event path's; the links end as the message path would leave them.

        Chunks that start at different times (``stagger``: a queue admitting chunks one by one, a
        chunk entering a dimension when it leaves the one before) are batched alike, but held until
        the ns before the batch's earliest possible exit (:meth:`_batch`, :meth:`_earliest_exit`):
        until then no event sees the phases (their exits come later; a message of the message path
        settles the held batches on its link first, :meth:`settle`), so evaluating them then is
        evaluating them when each completed, in another order between batches, which the links'
        order check covers as between any two phases. They are taken in the order member 0 started
        them, and a tie at step 1 is accepted on a member only when the later chunk started later
        there (``start_seq``: both sends are registered with one delay as the phases start, and
        same-tick callbacks run in registration order); the chains of later steps as above."""
        chunks = self._batches.pop(key)
        if self.stagger:  # in the order member 0 started them
            chunks.sort(key=lambda algos: (algos[0].start_ns, algos[0].start_seq))
        else:
            chunks.sort(key=lambda algos: algos[0].stream.stream_id)
        if len(chunks) == 1:
            self._finish(chunks[0], *self.recurrence(chunks[0]))
            return
        first = chunks[0][0]
        steps, d = first.stream_count, first.packet_delays()
        links = self.links(first.ring, first.msg_size, first.direction)
        pred, _ = self._pred(first.ring, first.direction)
        arrays = first.ring.size >= NUMPY_FROM
        links.begin(arrays)
        sends: list[Any]
        if arrays:
            predv = np.asarray(pred, dtype=np.int64)
            sends = [np.asarray([a.start_ns for a in algos], dtype=np.int64) + d[0] for algos in chunks]
        else:
            sends = [[a.start_ns + d[0] for a in algos] for algos in chunks]
        recvs: list[Any] = list(sends)
        # per chunk and member: whether its current send comes from a chain of same-ns callbacks that
        # started with step 1's (each receive found its message arrived strictly before its own send),
        # so it runs in chunk order among the chunks that tie with it
        clocked: list = [np.ones(len(pred), dtype=bool) if arrays else [True] * len(pred) for _ in chunks]
        if self.stagger:  # step 1's sends at one ns go in the order the chunks started on that member
            for c in range(1, len(chunks)):
                order = [a.start_seq < b.start_seq for a, b in zip(chunks[c - 1], chunks[c])]
                clocked[c] = np.asarray(order, dtype=bool) if arrays else order
        queued = False  # chunk 1's step 1 meets the links' carried-over state, the rest the message before
        for k in range(1, steps + 1):
            before: Any = None  # the chunk before's flags for this step's send
            for c, sent in enumerate(sends):
                mine = clocked[c]
                if arrays:
                    tied = (before & mine)[predv] if c else False  # the senders' flags (pred[i] sends to i)
                    arrived = links.arrive(sent[predv], queued, tied)
                    clocked[c] = arrived < sent
                    recv = np.maximum(arrived, sent)
                else:
                    tied = [before[j] and mine[j] for j in pred] if c else False
                    arrived = links.arrive([sent[j] for j in pred], queued, tied)
                    clocked[c] = [a < s for a, s in zip(arrived, sent)]
                    recv = [a if a > s else s for a, s in zip(arrived, sent)]
                before = mine
                recvs[c] = recv
                if k < steps:
                    sends[c] = recv + d[k] if arrays else [r + d[k] for r in recv]
                queued = True
        links.end()
        for algos, recv in zip(chunks, recvs):
            self._finish(algos, recv.tolist() if arrays else recv, d[steps], steps)

    def _shifted(self, algos: list[FastRing]) -> tuple[list[int], int, int]:
        """:meth:`recurrence` on the unaware network, whose max-plus steps shift with the starts: the
        outcome is kept per ring shape and relative start pattern (LLM steps repeat a few thousands of
        times), for at most ``OUTCOME_MEMBERS`` members in all (then the oldest go)."""
        first = algos[0]
        starts = [a.start_ns for a in algos]
        base = min(starts)
        key = (first.ring.key, first.direction, first.ctype, first.msg_size, tuple(s - base for s in starts))
        hit = self._outcomes.get(key)
        if hit is None:
            last, tail, steps = self.recurrence(algos)
            hit = self._keep(key, ([t - base for t in last], tail, steps))
        return [base + t for t in hit[0]], hit[1], hit[2]

    def _keep(self, key: tuple, outcome: tuple) -> tuple:
        """Keep ``outcome`` (relative times first) under ``key``, at most ``OUTCOME_MEMBERS`` members in all."""
        self._outcome_members += _weight(outcome)
        while self._outcomes and self._outcome_members > OUTCOME_MEMBERS:
            self._outcome_members -= _weight(self._outcomes.pop(next(iter(self._outcomes))))
        self._outcomes[key] = outcome
        return outcome

    def _kept_aware(self, algos: list[FastRing]) -> tuple[list[int], int, int]:
        """:meth:`recurrence` of a small ring on the aware network, kept like :meth:`_shifted`'s: every
        step there is a maximum or a sum of the starts and the links' free and arrival times, so the
        outcome and the state the links are left in shift with the starts and those times together
        (an unused link's bound, 0, is met by any start either way). Kept per ring shape, relative start
        pattern and links' state relative to the earliest start (llama3-8b t8 on an 8-NPU switch: 512
        phases, 7 distinct); a link with messages queued on the message path evaluates as it did.

        Why the key is the whole input: the evaluation reads of a link only ``free_at``,
        ``offered`` (as times: compared with arrivals, or the max-plus terms), ``sender`` (compared
        with the phase's senders and ``POINT_TO_POINT``, never with times) and ``pending``; hold and
        latency are fixed per link and size (``_Link.times``: no rounding that depends on a time),
        and the delays per ring shape, type and size, as for :meth:`_shifted`. Every conflict check
        compares two such times, so it raises or not alike at any shift. It writes only those three
        fields (``end``, ``copies``), which :meth:`FifoRingLinks.restore` writes back; what the
        message path and the tree fast path keep beside them (``free_seq``, ``past``, the symmetric
        engine's last offers) neither path touches."""
        first = algos[0]
        links = self.links(first.ring, first.msg_size, first.direction)
        starts = [a.start_ns for a in algos]
        base = min(starts)
        before = links.relative_state(base)
        if before is None:
            return self._recurrence(algos)
        key = (first.ring.key, first.direction, first.ctype, first.msg_size, tuple(s - base for s in starts), before)
        hit = self._outcomes.get(key)
        if hit is None:
            last, tail, steps = self._recurrence(algos)
            after = links.relative_state(base)
            assert after is not None  # nothing queued on the links before: nothing queued after
            hit = self._keep(key, ([t - base for t in last], tail, steps, after))
        else:
            links.restore(hit[3], base)
        return [base + t for t in hit[0]], hit[1], hit[2]

    def links(self, ring, size: int, direction: int):
        """The network's recurrence for this ring's hops (built once per ring, size and direction)."""
        key = (ring.key, size, direction)
        links = self._ring_links.get(key)
        if links is None:
            members = ring.members
            links = self.network.ring_links([ring.sender(m, direction) for m in members], members, size)
            self._ring_links[key] = links
        return links

    def recurrence(self, algos: list[FastRing]) -> tuple[list[int], int, int]:
        """One phase over every member (``algos`` in ring order, each with its ``start_ns``): each
        member's last receive, the tail delay after it, and the steps. Schedules nothing; the aware
        network's links advance. The public entry of the wiring layer's quotient engine (``symmetric``).

        On the aware network a phase whose members repeat with a period ``q`` — member ``i`` crosses
        the links of member ``i mod q`` with the same senders (``FifoRingLinks.period``, only in the
        symmetric engine's canonical links) and starts when it does — is the recurrence of members
        ``0 … q−1`` alone, with predecessors taken modulo ``q`` (``q`` a multiple of the links' period
        and a period of the starts): by induction over the steps, ``i`` and ``i mod q`` send at the
        same times (a ring's predecessor ``i ∓ 1`` commutes with ``mod q`` since ``q`` divides the
        size), so their copies of a link's state, loaded equal, get equal arrivals
        and stay equal, and the links end as the whole ring would leave them, after the same
        ``LinkConflict`` checks. ``q = 1`` has a closed form (``FifoRingLinks.copies``). A small ring's outcome is kept
        (:meth:`_kept_aware`).
        """
        if self.aware and algos[0].ring.size < NUMPY_FROM:
            return self._kept_aware(algos)
        return self._recurrence(algos)

    def _recurrence(self, algos: list[FastRing]) -> tuple[list[int], int, int]:
        """:meth:`recurrence`, evaluated."""
        first = algos[0]
        ring, p, steps = first.ring, first.ring.size, first.stream_count
        d = first.packet_delays()
        links = self.links(ring, first.msg_size, first.direction)
        starts = [a.start_ns for a in algos]
        pred, rotation = self._pred(ring, first.direction)
        q = links.common_period(starts) if self.aware and steps and rotation else p
        if q == 1 and links.one_message:
            return [links.copies(starts[0] + d[0], sum(d[1:steps]), steps)] * p, d[steps], steps
        if q < p:
            last = self._evaluate(links.reduced(q), starts[:q], [x % q for x in pred[:q]], d, steps)
            return last * (p // q), d[steps], steps
        return self._evaluate(links, starts, pred, d, steps), d[steps], steps

    def _pred(self, ring, direction: int) -> tuple[list[int], bool]:
        """Each member's predecessor (ring index) in ``direction``, and whether it is a rotation
        (``i → i + c mod P``, so taking it modulo any divisor of ``P`` commutes with it); cached per
        ring and direction."""
        key = (ring.key, direction)
        hit = self._preds.get(key)
        if hit is None:
            pred = [ring.index_of(ring.sender(m, direction)) for m in ring.members]
            p = len(pred)
            hit = self._preds[key] = (pred, all(x == (i + pred[0]) % p for i, x in enumerate(pred)))
        return hit

    def _evaluate(self, links, starts: list[int], pred: list[int], d: list[int], steps: int) -> list[int]:
        """The recurrence over the members of ``links`` (their ``starts`` and predecessors ``pred``)."""
        p = len(starts)
        if p >= NUMPY_FROM:
            links.begin()
            sends = np.asarray(starts, dtype=np.int64) + d[0]
            predv = np.asarray(pred, dtype=np.int64)
            recvs = sends
            for k in range(1, steps + 1):
                recvs = np.maximum(links.arrive(sends[predv]), sends)
                if k < steps:
                    sends = recvs + d[k]
            links.end()
            return recvs.tolist()
        # small rings: plain lists beat array steps
        send = [s + d[0] for s in starts]
        recv = send
        if self.aware:
            links.begin(arrays=False)
        else:
            net = links.delays
        for k in range(1, steps + 1):
            if self.aware:
                arrived = links.arrive([send[j] for j in pred])
                recv = [a if a > s else s for a, s in zip(arrived, send)]
            else:
                arrived = [send[j] + n for j, n in zip(pred, net)]
                recv = [a if a > s else s for a, s in zip(arrived, send)]
            if k < steps:
                dk = d[k]
                send = [r + dk for r in recv]
        if self.aware:
            links.end()
        return recv

    def _finish(self, algos: list, last: list[int], tail: int | list[int], steps: int) -> None:
        self.stats.messages += steps * len(algos)
        self.stats.fast_messages += steps * len(algos)
        tails = tail if isinstance(tail, list) else [tail] * len(algos)
        for algo, t, d in zip(algos, last, tails):
            self.queue.schedule(t, algo.sys.register_event, algo.exit, d)

    def join_planned(self, algo) -> None:
        """Like :meth:`join` for algorithms whose peer and size change per step (``plan()``)."""
        ring = algo.ring
        key = (
            ring.key,
            algo.stream.stream_id,
            algo.stream.steps_finished,
            algo.ctype,
            algo.data_size,
            type(algo).__name__,
        )
        members = self._waiting.setdefault(key, {})
        members[ring.index_of(algo.id)] = algo
        if len(members) == ring.size:
            del self._waiting[key]
            self._evaluate_planned([members[i] for i in range(ring.size)])

    def _evaluate_planned(self, algos: list) -> None:
        """send_1 = start + d_0; recv_k = max(send_k[src_k] + N(src_k -> me, m_k), send_k); ..."""
        ring = algos[0].ring
        members = ring.members
        plans = [a.plan() for a in algos]
        steps = len(plans[0][0])
        delay, index = self.network.delay, ring.index_of
        send = [a.start_ns + pl[2][0] for a, pl in zip(algos, plans)]
        recv = send
        for k in range(steps):
            recv = []
            for i, (srcs, sizes, _) in enumerate(plans):
                src = srcs[k]
                recv.append(max(send[index(src)] + delay(src, members[i], sizes[k]), send[i]))
            if k < steps - 1:
                send = [r + pl[2][k + 1] for r, pl in zip(recv, plans)]
        self._finish(algos, recv, [pl[2][steps] for pl in plans], steps)


class FastRing(Ring):
    """A :class:`Ring` phase evaluated by :class:`RingCoordinator` instead of message by message."""

    def start(self) -> None:
        sys = self.sys
        self.start_ns = sys.queue.now
        self.start_seq = next(START_ORDER)
        sys.ring_coordinator.join(self)

    def packet_delays(self) -> list[int]:
        """Bus (+ reduction) delay of each injected packet, from the event path's packet counters;
        computed once per phase shape (the counters start afresh in every phase and the delays read
        only the shape and the system config: a 16,384-GPU symmetric step evaluates ~10⁵ phases of a
        handful of shapes)."""
        d = self.shape.get("delays")
        if d is None:  # replayed on a fresh copy: this phase's own counters are its prototype's
            packets = Ring.unstarted_copy(self).replay_packets(self.stream_count + 1)
            d = self.shape["delays"] = [delay for _, _, delay in packets]
        return d

    def unstarted_copy(self) -> FastRing:
        """A copy sharing its prototype's packet counters: a fast phase never takes a packet (it is
        evaluated, not run), and :meth:`packet_delays` replays them on a copy of its own. One fewer
        object per chunk and phase."""
        return self.same_shape()

    def exit(self) -> None:
        self.sys.proceed_to_next_phase(self.stream)
