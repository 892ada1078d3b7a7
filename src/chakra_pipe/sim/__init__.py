"""ASTRA-sim-compatible analytical simulator (spec ``astra-sim-semantics.md``).

Layers mirror ASTRA-sim: ``config`` (files), ``workload`` (per-rank issue loop), ``system``
(chunking, queues, collective algorithms), ``network`` (congestion-unaware closed form and
congestion-aware links) on one shared event queue.
"""

from .config import HardwareConfig, MemoryConfig, NetworkConfig, SystemConfig, load_hardware
from .result import CollectiveRecord, SimResult
from .simulate import simulate

__all__ = ["simulate", "HardwareConfig", "SystemConfig", "NetworkConfig", "MemoryConfig", "SimResult",
           "CollectiveRecord", "load_hardware"]
