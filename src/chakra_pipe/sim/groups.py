"""Communicator groups as the simulator resolves them (spec §2.5): comm-group file, METADATA, ``pg_name``.

Which members a group has, and which METADATA node defines it, is resolved once for every stage by
:mod:`chakra_pipe.rankset.groups`; here the simulator turns that table into its per-rank ``Group``
objects and picks the group a COMM node's ``pg_name`` selects.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from ..et.traceset import WORLD_PG_NAMES
from .system.sys import Group


def groups_at_start(
    from_file: Mapping[int, Sequence[int]], npus: int, ranks: Iterable[int] | None = None
) -> dict[int, dict[str, Group]]:
    """The groups of each of ``ranks`` (default: every NPU) before any METADATA node runs: the world
    group and the comm-group-file groups it is a member of.

    Member lists are shared between the ranks' ``Group`` objects (they are never modified); the
    per-rank state (stream counter, plans) stays per rank as ASTRA-sim keeps it. The symmetric engine
    asks for its representatives only, so 131,072 ranks cost what a few hundred do.
    """
    world = list(range(npus))
    by_rank: dict[int, dict[str, Group]] = {r: {"": Group(1, world, "")} for r in (ranks or range(npus))}
    for gid, members in sorted(from_file.items()):
        shared = list(members)
        for m in dict.fromkeys(shared):
            if m in by_rank:
                by_rank[m][str(gid)] = Group(int(gid), shared, str(gid))
    return by_rank


def group_of(groups: dict[str, Group], pg_name: str) -> Group | None:
    """The group ``pg_name`` selects: a known group, else the default group for the world names;
    None when it names no group."""
    group = groups.get(pg_name)
    if group is None and pg_name in WORLD_PG_NAMES:
        return groups[""]
    return group
