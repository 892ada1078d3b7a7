"""What every communication node asks for: its comm spec, resolved once against the group table.

The per-node problems (missing or non-integer attributes, CPU-side communication, a collective ASTRA-
sim cannot chunk) are the ``comm-node`` rule of :mod:`.file_rules`; this module turns the nodes that
passed into :class:`CommSpec` records the cross-rank matching, the finish proof and the replay plan
read. One key per point-to-point channel, ``(src, dst, tag)``, is used everywhere: messages on a
channel pair up in issue order, and a pair whose sizes differ is a mismatch on that channel.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..et import schema
from ..et.graph import TraceGraph
from ..et.traceset import WORLD_PG_NAMES

KIND_COLL, KIND_SEND, KIND_RECV = "coll", "send", "recv"
WORLD = ""  # canonical name of the default group ("" and "0" both select it, §2.5)

# Attributes a communication node needs, by node type (chakra-format.md §9 items 15 and 17).
COMM_REQUIRED = {
    schema.COMM_COLL_NODE: ("comm_type", "comm_size"),
    schema.COMM_SEND_NODE: ("comm_dst", "comm_tag", "comm_size"),
    schema.COMM_RECV_NODE: ("comm_src", "comm_tag", "comm_size"),
}


def canonical_group(pg_name: str) -> str:
    """The group-table key a ``pg_name`` selects: ``""`` and ``"0"`` are both the world group."""
    return WORLD if pg_name in WORLD_PG_NAMES else pg_name


@dataclass(frozen=True)
class CommSpec:
    """One communication call of one rank.

    ``nbytes`` is the recorded ``comm_size``; ``group`` the canonical group name and ``members`` its
    global ranks in listed order (collectives); ``channel`` is ``(src, dst, tag)`` (p2p).
    """

    kind: str
    comm_type: int = -1
    nbytes: int = 0
    group: str = WORLD
    members: tuple[int, ...] = ()
    channel: tuple[int, int, int] = (-1, -1, 0)

    @property
    def peer(self) -> int:
        """The other end of a send or receive."""
        return self.channel[1] if self.kind == KIND_SEND else self.channel[0]

    @property
    def tag(self) -> int:
        return self.channel[2]

    def describe(self) -> str:
        if self.kind == KIND_COLL:
            name = schema.COMM_TYPE_NAMES.get(self.comm_type, f"comm_type {self.comm_type}")
            return f"{name} of {self.nbytes} B"
        return f"{self.kind} of {self.nbytes} B (tag {self.tag})"


def comm_specs(g: TraceGraph, rank: int, usable: list[int], groups: dict[str, tuple[int, ...]]) -> dict[int, CommSpec]:
    """Specs of the communication records ``usable`` (those without a ``comm-node`` problem).

    A collective whose ``pg_name`` names no group gets no spec (that is the ``pg-name`` rule); a
    send's ``comm_src`` and a receive's ``comm_dst`` default to the rank, as in ASTRA-sim.
    """
    ctype, csize = g.int_attr("comm_type", -1), g.exact_ints("comm_size")
    src, dst, tag = g.int_attr("comm_src", rank), g.int_attr("comm_dst", rank), g.int_attr("comm_tag", 0)
    types, pg = g.types, g.pg_name
    out: dict[int, CommSpec] = {}
    for i in usable:
        t = int(types[i])
        if t == schema.COMM_COLL_NODE:
            name = canonical_group(pg.get(i, ""))
            if name in groups:
                out[i] = CommSpec(KIND_COLL, int(ctype[i]), int(csize[i]), name, groups[name])
        else:
            kind = KIND_SEND if t == schema.COMM_SEND_NODE else KIND_RECV
            out[i] = CommSpec(kind, nbytes=int(csize[i]), channel=(int(src[i]), int(dst[i]), int(tag[i])))
    return out
