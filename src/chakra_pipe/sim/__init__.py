"""ASTRA-sim-compatible analytical simulator (spec ``astra-sim-semantics.md``).

Layers mirror ASTRA-sim: ``config`` (files), ``workload`` (per-rank issue loop), ``system``
(chunking, queues, collective algorithms), ``network`` (congestion-unaware closed form and
congestion-aware links) on one shared event queue.

Names are resolved lazily: ``chakra-pipe --help`` and every other verb import ``sim.cli`` (hence this
package) only to register flags, and must not pay for numpy, protobuf or the simulator modules.
"""

from __future__ import annotations

import importlib
import sys
import types
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the names as the type checker sees them; at run time __getattr__ below resolves them
    from .config import HardwareConfig, MemoryConfig, NetworkConfig, SystemConfig, load_hardware  # noqa: F401 (exported: __all__)
    from .result import CollectiveRecord, SimResult  # noqa: F401 (exported: __all__)
    from .simulate import simulate  # noqa: F401 (exported: __all__)

_EXPORTS = {
    "HardwareConfig": "config",
    "MemoryConfig": "config",
    "NetworkConfig": "config",
    "SystemConfig": "config",
    "load_hardware": "config",
    "CollectiveRecord": "result",
    "SimResult": "result",
    "simulate": "simulate",
}
__all__ = sorted(_EXPORTS)


class _Package(types.ModuleType):
    """Resolves the exports on first use; ``sim.simulate`` stays the function, never the module.

    Importing the submodule ``sim/simulate.py`` makes Python set the package attribute ``simulate``
    to that module; the eager ``from .simulate import simulate`` this replaces rebound it to the
    function, and callers rely on that, so the rebinding happens here on every such assignment.
    """

    def __getattr__(self, name: str):
        if name not in _EXPORTS:
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(f".{_EXPORTS[name]}", __name__), name)
        setattr(self, name, value)
        return value

    def __setattr__(self, name: str, value) -> None:
        if name == "simulate" and isinstance(value, types.ModuleType):
            value = value.simulate
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package
