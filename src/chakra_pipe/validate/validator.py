"""Validation entry points used by the CLI, by other stages and by tests.

``validate_trace`` checks one file; ``validate_set`` checks a rank set (per-file rules on every rank,
then the cross-rank rules). A gap in the rank numbering is a finding (checklist item 23; ASTRA-sim
exits on a missing rank file): the present files still get their per-file checks, while cross-rank
rules, which need every rank, are skipped. Unreadable input — framing or decode errors, a prefix with
no files — raises the et layer's ``TraceFormatError``/``InputError`` (exit 2) instead of becoming a
finding: there is nothing meaningful to validate past the first undecodable byte.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from ..et.graph import TraceGraph, load_graph
from ..et.traceset import TraceSet, comm_groups_option, describe_ranges, find_rank_files, missing_ranks
from ..rankset import analyze
from ..rankset.file_rules import FileChecker, FileResult
from .findings import ERROR, Finding, Report

CommGroups = dict[int, list[int]] | str | os.PathLike | None
_RANK_SUFFIX = re.compile(r"\.([0-9]+)\.et(\.gz)?$")


def _groups(comm_groups: CommGroups) -> dict[int, list[int]] | None:
    if comm_groups is None or isinstance(comm_groups, dict):
        return comm_groups
    return comm_groups_option("", comm_groups)[0]


def rank_of(path: str | os.PathLike) -> int | None:
    """The rank encoded in a ``<prefix>.<rank>.et`` name (None for other names)."""
    m = _RANK_SUFFIX.search(Path(path).name)
    return int(m.group(1)) if m else None


def _check_file(
    graph: TraceGraph, file: str, rank: int | None, groups: dict[int, list[int]] | None, dataset_splits: int = 1
) -> FileResult:
    names = [str(k) for k in groups] if groups else []
    return FileChecker(graph, file, rank, names, dataset_splits).run()


def validate_trace(
    path: str | os.PathLike, strict: bool = False, comm_groups: CommGroups = None, dataset_splits: int = 1
) -> list[Finding]:
    """Per-file findings for one ``.et`` file (rank taken from a ``<prefix>.<rank>.et`` name).

    ``strict`` is accepted for existing callers and changes nothing: dangling ``ctrl_deps`` are
    errors in every mode, because ASTRA-sim refuses such a file and so do simulate and replay.
    """
    groups = _groups(comm_groups)
    return _check_file(load_graph(path), str(path), rank_of(path), groups, dataset_splits).findings


def validate_set(
    prefix: str | os.PathLike, strict: bool = False, comm_groups: CommGroups = None, dataset_splits: int = 1
) -> Report:
    """Validate a rank set ``PREFIX.<r>.et`` (or a single ``.et`` file: per-file rules only).

    ``comm_groups`` is a parsed ``{id: [npus]}`` mapping or the path of an ASTRA-sim comm-group
    JSON (``"empty"``: no groups); without it a ``PREFIX.comm_groups.json`` beside the rank files is
    used when present. The findings are :func:`chakra_pipe.rankset.analyze`'s, the problems simulate
    and replay refuse a set on. ``strict``: see :func:`validate_trace`.
    ``dataset_splits`` is the target system's ``preferred-dataset-splits`` (rules that depend on it).
    """
    if Path(prefix).is_file():
        return Report([str(prefix)], validate_trace(prefix, strict, comm_groups, dataset_splits))
    present = find_rank_files(prefix)
    gaps = missing_ranks(present)
    if gaps:  # one finding for all of them: a stray PREFIX.30000000.et would otherwise make 3*10^7
        groups = _groups(comm_groups)
        findings = [
            Finding(
                str(prefix),
                None,
                "rank-gap",
                ERROR,
                f"rank file {Path(prefix).name}.{gaps[0][0]}.et is missing ({describe_ranges(gaps)} "
                f"missing in all; ranks must be 0..{max(present)} without gaps; ASTRA-sim exits on a "
                "missing rank)",
            )
        ]
        for r, f in sorted(present.items()):
            findings += _check_file(load_graph(f), str(f), r, groups, dataset_splits).findings
        return Report([str(f) for _, f in sorted(present.items())], findings)
    if isinstance(comm_groups, dict):
        analysis = analyze(TraceSet.load(prefix), comm_groups, "<comm groups>", dataset_splits, full=True)
    else:
        analysis = analyze(TraceSet.load(prefix, comm_groups), dataset_splits=dataset_splits, full=True)
    return Report([v.file for v in analysis.ranks], analysis.findings)
