"""The three basic topologies: hop counts (unaware) and link routes (aware).

A route is the list of devices a message visits; devices are NPU indices inside one dimension, and
``-1`` stands for the dimension's switch.
"""

from __future__ import annotations


def hops(kind: str, p: int, src: int, dst: int) -> int:
    """Hops between two NPUs of one dimension in the congestion-unaware model (spec §4.1)."""
    if kind == "Ring":
        d = (dst - src) % p
        return min(d, p - d)
    if kind == "Switch":
        return 2
    return 1


def route(kind: str, p: int, src: int, dst: int) -> list[int]:
    """Devices from ``src`` to ``dst`` (both included) in the congestion-aware model (spec §4.2)."""
    if kind == "Switch":
        return [src, -1, dst]
    if kind == "FullyConnected":
        return [src, dst]
    d = (dst - src) % p
    step = 1 if d <= p - d else -1  # shorter way; a tie goes clockwise
    out = [src]
    cur = src
    while cur != dst:
        cur = (cur + step) % p
        out.append(cur)
    return out
