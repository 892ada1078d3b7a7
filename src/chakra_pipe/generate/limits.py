"""Output-size limits for the trace generators, checked before any work starts.

``generate llm --dp 10^8`` used to hang, ``generate collective --npus 10^8`` to die of MemoryError
after 3.8 GB and ``convert text --npus 10^8`` to segfault: a typo in a count should cost a clear
error, not the machine. Each generator estimates what it would write — rank files and nodes in all
(a lower bound where the exact count needs the work itself) — and refuses past these limits,
naming the option that drives the size. ``--allow-large`` lifts both (README: "Output limits").
"""

from __future__ import annotations

from ..errors import InputError

MAX_RANK_FILES = 65_536  # 64 Ki NPUs: beyond the largest ASTRA-sim studies
MAX_NODES = 20_000_000  # nodes in all rank files together (about 1 GB of .et)
ALLOW_FLAG = "--allow-large"


def check_output(ranks: int, nodes: int, option: str, *, allow_large: bool = False) -> None:
    """Refuse a generation of ``ranks`` files and ``nodes`` nodes past the limits (unless allowed)."""
    if allow_large:
        return
    if ranks > MAX_RANK_FILES:
        raise InputError(
            f"would write {ranks:,} rank files (limit {MAX_RANK_FILES:,}; pass {ALLOW_FLAG} to go past it)",
            where=option,
        )
    if nodes > MAX_NODES:
        raise InputError(
            f"would write at least {nodes:,} nodes (limit {MAX_NODES:,}; pass {ALLOW_FLAG} to go past it)", where=option
        )
