"""Exact factors for scaling integer trace fields.

Factors are kept as fractions of their decimal text (``0.1`` is exactly 1/10, not the nearest
double), and products round half up, so a scaled trace is the same on every machine and
``--scale 0.5`` of 3 µs is 2 µs, never sometimes 1.
"""

from __future__ import annotations

import math
from fractions import Fraction

from ..errors import InputError


def parse_factor(text: object, where: str, allow_zero: bool = False) -> Fraction:
    """A finite non-negative (or positive) factor from CLI or JSON text."""
    try:
        value = Fraction(str(text).strip()) if not isinstance(text, bool) else None
    except (ValueError, ZeroDivisionError):
        value = None
    if value is None or value < 0 or (value == 0 and not allow_zero):
        need = "a number >= 0" if allow_zero else "a number > 0"
        raise InputError(f"factor {text!r} is not {need}", where=where)
    return value


INT64_MAX = (1 << 63) - 1  # the narrowest of the fields scaled (num_ops, comm_size are int64)


def scale_int(value: int, factor: Fraction, what: str = "value") -> int:
    """``value · factor`` rounded half up; a result no trace field can hold is an input error."""
    out = math.floor(value * factor + Fraction(1, 2))
    if out > INT64_MAX:
        raise InputError(f"{what} {value} scaled by {factor} exceeds the int64 range of trace fields")
    return out
