"""What each rank replays: per-node actions, slots, dependencies and process groups (no torch).

The plan is built once in the launcher from the :class:`~chakra_pipe.et.TraceSet` and shipped to
the rank processes, so every check that does not need a device runs before anything is spawned.
Those checks are :mod:`chakra_pipe.rankset`'s, the rules validate and simulate apply: a set they
refuse is refused here with the same problem lines (exit 2), a set that cannot finish with the same
stuck nodes (exit 3). Only what torch.distributed adds on top is checked here: a rank cannot send to
itself. (A reduce-scatter whose input does not split evenly over its group has its input rounded up to
whole chunks, as ASTRA-sim rounds its last chunk up.)

Why a *static* order for the communication slot: ``torch.distributed`` requires every member of a
process group to issue its collectives in the same order. ASTRA-sim picks among ready nodes by
ascending id at each (simulated) instant, which is deterministic there but timing dependent on
real devices; the rank set's issue order (topological, ascending-id tie-break) is the same for every
rank of an SPMD trace and for any capture whose ids follow program order, so the comm slot walks
that order. Compute and CPU slots have no cross-rank constraint and issue dynamically as the
simulator does.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..digits import is_int_text
from ..errors import InputError
from ..et import schema
from ..et.traceset import TraceSet
from ..rankset import analyze
from ..rankset import comm as rs_comm
from ..rankset.analysis import REPLAY_TOLERATES
from ..rankset.slots import SLOT_COMM, SLOT_CPU, SLOT_NAMES, SLOT_NONE
from ..rankset.slots import SLOT_GPU as SLOT_COMP

__all__ = ["SLOT_COMM", "SLOT_COMP", "SLOT_CPU", "SLOT_NAMES", "SLOT_NONE"]

# Actions a node turns into (communication actions are rankset's comm-spec kinds).
ACT_NOOP, ACT_COMPUTE = "noop", "compute"
ACT_COLL, ACT_SEND, ACT_RECV = rs_comm.KIND_COLL, rs_comm.KIND_SEND, rs_comm.KIND_RECV
WORLD = rs_comm.WORLD

_SPLIT_EVENLY = frozenset({schema.REDUCE_SCATTER, schema.REDUCE_SCATTER_BLOCK})


@dataclass(frozen=True)
class CommSpec(rs_comm.CommSpec):
    """A rank set's comm spec plus how to move its bytes with torch: ``elem_bytes`` is 4 (float32)
    when the size allows it, else 1 (uint8), so the byte count at the process-group call is exactly
    ``nbytes``. The first member of ``members`` is the root of rooted collectives (Chakra records none).
    """

    elem_bytes: int = 1


@dataclass
class RankPlan:
    """One rank's DAG in replay form; index ``i`` is the i-th node record of the rank file."""

    rank: int
    file: str
    ids: list[int]
    names: list[str]
    types: list[int]
    slots: list[int]
    actions: list[str]
    duration_ns: list[int]
    num_ops: list[int]
    comm: dict[int, CommSpec]
    parents: list[list[int]]
    children: list[list[int]] = field(default_factory=list)
    order: list[int] = field(default_factory=list)  # the rank's issue order (rankset's Kahn order)
    comm_order: list[int] = field(default_factory=list)  # its comm-slot records, in that order

    def __len__(self) -> int:
        return len(self.ids)

    def describe(self, i: int) -> str:
        """``node <id> '<name>' (<TYPE>[ <COLL>])`` for error messages."""
        kind = schema.NODE_TYPE_NAMES.get(self.types[i], str(self.types[i]))
        spec = self.comm.get(i)
        if spec is not None and spec.kind == ACT_COLL:
            kind += " " + schema.COMM_TYPE_NAMES.get(spec.comm_type, str(spec.comm_type))
        return f"node {self.ids[i]} '{self.names[i]}' ({kind})"


@dataclass
class ReplayPlan:
    """All ranks plus the process groups every rank must create, in creation order."""

    prefix: str
    ranks: list[RankPlan]
    groups: dict[str, tuple[int, ...]]
    sha256: str

    @property
    def world_size(self) -> int:
        return len(self.ranks)


def build_plan(ts: TraceSet) -> ReplayPlan:
    """Turn a rank set into a checked replay plan (raises ``SetRefused``/``SetStuck``/``InputError``)."""
    analysis = analyze(ts)
    analysis.refuse(REPLAY_TOLERATES)
    ranks = [_rank_plan(view, slots) for view, slots in zip(analysis.ranks, analysis.slots)]
    members = analysis.groups.members
    ordered = dict(sorted(((k, v) for k, v in members.items() if k != WORLD), key=lambda kv: _group_key(kv[0])))
    return ReplayPlan(ts.prefix, ranks, ordered, ts.sha256())


def _group_key(name: str) -> tuple[int, int, str]:
    return (0, int(name), "") if is_int_text(name) else (1, 0, name)


def _rank_plan(view, slots: list[int]) -> RankPlan:
    g, rank, path = view.graph, view.rank, view.file
    n = len(g)
    ids = [int(x) for x in g.ids]
    types = [int(t) for t in g.types]
    actions = [ACT_COMPUTE if t == schema.COMP_NODE else ACT_NOOP for t in types]
    comm: dict[int, CommSpec] = {}
    for i, spec in view.specs.items():
        actions[i] = spec.kind
        comm[i] = _torch_spec(spec, rank, path, f"node {ids[i]}")
    p = view.result.parents
    ptr, par = p.ptr.tolist(), p.parents.tolist()
    parents = [list(dict.fromkeys(par[ptr[i] : ptr[i + 1]])) for i in range(n)]  # data ∪ ctrl, each once
    children: list[list[int]] = [[] for _ in range(n)]
    for i, ps in enumerate(parents):
        for q in ps:
            children[q].append(i)
    order = view.result.issue_order.tolist()
    return RankPlan(
        rank,
        path,
        ids,
        [g.name(i) for i in range(n)],
        types,
        slots,
        actions,
        [int(d) * 1000 for d in g.duration_micros],
        [int(x) for x in g.int_attr("num_ops", 0)],
        comm,
        parents,
        children,
        order,
        [i for i in order if slots[i] == SLOT_COMM],
    )


def _torch_spec(spec: rs_comm.CommSpec, rank: int, path: str, where: str) -> CommSpec:
    """The spec with its torch element size; refuses what torch.distributed cannot express."""
    if spec.kind != ACT_COLL and spec.peer == rank:
        raise InputError(f"{spec.kind} with rank {rank} itself (torch.distributed cannot)", file=path, where=where)
    # a reduce-scatter's input splits into one chunk per member: float32 only when each chunk is whole
    # floats (an input that does not split evenly is rounded up to whole chunks by the engine)
    unit = 4 * (len(spec.members) if spec.kind == ACT_COLL and spec.comm_type in _SPLIT_EVENLY else 1)
    return CommSpec(
        spec.kind,
        spec.comm_type,
        spec.nbytes,
        spec.group,
        spec.members,
        spec.channel,
        elem_bytes=4 if spec.nbytes % unit == 0 else 1,
    )
