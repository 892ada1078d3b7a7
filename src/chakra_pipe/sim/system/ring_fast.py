"""Fast path for ring phases on the congestion-unaware network: one recurrence per phase, not per message.

In a ring phase every NPU alternates "send, wait for the predecessor's message, pass the memory bus
(+ reduction)". With the stateless unaware network the event-by-event behaviour reduces exactly to

    send_1 = start + d_0
    recv_k = max(send_k[pred] + N[pred -> me], send_k)          (a receive is posted when sending)
    send_{k+1} = recv_k + d_k,   exit = recv_S + d_S

where ``d_k`` is the bus delay of the k-th injected packet plus ``Pd`` when that packet carries a
reduction (the same packet counters as :class:`~.algorithm.PacketAlgorithm`). Every rank's exit
depends on every member's start, so the phase is evaluated once the last member has started, over
all members at once (numpy for large rings), and each member's exit is scheduled at its last receive
exactly as the event path would register it. Used only where it is exact: the unaware backend
without the rendezvous protocol; every other case runs message by message.
"""

from __future__ import annotations

import numpy as np

from .algorithm import AR, RS
from .ring import Ring

NUMPY_FROM = 48  # ring size from which array steps beat plain Python


class RingCoordinator:
    """Collects the members' start times of each ring phase and evaluates it when all have started."""

    def __init__(self, network, queue, stats):
        self.network, self.queue, self.stats = network, queue, stats
        self._waiting: dict[tuple, dict[int, "FastRing"]] = {}
        self._delays: dict[tuple, list[int]] = {}

    def join(self, algo: "FastRing") -> None:
        ring = algo.ring
        key = (tuple(ring.members), algo.stream.stream_id, algo.stream.steps_finished, algo.ctype,
               algo.msg_size, algo.direction)
        members = self._waiting.setdefault(key, {})
        members[ring.index_of(algo.id)] = algo
        if len(members) == ring.size:
            del self._waiting[key]
            self._evaluate(key, [members[i] for i in range(ring.size)])

    def _net_delays(self, members: tuple, size: int, direction: int, ring) -> list[int]:
        key = (members, size, direction)
        out = self._delays.get(key)
        if out is None:
            out = [self.network.delay(ring.sender(m, direction), m, size) for m in members]
            self._delays[key] = out
        return out

    def _evaluate(self, key: tuple, algos: list["FastRing"]) -> None:
        first = algos[0]
        ring, p, steps = first.ring, first.ring.size, first.stream_count
        d = first.packet_delays()
        net = self._net_delays(key[0], first.msg_size, first.direction, ring)
        pred = [ring.index_of(ring.sender(m, first.direction)) for m in ring.members]
        starts = [a.start_ns for a in algos]
        if p >= NUMPY_FROM:
            send = np.asarray(starts, dtype=np.int64) + d[0]
            netv = np.asarray(net, dtype=np.int64)
            predv = np.asarray(pred, dtype=np.int64)
            recv = send
            for k in range(1, steps + 1):
                recv = np.maximum(send[predv] + netv, send)
                if k < steps:
                    send = recv + d[k]
            last = recv.tolist()
        else:
            send = [s + d[0] for s in starts]
            recv = send
            for k in range(1, steps + 1):
                recv = [max(send[pred[i]] + net[i], send[i]) for i in range(p)]
                if k < steps:
                    dk = d[k]
                    send = [r + dk for r in recv]
            last = recv
        self.stats.messages += steps * p
        tail = d[steps]
        for algo, t in zip(algos, last):
            self.queue.schedule(t, algo.sys.register_event, algo.exit, tail)


class FastRing(Ring):
    """A :class:`Ring` phase evaluated by :class:`RingCoordinator` instead of message by message."""

    def start(self) -> None:
        self.start_ns = self.sys.now
        self.sys.ring_coordinator.join(self)

    def packet_delays(self) -> list[int]:
        """Bus (+ reduction) delay of each injected packet, replaying the packet counters."""
        bus = 10 if self.fast else self.sys.endpoint_delay
        pd = self.sys.reduction_delay(self.msg_size)
        out = []
        zero = nonzero = 0
        toggle = False
        for _ in range(self.stream_count + 1):
            if zero == 0 and nonzero == 0:
                zero, nonzero, toggle = self.parallel_reduce, self.non_zero_latency_packets(), not toggle
            if zero > 0:
                zero -= 1
                out.append(bus)
            else:
                nonzero -= 1
                processed = self.ctype == RS or (self.ctype == AR and toggle)
                out.append(bus + pd if processed else bus)
        return out

    def exit(self) -> None:
        self.sys.proceed_to_next_phase(self.stream)
