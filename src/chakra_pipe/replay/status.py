"""A shared status board: where each rank is, readable after the rank was killed.

A rank that dies (SIGKILL, OOM) cannot report its own last node, yet the user must be told where it
was. Each rank writes its phase, iteration and in-flight node ids into a fixed slot of a small
memory-mapped file on every change (one ``struct.pack_into``, no syscall, well under a microsecond
so the issue loop stays cheap); the launcher reads the file when a rank fails or the deadline passes.
"""

from __future__ import annotations

import mmap
import os
import struct
from dataclasses import dataclass

MAX_IN_FLIGHT = 5
_ROW = struct.Struct(f"<{3 + MAX_IN_FLIGHT}q")  # phase, iteration, count, node ids…

PHASE_NAMES = ("starting", "connecting", "running", "done", "failed")
STARTING, CONNECTING, RUNNING, DONE, FAILED = range(5)
_PAD = (0,) * MAX_IN_FLIGHT


@dataclass(frozen=True)
class RankStatus:
    phase: str
    iteration: int
    in_flight: list[int]


def create(path: str | os.PathLike, ranks: int) -> None:
    with open(path, "wb") as f:
        f.write(bytes(_ROW.size * ranks))


class StatusBoard:
    """One rank's writer (or the launcher's reader) over the shared file."""

    def __init__(self, path: str | os.PathLike, ranks: int, mode: str = "r+"):
        with open(path, "r+b" if mode == "r+" else "rb") as f:
            access = mmap.ACCESS_WRITE if mode == "r+" else mmap.ACCESS_READ
            self._map = mmap.mmap(f.fileno(), _ROW.size * ranks, access=access)

    def set(self, rank: int, phase: int, iteration: int = -1, in_flight: list[int] | None = None) -> None:
        ids = tuple((in_flight or ())[:MAX_IN_FLIGHT])
        _ROW.pack_into(self._map, rank * _ROW.size, phase, iteration, len(ids), *ids, *_PAD[len(ids) :])

    def get(self, rank: int) -> RankStatus:
        row = _ROW.unpack_from(self._map, rank * _ROW.size)
        phase = PHASE_NAMES[row[0]] if 0 <= row[0] < len(PHASE_NAMES) else "unknown"
        return RankStatus(phase, row[1], list(row[3 : 3 + max(0, min(row[2], MAX_IN_FLIGHT))]))
