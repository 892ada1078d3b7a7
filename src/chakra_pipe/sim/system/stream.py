"""Streams (one per chunk), their data sets (one per collective) and packets' memory-bus hop.

A collective becomes a :class:`DataSet` of chunk streams; each stream walks its chain of phases, each
phase run by one algorithm object. Packets pass the local memory bus (``E`` ns, 10 on sub-group
rings) and, when they carry a reduction, ``Pd`` more ns before the algorithm is called back (§3.4).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

# ASTRA-sim tags a sub-group's logical ring "Local" and then charges this fixed memory-bus delay per
# packet instead of ``endpoint-delay`` (spec §2.5, §3.4).
LOCAL_BUS_DELAY_NS = 10


def bus_delay(sys, local: bool) -> int:
    """The memory-bus hop of one packet: the event path and both fast paths read it here."""
    return LOCAL_BUS_DELAY_NS if local else sys.endpoint_delay


@dataclass(slots=True)
class Phase:
    """One phase of a chunk's chain: the queue it runs in and its (unstarted, then running) algorithm."""

    queue_id: int
    algorithm: Any  # a collective algorithm: start(), on_general(), on_received(), .stream


class DataSet:
    """One collective: notifies its node once every stream finished."""

    __slots__ = ("total_streams", "finished_streams", "notifier", "start_ns")

    def __init__(self, total_streams: int, start_ns: int):
        self.total_streams = total_streams
        self.finished_streams = 0
        self.notifier: Callable[[], None] | None = None
        self.start_ns = start_ns

    def stream_finished(self) -> None:
        self.finished_streams += 1
        if self.finished_streams == self.total_streams and self.notifier is not None:
            notify, self.notifier = self.notifier, None
            notify()


class Stream:
    __slots__ = (
        "dataset",
        "stream_id",
        "phases",
        "priority",
        "queue_id",
        "phase",
        "steps_finished",
        "initialized",
    )

    def __init__(self, dataset: DataSet, stream_id: int, priority: int):
        """An empty chain: ``Sys.generate_collective`` adds the phases, pointing each at the stream."""
        self.dataset = dataset
        self.stream_id = stream_id
        # the phases still to run, the next one last (a list pops from its end in O(1) and costs a
        # fraction of a deque's construction: one stream per chunk, ~10^4 on an LLM step)
        self.phases: list[Phase] = []
        self.priority = priority
        self.queue_id = -1
        self.phase: Phase | None = None
        self.steps_finished = 0
        self.initialized = False

    def init(self) -> None:
        self.initialized = True
        self.phase.algorithm.start()  # type: ignore[union-attr]

    def general(self) -> None:
        self.phase.algorithm.on_general()  # type: ignore[union-attr]

    def consume(self) -> None:
        self.phase.algorithm.on_received()  # type: ignore[union-attr]


def release_packet(sys, stream: Stream, processed: bool, size: int, local: bool) -> None:
    """Packets released together cross the memory bus (both directions cost the same fixed delay when
    the shared bus is not modelled), then, when they carry a reduction, ``Pd`` more ns; then the
    stream's algorithm is called back (:meth:`Stream.general`, read at that ns). A packet without a
    reduction registers the callback itself: no bundle object, one call less per message."""
    bus = bus_delay(sys, local)
    if processed:
        sys.register_event(_Reduction(sys, stream, size).call, bus)
    else:
        sys.register_event(stream.general, bus)


class _Reduction:
    """A packet back from the memory bus that still carries its reduction (``Pd``)."""

    __slots__ = ("sys", "stream", "size")

    def __init__(self, sys, stream: Stream, size: int):
        self.sys, self.stream, self.size = sys, stream, size

    def call(self) -> None:
        self.sys.register_event(self.stream.general, self.sys.reduction_delay(self.size))
