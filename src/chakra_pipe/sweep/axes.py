"""Cartesian expansion of named parameter axes, shared by every campaign axis that is not hardware.

Why separate from :mod:`.grid`: hardware axes set ASTRA-sim file keys and build point ids; workload
axes (transform parameters here, generator parameters later) only need "every combination, in a
stable order, with a filesystem- and wildcard-safe label".
"""

from __future__ import annotations

import itertools
import re
from typing import Any

_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]+")


def combinations(axes: list[tuple[str, list[Any]]]) -> list[list[tuple[str, Any]]]:
    """Every choice of one value per axis, the last axis varying fastest (as in the hardware grid)."""
    names = [name for name, _ in axes]
    return [list(zip(names, values)) for values in itertools.product(*(vals for _, vals in axes))]


def value_text(value: Any) -> str:
    """A value as a config author wrote it: lists comma-joined, numbers in Python's shortest form."""
    if isinstance(value, (list, tuple)):
        return ",".join(value_text(v) for v in value)
    return str(value).lower() if isinstance(value, bool) else str(value)


def label(choice: list[tuple[str, Any]]) -> str:
    """``dp.to-16.compute.scale-0.5``: safe in file names and Snakemake wildcards, readable in reports."""
    return ".".join(f"{name}-{_UNSAFE.sub('_', value_text(value))}" for name, value in choice)
