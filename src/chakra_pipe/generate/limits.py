"""Output-size limits for the trace generators, checked before any work starts.

``generate llm --dp 10^8`` used to hang, ``generate collective --npus 10^8`` to die of MemoryError
after 3.8 GB and ``convert text --npus 10^8`` to segfault: a typo in a count should cost a clear
error, not the machine. Each generator estimates what it would write — rank files and nodes in all
(a lower bound where the exact count needs the work itself) — and refuses past these limits,
naming the option that drives the size. ``--allow-large`` lifts both (README: "Output limits").

A campaign's generated set simulated in memory writes no file (:mod:`chakra_pipe.sweep.generated`):
the file limits protect the disk and its inodes, so it gets its own, wider ones instead. What it
holds is the representatives of a symmetric run; the digest streams every rank's bytes through the
hash one rank at a time; the layout numbers its groups per rank. The in-memory limits still stop a
typo (``dp: 10000000``) from costing the planner minutes and gigabytes. A full-engine run holds every
rank's graph, as many as the files would be, so it keeps the file limits (:func:`check_full_engine`).
"""

from __future__ import annotations

from ..errors import InputError

MAX_RANK_FILES = 65_536  # 64 Ki NPUs: beyond the largest ASTRA-sim studies
MAX_NODES = 20_000_000  # nodes in all rank files together (about 1 GB of .et)
# In memory: 8× the 131,072-GPU target; numbering the groups of 131,072 ranks costs ~150 MiB
# and hashing their bytes ~1 µs a node (README "Scale"), so these keep a planned point to minutes.
MAX_MEMORY_RANKS = 1_048_576
MAX_MEMORY_NODES = 320_000_000
ALLOW_FLAG = "--allow-large"


class OutputLimitError(InputError):
    """A generation past a limit. ``lift``: how the caller can go past it (empty when it cannot), kept
    apart from the count so a campaign, which has no ``--allow-large``, can say its own way."""

    def __init__(self, refusal: str, lift: str, where: str):
        self.refusal, self.lift = refusal, lift
        super().__init__(f"{refusal}: {lift}" if lift else refusal, where=where)


def check_output(ranks: int, nodes: int, option: str, *, allow_large: bool = False, in_memory: bool = False) -> None:
    """Refuse a generation of ``ranks`` files and ``nodes`` nodes past the limits (unless allowed);
    ``in_memory``: a set generated for a simulation in memory, which writes nothing."""
    if allow_large:
        return
    if in_memory:  # only a campaign asks, and a campaign cannot lift the limits
        _refuse(ranks, MAX_MEMORY_RANKS, "generate", "ranks in memory", option, "")
        _refuse(nodes, MAX_MEMORY_NODES, "generate at least", "nodes in memory", option, "")
    else:
        lift = f"pass {ALLOW_FLAG} to go past it"
        _refuse(ranks, MAX_RANK_FILES, "write", "rank files", option, lift)
        _refuse(nodes, MAX_NODES, "write at least", "nodes", option, lift)


def check_full_engine(ranks: int, why: str, where: str) -> None:
    """Refuse to decode every one of ``ranks`` in-memory ranks for the full engine past the rank-file
    limit (``why``: why the run is not symmetric): it would hold as many graphs as the files."""
    if ranks > MAX_RANK_FILES:
        raise InputError(
            f"the full engine would hold all {ranks:,} ranks in memory (limit {MAX_RANK_FILES:,}, as for rank "
            f"files): {why}",
            where=where,
        )


def _refuse(count: int, limit: int, verb: str, what: str, option: str, lift: str) -> None:
    if count > limit:
        raise OutputLimitError(f"would {verb} {count:,} {what} (limit {limit:,})", lift, option)
