"""Byte sizes as users and ASTRA-sim write them.

ASTRA-sim's examples call 1,048,576 bytes "1MB", so ``MB``/``KB``/``GB`` here are binary
multiples, exactly like ``MiB``/``KiB``/``GiB``; a plain number is bytes. Labels follow the same
convention so a generated microbenchmark named ``all_reduce_8npus_1MB`` matches upstream's.
"""

from __future__ import annotations

import re

from ..errors import InputError

_UNITS = {
    "": 1,
    "B": 1,
    "K": 1 << 10,
    "KB": 1 << 10,
    "KIB": 1 << 10,
    "M": 1 << 20,
    "MB": 1 << 20,
    "MIB": 1 << 20,
    "G": 1 << 30,
    "GB": 1 << 30,
    "GIB": 1 << 30,
    "T": 1 << 40,
    "TB": 1 << 40,
    "TIB": 1 << 40,
}
_SIZE = re.compile(r"^\s*([0-9]+)\s*([A-Za-z]*)\s*$")  # ASCII digits: int() would read "٣" as 3
INT64_MAX = (1 << 63) - 1


def parse_size(text: str, where: str = "--size") -> int:
    """Bytes of ``text`` (``1MiB``, ``64KiB``, ``1MB`` = 1,048,576, ``4096``); errors name ``where``."""
    m = _SIZE.match(str(text))
    unit = m.group(2).upper() if m else None
    if not m or unit not in _UNITS:
        raise InputError(f"cannot read size {text!r} (use bytes or a KiB/MiB/GiB, KB/MB/GB suffix)", where=where)
    size = int(m.group(1)) * _UNITS[unit]
    if size > INT64_MAX:
        raise InputError(f"size {text!r} does not fit the int64 comm_size attribute", where=where)
    return size


def size_label(size: int) -> str:
    """Shortest exact ASTRA-sim style label: 1048576 -> ``1MB``, 65536 -> ``64KB``, 1000 -> ``1000B``."""
    for unit, mult in (("TB", 1 << 40), ("GB", 1 << 30), ("MB", 1 << 20), ("KB", 1 << 10)):
        if size >= mult and size % mult == 0:
            return f"{size // mult}{unit}"
    return f"{size}B"
