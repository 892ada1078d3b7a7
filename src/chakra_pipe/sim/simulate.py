"""``simulate(trace_set, hw)``: build one ``Sys`` + ``Workload`` per NPU on a shared event queue and run.

Per-call setup is small: the per-rank columns (``RankTrace``) are cached on the ``TraceGraph``
objects, so a sweep that simulates one ``TraceSet`` for many hardware points decodes it once. The
``TraceSet`` itself is never modified.
"""

from __future__ import annotations

import gc
import weakref

import numpy as np

from ..errors import ConfigError, StuckError
from ..et import schema
from ..et.traceset import WORLD_PG_NAMES
from .config import HardwareConfig
from .engine import EventQueue
from .groups import GroupTable, metadata_groups
from .memory import remote_memories
from .network import make_network
from .result import SimResult
from .system.deadlock import explain, queue_deadlock
from .system.phase_fast import FastPathDeclined, PhaseCoordinator
from .system.ring_fast import RingCoordinator
from .system.sys import Sys
from .workload import RankTrace, Workload

_CACHE: dict[int, tuple] = {}  # id(graph) -> (weakref to graph, RankTrace); graphs are unhashable
STUCK_LIST_LIMIT = 20


def _prune_cache() -> None:
    """Drop the columns of graphs that are gone (once per run: per rank it was O(P^2) at scale)."""
    for key in [k for k, (ref, _) in _CACHE.items() if ref() is None]:
        del _CACHE[key]


def _rank_trace(graph) -> RankTrace:
    hit = _CACHE.get(id(graph))
    if hit is not None and hit[0]() is graph:
        return hit[1]
    rt = RankTrace.build(graph)
    _CACHE[id(graph)] = (weakref.ref(graph), rt)
    return rt


class _Stats:
    __slots__ = ("messages",)

    def __init__(self) -> None:
        self.messages = 0


def aware_fast_path_is_exact(trace_set, hw, groups: dict | None, network) -> bool:
    """True when every link carries ring-phase messages of one sender only (``system/ring_fast.py``).

    With one queue and one active chunk on a 1-D network, an NPU runs one ring phase at a time and
    all of them clockwise; a link whose messages all come from one sender then sees them in that
    sender's phase order, which is the order the coordinator evaluates them in. So the recurrence is
    exact when no link is on the paths of two senders over all rings the run can use: the world
    ring, and the ring of every group a collective names (comm-group file or METADATA). Always true
    on FullyConnected (a link per ordered pair); on Switch or Ring topologies only when the rings do
    not share a downlink or a hop. It reads the traces and the whole config, so it runs here, where
    the layers are wired; the system layer only receives the answer (a ``RingCoordinator`` or none).
    """
    sysc, net = hw.system, hw.network
    if hw.rendezvous or net.dims != 1 or hw.num_queues_per_dim != 1 or sysc.active_chunks_per_dimension != 1:
        return False
    if any(a.base != "ring" for _, algos in sysc.implementations for a in algos):
        return False
    rings = _rings_used(trace_set, groups or {}, net.npus)
    if rings is None:
        return False
    pairs = {(members[k - 1], members[k]) for members in rings for k in range(len(members)) if len(members) > 1}
    return network.one_sender_per_link(sorted(pairs))


def _rings_used(trace_set, groups: dict, npus: int) -> set[tuple[int, ...]] | None:
    """Member lists (ring order) of the rings the collectives can run on; None when a rank sends or
    receives point to point, or names a group that cannot be resolved before the run."""
    world = tuple(range(npus))
    out: set[tuple[int, ...]] = set()
    file_groups = {str(k): list(v) for k, v in groups.items()}
    for g in trace_set.ranks:
        types = g.types
        if np.isin(types, (schema.COMM_SEND_NODE, schema.COMM_RECV_NODE)).any():
            return None
        named = dict(file_groups)
        for i in np.nonzero(types == schema.METADATA_NODE)[0].tolist():
            made, problem = metadata_groups(g.node(i), npus)
            if problem:
                return None
            for name, group in made.items():  # both kept: the METADATA node may run after the file's group is used
                out.add(_ring(group.members, world))
                named.setdefault(name, group.members)
        for i in np.nonzero(types == schema.COMM_COLL_NODE)[0].tolist():
            pg = g.pg_name.get(i, "")
            if i in g.involved_dim or (pg not in named and pg in WORLD_PG_NAMES):
                out.add(world)
            elif pg in named:
                out.add(_ring(named[pg], world))
            else:
                return None
    if any(len(set(r)) != len(r) or not all(0 <= m < npus for m in r) for r in out):
        return None  # the run reports the group; the fast path need not reason about it
    return out


def _ring(members: list[int], world: tuple[int, ...]) -> tuple[int, ...]:
    """The logical ring of a group: the global ring when it has every NPU (``Sys._plan``)."""
    return world if len(members) == len(world) else tuple(members)


def simulate(
    trace_set,
    hw: HardwareConfig,
    comm_groups: dict[int, list[int]] | None = None,
    fast: bool = True,
    comm_groups_file: str | None = None,
) -> SimResult:
    """Simulate every rank of ``trace_set`` on ``hw``; see :class:`SimResult` for the outputs.

    ``comm_groups`` overrides ``trace_set.comm_groups``; ``comm_groups_file`` only names its origin in
    error messages. ``fast=False`` forces the message-by-message path everywhere (the fast path is
    exact; the switch exists so tests and benchmarks can compare the two).
    """
    # The run allocates many small long-lived objects and frees few: the cyclic collector would
    # rescan them again and again for nothing (up to half the wall time at 1,024 NPUs).
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        try:
            return _simulate(trace_set, hw, comm_groups, fast, comm_groups_file)
        except FastPathDeclined:  # a direct phase hit a same-time tie only the event order settles
            return _simulate(trace_set, hw, comm_groups, fast, comm_groups_file, phases_fast=False)
    finally:
        if was_enabled:
            gc.enable()


def _simulate(
    trace_set, hw: HardwareConfig, comm_groups, fast: bool, groups_file: str | None, phases_fast: bool = True
) -> SimResult:
    npus = hw.network.npus
    if len(trace_set.ranks) != npus:
        raise ConfigError(
            f"npus_count multiplies to {npus} NPUs but the workload has {len(trace_set.ranks)} rank files",
            file=hw.network.source,
            where="npus_count",
        )
    groups = comm_groups if comm_groups is not None else trace_set.comm_groups
    if comm_groups is None and trace_set.comm_groups_file is not None:
        groups_file = str(trace_set.comm_groups_file)
    queue = EventQueue()
    network = make_network(hw.backend, hw.network, queue)
    stats = _Stats()
    result = SimResult(hw.backend)
    memories = remote_memories(hw.memory, npus)
    coordinator = None
    if fast and hw.backend == "congestion_unaware" and not hw.rendezvous:
        coordinator = RingCoordinator(network, queue, stats)
    elif fast and hw.backend == "congestion_aware" and aware_fast_path_is_exact(trace_set, hw, groups, network):
        coordinator = RingCoordinator(network, queue, stats, aware=True)
    phases = PhaseCoordinator(network, queue, stats) if coordinator is not None and not coordinator.aware else None
    workloads = []
    rings: dict = {}
    table = GroupTable(npus, groups, groups_file)
    _prune_cache()
    for rank, graph in enumerate(trace_set.ranks):
        sys = Sys(rank, hw, queue, network, stats, coordinator, rings, phases if phases_fast else None)
        workloads.append(Workload(rank, _rank_trace(graph), sys, hw, table.groups_for(rank), memories[rank], result))
    for w in workloads:
        w.fire()
    queue.run()
    stuck = {}
    for w in workloads:
        if not w.finished:
            ids = [w.t.ids[i] for i in (*w.ongoing, *w.free.indices())]
            if not ids:
                ids = [w.t.ids[i] for i in range(len(w.t.ids)) if w.end[i] < 0]
            stuck[w.rank] = sorted(ids)[:STUCK_LIST_LIMIT]
    if stuck:
        first = min(stuck)
        cycle = queue_deadlock([w.sys for w in workloads])
        why = (
            "deadlock, unmatched send/recv or a collective some group member never issues"
            if cycle is None
            else explain(cycle, workloads[0].sys.threshold, hw.system.preferred_dataset_splits)
        )
        raise StuckError(
            f"{len(stuck)} rank(s) cannot finish ({why}); rank {first} waits on node(s) {stuck[first]}",
            stuck=stuck,
            file=trace_set.prefix,
        )
    result.messages = stats.messages
    result.finalize(workloads)
    return result
