"""Ring: send to the successor, receive from the predecessor, one packet in flight (§3.5)."""

from __future__ import annotations

from .algorithm import A2A, AG, AR, RS, PacketAlgorithm


class Ring(PacketAlgorithm):
    def __init__(self, ctype: str, sys, ring, data_size: int, direction: int):
        super().__init__(ctype, sys, ring, data_size)
        p = self.P
        self.receiver = ring.receiver(self.id, direction)
        self.sender = ring.sender(self.id, direction)
        self.direction = direction
        self.stream_count = {AR: 2 * (p - 1), A2A: (p - 1) * p // 2}.get(ctype, p - 1)
        self.msg_size = data_size if ctype == AG else data_size // p
        self.final_data_size = {AR: data_size, AG: data_size * p, RS: data_size // p, A2A: data_size}[ctype]
