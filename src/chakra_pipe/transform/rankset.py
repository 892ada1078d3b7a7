"""A rank set held in memory while transforms edit it, and its atomic, reproducible writer.

Why in memory: a transform chain must fail before anything is written (a refused op never leaves
a half-rewritten set), and ``dp --to`` builds ranks that exist only after the whole set is read.
Groups are held by ``pg_name`` (the key both ``PREFIX.comm_groups.json`` and METADATA tables use).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import InputError
from ..et import schema
from ..et.attrs import set_attr
from ..et.framing import read_trace, write_trace
from ..et.process_groups import parse_process_groups
from ..et.traceset import (
    COMM_GROUPS_SUFFIX,
    clear_rank_set,
    files_sha256,
    load_comm_groups,
    rank_files,
    write_comm_groups,
    write_order,
)
from ..rankset.comm import WORLD, canonical_group
from ..rankset.groups import resolve_groups

PROVENANCE_ATTR = "chakra_pipe.transform"


def _node_where(node: int | None) -> str | None:
    return f"node {node}" if node is not None else None


@dataclass
class RankSet:
    """Per-rank GlobalMetadata and nodes, plus the set's communicator groups.

    ``comm_groups`` maps pg_name → members as ``PREFIX.comm_groups.json`` lists them (None when the
    set had no such file, so none is written back); ``tables`` maps pg_name → members as the
    METADATA process-group tables declare them (an empty ``ranks`` list is the whole world).
    """

    prefix: str
    metadata: list[Any]  # GlobalMetadata messages
    nodes: list[list[Any]]  # Node messages
    comm_groups: dict[str, list[int]] | None
    sha256: str
    tables: dict[str, list[int]] = field(default_factory=dict)
    descs: dict[str, str] = field(default_factory=dict)
    # per rank: METADATA record index -> its process-group table (what ``tables`` resolves from)
    metadata_tables: list[dict[int, dict[str, list[int]]]] = field(default_factory=list)

    @classmethod
    def load(cls, prefix: str) -> RankSet:
        files = rank_files(prefix)
        cg_path = Path(prefix + COMM_GROUPS_SUFFIX)
        companion = cg_path if cg_path.is_file() else None
        metadata, nodes = [], []
        for path in files:
            md, ns = read_trace(path)
            metadata.append(md)
            nodes.append(ns)
        groups = {str(k): v for k, v in load_comm_groups(cg_path).items()} if companion else None
        rs = cls(prefix, metadata, nodes, groups, files_sha256(files, companion))
        rs.reread_tables()
        return rs

    def __len__(self) -> int:
        return len(self.nodes)

    def reread_tables(self) -> None:
        """Collect every METADATA table (and its ``pg_desc`` labels); conflicting tables are refused.

        Groups resolve by :func:`chakra_pipe.rankset.groups.resolve_groups`, the one rule validate,
        simulate and replay apply, so a transform never accepts a group table they refuse.
        """
        self.metadata_tables = []
        for nodes in self.nodes:
            per_node: dict[int, dict[str, list[int]]] = {}
            for k, node in enumerate(nodes):
                if node.type != schema.METADATA_NODE or not node.inputs.values.startswith("['"):
                    continue
                table, problem = parse_process_groups(node.inputs.values)
                if problem:
                    continue  # not a process-group table; the validator reports malformed ones
                per_node[k] = table
                for entry in json.loads(node.inputs.values[2:-2]):
                    if isinstance(entry.get("pg_desc"), str):
                        self.descs.setdefault(canonical_group(entry["pg_name"]), entry["pg_desc"])
            self.metadata_tables.append(per_node)
        self.tables = self._resolve(None)

    def groups(self) -> dict[str, list[int]]:
        """Every named group of the set (comm-group file and METADATA tables, which must agree)."""
        return self._resolve({int(k): v for k, v in (self.comm_groups or {}).items()})

    def _resolve(self, comm_groups: dict[int, list[int]] | None) -> dict[str, list[int]]:
        files = [f"{self.prefix}.{r}.et" for r in range(len(self))]
        ids = [[n.id for n in nodes] for nodes in self.nodes]
        cg_file = self.prefix + COMM_GROUPS_SUFFIX
        table, problems = resolve_groups(files, ids, self.metadata_tables, comm_groups, cg_file)
        if problems:
            first = problems[0]
            raise InputError(f"{first.rule}: {first.message}", file=first.file, where=_node_where(first.node))
        return {name: list(members) for name, members in table.members.items() if name != WORLD}

    def write(self, prefix: str, provenance: dict) -> list[Path]:
        """Write the set at ``prefix`` the way the generators do: old set cleared, companion file first,
        rank 0 last, every file atomically; each GlobalMetadata gains the provenance note."""
        note = json.dumps(provenance, sort_keys=True, separators=(",", ":"))
        clear_rank_set(prefix)
        if self.comm_groups is not None:
            write_comm_groups(prefix + COMM_GROUPS_SUFFIX, self.comm_groups)
        for rank in write_order(len(self)):
            md = schema.GlobalMetadata()
            md.CopyFrom(self.metadata[rank])
            set_attr(md, PROVENANCE_ATTR, note)
            write_trace(f"{prefix}.{rank}.et", md, self.nodes[rank])
        return [Path(f"{prefix}.{rank}.et") for rank in range(len(self))]
