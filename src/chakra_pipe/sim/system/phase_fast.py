"""Shared machinery of the exact fast paths for direct and double-binary-tree phases (unaware network).

A direct or tree phase touches every member's clock, so — like the ring fast path — it is evaluated
once its last member has started, for all members at once, instead of message by message through
``Sys`` tick lists, packet bundles and the network's send/receive matching. This module holds what
both evaluations need: gathering the members of a phase, the network's delays for arrays of
(source, destination) pairs (``CongestionUnawareNetwork.delays``), and scheduling each member's
exit where the event path would register it.

When an evaluation finds a same-time tie whose outcome depends on the global event order (which the
recurrence does not model), it raises :class:`FastPathDeclined` and ``simulate`` reruns the whole
simulation with these phases message by message: the fast path is exact or it is not used.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

CACHE_BYTES = 64 << 20  # tables kept at once (a 1,024-member direct phase's delay matrix is 8 MB)


class FastPathDeclined(Exception):
    """A phase's outcome depends on same-time event order: rerun with the message-level path."""


class PhaseCoordinator:
    """Collects the members of direct / double-binary-tree phases and evaluates each when all started."""

    def __init__(self, network, queue, stats, aware: bool = False, chunks: bool = False, stagger: bool = False):
        """``aware``: the network is the congestion-aware one, whose FIFO links the direct phases
        cross (``direct_aware.py``; only direct phases get this coordinator there). ``chunks`` (aware
        only): several chunks of a collective may run their direct phase at once, and the chunks'
        phases are evaluated together (:meth:`hold`, ``direct_aware.outcome_chunks``). ``stagger``
        (with ``chunks``): they may also start it at different times (a queue admitting chunks one by
        one), so a batch is held until just before its earliest possible exit."""
        self.network, self.queue, self.stats = network, queue, stats
        self.aware = aware
        self.chunks = chunks
        self.stagger = stagger
        self._waiting: dict[tuple, dict[int, Any]] = {}
        self._held: dict[tuple, list[list[Any]]] = {}  # complete phases of one collective, until released
        self.cache: dict[tuple, tuple[Any, int]] = {}  # per-topology tables the evaluations build once
        self._cache_bytes = 0

    def join(self, key: tuple, index: int, size: int, algo, evaluate: Callable[[list], None]) -> None:
        members = self._waiting.setdefault(key, {})
        members[index] = algo
        if len(members) == size:
            del self._waiting[key]
            evaluate([members[i] for i in range(size)])

    def hold(self, key: tuple, algos: list, evaluate: Callable[[list[list]], None], due: int = 0) -> None:
        """Keep a complete phase with the other chunks of its collective (``key``) and hand them all to
        ``evaluate`` once the events already at this ns have run — or, with ``stagger``, at ``due``
        (the ns before the earliest exit any member of the phase could have) if that is later.

        Every chunk at once: they start in one pass, so they complete together, and nothing sees a
        phase before its first send (the memory-bus hop after its start). Chunks at different times
        (a queue admitting chunks one by one): nothing sees a phase before its first exit either (its
        exits are scheduled at receives; a message of the message path meeting its links before it is
        evaluated is checked there, ``network/aware.py``), so the chunks completing until then join it
        (``RingCoordinator._batch`` holds ring phases alike)."""
        batch = self._held.get(key)
        if batch is None:
            batch = self._held[key] = []
            if not self.stagger:
                self.queue.schedule(self.queue.now, self._release, key, batch, evaluate)
        batch.append(algos)
        if self.stagger:
            self.queue.schedule(max(self.queue.now, due), self._release, key, batch, evaluate)

    def _release(self, key: tuple, batch: list[list], evaluate: Callable[[list[list]], None]) -> None:
        """Evaluate a held batch (a no-op when an earlier due time of the same batch released it)."""
        if self._held.get(key) is batch:
            evaluate(self._held.pop(key))

    def delays(self, src: np.ndarray, dst: np.ndarray, size: int) -> np.ndarray:
        """Network delays of arrays of messages: the unaware network's closed form, elementwise."""
        return self.network.delays(src, dst, size)

    def cached(self, key: tuple, build: Callable[[], Any]) -> Any:
        """A table the evaluations reuse (delay matrices, packet plans, tree layouts), bounded in bytes:
        LLM steps revisit a few dozen (group, size) shapes, a single big collective needs few but large."""
        hit = self.cache.get(key)
        if hit is not None:
            return hit[0]
        value = build()
        size = _nbytes(value) + _nbytes(key)  # a kept aware outcome's key holds the links' state
        while self.cache and self._cache_bytes + size > CACHE_BYTES:  # oldest first
            self._cache_bytes -= self.cache.pop(next(iter(self.cache)))[1]
        self.cache[key] = (value, size)
        self._cache_bytes += size
        return value

    def exit_at(self, algo, registered: int, delay: int) -> None:
        """Register ``algo.exit`` at ``registered`` with ``delay``, as the event path's last callback is."""
        self.queue.schedule(registered, algo.sys.register_event, algo.exit, delay)


def _nbytes(value: Any) -> int:
    """Approximate memory of a cached table or key: arrays by their buffers, bytes by their length,
    Python sequences at 8 B a slot plus what their items hold. A kept aware direct outcome is lists
    of lists (``direct_aware._kept``): counted by its outer slots alone, one of 32 members came to
    24 B for ~110 KB, so the bound held millions of them. A sequence whose first item is an int is
    taken for all ints (times, members: not walked, a miss would pay for every member)."""
    kind = type(value)
    if kind is tuple or kind is list:
        if not value or type(value[0]) is int:
            return 8 * len(value)
        return 8 * len(value) + sum(map(_nbytes, value))
    if kind is int:
        return 0
    if kind is bytes or kind is str:
        return len(value)
    if isinstance(value, np.ndarray):
        return value.nbytes
    return 64 * len(getattr(value, "members", ()))
