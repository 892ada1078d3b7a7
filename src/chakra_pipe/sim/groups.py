"""Communicator groups as the simulator resolves them (spec §2.5): comm-group file, METADATA, ``pg_name``.

Every group rule of ``sim`` lives here: the comm-group file's groups indexed by member, the groups a
METADATA node creates, and the group a COMM node's ``pg_name`` selects.
"""

from __future__ import annotations

from ..errors import ConfigError
from ..et.process_groups import parse_process_groups
from ..et.traceset import WORLD_PG_NAMES
from .system.sys import Group


class GroupTable:
    """Communicator groups checked once and indexed by member, so each rank's set costs O(its groups).

    Member lists are shared between the ranks' ``Group`` objects (they are never modified); the
    per-rank state (stream counter, plans) stays per rank as ASTRA-sim keeps it.
    """

    def __init__(self, npus: int, comm_groups: dict[int, list[int]] | None, source: str | None):
        self.world = list(range(npus))
        self.by_rank: list[list[tuple[int, list[int]]]] = [[] for _ in range(npus)]
        for gid, members in sorted((comm_groups or {}).items()):
            bad = [m for m in members if not 0 <= m < npus]
            if bad:
                raise ConfigError(
                    f"lists NPU {bad[0]} but the network has {npus} NPUs (0..{npus - 1})",
                    file=source,
                    where=f"group {gid}",
                )
            shared = list(members)
            for m in dict.fromkeys(shared):
                self.by_rank[m].append((gid, shared))

    def groups_for(self, rank: int) -> dict[str, Group]:
        groups = {"": Group(1, self.world, "")}
        for gid, members in self.by_rank[rank]:
            groups[str(gid)] = Group(int(gid), members, str(gid))
        return groups


def metadata_groups(node, npus: int) -> tuple[dict[str, Group], str | None]:
    """The groups a METADATA node's ``inputs.values`` creates (id ``pg + 1``; empty ranks = every NPU),
    or the problem with the text. A node without the text creates none (skipped, as upstream)."""
    text = node.inputs.values if node.HasField("inputs") else ""
    if not text:
        return {}, None
    parsed, problem = parse_process_groups(text)
    if problem:
        return {}, problem
    return {name: Group(int(name) + 1, ranks or list(range(npus)), name) for name, ranks in parsed.items()}, None


def group_of(groups: dict[str, Group], pg_name: str) -> Group | None:
    """The group ``pg_name`` selects: a known group, else the default group for the world names;
    None when it names no group."""
    group = groups.get(pg_name)
    if group is None and pg_name in WORLD_PG_NAMES:
        return groups[""]
    return group
