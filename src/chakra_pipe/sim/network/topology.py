"""Dispatch to the basic topology modules: hop counts (unaware) and device routes (aware)."""

from __future__ import annotations

from . import fully_connected, ring, switch

BASIC = {"Ring": ring, "Switch": switch, "FullyConnected": fully_connected}


def hops(kind: str, p: int, src: int, dst: int) -> int:
    """Hops between two NPUs of one dimension in the congestion-unaware model (spec §4.1)."""
    return BASIC[kind].hops(p, src, dst)


def route(kind: str, p: int, src: int, dst: int) -> list[int]:
    """Devices from ``src`` to ``dst`` (both included) in the congestion-aware model (spec §4.2)."""
    return BASIC[kind].route(p, src, dst)
