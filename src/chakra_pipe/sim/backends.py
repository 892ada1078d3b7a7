"""One table of the simulator's network backends and how each is named.

Why one table: the backend's name is data that travels — config files and ``--backend`` give it,
``plan.json`` checks it, the results' ``backend`` column and the leaderboard's divisions group by
it, and ASTRA-sim names its binary after it. The config schema, the sweep, the simulator, its CLI
and the drop-in scripts all used to spell the list themselves; they now read it here
(``workflow/schemas/config.schema.yaml`` cannot import Python: a test checks its enum against this).
Stdlib only, so CLIs can read it while registering their options; and a NamedTuple, not a
dataclass, because ``chakra-pipe simulate --help`` would import :mod:`dataclasses` (and with it
:mod:`inspect`, :mod:`ast`, :mod:`dis`: ~8 ms, a sixth of its wall) for this record alone (issue #15).
"""

from __future__ import annotations

from typing import NamedTuple


class Backend(NamedTuple):
    """``name``: what configs, plans and results say; ``program``: ASTRA-sim's binary (and our drop-in)."""

    name: str
    program: str


UNAWARE = Backend("congestion_unaware", "AstraSim_Analytical_Congestion_Unaware")
AWARE = Backend("congestion_aware", "AstraSim_Analytical_Congestion_Aware")
BACKENDS: tuple[Backend, ...] = (UNAWARE, AWARE)
NAMES: tuple[str, ...] = tuple(b.name for b in BACKENDS)
DEFAULT = UNAWARE.name  # ASTRA-sim's analytical default, and ours when a config names none
