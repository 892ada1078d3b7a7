"""Communicator groups of a rank set: the comm-group file, METADATA tables and ``pg_name``, one rule.

Precedence (one rule, every stage): the group names form one namespace.

* ``""`` and ``"0"`` are always the world group, all ranks in rank order (§2.5).
* The comm-group file (``--comm-group-configuration`` or ``PREFIX.comm_groups.json``) defines group
  ``str(id)``; a PyTorch METADATA node defines group ``pg_name`` (empty ``ranks``: every rank).
* A name defined more than once — by the file and a METADATA node, or by METADATA nodes of two
  ranks — must have the same members everywhere. A conflict is a ``group-members`` error naming the
  METADATA node (and the comm-group file when the file is the other definition): ASTRA-sim would
  build different rings on different ranks and fail or hang on the group's first collective.
* Members must be ranks of the set: outside it, the file's group is a ``group-members`` error on the
  file, a METADATA group an ``incomplete-set`` error on the defining node.

The simulator creates a METADATA group when its node runs (ASTRA-sim's id ``pg_name + 1``) and a
file group at start (its id), with the members this table resolves.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from .comm import WORLD, canonical_group
from .problems import ERROR, Finding

SHOW_IDS = 10  # ids quoted in one message


def id_list(ids, total: int | None = None) -> str:
    """``"1, 2, 3"`` or ``"1, 2, … (N in all)"`` — messages stay one short line."""
    ids = [int(i) for i in ids]
    total = len(ids) if total is None else total
    head = ", ".join(map(str, ids[:SHOW_IDS]))
    return head if total <= SHOW_IDS else f"{head}, … ({total} in all)"


@dataclass
class GroupTable:
    """Members of every group by canonical name, and which METADATA nodes define which names."""

    members: dict[str, tuple[int, ...]]
    from_file: dict[int, tuple[int, ...]]  # comm-group file id -> members (created at start)
    metadata: list[dict[int, list[str]]] = field(default_factory=list)  # per rank: record -> names

    def known(self) -> list[str]:
        """Group names a ``pg_name`` may use, sorted for messages (world names included)."""
        return sorted({*self.members, "0"} - {WORLD}, key=lambda s: (len(s), s))


def resolve_groups(
    files: list[str],
    node_ids: Sequence[Sequence[int] | np.ndarray],
    metadata_tables: list[dict[int, dict[str, list[int]]]],
    comm_groups: dict[int, list[int]] | None,
    groups_file: str,
) -> tuple[GroupTable, list[Finding]]:
    """The one group table of a rank set, and the ``group-members``/``incomplete-set`` problems.

    ``node_ids[r]`` are rank ``r``'s node ids by record index (a TraceGraph's ``ids`` column, or the
    ids of the protobuf nodes a transform holds); ``metadata_tables[r]`` maps each METADATA record
    index of rank ``r`` to its parsed process-group table (nodes whose table does not parse are
    ``metadata-pg`` problems and are left out).
    """
    n = len(node_ids)
    world = tuple(range(n))
    findings: list[Finding] = []
    members: dict[str, tuple[int, ...]] = {WORLD: world}
    defined: dict[str, str] = {}  # name -> who defined it first, for messages
    from_file: dict[int, tuple[int, ...]] = {}
    for gid, ranks in sorted((comm_groups or {}).items()):
        outside = [m for m in ranks if not 0 <= m < n]
        if outside:
            findings.append(
                Finding(
                    groups_file,
                    None,
                    "group-members",
                    ERROR,
                    f"group '{gid}' lists NPU {id_list(outside)}, outside the {n}-rank set (0..{n - 1})",
                )
            )
            continue
        from_file[gid] = tuple(ranks)
        members[str(gid)] = tuple(ranks)
        defined[str(gid)] = f"the comm-group file {groups_file}"
    metadata: list[dict[int, list[str]]] = []
    for r, tables in enumerate(metadata_tables):
        by_node: dict[int, list[str]] = {}
        for i, table in sorted(tables.items()):
            node = int(node_ids[r][i])
            names: list[str] = []
            for raw, ranks in table.items():
                name = canonical_group(raw)
                if name == WORLD:
                    continue
                mine = tuple(ranks) or world
                outside = [m for m in mine if m >= n]
                if outside:
                    findings.append(
                        Finding(
                            files[r],
                            node,
                            "incomplete-set",
                            ERROR,
                            f"incomplete rank set: METADATA group {name!r} lists rank(s) {id_list(outside)} "
                            f"but the set has {n} rank file(s); its collectives could never complete",
                        )
                    )
                    continue
                old = members.setdefault(name, mine)
                if old != mine:
                    findings.append(
                        Finding(
                            files[r],
                            node,
                            "group-members",
                            ERROR,
                            f"METADATA defines group {name!r} as ranks {id_list(mine)} but {defined[name]} "
                            f"defines it as {id_list(old)}",
                        )
                    )
                    continue
                defined.setdefault(name, f"rank {r}")
                names.append(name)
            by_node[i] = names
        metadata.append(by_node)
    return GroupTable(members, from_file, metadata), findings
