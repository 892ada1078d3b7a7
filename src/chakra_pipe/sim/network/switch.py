"""Switch: NPU -> switch -> NPU. Unaware counts the latency twice and serialisation once (quirk 12);
aware pays both twice (store-and-forward through the switch, device ``-1``)."""

from __future__ import annotations

SWITCH = -1


def hops(p: int, src: int, dst: int) -> int:
    return 2


def route(p: int, src: int, dst: int) -> list[int]:
    return [src, SWITCH, dst]
