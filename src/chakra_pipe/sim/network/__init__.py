"""Analytical network backends: message matching shared by both, delay models per backend.

The congestion-aware model (numpy link tables, routing) is imported only by a run that selects it:
the default backend's small runs start without it (issue #15).
"""

from __future__ import annotations

from .common import Network
from .unaware import CongestionUnawareNetwork


def make_network(backend: str, cfg, queue) -> Network:
    if backend == "congestion_aware":
        from .aware import CongestionAwareNetwork

        return CongestionAwareNetwork(cfg, queue)
    return CongestionUnawareNetwork(cfg, queue)


__all__ = ["Network", "CongestionUnawareNetwork", "make_network"]
