"""Congestion-unaware backend: one closed-form delay per message, no state (spec §4.1).

``delay = floor(h * L + S / B')`` on the lowest dimension whose coordinates differ (quirk 11).
"""

from __future__ import annotations

import numpy as np

from .common import Network, bytes_per_ns
from .topology import hops


class FixedRingLinks:
    """The hops of one ring phase on the unaware network: a fixed delay per member, no state."""

    def __init__(self, delays: list[int]):
        self.delays = delays  # plain ints: small rings step in Python lists (ring_fast.NUMPY_FROM)
        self._delays = np.asarray(delays, dtype=np.int64)

    def begin(self) -> None:
        """Stateless: nothing carries over between phases."""

    def arrive(self, sent: np.ndarray) -> np.ndarray:
        return sent + self._delays

    def end(self) -> None:
        """Stateless: nothing carries over between phases."""


class CongestionUnawareNetwork(Network):
    def __init__(self, cfg, queue):
        super().__init__(cfg, queue)
        self._bw = [bytes_per_ns(b) for b in cfg.bandwidth]
        self._lat = [float(x) for x in cfg.latency]
        # hops per dimension by ``(dst - src) mod p`` (every topology kind here depends only on that): a
        # message's delay reads them instead of decoding both addresses and dispatching on the kind
        self._hop_rows = [[hops(kind, p, 0, k) for k in range(p)] for kind, p in zip(cfg.topology, self.dims)]
        self._hops: list[np.ndarray] | None = None

    def delay(self, src: int, dst: int, size: int) -> int:
        """The closed form on the lowest dimension where the addresses differ (dimension 0 varies fastest)."""
        for d, p in enumerate(self.dims):
            a, b = src % p, dst % p
            if a != b:
                return int(self._hop_rows[d][(b - a) % p] * self.cfg.latency[d] + size / self._bw[d])
            src //= p
            dst //= p
        return 0

    def delays(self, src: np.ndarray, dst: np.ndarray, size: int) -> np.ndarray:
        """:meth:`delay` elementwise over arrays of (source, destination) NPUs, for the direct and tree
        fast paths: the same float operations in the same order, so the same ns."""
        out = np.zeros(np.broadcast(src, dst).shape, dtype=np.int64)
        undecided = np.ones(out.shape, dtype=bool)
        s, d = np.asarray(src, dtype=np.int64), np.asarray(dst, dtype=np.int64)
        for p, lat, bw, tab in zip(self.dims, self._lat, self._bw, self._hop_tables()):
            a, b = s % p, d % p
            here = undecided & (a != b)
            if here.any():
                h = tab[(b - a) % p]
                out[here] = (h * lat + size / bw)[here].astype(np.int64)
                undecided &= ~here
            s, d = s // p, d // p
        return out

    def _hop_tables(self) -> list[np.ndarray]:
        """``_hop_rows`` as arrays, built on first use."""
        if self._hops is None:
            self._hops = [np.asarray(row, dtype=np.int64) for row in self._hop_rows]
        return self._hops

    def ring_links(self, senders: list[int], receivers: list[int], size: int) -> FixedRingLinks:
        return FixedRingLinks([self.delay(s, r, size) for s, r in zip(senders, receivers)])

    def _transmit(self, src: int, dst: int, size: int, full: tuple) -> None:
        q = self.queue
        q.schedule(q.now + self.delay(src, dst, size), self._arrive, full)
