"""Write converted ranks as a Chakra rank set: ``PREFIX.<rank>.et`` + ``PREFIX.comm_groups.json``.

A whole capture folder converts in one call: each rank uses ``rank{r}.linked.json[.gz]`` when
present, otherwise links ``rank{r}.host_et.json.gz`` with ``rank{r}.kineto.json.gz`` in memory, or
converts the host trace alone (durations 0) when there is no Kineto file. Upstream layouts
(``host.{r}.json``/``device.{r}.json``, ``pytorch_et_{r}.json``/``kineto_{r}.json``) and explicit
``{rank}`` patterns name the host and Kineto files the same way.
"""

from __future__ import annotations

import os
import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from ..console import track
from ..errors import InputError
from ..et import schema
from ..et.framing import write_trace
from ..et.traceset import (
    COMM_GROUPS_SUFFIX,
    WORLD_PG,
    clear_rank_set,
    describe_ranges,
    missing_ranks,
    write_comm_groups,
    write_order,
)
from ..link.hostet import HostTrace, load_host_trace
from ..link.kineto import load_kineto
from ..link.linker import LinkStats, link_traces
from ..readfile import read_json
from .check import rank_problems, set_problems
from .pytorch import RankConversion, convert_trace

RANK_OUT = re.compile(r"^(?P<prefix>.+)\.(?P<rank>[0-9]+)\.et$")
_GZ = r"\.json(\.gz)?$"
# Rank-file layouts a --ranks-dir may use: ours (capture, link), the upstream Chakra collection
# recipe's host.{r}.json / device.{r}.json, and the ASTRA-sim tutorials' pytorch_et_{r} / kineto_{r}.
_LAYOUTS = (
    re.compile(r"^rank(?P<rank>[0-9]+)\.(?P<kind>linked|host_et|kineto)" + _GZ),
    re.compile(r"^(?P<kind>host|device)\.(?P<rank>[0-9]+)" + _GZ),
    re.compile(r"^(?P<kind>pytorch_et|kineto)_(?P<rank>[0-9]+)" + _GZ),
)
_KIND = {"host": "host_et", "pytorch_et": "host_et", "device": "kineto"}
RANK_FIELD = "{rank}"


@dataclass
class ConvertSummary:
    """What was written and how many nodes of each type (for the CLI line and tests)."""

    files: list[Path]
    comm_groups: Path
    counts: Counter = field(default_factory=Counter)
    pg_unknown: int = 0
    links: list[LinkStats] = field(default_factory=list)
    sync_dropped: int = 0

    def line(self) -> str:
        kinds = ", ".join(f"{schema.NODE_TYPE_NAMES[t]} {c}" for t, c in sorted(self.counts.items()))
        extra = f"; {self.pg_unknown} comm ops with unknown process group (assumed default)" if self.pg_unknown else ""
        if self.sync_dropped:
            extra += f"; {self.sync_dropped} GPU-wait edges dropped (they closed a cycle)"
        return f"{len(self.files)} rank file(s): {kinds}{extra}"


def _rank_of(trace: HostTrace) -> int | None:
    info = trace.header.get("distributedInfo")
    rank = info.get("rank") if isinstance(info, dict) else None
    return rank if isinstance(rank, int) else None


def _self_check(conversions: list[RankConversion], source: str, prefix: str | None) -> None:
    """Refuse a conversion that breaks the converter's guarantees (``prefix``: check as a set)."""
    if prefix is None:
        problems = rank_problems(conversions[0].nodes, source)
    else:
        problems = set_problems([c.nodes for c in conversions], prefix)
    if problems:
        more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
        raise InputError(f"the converted trace is inconsistent: {problems[0].line()}{more}", file=source)


def write_set_groups(prefix: str, conversions: list[RankConversion]) -> Path:
    """``PREFIX.comm_groups.json``: every non-default process group the traces declare or use.

    Declared groups come from the PG table every rank records in full, so converting ranks one
    by one writes the same file each time; members are listed in rank order, ids are > 0.
    """
    groups: dict[str, list[int]] = {}
    for rank, conv in enumerate(conversions):
        for pg in sorted(set(conv.groups.members) | conv.used_pgs):
            name = conv.groups.chakra_name(pg)
            if name == WORLD_PG:
                continue
            members = conv.groups.ranks_of(pg)
            if groups.setdefault(name, members) != members:
                raise InputError(
                    f"process group {pg!r} has members {members} in rank {rank}'s trace but "
                    f"{groups[name]} in an earlier one",
                    file=prefix,
                )
    return write_comm_groups(prefix + COMM_GROUPS_SUFFIX, groups)


def write_rank_set(
    prefix: str, conversions: list[RankConversion], links: list[LinkStats] | None = None
) -> ConvertSummary:
    """Check, then write every rank file and the comm-group JSON."""
    _self_check(conversions, prefix, prefix)
    clear_rank_set(prefix)
    comm_path = write_set_groups(prefix, conversions)
    counts: Counter = Counter()
    for rank in write_order(len(conversions)):
        conv = conversions[rank]
        write_trace(f"{prefix}.{rank}.et", conv.metadata, conv.nodes)
        counts.update(conv.counts)
    files = [Path(f"{prefix}.{rank}.et") for rank in range(len(conversions))]
    return ConvertSummary(
        files,
        comm_path,
        counts,
        sum(c.pg_unknown for c in conversions),
        links or [],
        sum(c.sync_dropped for c in conversions),
    )


def convert_file(in_path: str | os.PathLike, out_path: str | os.PathLike) -> ConvertSummary:
    """One host ET / ET+ to ``PREFIX.RANK.et`` (rank taken from the output name)."""
    m = RANK_OUT.match(str(out_path))
    if not m:
        raise InputError("output must be named PREFIX.RANK.et (e.g. out/model.0.et)", where="--out")
    rank = int(m.group("rank"))
    trace = load_host_trace(in_path)
    recorded = _rank_of(trace)
    if recorded is not None and recorded != rank:
        raise InputError(f"trace is rank {recorded} but --out names rank {rank}", file=str(in_path))
    conv = convert_trace(trace, rank)
    _self_check([conv], str(in_path), None)
    write_trace(out_path, conv.metadata, conv.nodes)
    comm_path = write_set_groups(m.group("prefix"), [conv])
    return ConvertSummary(
        [Path(out_path)], comm_path, Counter(conv.counts), conv.pg_unknown, sync_dropped=conv.sync_dropped
    )


def pattern_regex(pattern: str, where: str) -> re.Pattern:
    """A file-name pattern with one ``{rank}`` (``et_{rank}.json.gz``) as a regex with a rank group."""
    if pattern.count(RANK_FIELD) != 1 or "/" in pattern:
        raise InputError(f"pattern {pattern!r} must be a file name containing {RANK_FIELD} exactly once", where=where)
    head, tail = pattern.split(RANK_FIELD)
    return re.compile(f"^{re.escape(head)}(?P<rank>[0-9]+){re.escape(tail)}$")


def _capture_ranks(folder: Path, patterns: dict[str, re.Pattern] | None = None) -> dict[int, dict[str, Path]]:
    """Per rank, its files by kind (linked / host_et / kineto): explicit ``patterns`` (kind -> regex)
    when given, else the first of the known layouts that names a file."""
    try:
        names = sorted(os.listdir(folder))
    except OSError as exc:
        raise InputError(f"cannot list: {exc.strerror}", file=str(folder)) from None
    ranks: dict[int, dict[str, Path]] = {}
    for name in names:
        if patterns:
            hits = [(kind, m) for kind, rx in patterns.items() if (m := rx.match(name))]
        else:
            hits = [(_KIND.get(m.group("kind"), m.group("kind")), m) for rx in _LAYOUTS if (m := rx.match(name))]
        for kind, m in hits[:1]:
            ranks.setdefault(int(m.group("rank")), {}).setdefault(kind, folder / name)
    if not ranks:
        raise InputError(
            "no file names match the given patterns"
            if patterns
            else "no rank{r}.linked.json[.gz], rank{r}.host_et.json[.gz] (+ rank{r}.kineto), host.{r}.json "
            "(+ device.{r}.json) or pytorch_et_{r}.json (+ kineto_{r}.json) files",
            file=str(folder),
        )
    gaps = missing_ranks(ranks)
    if gaps:
        raise InputError(f"capture has gaps: no files for {describe_ranges(gaps)}", file=str(folder))
    return ranks


def convert_capture(
    folder: str | os.PathLike, prefix: str, patterns: dict[str, re.Pattern] | None = None
) -> ConvertSummary:
    """Every rank of a capture (or link) folder into one rank set (file names: see _capture_ranks)."""
    folder = Path(folder)
    ranks = _capture_ranks(folder, patterns)
    capture_json = folder / "capture.json"
    if capture_json.is_file():
        world = read_json(capture_json).get("world_size")
        if isinstance(world, int) and world != len(ranks):
            raise InputError(
                f"capture.json says world_size {world} but {len(ranks)} ranks have traces", file=str(capture_json)
            )
    conversions, links = [], []
    for rank in track(range(len(ranks)), "convert", len(ranks), "ranks"):
        files = ranks[rank]
        if "linked" in files:
            trace = load_host_trace(files["linked"])
        elif "host_et" in files:
            trace = load_host_trace(files["host_et"])
            if "kineto" in files:
                obj, stats = link_traces(trace, load_kineto(files["kineto"]))
                links.append(stats)
                trace = HostTrace(
                    trace.path,
                    {k: v for k, v in obj.items() if k != "nodes"},
                    obj["nodes"],
                    {n["id"]: n for n in obj["nodes"]},
                )
        else:
            raise InputError(f"rank {rank} has a Kineto trace but no host trace", file=str(folder))
        recorded = _rank_of(trace)
        if recorded is not None and recorded != rank:
            raise InputError(f"file of rank {rank} records rank {recorded}", file=trace.path)
        conversions.append(convert_trace(trace, rank))
    return write_rank_set(prefix, conversions, links)
