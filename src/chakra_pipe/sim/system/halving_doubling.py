"""Recursive halving / doubling (§3.5): partner distance doubles (or halves) every step."""

from __future__ import annotations

import math

from ...errors import ConfigError
from .algorithm import AG, AR, RS, PacketAlgorithm
from .topology import ANTICLOCKWISE, CLOCKWISE


class HalvingDoubling(PacketAlgorithm):
    def __init__(self, ctype: str, sys, ring, data_size: int):
        super().__init__(ctype, sys, ring, data_size)
        p = self.P
        if ctype not in (AR, RS, AG):
            raise ConfigError(f"halvingDoubling does not implement {ctype}")
        if p & (p - 1):
            raise ConfigError(f"halvingDoubling needs a power-of-two group, got {p} NPUs")
        k = int(math.log2(p))
        self.stream_count = 2 * k if ctype == AR else k
        if ctype == AG:
            self.msg_size, self.rank_offset, self.mult = data_size, p // 2, 0.5
            self.final_data_size = data_size * p
        else:
            self.msg_size, self.rank_offset, self.mult = data_size // 2, 1, 2.0
            self.final_data_size = data_size if ctype == AR else data_size // p
        self._aim()

    def non_zero_latency_packets(self) -> int:
        return int(math.log2(self.P)) - 1

    def _aim(self) -> None:
        if self.rank_offset == 0:
            direction = CLOCKWISE
        else:
            direction = ANTICLOCKWISE if (self.ring.index_of(self.id) // self.rank_offset) % 2 else CLOCKWISE
        cur = self.id
        for _ in range(self.rank_offset):
            cur = self.ring.receiver(cur, direction)
        self.receiver = self.sender = cur

    def after_release(self) -> None:
        self.rank_offset = int(self.rank_offset * self.mult)
        self.msg_size = int(self.msg_size / self.mult)
        if self.rank_offset == self.P and self.ctype == AR:
            self.mult = 0.5
            self.rank_offset = int(self.rank_offset * self.mult)
            self.msg_size = int(self.msg_size / self.mult)
        self._aim()


class FastHalvingDoubling(HalvingDoubling):
    """Evaluated by the ring coordinator's per-step recurrence (unaware network only; exact there)."""

    def start(self) -> None:
        self.start_ns = self.sys.now
        self.sys.ring_coordinator.join_planned(self)

    def plan(self) -> tuple[list[int], list[int], list[int]]:
        """Peer and size of each send, bus (+ reduction) delay of each packet (one more than sends)."""
        srcs, sizes, delays = (list(col) for col in zip(*self.replay_packets(self.stream_count + 1)))
        return srcs[:-1], sizes[:-1], delays

    def exit(self) -> None:
        self.sys.proceed_to_next_phase(self.stream)
