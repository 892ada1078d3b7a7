"""Congestion-unaware backend: one closed-form delay per message, no state (spec §4.1).

``delay = floor(h * L + S / B')`` on the lowest dimension whose coordinates differ (quirk 11).
"""

from __future__ import annotations

from .common import Network, bytes_per_ns
from .topology import hops


class CongestionUnawareNetwork(Network):
    def __init__(self, cfg, queue):
        super().__init__(cfg, queue)
        self._bw = [bytes_per_ns(b) for b in cfg.bandwidth]

    def delay(self, src: int, dst: int, size: int) -> int:
        cs, cd = self.coords(src), self.coords(dst)
        for d, (a, b) in enumerate(zip(cs, cd)):
            if a != b:
                h = hops(self.cfg.topology[d], self.dims[d], a, b)
                return int(h * self.cfg.latency[d] + size / self._bw[d])
        return 0

    def _transmit(self, src: int, dst: int, size: int, full: tuple) -> None:
        q = self.queue
        q.schedule(q.now + self.delay(src, dst, size), self._arrive, full)
