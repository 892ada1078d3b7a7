"""SLURM hostlist expressions (``node[1-3,5]``, ``gpu[01-02]-ib,login``) to host names.

Ours rather than ``scontrol show hostnames``: a rank must find its master without running a SLURM
client, which compute nodes do not always have on PATH.
"""

from __future__ import annotations

from ..digits import is_int_text
from ..errors import InputError


def expand(expr: str) -> list[str]:
    """Every host of ``expr`` in SLURM's order; zero padding of ranges is kept (``n[08-10]``)."""
    hosts: list[str] = []
    for part in _split_top(expr.strip()):
        hosts.extend(_expand_one(part, expr))
    if not hosts:
        raise InputError(f"empty host list {expr!r}", where="SLURM_STEP_NODELIST")
    return hosts


def _split_top(expr: str) -> list[str]:
    """Split on commas outside brackets."""
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(expr):
        if ch == "[":
            depth += 1
        elif ch == "]":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append(expr[start:i])
            start = i + 1
    parts.append(expr[start:])
    return [p for p in parts if p]


def _expand_one(part: str, whole: str) -> list[str]:
    open_at = part.find("[")
    if open_at < 0:
        if "]" in part:
            raise InputError(f"unbalanced ']' in host list {whole!r}", where="SLURM_STEP_NODELIST")
        return [part]
    close_at = part.find("]", open_at)
    if close_at < 0:
        raise InputError(f"unbalanced '[' in host list {whole!r}", where="SLURM_STEP_NODELIST")
    head, body, tail = part[:open_at], part[open_at + 1 : close_at], part[close_at + 1 :]
    tails = _expand_one(tail, whole) if tail else [""]
    out: list[str] = []
    for item in body.split(","):
        lo, sep, hi = item.partition("-")
        if not is_int_text(lo) or (sep and not is_int_text(hi)):
            raise InputError(f"bad range {item!r} in host list {whole!r}", where="SLURM_STEP_NODELIST")
        first, last = int(lo), int(hi) if sep else int(lo)
        if last < first or last - first > 100_000:
            raise InputError(f"bad range {item!r} in host list {whole!r}", where="SLURM_STEP_NODELIST")
        width = len(lo)
        out.extend(f"{head}{n:0{width}d}{t}" for n in range(first, last + 1) for t in tails)
    return out
