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
    """Evaluated by the ring coordinator's per-step recurrence on the unaware network, by
    :func:`evaluate_aware` over the FIFO links on the aware one (both exact, or rerun)."""

    def start(self) -> None:
        self.start_ns = self.sys.now
        if self.sys.ring_coordinator.aware:
            ring, coord = self.ring, self.sys.phase_coordinator
            key = ("halvingDoubling", ring.key, self.stream.stream_id, self.stream.steps_finished, self.ctype)
            coord.join(
                key + (self.data_size,), ring.index_of(self.id), ring.size, self, lambda a: evaluate_aware(coord, a)
            )
        else:
            self.sys.ring_coordinator.join_planned(self)

    def plan(self) -> tuple[list[int], list[int], list[int]]:
        """Peer and size of each send, bus (+ reduction) delay of each packet (one more than sends)."""
        srcs, sizes, delays = (list(col) for col in zip(*self.replay_packets(self.stream_count + 1)))
        return srcs[:-1], sizes[:-1], delays

    def exit(self) -> None:
        self.sys.proceed_to_next_phase(self.stream)


def evaluate_aware(coord, algos: list[FastHalvingDoubling]) -> None:
    """One halving-doubling phase on the congestion-aware network, every member at once::

        send_1 = start + d_0;  recv_k = max(arrival_k(partner_k -> me), send_k);  send_{k+1} = recv_k + d_k

    (the unaware recurrence, ``RingCoordinator._evaluate_planned``, with the fixed delay replaced by
    the FIFO links). Each step sends one message per member to its partner — through a switch one per
    uplink and one per downlink —, evaluated by the network as one batch (``network.batch_links``)
    from the links' state, which it checks: a step's message reaching a link too early for the
    link's last evaluated one raises ``LinkConflict`` and ``simulate`` reruns message by message.
    Each member's exit is registered at its last receive, as the event path does."""
    ring = algos[0].ring
    plans = [a.plan() for a in algos]
    steps = len(plans[0][0])
    index = ring.index_of
    send = [a.start_ns + pl[2][0] for a, pl in zip(algos, plans)]
    recv = send
    for k in range(steps):
        partners = tuple(pl[0][k] for pl in plans)
        size = plans[0][1][k]
        links = coord.cached(
            ("hd-links", ring.key, size, partners),
            lambda partners=partners, size=size: coord.network.batch_links(ring.members, [[q] for q in partners], size),
        )
        arrived = links.send(send)
        recv = [max(arrived[index(q)], t) for q, t in zip(partners, send)]
        if k < steps - 1:
            send = [r + pl[2][k + 1] for r, pl in zip(recv, plans)]
    coord.stats.messages += steps * len(algos)
    coord.stats.fast_messages += steps * len(algos)
    for algo, t, pl in zip(algos, recv, plans):
        coord.exit_at(algo, t, pl[2][steps])
