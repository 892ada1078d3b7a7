"""Rank sets: ``PREFIX.0.et … PREFIX.{N-1}.et`` addressed by their prefix, as ASTRA-sim does.

A set may carry its communicator groups in ``PREFIX.comm_groups.json`` (ASTRA-sim's
``{"<id>": [npu, …]}`` format), written by our generators and converters beside the rank files.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..console import track
from ..errors import InputError
from ..readfile import read_json
from .graph import TraceGraph, load_graphs
from .rankfiles import find_rank_files

COMM_GROUPS_SUFFIX = ".comm_groups.json"
# The comm-groups option's value meaning "no groups" (ASTRA-sim's default value). ASTRA-sim ignores
# any path *containing* "empty" (so ".../nonempty/cg.json" silently meant no groups); only the
# literal value means it here, for every verb.
NO_COMM_GROUPS = "empty"
_GROUP_ID = re.compile(r"[ \t\n]*\+?[0-9]{1,12}")
WORLD_PG = "0"  # the pg_name writers give collectives on the default group of all ranks
WORLD_PG_NAMES = frozenset({"", "0"})  # pg_name values that select that group (ASTRA-sim §2.5)


def missing_ranks(ranks: Iterable[int]) -> list[tuple[int, int]]:
    """Inclusive ``(first, last)`` ranges of the ranks absent below the highest present one.

    Computed from the sorted list of present ranks, so a stray ``PREFIX.3000000000.et`` costs one
    range, not a set of three billion numbers.
    """
    gaps, expected = [], 0
    for r in sorted(ranks):
        if r > expected:
            gaps.append((expected, r - 1))
        expected = r + 1
    return gaps


def describe_ranges(ranges: list[tuple[int, int]], shown: int = 5) -> str:
    """``"1,234 ranks (4-29999999, 30000001)"``: the count and the first ``shown`` ranges."""
    count = sum(b - a + 1 for a, b in ranges)
    parts = [f"{a}" if a == b else f"{a}-{b}" for a, b in ranges[:shown]]
    more = f" and {len(ranges) - shown} more ranges" if len(ranges) > shown else ""
    return f"{count:,} rank{'s' if count != 1 else ''} ({', '.join(parts)}{more})"


def rank_files(prefix: str | os.PathLike) -> list[Path]:
    """The rank files of a prefix in rank order; errors on a missing prefix or a gap in the ranks."""
    found = find_rank_files(prefix)
    stem, folder = Path(prefix).name, Path(prefix).parent
    if not found:
        raise InputError(f"no rank files {stem}.<rank>.et found in {folder}", file=str(prefix))
    gaps = missing_ranks(found)
    if gaps:
        raise InputError(
            f"rank set has gaps: missing {stem}.{gaps[0][0]}.et ({describe_ranges(gaps)} missing "
            f"below the highest rank {max(found)}; a stray file?)",
            file=str(prefix),
        )
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


def _members_problem(members: object) -> str | None:
    """Why ``members`` is not a group's NPU list ASTRA-sim reads (None when it is one)."""
    if not (
        isinstance(members, list)
        and members
        and all(isinstance(m, int) and not isinstance(m, bool) and m >= 0 for m in members)
    ):
        return "members must be a non-empty list of NPU ids"
    if len(set(members)) != len(members):
        return "an NPU is listed twice"
    return None


def load_comm_groups(path: str | os.PathLike) -> dict[int, list[int]]:
    """Parse an ASTRA-sim comm-group JSON: ``{"<id>": [npu, …]}`` with integer ids > 0."""
    raw = read_json(path)
    if not isinstance(raw, dict):
        raise InputError('expected an object {"<group id>": [npu, ...]}', file=str(path))
    groups: dict[int, list[int]] = {}
    for key, members in raw.items():
        # ASTRA-sim reads ids with std::stoi: optional blanks and '+', ASCII digits, an int > 0.
        if not (isinstance(key, str) and _GROUP_ID.fullmatch(key) and 0 < int(key) < 2**31):
            raise InputError(
                f"group id {str(key)[:40]!r} is not an integer > 0 (and below 2^31: ASTRA-sim reads an int)",
                file=str(path),
                where=f"key {str(key)[:40]!r}",
            )
        problem = _members_problem(members)
        if problem:
            raise InputError(problem, file=str(path), where=f"key {key!r}")
        groups[int(key)] = list(members)
    return groups


def write_comm_groups(
    path: str | os.PathLike, groups: Mapping[str, Sequence[int]] | Mapping[int, Sequence[int]]
) -> Path:
    """Write ``groups`` as the comm-group JSON :func:`load_comm_groups` reads back unchanged, atomically.

    The one writer for generators, converters and transforms: ids as canonical decimal strings in
    numeric order, members in the caller's order, two-space indent and a trailing newline, so equal
    groups give equal bytes whichever stage wrote them. A group the parser (and ASTRA-sim) would
    refuse — id not in 1..2^31-1, empty or repeated members — is refused here instead of being
    written for a later stage to trip over.
    """
    ids: dict[int, Any] = {}
    for key in groups:
        text = str(key)
        if not (text.isascii() and text.isdigit() and text == str(int(text)) and 0 < int(text) < 2**31):
            raise InputError(f"group id {text[:40]!r} is not an integer in 1..2^31-1", file=str(path))
        ids[int(text)] = key
    out: dict[str, list[int]] = {}
    for gid in sorted(ids):
        members = list(groups[ids[gid]])
        problem = _members_problem(members)
        if problem:
            raise InputError(problem, file=str(path), where=f"key {str(gid)!r}")
        out[str(gid)] = members
    from ..atomic import write_text  # here: loading a set (every simulate) writes nothing

    write_text(path, comm_groups_text(out))
    return Path(path)


def comm_groups_text(groups: Mapping[str, Sequence[int]]) -> str:
    """The comm-group file's text for already-checked groups (:func:`write_comm_groups`'s bytes)."""
    return json.dumps(groups, indent=2, ensure_ascii=False, allow_nan=False) + "\n"


def comm_groups_option(
    trace_or_prefix: str | os.PathLike, value: str | os.PathLike | None
) -> tuple[dict[int, list[int]] | None, Path | None]:
    """``(groups, file)`` for a comm-groups option value, the one meaning every verb gives it.

    ``None`` (option not given): ``PREFIX.comm_groups.json`` when present, else no groups;
    ``"empty"``: no groups (``{}``, no file); anything else: that JSON file, which must exist.
    """
    if value is not None and str(value) == NO_COMM_GROUPS:
        return {}, None
    path = Path(value) if value else Path(str(trace_or_prefix) + COMM_GROUPS_SUFFIX)
    if value or path.is_file():
        return load_comm_groups(path), path
    return None, None


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
        ranks = load_graphs(track(files, "load", len(files), "rank files"))
        groups, cg_path = comm_groups_option(trace_or_prefix, comm_groups)
        return cls(str(trace_or_prefix), files, ranks, groups, cg_path)

    def __len__(self) -> int:
        return len(self.ranks)

    def sha256(self) -> str:
        return files_sha256(self.files, self.comm_groups_file)


def files_sha256(files: list[Path], comm_groups_file: Path | None = None) -> str:
    """Digest of the rank files' bytes in rank order (plus the comm-group file): a set's provenance."""
    return named_sha256((f.name, _blocks(f)) for f in [*files, *([comm_groups_file] if comm_groups_file else [])])


def named_sha256(items: Iterable[tuple[str, Iterable[bytes]]]) -> str:
    """:func:`files_sha256` of ``(file name, content blocks)`` pairs: a set kept in memory hashes as its files."""
    import hashlib  # here: a simulation that never asks for the digest does not pay its import

    h = hashlib.sha256()
    for name, blocks in items:
        h.update(name.encode() + b"\0")
        for block in blocks:
            h.update(block)
    return h.hexdigest()


def _blocks(path: Path) -> Iterator[bytes]:
    with open(path, "rb") as fh:
        yield from iter(lambda: fh.read(1 << 20), b"")
