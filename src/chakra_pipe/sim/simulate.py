"""``simulate(trace_set, hw)``: build one ``Sys`` + ``Workload`` per NPU on a shared event queue and run.

Per-call setup is small: the per-rank columns (``RankTrace``) are cached on the ``TraceGraph``
objects, so a sweep that simulates one ``TraceSet`` for many hardware points decodes it once. The
``TraceSet`` itself is never modified.
"""

from __future__ import annotations

import gc
import weakref

from ..errors import ConfigError
from ..rankset import analyze
from ..rankset.groups import GroupTable
from ..rankset.progress import STUCK_LIST_LIMIT
from .config import HardwareConfig
from .engine import EventQueue
from .network import make_network
from .result import SimResult
from .system.ring_fast import RingCoordinator, aware_fast_path_is_exact
from .system.sys import Group, Sys
from .workload import FifoServer, RankTrace, Workload

_CACHE: dict[int, tuple] = {}  # id(graph) -> (weakref to graph, RankTrace); graphs are unhashable


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


def _groups_at_start(table: GroupTable, npus: int) -> list[dict[str, Group]]:
    """Each rank's groups before any METADATA node runs: the world group and its comm-group-file groups.

    Member lists are shared between the ranks' ``Group`` objects (they are never modified); the
    per-rank state (stream counter, plans) stays per rank as ASTRA-sim keeps it.
    """
    world = list(range(npus))
    by_rank: list[dict[str, Group]] = [{"": Group(1, world, "")} for _ in range(npus)]
    for gid, members in sorted(table.from_file.items()):
        shared = list(members)
        for m in dict.fromkeys(shared):
            by_rank[m][str(gid)] = Group(int(gid), shared, str(gid))
    return by_rank


def _memory_servers(hw: HardwareConfig, npus: int) -> list:
    mem = hw.memory
    if mem is None or mem.memory_type in ("NO_MEMORY_EXPANSION", "PER_NPU_MEMORY_EXPANSION"):
        return [None] * npus
    if mem.memory_type == "MEMORY_POOL":
        pool = FifoServer()
        return [pool] * npus
    servers: dict[int, FifoServer] = {}
    return [servers.setdefault(r // mem.num_npus_per_node, FifoServer()) for r in range(npus)]


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
        return _simulate(trace_set, hw, comm_groups, fast, comm_groups_file)
    finally:
        if was_enabled:
            gc.enable()


def _simulate(trace_set, hw: HardwareConfig, comm_groups, fast: bool, groups_file: str | None) -> SimResult:
    npus = hw.network.npus
    if len(trace_set.ranks) != npus:
        raise ConfigError(
            f"npus_count multiplies to {npus} NPUs but the workload has {len(trace_set.ranks)} rank files",
            file=hw.network.source,
            where="npus_count",
        )
    analysis = analyze(trace_set, comm_groups, groups_file, hw.system.preferred_dataset_splits)
    analysis.refuse_input()  # input problems exit 2 with validate's problem lines
    groups = comm_groups if comm_groups is not None else trace_set.comm_groups
    queue = EventQueue()
    network = make_network(hw.backend, hw.network, queue)
    stats = _Stats()
    result = SimResult(hw.backend)
    servers = _memory_servers(hw, npus)
    coordinator = None
    if fast and hw.backend == "congestion_unaware" and not hw.rendezvous:
        coordinator = RingCoordinator(network, queue, stats)
    elif fast and hw.backend == "congestion_aware" and aware_fast_path_is_exact(trace_set, hw, groups):
        coordinator = RingCoordinator(network, queue, stats, aware=True)
    workloads = []
    rings: dict = {}
    table = analysis.groups
    start_groups = _groups_at_start(table, npus)
    _prune_cache()
    for rank, graph in enumerate(trace_set.ranks):
        sys = Sys(rank, hw, queue, network, stats, coordinator, rings)
        metadata = {i: [(g, list(table.members[g])) for g in names] for i, names in table.metadata[rank].items()}
        workloads.append(
            Workload(rank, _rank_trace(graph), sys, hw, start_groups[rank], servers[rank], result, metadata)
        )
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
        raise analysis.stuck_error(stuck)  # exit 3, printed as set-deadlock problem lines
    result.messages = stats.messages
    result.finalize(workloads)
    return result
