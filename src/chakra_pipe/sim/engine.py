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
    __slots__ = ("now", "_heap", "_seq")

    def __init__(self) -> None:
        self.now = 0
        self._heap: list = []
        self._seq = 0

    def schedule(self, time: int, fn: Callable[..., Any], *args: Any) -> None:
        """Run ``fn(*args)`` at absolute ``time`` (>= now)."""
        self._seq += 1
        heapq.heappush(self._heap, (time, self._seq, fn, args))

    def run(self) -> None:
        heap, pop = self._heap, heapq.heappop
        while heap:
            time, _, fn, args = pop(heap)
            self.now = time
            fn(*args)
