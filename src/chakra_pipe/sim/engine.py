"""The global event queue: integer-ns time, same-time events in insertion order.

ASTRA-sim's analytical backend keeps a list of per-time buckets and runs a bucket until it is empty
(events added to the current time run in the same pass, after the ones already there). So does this
queue: a heap of the distinct times and one list per time. Most events share their time with others
(a phase's members exit together), so the heap holds a time once instead of one
``(time, sequence)`` entry per event: a push and pop per time, an append per event.
"""

from __future__ import annotations

import bisect
import heapq
from collections.abc import Callable
from typing import Any

_heappush = heapq.heappush  # a module global: one lookup less per new time


class EventQueue:
    __slots__ = ("now", "seq", "_times", "_buckets", "_seq")

    def __init__(self) -> None:
        self.now = 0
        self.seq = 0  # insertion sequence of the event running now (0 before the run)
        self._times: list[int] = []  # heap of the times that have a bucket
        self._buckets: dict[int, list[tuple]] = {}  # time -> [(sequence, fn, args)] in sequence order
        self._seq = 0

    def schedule(self, time: int, fn: Callable[..., Any], *args: Any) -> None:
        """Run ``fn(*args)`` at absolute ``time`` (>= now)."""
        seq = self._seq = self._seq + 1
        bucket = self._buckets.get(time)
        if bucket is None:
            self._buckets[time] = [(seq, fn, args)]
            _heappush(self._times, time)
        else:
            bucket.append((seq, fn, args))  # the newest sequence: the end keeps the order

    def reserve(self) -> int:
        """Take the next place in the same-time order for an event that may never be needed.

        ``schedule_reserved`` schedules it later in that place, so it runs exactly where it would have
        had it been scheduled now; the congestion-aware links schedule the event that frees a link
        only when a message is waiting for it (most never are)."""
        self._seq += 1
        return self._seq

    def schedule_reserved(self, time: int, seq: int, fn: Callable[..., Any], *args: Any) -> None:
        """Run ``fn(*args)`` at ``time`` in the place ``seq`` from :meth:`reserve`, which must not have passed."""
        bucket = self._buckets.get(time)
        if bucket is None:
            self._buckets[time] = [(seq, fn, args)]
            _heappush(self._times, time)
        else:  # after every event of a smaller sequence (those already run included)
            bucket.insert(bisect.bisect(bucket, seq, key=_sequence), (seq, fn, args))

    def run(self) -> None:
        times, buckets, pop = self._times, self._buckets, heapq.heappop
        while times:
            time = pop(times)
            self.now = time
            # A list iterator walks by index and rereads the length each step, so the events the running
            # ones add at this time (appended, or inserted after the current one) join the same pass.
            for seq, fn, args in buckets[time]:
                self.seq = seq
                fn(*args)
            del buckets[time]


def _sequence(entry: tuple) -> int:
    return entry[0]
