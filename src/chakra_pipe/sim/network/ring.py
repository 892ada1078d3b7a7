"""Bidirectional ring: shorter way round; the congestion-aware route breaks ties clockwise."""

from __future__ import annotations


def hops(p: int, src: int, dst: int) -> int:
    d = (dst - src) % p
    return min(d, p - d)


def route(p: int, src: int, dst: int) -> list[int]:
    d = (dst - src) % p
    step = 1 if d <= p - d else -1
    out = [src]
    cur = src
    while cur != dst:
        cur = (cur + step) % p
        out.append(cur)
    return out
