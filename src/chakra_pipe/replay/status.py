"""A shared status board: where each rank is, readable after the rank was killed.

A rank that dies (SIGKILL, OOM) cannot report its own last node, yet the user must be told where it
was. Each rank writes its phase, iteration and in-flight node ids into a fixed slot of a small
memory-mapped file on every change (a few stores, no syscall); the launcher reads the file when a
rank fails or the deadline passes.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np

MAX_IN_FLIGHT = 5
_FIELDS = 3 + MAX_IN_FLIGHT  # phase, iteration, count, node ids…

PHASE_NAMES = ("starting", "connecting", "running", "done", "failed")
STARTING, CONNECTING, RUNNING, DONE, FAILED = range(5)


@dataclass(frozen=True)
class RankStatus:
    phase: str
    iteration: int
    in_flight: list[int]


def create(path: str | os.PathLike, ranks: int) -> None:
    np.zeros((ranks, _FIELDS), dtype=np.int64).tofile(path)


class StatusBoard:
    """One rank's writer (or the launcher's reader) over the shared file."""

    def __init__(self, path: str | os.PathLike, ranks: int, mode: str = "r+"):
        self.table = np.memmap(path, dtype=np.int64, mode=mode, shape=(ranks, _FIELDS))

    def set(self, rank: int, phase: int, iteration: int = -1, in_flight: list[int] | None = None) -> None:
        row = self.table[rank]
        ids = (in_flight or [])[:MAX_IN_FLIGHT]
        row[3:3 + len(ids)] = ids
        row[2] = len(ids)
        row[1] = iteration
        row[0] = phase

    def get(self, rank: int) -> RankStatus:
        row = [int(x) for x in self.table[rank]]
        phase = PHASE_NAMES[row[0]] if 0 <= row[0] < len(PHASE_NAMES) else "unknown"
        return RankStatus(phase, row[1], row[3:3 + max(0, min(row[2], MAX_IN_FLIGHT))])
