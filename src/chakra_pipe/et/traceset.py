"""Rank sets: ``PREFIX.0.et … PREFIX.{N-1}.et`` addressed by their prefix, as ASTRA-sim does.

A set may carry its communicator groups in ``PREFIX.comm_groups.json`` (ASTRA-sim's
``{"<id>": [npu, …]}`` format), written by our generators and converters beside the rank files.
"""

from __future__ import annotations

import hashlib
import os
import re
from dataclasses import dataclass
from pathlib import Path

from ..console import track
from ..errors import InputError
from ..readfile import read_json
from .graph import TraceGraph, load_graph

COMM_GROUPS_SUFFIX = ".comm_groups.json"
WORLD_PG = "0"  # the pg_name writers give collectives on the default group of all ranks
WORLD_PG_NAMES = frozenset({"", "0"})  # pg_name values that select that group (ASTRA-sim §2.5)


def find_rank_files(prefix: str | os.PathLike) -> dict[int, Path]:
    """Every ``PREFIX.<rank>.et`` file that exists, by rank (gaps allowed: validators report them)."""
    prefix = str(prefix)
    folder = Path(prefix).parent
    pattern = re.compile(re.escape(Path(prefix).name) + r"\.(\d+)\.et$")
    try:
        return {int(m.group(1)): folder / name for name in sorted(os.listdir(folder or "."))
                if (m := pattern.match(name))}
    except OSError as exc:
        raise InputError(f"cannot list trace folder: {exc.strerror}", file=prefix) from None


def rank_files(prefix: str | os.PathLike) -> list[Path]:
    """The rank files of a prefix in rank order; errors on a missing prefix or a gap in the ranks."""
    found = find_rank_files(prefix)
    stem, folder = Path(prefix).name, Path(prefix).parent
    if not found:
        raise InputError(f"no rank files {stem}.<rank>.et found in {folder}", file=str(prefix))
    missing = sorted(set(range(max(found) + 1)) - set(found))
    if missing:
        raise InputError(f"rank set has gaps: missing {stem}.{missing[0]}.et"
                         + (f" and {len(missing) - 1} more" if len(missing) > 1 else ""), file=str(prefix))
    return [found[r] for r in range(len(found))]


def clear_rank_set(prefix: str | os.PathLike) -> None:
    """Remove a rank set already at ``prefix`` before a new one is written there.

    Without this, writing 2 ranks over an old 4-rank set leaves a mixed 4-rank set that loads fine.
    Rank 0 goes first, so even a kill during the clean-up leaves nothing that loads as complete.
    """
    if not Path(prefix).parent.is_dir():
        return
    for _, path in sorted(find_rank_files(prefix).items()):
        path.unlink(missing_ok=True)
    Path(str(prefix) + COMM_GROUPS_SUFFIX).unlink(missing_ok=True)


def write_order(npus: int) -> list[int]:
    """The order in which writers emit a rank set's files: rank 0 last.

    A writer killed midway then leaves ranks 1..k without rank 0, which never loads as a complete
    (smaller) set; written in rank order it would leave 0..k, indistinguishable from a real k+1-rank set.
    Companion files (``PREFIX.comm_groups.json``) are written before any rank file for the same reason.
    """
    return [*range(1, npus), 0][:npus]


def resolve(trace_or_prefix: str | os.PathLike) -> list[Path]:
    """A single ``.et`` file (one rank) or the rank files of a prefix."""
    path = Path(trace_or_prefix)
    if path.is_file():
        return [path]
    return rank_files(trace_or_prefix)


def load_comm_groups(path: str | os.PathLike) -> dict[int, list[int]]:
    """Parse an ASTRA-sim comm-group JSON: ``{"<id>": [npu, …]}`` with integer ids > 0."""
    raw = read_json(path)
    if not isinstance(raw, dict):
        raise InputError("expected an object {\"<group id>\": [npu, ...]}", file=str(path))
    groups: dict[int, list[int]] = {}
    for key, members in raw.items():
        if not (isinstance(key, str) and key.strip().isdigit() and int(key) > 0):
            raise InputError(f"group id {key!r} is not an integer > 0", file=str(path), where=f"key {key!r}")
        if not (isinstance(members, list) and members and all(isinstance(m, int) and not isinstance(m, bool)
                                                               and m >= 0 for m in members)):
            raise InputError("members must be a non-empty list of NPU ids", file=str(path), where=f"key {key!r}")
        if len(set(members)) != len(members):
            raise InputError("an NPU is listed twice", file=str(path), where=f"key {key!r}")
        groups[int(key)] = list(members)
    return groups


@dataclass
class TraceSet:
    """All ranks of one workload, loaded once and shared by every consumer."""

    prefix: str
    files: list[Path]
    ranks: list[TraceGraph]
    comm_groups: dict[int, list[int]] | None = None
    comm_groups_file: Path | None = None

    @classmethod
    def load(cls, trace_or_prefix: str | os.PathLike, comm_groups: str | os.PathLike | None = None) -> TraceSet:
        files = resolve(trace_or_prefix)
        ranks = [load_graph(f) for f in track(files, "load", len(files), "rank files")]
        cg_path = Path(comm_groups) if comm_groups else Path(str(trace_or_prefix) + COMM_GROUPS_SUFFIX)
        groups = None
        if comm_groups or cg_path.is_file():
            groups = load_comm_groups(cg_path)
        return cls(str(trace_or_prefix), files, ranks, groups, cg_path if groups is not None else None)

    def __len__(self) -> int:
        return len(self.ranks)

    def sha256(self) -> str:
        """Digest of the rank files' bytes in rank order (plus the comm-group file): provenance."""
        h = hashlib.sha256()
        for f in [*self.files, *([self.comm_groups_file] if self.comm_groups_file else [])]:
            h.update(f.name.encode() + b"\0")
            with open(f, "rb") as fh:
                for block in iter(lambda: fh.read(1 << 20), b""):
                    h.update(block)
        return h.hexdigest()
