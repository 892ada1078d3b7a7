"""Direct (ASTRA-sim ``AllToAll`` class): rotate receivers over all peers, a window of sends (§3.5).

An all-reduce sends its P-1 reduce-scatter messages, waits for all P-1 receives, then sends the
all-gather messages.
"""

from __future__ import annotations

from .algorithm import A2A, AR
from .ring import Ring


class Direct(Ring):
    def __init__(self, ctype: str, sys, ring, data_size: int, direction: int, window: int):
        super().__init__(ctype, sys, ring, data_size, direction)
        self.middle = self.P - 1
        self.parallel_reduce = self.P - 1 if window == -1 else min(window, self.P - 1)
        if ctype == A2A:
            self.stream_count = self.P - 1

    def non_zero_latency_packets(self) -> int:
        return (self.P - 1) * self.parallel_reduce if self.ring.local else self.parallel_reduce

    def after_release(self) -> None:
        ring, me, d = self.ring, self.id, self.direction
        self.receiver = ring.receiver(self.receiver, d)
        if self.receiver == me:
            self.receiver = ring.receiver(self.receiver, d)
        self.sender = ring.sender(self.sender, d)
        if self.sender == me:
            self.sender = ring.sender(self.sender, d)

    def on_general(self) -> None:
        self.free_packets += 1
        if self.ctype == AR and self.stream_count <= self.middle:
            if self.received < self.middle:
                return
            for _ in range(self.parallel_reduce):
                if not self.ready():  # nothing changes until the next event: later calls fail too
                    break
            self.iteratable()
        else:
            self.ready()
            self.iteratable()
