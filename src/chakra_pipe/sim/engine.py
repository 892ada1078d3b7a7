"""The global event queue: integer-ns time, same-time events in insertion order.

ASTRA-sim's analytical backend keeps a list of per-time buckets and runs a bucket until it is empty
(events added to the current time run in the same pass, after the ones already there). A heap keyed
by ``(time, insertion sequence)`` gives exactly that order without the linear insertion cost.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable
from typing import Any


class EventQueue:
    __slots__ = ("now", "seq", "_heap", "_seq")

    def __init__(self) -> None:
        self.now = 0
        self.seq = 0  # insertion sequence of the event running now (0 before the run)
        self._heap: list = []
        self._seq = 0

    def schedule(self, time: int, fn: Callable[..., Any], *args: Any) -> None:
        """Run ``fn(*args)`` at absolute ``time`` (>= now)."""
        self._seq += 1
        heapq.heappush(self._heap, (time, self._seq, fn, args))

    def reserve(self) -> int:
        """Take the next place in the same-time order for an event that may never be needed.

        ``schedule_reserved`` schedules it later in that place, so it runs exactly where it would have
        had it been scheduled now; the congestion-aware links schedule the event that frees a link
        only when a message is waiting for it (most never are)."""
        self._seq += 1
        return self._seq

    def schedule_reserved(self, time: int, seq: int, fn: Callable[..., Any], *args: Any) -> None:
        """Run ``fn(*args)`` at ``time`` in the place ``seq`` from :meth:`reserve`, which must not have passed."""
        heapq.heappush(self._heap, (time, seq, fn, args))

    def run(self) -> None:
        heap, pop = self._heap, heapq.heappop
        while heap:
            time, seq, fn, args = pop(heap)
            self.now = time
            self.seq = seq
            fn(*args)
