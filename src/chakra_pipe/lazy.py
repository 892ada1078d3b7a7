"""Lazy package exports: a name is imported from its submodule on first use.

Why: every ``chakra-pipe`` start-up imports each stage's CLI module, hence its package, only to register
flags; eager package exports would make even ``--help`` pay for numpy, protobuf and the simulator.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any


def lazy_getattr(package: str, exports: Mapping[str, str | None]) -> Callable[[str], Any]:
    """A module-level ``__getattr__`` for ``package``: ``exports`` maps each name to the submodule that
    defines it (``None``: the name is a submodule, exported as itself)."""

    def __getattr__(name: str) -> Any:
        if name not in exports:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        module = exports[name]
        if module is None:
            return importlib.import_module(f".{name}", package)
        return getattr(importlib.import_module(f".{module}", package), name)

    return __getattr__
