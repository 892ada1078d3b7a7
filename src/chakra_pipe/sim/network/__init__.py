"""Analytical network backends: message matching shared by both, delay models per backend."""

from __future__ import annotations

from .aware import CongestionAwareNetwork
from .common import Network
from .unaware import CongestionUnawareNetwork


def make_network(backend: str, cfg, queue) -> Network:
    if backend == "congestion_aware":
        return CongestionAwareNetwork(cfg, queue)
    return CongestionUnawareNetwork(cfg, queue)


__all__ = ["Network", "CongestionAwareNetwork", "CongestionUnawareNetwork", "make_network"]
