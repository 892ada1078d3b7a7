"""The dependency-free nodes of one rank, kept so that an issue pass costs O(what it issues).

ASTRA-sim's issue pass copies the whole dependency-free set, walks it in ascending node id and issues
each node whose hardware slot is free (spec §2.2). Walking the copy on every completion is O(N) per
completion, O(N²) per rank: 40,000 independent compute roots took minutes. But a pass can issue at
most the smallest free node of each slot whose slot is free (plus more of that slot only when an
issued node finishes synchronously — METADATA, INVALID, a skipped roofline node — and frees it
again), and every receive. So free nodes are kept per slot in a heap of their positions in id
order; a pass merges the heads of the free slots' heaps and the receives in ascending id, which is
the order the walk would have issued them in. Nodes freed *during* a pass were not in the copy the
walk iterates, so they are held back until the pass ends.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable

from ..rankset.slots import SLOT_NONE
from ..rankset.slots import SLOTS as _SLOTS


class ReadySet:
    """Free nodes by slot; positions are ranks in ascending node id (``pos[i]``, ``index[p]``)."""

    __slots__ = ("_deferred", "_heaps", "_in_pass", "_recv", "index", "pos", "slot_of", "size")

    def __init__(self, pos: list[int], index: list[int], slot_of: list[int]):
        self.pos, self.index, self.slot_of = pos, index, slot_of
        self._heaps: tuple[list[int], list[int], list[int]] = ([], [], [])
        self._recv: list[int] = []
        self._deferred: list[int] = []
        self._in_pass = False
        self.size = 0

    def __len__(self) -> int:
        return self.size

    def add(self, i: int) -> None:
        """Node index ``i`` became dependency-free."""
        self.size += 1
        if self._in_pass:
            self._deferred.append(i)
        else:
            self._put(i)

    def _put(self, i: int) -> None:
        s = self.slot_of[i]
        if s < 0:
            self._recv.append(self.pos[i])
        else:
            heapq.heappush(self._heaps[s], self.pos[i])

    def indices(self) -> list[int]:
        """Every free node index, in ascending id (for error reports)."""
        held = [self.pos[i] for i in self._deferred]
        return [self.index[p] for p in sorted([*self._recv, *held, *(p for h in self._heaps for p in h)])]

    def issue_pass(self, slots: list[int], issue: Callable[[int, int], None]) -> None:
        """Issue, in ascending id, every free receive and each free node whose slot is free when reached.

        ``slots[s]`` is the number of nodes holding slot ``s``; ``issue(i, s)`` takes the slot (and may
        release it again at once). Only slot ``s`` changes when a node of slot ``s`` is issued.
        """
        heaps, index, recv = self._heaps, self.index, self._recv
        only = -1  # the one open slot with free nodes, when there is exactly one
        for s in _SLOTS:
            if heaps[s] and not slots[s]:
                only = s if only == -1 else -2
        if only == -1 and not recv:
            return
        self._in_pass = True
        try:
            if only >= 0 and not recv:  # the common case: one slot to fill, no receives
                h = heaps[only]
                while h and not slots[only]:
                    self.size -= 1
                    issue(index[heapq.heappop(h)], only)
            else:
                self._merge(sorted(recv), slots, issue)
        finally:
            self._in_pass = False
            if self._deferred:
                deferred, self._deferred = self._deferred, []
                for i in deferred:
                    self._put(i)

    def _merge(self, recv: list[int], slots: list[int], issue: Callable[[int, int], None]) -> None:
        """The general pass: receives and the heads of the open slots, smallest position first."""
        heaps, index = self._heaps, self.index
        self._recv = []
        heads = [h[0] if h and not slots[s] else -1 for s, h in enumerate(heaps)]
        r = 0
        try:
            while True:
                best, best_s = recv[r] if r < len(recv) else -1, SLOT_NONE
                for s in _SLOTS:
                    p = heads[s]
                    if p >= 0 and (best < 0 or p < best):
                        best, best_s = p, s
                if best < 0:
                    return
                if best_s == SLOT_NONE:
                    r += 1
                else:
                    heapq.heappop(heaps[best_s])
                self.size -= 1
                issue(index[best], best_s)
                if best_s != SLOT_NONE:
                    h = heaps[best_s]
                    heads[best_s] = h[0] if h and not slots[best_s] else -1
        finally:
            self._recv.extend(recv[r:])  # left over only when issue() raised
