"""What each rank replays: per-node actions, slots, dependencies and process groups (no torch).

The plan is built once in the launcher from the :class:`~chakra_pipe.et.TraceSet` and shipped to
the rank processes, so every check that does not need a device runs before anything is spawned:
dangling or cyclic dependencies, unknown process groups, sizes a collective cannot split, and
collectives or point-to-point messages whose sequences do not match across ranks (a real
``torch.distributed`` run would hang on those, so we refuse them up front with the node named).

Why a *static* order for the communication slot: ``torch.distributed`` requires every member of a
process group to issue its collectives in the same order. ASTRA-sim picks among ready nodes by
ascending id at each (simulated) instant, which is deterministic there but timing dependent on
real devices; a topological order with ascending-id tie-break is the same for every rank of an
SPMD trace and for any capture whose ids follow program order, so the comm slot walks that order.
Compute and CPU slots have no cross-rank constraint and issue dynamically as the simulator does.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass, field

import numpy as np

from ..digits import is_int_text
from ..errors import InputError, StuckError
from ..et import schema
from ..et.process_groups import parse_process_groups
from ..et.traceset import WORLD_PG_NAMES, TraceSet

# Slots (astra-sim-semantics.md §2.3). RECV never occupies one.
SLOT_CPU, SLOT_COMP, SLOT_COMM, SLOT_NONE = 0, 1, 2, 3
SLOT_NAMES = ("cpu", "compute", "comm", "none")

# Actions a node turns into.
ACT_NOOP, ACT_COMPUTE, ACT_COLL, ACT_SEND, ACT_RECV = "noop", "compute", "coll", "send", "recv"

WORLD = ""  # canonical name of the default group ("" and "0" both select it, §2.5)

# Collective kinds torch.distributed offers, by CollectiveCommType value.
SUPPORTED_COLLECTIVES = frozenset(
    {
        schema.ALL_REDUCE,
        schema.REDUCE,
        schema.ALL_GATHER,
        schema.GATHER,
        schema.SCATTER,
        schema.BROADCAST,
        schema.ALL_TO_ALL,
        schema.REDUCE_SCATTER,
        schema.REDUCE_SCATTER_BLOCK,
        schema.BARRIER,
    }
)
_SPLIT_EVENLY = frozenset({schema.REDUCE_SCATTER, schema.REDUCE_SCATTER_BLOCK})


@dataclass(frozen=True)
class CommSpec:
    """One communication call. ``nbytes`` is the recorded ``comm_size`` (see ``busbw`` for meanings).

    ``group`` is the canonical group name, ``members`` its global ranks in listed order (the first
    member is the root of rooted collectives: Chakra records no root). ``peer``/``tag`` are for p2p.
    ``elem_bytes`` is 4 (float32) when the size allows it, else 1 (uint8), so the byte count at the
    process-group call is exactly ``nbytes``.
    """

    kind: str
    comm_type: int = -1
    nbytes: int = 0
    group: str = WORLD
    members: tuple[int, ...] = ()
    peer: int = -1
    tag: int = 0
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
    comm_order: list[int] = field(default_factory=list)

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
    """Turn a rank set into a checked replay plan (raises ``InputError``/``StuckError``)."""
    world = len(ts.ranks)
    groups = _collect_groups(ts, world)
    ranks = [_rank_plan(r, ts, groups) for r in range(world)]
    for plan in ranks:
        plan.comm_order = _static_comm_order(plan)
    _check_collective_sequences(ranks, groups)
    _check_p2p(ranks)
    from .progress import check_progress  # needs this module's plan types: imported late

    check_progress(ranks, groups)
    ordered = dict(sorted(((k, v) for k, v in groups.items() if k != WORLD), key=lambda kv: _group_key(kv[0])))
    return ReplayPlan(ts.prefix, ranks, ordered, ts.sha256())


def _group_key(name: str) -> tuple[int, int, str]:
    return (0, int(name), "") if is_int_text(name) else (1, 0, name)


def canonical_group(pg_name: str) -> str:
    return WORLD if pg_name in WORLD_PG_NAMES else pg_name


def _collect_groups(ts: TraceSet, world: int) -> dict[str, tuple[int, ...]]:
    """Groups from the comm-group JSON (keyed by id) and from PyTorch METADATA nodes (by pg_name)."""
    groups: dict[str, tuple[int, ...]] = {WORLD: tuple(range(world))}
    where = str(ts.comm_groups_file) if ts.comm_groups_file else ts.prefix
    for gid, members in (ts.comm_groups or {}).items():
        bad = [m for m in members if m >= world]
        if bad:
            raise InputError(f"NPU {bad[0]} is not a rank of this {world}-rank set", file=where, where=f"group {gid}")
        groups[str(gid)] = tuple(members)
    for r, graph in enumerate(ts.ranks):
        for i in np.nonzero(graph.types == schema.METADATA_NODE)[0]:
            for name, members in _metadata_groups(graph, int(i), world):  # type: ignore[assignment]
                if name == WORLD:
                    continue
                old = groups.setdefault(name, members)  # type: ignore[arg-type]
                if old != members:
                    raise InputError(
                        f"process group {name!r} is {list(members)} here but {list(old)} elsewhere",
                        file=str(ts.files[r]),
                        where=f"node {int(graph.ids[i])}",
                    )
    return groups


def _metadata_groups(graph, i: int, world: int) -> list[tuple[str, tuple[int, ...]]]:
    """PyTorch process-group table in a METADATA node: ``inputs.values == "['<json list>']"``."""
    node = graph.node(i)
    text = node.inputs.values if node.HasField("inputs") else ""
    if not text:
        return []  # a METADATA node without a process-group table (e.g. Chakra's generator's)
    table, problem = parse_process_groups(text)
    if problem:
        raise InputError(f"METADATA inputs.values {problem}", file=graph.path, where=f"node {int(graph.ids[i])}")
    out = []
    for name, ranks in table.items():
        ranks = ranks or list(range(world))
        if not all(r < world for r in ranks):
            raise InputError(
                f"process group {name!r} names ranks outside 0..{world - 1}",
                file=graph.path,
                where=f"node {int(graph.ids[i])}",
            )
        out.append((canonical_group(name), tuple(ranks)))
    return out


def _rank_plan(rank: int, ts: TraceSet, groups: dict[str, tuple[int, ...]]) -> RankPlan:
    g = ts.ranks[rank]
    path = str(ts.files[rank])
    n = len(g)
    ids = [int(x) for x in g.ids]
    if len(set(ids)) != n:
        dup = next(x for x, c in zip(*np.unique(g.ids, return_counts=True)) if c > 1)
        raise InputError(f"node id {int(dup)} appears more than once", file=path)
    types = [int(t) for t in g.types]
    cpu = g.is_cpu_op
    comm_type = g.int_attr("comm_type", -1)
    comm_size = g.int_attr("comm_size", -1)
    tensor_size = g.int_attr("tensor_size", 0)
    src = g.int_attr("comm_src", -1)
    dst = g.int_attr("comm_dst", -1)
    tag = g.int_attr("comm_tag", 0)
    num_ops = g.int_attr("num_ops", 0)
    has_comm_size = g.has("comm_size")
    slots, actions, comm = [], [], {}
    for i in range(n):
        t = types[i]
        where = f"node {ids[i]}"
        if t == schema.COMM_RECV_NODE:
            slot = SLOT_NONE
        elif t in (schema.COMM_COLL_NODE, schema.COMM_SEND_NODE):
            slot = SLOT_COMM  # communication even when mislabelled is_cpu_op (ASTRA-sim would refuse it)
        elif cpu[i]:
            slot = SLOT_CPU
        elif t == schema.COMP_NODE:
            slot = SLOT_COMP
        else:
            slot = SLOT_COMM
        slots.append(slot)
        if t == schema.COMP_NODE:
            actions.append(ACT_COMPUTE)
        elif t == schema.COMM_COLL_NODE:
            actions.append(ACT_COLL)
            comm[i] = _coll_spec(int(comm_type[i]), int(comm_size[i]), g.pg_name.get(i, ""), groups, rank, path, where)
        elif t in (schema.COMM_SEND_NODE, schema.COMM_RECV_NODE):
            send = t == schema.COMM_SEND_NODE
            actions.append(ACT_SEND if send else ACT_RECV)
            comm[i] = _p2p_spec(
                send,
                rank,
                len(ts.ranks),
                int(src[i]),
                int(dst[i]),
                int(tag[i]),
                int(comm_size[i]) if has_comm_size[i] else int(tensor_size[i]),
                path,
                where,
            )
        else:
            actions.append(ACT_NOOP)  # METADATA, INVALID, MEM_LOAD/STORE: nothing to run here
    parents = _parents(g, path)
    plan = RankPlan(
        rank,
        path,
        ids,
        [g.name(i) for i in range(n)],
        types,
        slots,
        actions,
        [int(d) * 1000 for d in g.duration_micros],
        [int(x) for x in num_ops],
        comm,
        parents,
    )
    plan.children = [[] for _ in range(n)]
    for i, ps in enumerate(parents):
        for p in ps:
            plan.children[p].append(i)
    return plan


def _coll_spec(ctype: int, size: int, pg_name: str, groups, rank: int, path: str, where: str) -> CommSpec:
    if ctype < 0:
        raise InputError("COMM_COLL node has no integer comm_type attribute", file=path, where=where)
    if ctype not in SUPPORTED_COLLECTIVES:
        raise InputError(f"comm_type {ctype} is not a collective torch.distributed offers", file=path, where=where)
    if size < 0:
        if ctype != schema.BARRIER:
            raise InputError("COMM_COLL node has no comm_size", file=path, where=where)
        size = 0
    name = canonical_group(pg_name)
    if name not in groups:
        raise InputError(
            f"pg_name {pg_name!r} is not a known communicator group "
            f"(known: {', '.join(sorted(k for k in groups if k)) or 'none'})",
            file=path,
            where=where,
        )
    members = groups[name]
    if rank not in members:
        raise InputError(f"rank {rank} is not a member of group {pg_name!r} {list(members)}", file=path, where=where)
    p = len(members)
    if ctype in _SPLIT_EVENLY and size % p:
        raise InputError(
            f"{schema.COMM_TYPE_NAMES[ctype]} of {size} B cannot be split evenly over {p} ranks", file=path, where=where
        )
    unit = 4 * (p if ctype in _SPLIT_EVENLY else 1)
    return CommSpec(ACT_COLL, ctype, size, name, members, elem_bytes=4 if size % unit == 0 else 1)


def _p2p_spec(
    send: bool, rank: int, world: int, src: int, dst: int, tag: int, size: int, path: str, where: str
) -> CommSpec:
    me, peer = (src, dst) if send else (dst, src)
    if me not in (-1, rank):
        role = "comm_src" if send else "comm_dst"
        raise InputError(f"{role} is {me} but this is rank {rank}", file=path, where=where)
    if not 0 <= peer < world or peer == rank:
        role = "comm_dst" if send else "comm_src"
        raise InputError(f"{role} {peer} is not another rank of this {world}-rank set", file=path, where=where)
    if tag < 0:
        raise InputError(f"comm_tag {tag} is negative", file=path, where=where)
    if size < 0:
        raise InputError("p2p node has neither comm_size nor tensor_size", file=path, where=where)
    return CommSpec(
        ACT_SEND if send else ACT_RECV, nbytes=size, peer=peer, tag=tag, elem_bytes=4 if size % 4 == 0 else 1
    )


def _parents(g, path: str) -> list[list[int]]:
    """Union of data and ctrl parents as record indices (both are enforced, §2.2)."""
    out: list[list[int]] = [[] for _ in range(len(g))]
    for which in ("data", "ctrl"):
        ptr, idx = g.dep_indices(which)
        raw = g.data_ids if which == "data" else g.ctrl_ids
        bad = np.nonzero(idx < 0)[0]
        if len(bad):
            child = int(np.searchsorted(ptr, bad[0], side="right") - 1)
            raise InputError(
                f"{which} dependency on node {int(raw[bad[0]])}, which is not in the file",
                file=path,
                where=f"node {int(g.ids[child])}",
            )
        for i in range(len(g)):
            for p in idx[ptr[i] : ptr[i + 1]]:
                p = int(p)
                if p not in out[i]:
                    out[i].append(p)
    return out


def topological_order(plan: RankPlan) -> list[int]:
    """Kahn's order with ascending node id among ready nodes; errors on a cycle."""
    indeg = [len(ps) for ps in plan.parents]
    heap = [(plan.ids[i], i) for i in range(len(plan)) if indeg[i] == 0]
    heapq.heapify(heap)
    order = []
    while heap:
        _, i = heapq.heappop(heap)
        order.append(i)
        for c in plan.children[i]:
            indeg[c] -= 1
            if indeg[c] == 0:
                heapq.heappush(heap, (plan.ids[c], c))
    if len(order) != len(plan):
        stuck = min((plan.ids[i], i) for i in range(len(plan)) if indeg[i] > 0)[1]
        raise InputError("dependency cycle (node never becomes ready)", file=plan.file, where=f"node {plan.ids[stuck]}")
    return order


def _static_comm_order(plan: RankPlan) -> list[int]:
    return [i for i in topological_order(plan) if plan.slots[i] == SLOT_COMM]


def _check_collective_sequences(ranks: list[RankPlan], groups: dict[str, tuple[int, ...]]) -> None:
    """Every member must issue the same (type, size) sequence on each group, or a real run hangs."""
    seqs: dict[str, dict[int, list[int]]] = {}
    for plan in ranks:
        for i in plan.comm_order:
            spec = plan.comm.get(i)
            if spec is not None and spec.kind == ACT_COLL:
                seqs.setdefault(spec.group, {}).setdefault(plan.rank, []).append(i)
    for name, by_rank in seqs.items():
        members = groups[name]
        ref_rank = min(members, key=lambda r: (-len(by_rank.get(r, [])), r))
        ref = by_rank.get(ref_rank, [])
        for r in members:
            mine = by_rank.get(r, [])
            for k in range(max(len(ref), len(mine))):
                a = _sig(ranks[ref_rank], ref[k]) if k < len(ref) else None
                b = _sig(ranks[r], mine[k]) if k < len(mine) else None
                if a == b:
                    continue
                label = f"group {name or '0'} {list(members)}"
                if b is None:
                    raise StuckError(
                        f"{label}: rank {r} never issues collective #{k + 1}, which rank {ref_rank} "
                        f"issues as {ranks[ref_rank].describe(ref[k])}",
                        stuck={r: [], ref_rank: [ranks[ref_rank].ids[ref[k]]]},
                        file=ranks[r].file,
                    )
                raise StuckError(
                    f"{label}: collective #{k + 1} is {ranks[r].describe(mine[k])} of {b[1]} B on rank "
                    f"{r} but {ranks[ref_rank].describe(ref[k])} of {a[1]} B on rank {ref_rank}",  # type: ignore[index]
                    stuck={r: [ranks[r].ids[mine[k]]], ref_rank: [ranks[ref_rank].ids[ref[k]]]},
                    file=ranks[r].file,
                )


def _sig(plan: RankPlan, i: int) -> tuple[int, int]:
    spec = plan.comm[i]
    return spec.comm_type, spec.nbytes


def _check_p2p(ranks: list[RankPlan]) -> None:
    """Each (src, dst, tag) channel must carry as many sends as receives, of matching sizes, in order."""
    sends: dict[tuple[int, int, int], list[tuple[int, int]]] = {}
    recvs: dict[tuple[int, int, int], list[tuple[int, int]]] = {}
    for plan in ranks:
        for i in topological_order(plan):
            spec = plan.comm.get(i)
            if spec is None or spec.kind not in (ACT_SEND, ACT_RECV):
                continue
            if spec.kind == ACT_SEND:
                sends.setdefault((plan.rank, spec.peer, spec.tag), []).append((i, spec.nbytes))
            else:
                recvs.setdefault((spec.peer, plan.rank, spec.tag), []).append((i, spec.nbytes))
    for key in sorted(set(sends) | set(recvs)):
        s, r = sends.get(key, []), recvs.get(key, [])
        src, dst, tag = key
        for k in range(max(len(s), len(r))):
            if k < len(s) and k < len(r) and s[k][1] == r[k][1]:
                continue
            if k >= len(r):
                i = s[k][0]
                raise StuckError(
                    f"rank {src} {ranks[src].describe(i)} sends to rank {dst} tag {tag} but rank {dst} "
                    f"posts no matching receive",
                    stuck={src: [ranks[src].ids[i]]},
                    file=ranks[src].file,
                )
            if k >= len(s):
                i = r[k][0]
                raise StuckError(
                    f"rank {dst} {ranks[dst].describe(i)} waits for rank {src} tag {tag} but rank {src} "
                    f"sends nothing more",
                    stuck={dst: [ranks[dst].ids[i]]},
                    file=ranks[dst].file,
                )
            raise StuckError(
                f"rank {src} {ranks[src].describe(s[k][0])} sends {s[k][1]} B but rank {dst} "
                f"{ranks[dst].describe(r[k][0])} receives {r[k][1]} B (tag {tag})",
                stuck={src: [ranks[src].ids[s[k][0]]], dst: [ranks[dst].ids[r[k][0]]]},
                file=ranks[src].file,
            )
