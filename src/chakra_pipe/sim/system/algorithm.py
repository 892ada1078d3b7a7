"""Shared machinery of the packet-driven native algorithms (ring, direct, halving-doubling).

ASTRA-sim's algorithms keep a queue of packets: a packet is created at start (one per slot of
``parallel_reduce``) and on every receive, crosses the memory bus, and frees a send slot when it
comes back; a send slot plus a queued packet makes the next send. Counters decide which packets
carry a reduction (``processed``). This class holds the common state; subclasses set the sizes,
peers and counts of their algorithm. The fast paths (``ring_fast.py``, ``FastHalvingDoubling``)
replay the same counters through :meth:`PacketAlgorithm.replay_packets` instead of copying them.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator
from typing import Any, Self

from .stream import bus_delay, release_packet

AR, RS, AG, A2A = "ALL_REDUCE", "REDUCE_SCATTER", "ALL_GATHER", "ALL_TO_ALL"


class PacketCounters:
    """ASTRA-sim's ``zero_latency_packets`` / ``non_zero_latency_packets`` / ``toggle``.

    Every round refills both counters — ``parallel_reduce`` packets that carry no reduction, then the
    algorithm's non-zero-latency count — and flips ``toggle``. A non-zero-latency packet carries a
    reduction (``Pd``) in a reduce-scatter always and in an all-reduce on odd rounds (its reduce-scatter
    half). Written once: the event path and both fast paths take packets from here.
    """

    __slots__ = ("zero_latency", "non_zero_latency", "toggle")

    def __init__(self) -> None:
        self.zero_latency = 0
        self.non_zero_latency = 0
        self.toggle = False

    def take(self, algo: PacketAlgorithm) -> bool:
        """Count one injected packet of ``algo``; True when it carries a reduction."""
        if self.zero_latency == 0 and self.non_zero_latency == 0:
            self.zero_latency = algo.parallel_reduce
            self.non_zero_latency = algo.non_zero_latency_packets()
            self.toggle = not self.toggle
        if self.zero_latency > 0:
            self.zero_latency -= 1
            return False
        if self.non_zero_latency > 0:
            self.non_zero_latency -= 1
            return algo.ctype == RS or (algo.ctype == AR and self.toggle)
        raise RuntimeError("collective algorithm injected a packet it had no slot for")


class PacketAlgorithm:
    def __init__(self, ctype: str, sys, ring, data_size: int):
        self.ctype = ctype
        self.sys = sys
        self.id = sys.id
        self.ring = ring
        self.data_size = data_size
        self.P = ring.size
        self.local = ring.local  # a sub-group ring: fixed bus delay (stream.LOCAL_BUS_DELAY_NS)
        self.stream: Any = None  # the Stream running this phase, set by Stream.__init__
        self.parallel_reduce = 1
        self.free_packets = 0
        self.counters = PacketCounters()
        self.received = 0
        # (dest, src, size); created by the first packet: an empty deque is ~600 bytes, and phases
        # that fast paths evaluate (two per rank and chunk, 8,192 at 1,024 NPUs) never hold one
        self.packets: deque | None = None
        self.stream_count = 0
        self.msg_size = 0
        self.final_data_size = data_size
        self.receiver = self.sender = self.id
        # What fast paths derive from the phase's shape alone (packet delays): one dict shared by the
        # copies ``unstarted_copy`` makes, so an LLM step's thousands of like phases compute it once.
        self.shape: dict[str, Any] = {}

    def unstarted_copy(self) -> PacketAlgorithm:
        """A new phase of the same shape as this unstarted one, with its own packet counters.

        ``Sys`` keeps one never-started object per (dimension, type, size, direction) and copies it for
        every chunk: every other field is a number (or the not-yet-created packet deque) until start.
        """
        new = self.same_shape()
        new.counters = PacketCounters()
        return new

    def same_shape(self) -> Self:
        """A copy of this unstarted phase sharing every field, the packet counters too."""
        new = object.__new__(type(self))
        new.__dict__ = self.__dict__.copy()  # a whole-dict copy: ~2x cheaper than update()
        return new

    # -- hooks ---------------------------------------------------------------------------------
    def non_zero_latency_packets(self) -> int:
        return (self.P - 1) * self.parallel_reduce

    def after_release(self) -> None:
        """Called after each packet is released (direct rotates peers, HD moves to the next step)."""

    # -- events --------------------------------------------------------------------------------
    def start(self) -> None:
        for _ in range(self.parallel_reduce):
            self.insert_packet()

    def on_received(self) -> None:
        self.received += 1
        self.insert_packet()

    def on_general(self) -> None:
        self.free_packets += 1
        self.ready()
        self.iteratable()

    # -- mechanics -----------------------------------------------------------------------------
    def insert_packet(self) -> None:
        size = self.msg_size
        packets = self.packets
        if packets is None:
            packets = self.packets = deque()
        packets.append((self.receiver, self.sender, size))
        release_packet(self.sys, self.stream, self.counters.take(self), size, self.local)
        self.after_release()

    def replay_packets(self, count: int) -> Iterator[tuple[int, int, int]]:
        """The first ``count`` packets as the event path injects them: ``(sender, size, delay)`` each.

        ``delay`` is the memory-bus hop plus ``Pd`` when the packet carries a reduction. Advances this
        algorithm's counters and peers, so a fast path calls it instead of running the phase.
        """
        bus = bus_delay(self.sys, self.local)
        for _ in range(count):
            size = self.msg_size
            sender = self.sender
            processed = self.counters.take(self)
            yield sender, size, bus + self.sys.reduction_delay(size) if processed else bus
            self.after_release()

    def ready(self) -> bool:
        packets = self.packets
        if not packets or self.stream_count == 0 or self.free_packets == 0:
            return False
        dest, src, size = packets[0]
        stream, sys = self.stream, self.sys
        sys.send(dest, size, stream.stream_id, None)
        sys.recv(src, size, stream.stream_id, stream.consume)
        self.stream_count -= 1
        packets.popleft()
        self.free_packets -= 1
        return True

    def iteratable(self) -> bool:
        if self.stream_count == 0 and self.free_packets == self.parallel_reduce:
            self.exit()
            return False
        return True

    def exit(self) -> None:
        self.packets = None
        self.sys.proceed_to_next_phase(self.stream)
