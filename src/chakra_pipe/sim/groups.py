"""Communicator groups as the simulator resolves them (spec §2.5): comm-group file, METADATA, ``pg_name``.

Which members a group has, and which METADATA node defines it, is resolved once for every stage by
:mod:`chakra_pipe.rankset.groups`; here the simulator turns that table into its per-rank ``Group``
objects and picks the group a COMM node's ``pg_name`` selects.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from ..rankset.comm import lookup_group
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
    """The group ``pg_name`` selects (``groups`` is keyed by canonical names, the world's ``""``) by
    the rule every stage uses (:func:`~chakra_pipe.rankset.comm.canonical_group`: ``"0"`` is the
    world, ``"03"`` group 3); None when it names no group."""
    return lookup_group(groups, pg_name)
