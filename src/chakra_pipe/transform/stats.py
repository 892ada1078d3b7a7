"""What one transform changed: the ``stats`` record written beside the output after every op.

Totals are measured on the whole set before and after the op (not trusted from the op), so the
record also catches an op that changed more than it meant to.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from ..et import schema
from ..et.attrs import get_int
from .rankset import RankSet

COMM_NODE_TYPES = frozenset({schema.COMM_COLL_NODE, schema.COMM_SEND_NODE, schema.COMM_RECV_NODE})


@dataclass(frozen=True)
class Totals:
    """Size of a set along the axes transforms change."""

    ranks: int
    nodes: int
    comp_micros: int
    comm_nodes: int
    comm_bytes: int

    @classmethod
    def of(cls, rs: RankSet) -> Totals:
        nodes = comp = comm_nodes = comm_bytes = 0
        for rank_nodes in rs.nodes:
            nodes += len(rank_nodes)
            for node in rank_nodes:
                if node.type == schema.COMP_NODE:
                    comp += node.duration_micros
                elif node.type in COMM_NODE_TYPES:
                    comm_nodes += 1
                    comm_bytes += get_int(node, "comm_size", 0) or 0
        return cls(len(rs.nodes), nodes, comp, comm_nodes, comm_bytes)


@dataclass(frozen=True)
class OpStats:
    """One op's entry in ``OUT_PREFIX.transform_stats.json``."""

    op: str
    params: dict
    nodes_touched: int
    before: Totals
    after: Totals

    def to_json(self) -> dict:
        return {
            "op": self.op,
            "params": self.params,
            "nodes_touched": self.nodes_touched,
            "before": asdict(self.before),
            "after": asdict(self.after),
        }
