"""Run a chain of ops on a rank set in memory, then write it with provenance and per-op stats.

Every op sees the result of the previous one; the set is written only after the last op has
succeeded, so a refused op leaves the output prefix as it was.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from ..atomic import write_json
from ..errors import InputError
from .rankset import RankSet
from .stats import OpStats, Totals

STATS_SUFFIX = ".transform_stats.json"


class Op(Protocol):
    name: str

    def apply(self, rs: RankSet) -> int:
        """Edit ``rs`` in place; return how many nodes were touched (or added/removed)."""


@dataclass(frozen=True)
class Step:
    """An op and the arguments it was given (kept verbatim for provenance and stats)."""

    op: Op
    args: tuple[str, ...]

    def describe(self) -> dict:
        return {"op": self.op.name, "args": list(self.args)}


@dataclass
class TransformResult:
    files: list[Path]
    stats_file: Path
    stats: list[OpStats]


def run_transforms(in_prefix: str, out_prefix: str, steps: list[Step]) -> TransformResult:
    if Path(out_prefix).resolve() == Path(in_prefix).resolve():
        # Writing clears the old set first: a failed write would then lose the input too.
        raise InputError("OUT_PREFIX is the input set; write the transformed set to another prefix", file=out_prefix)
    rs = RankSet.load(in_prefix)
    stats = []
    for step in steps:
        before = Totals.of(rs)
        touched = step.op.apply(rs)
        stats.append(OpStats(step.op.name, step.describe(), touched, before, Totals.of(rs)))
    provenance = {"input_sha256": rs.sha256, "transforms": [s.describe() for s in steps]}
    files = rs.write(out_prefix, provenance)
    stats_file = Path(out_prefix + STATS_SUFFIX)
    write_json(stats_file, {**provenance, "ops": [s.to_json() for s in stats]})
    return TransformResult(files, stats_file, stats)
