"""Hypothesis strategies for small rank sets, and the writer that turns one into ``PREFIX.<r>.et`` files.

Why a description first and files second: hypothesis shrinks and prints the description (plain frozen
dataclasses), so a failing case reads as "rank 1's all-reduce in group 1 is 4096 B" rather than bytes.

A set is built like a real SPMD trace and then damaged: a *program* of steps every rank walks (compute,
a collective in some group, a send/recv pair, a CPU op), chained by data or ctrl deps, with optional
METADATA process-group tables and an optional ``PREFIX.comm_groups.json``. Then a few *mutations*
change one node of one rank: its size, collective type, tag, peer, ``pg_name``, node type or
``is_cpu_op`` flag (or drop the attribute), drop it, duplicate its id, swap two communication nodes, add
a dangling data or ctrl dep, a self dep or a dep on a later node (a cycle), add a METADATA node without
inputs, on the CPU, or with a malformed table, or put an NPU outside the set into a comm-group file
group. Group tables can agree or conflict between the file and the METADATA nodes, and a ``pg_name``
can name a group nobody declares. Every set decodes (the robust corpus covers framing).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from pathlib import Path

from hypothesis import strategies as st

from chakra_pipe.et import schema
from chakra_pipe.et.attrs import set_attr
from chakra_pipe.et.framing import write_trace
from chakra_pipe.et.process_groups import format_process_groups

SIZES = (0, 6, 1000, 4096, 12288, 65536, 1 << 20)  # odd ones too: replay must split them over members
COLLECTIVES = (
    schema.ALL_REDUCE,
    schema.ALL_GATHER,
    schema.REDUCE_SCATTER,
    schema.ALL_TO_ALL,
    schema.BROADCAST,
    schema.REDUCE,
    schema.BARRIER,
)
NICE_SIZES = SIZES[3:] * 3 + SIZES  # mostly sizes every group splits; sometimes one it cannot
COMMON = COLLECTIVES[:4] * 3 + COLLECTIVES  # mostly what ASTRA-sim runs; sometimes what it refuses
UNDECLARED_PG = "7"  # a pg_name no table declares


@dataclass(frozen=True)
class NodeSpec:
    """One node of one rank; ``None`` attributes are left out of the record."""

    id: int
    type: int
    data_deps: tuple[int, ...] = ()
    ctrl_deps: tuple[int, ...] = ()
    is_cpu_op: bool | None = False
    duration: int = 0
    comm_type: int | None = None
    comm_size: int | None = None
    pg_name: str | None = None
    peer: int | None = None
    tag: int | None = None
    pg_table: str | None = None  # METADATA inputs.values; None: no ``inputs`` at all

    def describe(self) -> str:
        kind = schema.NODE_TYPE_NAMES.get(self.type, str(self.type)).removesuffix("_NODE")
        parts = [f"{self.id} {kind}"]
        if self.comm_type is not None:
            parts.append(schema.COMM_TYPE_NAMES.get(self.comm_type, str(self.comm_type)))
        if self.comm_size is not None:
            parts.append(f"{self.comm_size}B")
        for label, value in (("pg", self.pg_name), ("peer", self.peer), ("tag", self.tag)):
            if value is not None:
                parts.append(f"{label}={value}")
        if self.is_cpu_op is not False:
            parts.append(f"cpu={self.is_cpu_op}")
        if self.data_deps:
            parts.append(f"data<-{list(self.data_deps)}")
        if self.ctrl_deps:
            parts.append(f"ctrl<-{list(self.ctrl_deps)}")
        if self.pg_table is not None:
            parts.append(f"table={self.pg_table}")
        elif self.type == schema.METADATA_NODE:
            parts.append("no inputs")
        return " ".join(parts)

    def to_node(self) -> schema.Node:
        node = schema.Node(id=self.id, name=f"n{self.id}", type=self.type, duration_micros=self.duration)
        node.data_deps.extend(self.data_deps)
        node.ctrl_deps.extend(self.ctrl_deps)
        if self.is_cpu_op is not None:
            set_attr(node, "is_cpu_op", self.is_cpu_op)
        if self.type == schema.COMP_NODE:
            set_attr(node, "num_ops", 1000)
            set_attr(node, "tensor_size", 4096)
        if self.comm_type is not None:
            set_attr(node, "comm_type", self.comm_type)
        if self.comm_size is not None:
            set_attr(node, "comm_size", self.comm_size)
        if self.pg_name is not None:
            set_attr(node, "pg_name", self.pg_name)
        if self.peer is not None:
            set_attr(node, "comm_dst" if self.type == schema.COMM_SEND_NODE else "comm_src", self.peer)
        if self.tag is not None:
            set_attr(node, "comm_tag", self.tag)
        if self.pg_table is not None:
            node.inputs.values = self.pg_table
        return node


@dataclass(frozen=True)
class RankSetSpec:
    """A whole set: per-rank nodes in file order, and the comm-group file's content (None: no file)."""

    ranks: tuple[tuple[NodeSpec, ...], ...]
    comm_groups: tuple[tuple[str, tuple[int, ...]], ...] | None = None

    def write(self, directory: Path, name: str = "set") -> Path:
        """Write ``directory/name.<r>.et`` (+ ``name.comm_groups.json``); return the prefix."""
        prefix = directory / name
        md = schema.GlobalMetadata(version="0.0.4")
        for r, nodes in enumerate(self.ranks):
            write_trace(f"{prefix}.{r}.et", md, [n.to_node() for n in nodes])
        if self.comm_groups is not None:
            text = json.dumps({gid: list(members) for gid, members in self.comm_groups})
            Path(f"{prefix}.comm_groups.json").write_text(text)
        return prefix

    def describe(self) -> str:
        """A compact, readable form for reports: one line per rank, then the comm-group file."""
        lines = [f"rank {r}: " + "; ".join(n.describe() for n in nodes) for r, nodes in enumerate(self.ranks)]
        if self.comm_groups is not None:
            lines.append(f"comm_groups.json: { {gid: list(m) for gid, m in self.comm_groups} }")
        return "\n".join(lines)


# -- the program every rank walks ---------------------------------------------------------------


@dataclass(frozen=True)
class Group:
    """A process group: ``where`` it is declared ("file", "meta", "both", "conflict" or "nowhere")."""

    name: str
    members: tuple[int, ...]
    where: str


@dataclass(frozen=True)
class Step:
    kind: str  # comp | cpu | coll | p2p
    dep: str  # how it hangs off the rank's previous node: data | ctrl | root
    value: int = 0  # comp/cpu duration, collective/p2p size
    comm_type: int = schema.ALL_REDUCE
    group: str = ""  # "" is the world group (no pg_name attribute)
    src: int = 0
    dst: int = 1
    tag: int = 0


@dataclass(frozen=True)
class Mutation:
    kind: str
    rank: int  # taken modulo the rank count
    node: int  # taken modulo the rank's node count
    value: int = 0


MUTATIONS = (
    "size",
    "comm_type",
    "tag",
    "peer",
    "pg_name",
    "cpu_flag",
    "drop",
    "swap",
    "dangling_data",
    "dangling_ctrl",
    "self_dep",
    "meta_without_inputs",
    "meta_on_cpu",
    "no_cpu_attr",
    "retype",
    "duplicate_id",
    "back_dep",
    "bad_table",
    "group_outside",
)
RETYPES = (  # what a node can be turned into: the other node types, and one outside the enum
    schema.INVALID_NODE,
    schema.METADATA_NODE,
    schema.MEM_LOAD_NODE,
    schema.MEM_STORE_NODE,
    42,
)
# METADATA tables ASTRA-sim cannot read: not JSON, not the ['...'] shape, a non-integer pg_name, a rank
# outside the set.
BAD_TABLES = ("['not json']", "[{}]", '[\'[{"pg_name":"x","ranks":[0]}]\']', '[\'[{"pg_name":"1","ranks":[0,9]}]\']')


@st.composite
def groups(draw, world: int) -> tuple[Group, ...]:
    out = []
    for k in range(draw(st.integers(0, 2))):
        members = draw(st.lists(st.integers(0, world - 1), min_size=2, max_size=world, unique=True))
        where = draw(st.sampled_from(("file", "meta", "both", "conflict", "nowhere")))
        out.append(Group(str(k + 1), tuple(sorted(members)), where))
    return tuple(out)


@st.composite
def steps(draw, world: int, declared: tuple[Group, ...]) -> tuple[Step, ...]:
    names = [""] + [g.name for g in declared]
    out = []
    for _ in range(draw(st.integers(1, 6))):
        kind = draw(st.sampled_from(("comp", "cpu", "coll", "coll", "p2p")))
        dep = draw(st.sampled_from(("data", "data", "data", "ctrl", "root")))
        if kind in ("comp", "cpu"):
            out.append(Step(kind, dep, value=draw(st.integers(0, 5))))
        elif kind == "coll":
            out.append(
                Step(
                    kind,
                    dep,
                    value=draw(st.sampled_from(NICE_SIZES)),
                    comm_type=draw(st.sampled_from(COMMON)),
                    group=draw(st.sampled_from(names)),
                )
            )
        else:
            src = draw(st.integers(0, world - 1))
            dst = draw(st.integers(0, world - 1).filter(lambda d, s=src: d != s))
            out.append(
                Step(kind, dep, value=draw(st.sampled_from(NICE_SIZES)), src=src, dst=dst, tag=draw(st.integers(0, 2)))
            )
    return tuple(out)


def _pg_table(world: int, declared: tuple[Group, ...], rank: int) -> str | None:
    """The METADATA table rank ``rank`` carries: the groups declared in METADATA, world first.

    Rank 0 always carries one; the others only when it declares a group besides the world, so some
    sets have a table on one rank only (as a partial capture would)."""
    table = [{"pg_name": "0", "ranks": list(range(world))}]
    for g in declared:
        if g.where in ("meta", "both"):
            table.append({"pg_name": g.name, "ranks": list(g.members)})
        elif g.where == "conflict":  # the file says g.members; METADATA says the complement (or a rotation)
            other = tuple(sorted({(m + 1) % world for m in g.members}))
            if other == g.members:
                other = tuple(range(world))[: max(2, len(g.members) - 1)]
            table.append({"pg_name": g.name, "ranks": list(other)})
    return format_process_groups(table) if len(table) > 1 or rank == 0 else None


def materialize(world: int, declared: tuple[Group, ...], program: tuple[Step, ...], with_meta: bool) -> RankSetSpec:
    """Every rank's nodes for ``program``: ids 1.. in program order, METADATA (id 0) first when asked."""
    members = {g.name: g.members for g in declared} | {"": tuple(range(world))}
    ranks = []
    for r in range(world):
        nodes: list[NodeSpec] = []
        table = _pg_table(world, declared, r) if with_meta else None
        if table is not None:
            nodes.append(NodeSpec(0, schema.METADATA_NODE, is_cpu_op=False, pg_table=table))
        prev: int | None = None
        for k, s in enumerate(program, start=1):
            data = (prev,) if prev is not None and s.dep == "data" else ()
            ctrl = (prev,) if prev is not None and s.dep == "ctrl" else ()
            node: NodeSpec | None = None
            if s.kind == "comp":
                node = NodeSpec(k, schema.COMP_NODE, data, ctrl, duration=s.value)
            elif s.kind == "cpu":
                node = NodeSpec(k, schema.COMP_NODE, data, ctrl, is_cpu_op=True, duration=s.value)
            elif s.kind == "coll" and r in members[s.group]:
                node = NodeSpec(
                    k,
                    schema.COMM_COLL_NODE,
                    data,
                    ctrl,
                    comm_type=s.comm_type,
                    comm_size=s.value,
                    pg_name=s.group or None,
                )
            elif s.kind == "p2p" and r in (s.src, s.dst):
                send = r == s.src
                node = NodeSpec(
                    k,
                    schema.COMM_SEND_NODE if send else schema.COMM_RECV_NODE,
                    data,
                    ctrl,
                    comm_size=s.value,
                    peer=s.dst if send else s.src,
                    tag=s.tag,
                )
            if node is not None:
                nodes.append(node)
                prev = k
        ranks.append(tuple(nodes))
    in_file = tuple((g.name, g.members) for g in declared if g.where in ("file", "both", "conflict"))
    return RankSetSpec(tuple(ranks), in_file or None)


def mutate(spec: RankSetSpec, m: Mutation) -> RankSetSpec:
    """``spec`` with one node of one rank changed as ``m`` says (a no-op where it does not apply)."""
    world = len(spec.ranks)
    r = m.rank % world
    nodes = list(spec.ranks[r])
    if m.kind == "meta_without_inputs":
        nodes.insert(0, NodeSpec(100 + len(nodes), schema.METADATA_NODE, is_cpu_op=False))
        return _with_rank(spec, r, nodes)
    if m.kind == "bad_table":
        nodes.insert(
            0, NodeSpec(300 + len(nodes), schema.METADATA_NODE, pg_table=BAD_TABLES[m.value % len(BAD_TABLES)])
        )
        return _with_rank(spec, r, nodes)
    if m.kind == "group_outside":  # the comm-group file lists an NPU the set does not have
        groups = dict(spec.comm_groups or ())
        gid = str(1 + m.value % 2)
        groups[gid] = (*groups.get(gid, (0,)), world + m.value % 3)
        return replace(spec, comm_groups=tuple(sorted(groups.items())))
    if not nodes:
        return spec
    k = m.node % len(nodes)
    n = nodes[k]
    comm = n.type in (schema.COMM_COLL_NODE, schema.COMM_SEND_NODE, schema.COMM_RECV_NODE)
    if m.kind == "size" and comm:
        nodes[k] = replace(n, comm_size=SIZES[m.value % len(SIZES)])
    elif m.kind == "comm_type" and n.type == schema.COMM_COLL_NODE:
        nodes[k] = replace(n, comm_type=COLLECTIVES[m.value % len(COLLECTIVES)])
    elif m.kind == "tag" and n.tag is not None:
        nodes[k] = replace(n, tag=n.tag + 1 + m.value % 2)
    elif m.kind == "peer" and n.peer is not None:
        nodes[k] = replace(n, peer=m.value % (world + 1))  # itself, another rank, or outside the set
    elif m.kind == "pg_name" and n.type == schema.COMM_COLL_NODE:
        nodes[k] = replace(n, pg_name=("0", "1", "2", UNDECLARED_PG)[m.value % 4])
    elif m.kind == "cpu_flag":
        nodes[k] = replace(n, is_cpu_op=not n.is_cpu_op)
    elif m.kind == "no_cpu_attr":
        nodes[k] = replace(n, is_cpu_op=None)
    elif m.kind == "meta_on_cpu":
        nodes.insert(
            0,
            NodeSpec(
                200 + len(nodes),
                schema.METADATA_NODE,
                is_cpu_op=True,
                pg_table=format_process_groups([{"pg_name": "0", "ranks": list(range(world))}]),
            ),
        )
    elif m.kind == "drop":
        gone = nodes.pop(k)
        nodes = [_relink(x, gone) for x in nodes]
    elif m.kind == "swap":
        others = [j for j, x in enumerate(nodes) if j != k and x.type == n.type and comm]
        if others:
            j = others[m.value % len(others)]
            a, b = nodes[k], nodes[j]
            nodes[k] = replace(b, id=a.id, data_deps=a.data_deps, ctrl_deps=a.ctrl_deps)
            nodes[j] = replace(a, id=b.id, data_deps=b.data_deps, ctrl_deps=b.ctrl_deps)
    elif m.kind == "dangling_data":
        nodes[k] = replace(n, data_deps=(*n.data_deps, 999))
    elif m.kind == "dangling_ctrl":
        nodes[k] = replace(n, ctrl_deps=(*n.ctrl_deps, 998))
    elif m.kind == "retype":
        nodes[k] = replace(n, type=RETYPES[m.value % len(RETYPES)])
    elif m.kind == "duplicate_id":
        nodes.insert(k, replace(n, data_deps=(), ctrl_deps=()))
    elif m.kind == "back_dep":  # a dep on a later node of the chain: a cycle when the chain connects them
        later = [x.id for x in nodes[k + 1 :]]
        if later:
            nodes[k] = replace(n, data_deps=(*n.data_deps, later[m.value % len(later)]))
    elif m.kind == "self_dep":
        nodes[k] = replace(n, data_deps=(*n.data_deps, n.id))
    return _with_rank(spec, r, nodes)


def _relink(node: NodeSpec, gone: NodeSpec) -> NodeSpec:
    """Dropping a node keeps the chain: its children depend on its parents instead."""
    if gone.id in node.data_deps:
        node = replace(node, data_deps=tuple(d for d in node.data_deps if d != gone.id) + gone.data_deps)
    if gone.id in node.ctrl_deps:
        node = replace(node, ctrl_deps=tuple(d for d in node.ctrl_deps if d != gone.id) + gone.ctrl_deps)
    return node


def _with_rank(spec: RankSetSpec, r: int, nodes: list[NodeSpec]) -> RankSetSpec:
    return replace(spec, ranks=tuple(tuple(nodes) if i == r else old for i, old in enumerate(spec.ranks)))


@st.composite
def rank_sets(draw) -> RankSetSpec:
    """A 2-4 rank set: groups, a program, METADATA tables or not, then 0-3 mutations."""
    world = draw(st.integers(2, 4))
    declared = draw(groups(world))
    program = draw(steps(world, declared))
    spec = materialize(world, declared, program, with_meta=draw(st.booleans()))
    for m in draw(
        st.lists(
            st.builds(
                Mutation,
                kind=st.sampled_from(MUTATIONS),
                rank=st.integers(0, 3),
                node=st.integers(0, 8),
                value=st.integers(0, 7),
            ),
            max_size=3,
        )
    ):
        spec = mutate(spec, m)
    return spec
