"""``simulate(trace_set, hw)``: build one ``Sys`` + ``Workload`` per NPU on a shared event queue and run.

Per-call setup is small: the per-rank columns (``RankTrace``) are cached on the ``TraceGraph``
objects, so a sweep that simulates one ``TraceSet`` for many hardware points decodes it once. The
``TraceSet`` itself is never modified.
"""

from __future__ import annotations

import gc
import weakref
from collections.abc import Sequence
from dataclasses import replace

import numpy as np

from ..console import logger
from ..errors import ConfigError
from ..et import schema
from ..et.traceset import WORLD_PG_NAMES
from ..rankset import WARNING, Finding, analyze
from ..rankset.groups import GroupTable
from ..rankset.progress import STUCK_LIST_LIMIT
from ..rankset.twins import Twins
from .backends import AWARE, UNAWARE
from .config import HardwareConfig
from .engine import EventQueue
from .groups import groups_at_start
from .memory import remote_memories
from .network import make_network
from .network.common import LinkConflict
from .result import SimResult
from .system.phase_fast import FastPathDeclined, PhaseCoordinator
from .system.ring_fast import RingCoordinator
from .system.sys import Sys
from .workload import RankTrace, Workload

_CACHE: dict[int, tuple] = {}  # id(graph) -> (weakref to graph, RankTrace); graphs are unhashable


def _prune_cache() -> None:
    """Drop the columns of graphs that are gone (once per run: per rank it was O(P^2) at scale)."""
    for key in [k for k, (ref, _) in _CACHE.items() if ref() is None]:
        del _CACHE[key]


def rank_trace(graph, twins: Twins[RankTrace] | None = None) -> RankTrace:
    """The columns of ``graph``, built once per graph object (wiring API: every engine builds its
    ``Workload``s from these, ``simulate`` here and ``symmetric``); with ``twins``, a byte-identical
    rank's columns are shared rather than built again (``rankset/twins.py``)."""
    hit = _CACHE.get(id(graph))
    if hit is not None and hit[0]() is graph:
        return hit[1]
    key, twin = twins.get(graph) if twins is not None else (None, None)
    rt = twin.of_twin(graph) if twin is not None else RankTrace.build(graph)
    if twins is not None:
        twins.put(key, graph, rt)
    _CACHE[id(graph)] = (weakref.ref(graph), rt)
    return rt


class RunStats:
    """Counters of one run shared by its ``Sys``s and coordinators (wiring API)."""

    __slots__ = ("messages", "fast_messages")

    def __init__(self) -> None:
        self.messages = 0
        self.fast_messages = 0  # of them, evaluated by a fast path's recurrence (tests tell which path ran)


def aware_fast_path_is_exact(trace_set, hw, table: GroupTable, network) -> bool:
    """True when the aware ring fast path is exact for this run, or its check while running
    (``LinkConflict``) tells when it is not (``system/ring_fast.py``, ``network/aware.py``).

    With one queue and one active chunk on a 1-D network, an NPU runs one ring phase at a time, so a
    link sees each sender's ring messages in that sender's phase order, which is the order the
    coordinator evaluates them in. With several queues or active chunks per dimension it runs several at
    once: the chunks of one collective (``preferred_dataset_splits`` > 1) then cross the same links
    together, which the links' check refuses on the first collective, so such runs are declined here
    rather than tried and redone; with one chunk per collective only different collectives may overlap,
    and the check tells when their messages do meet on a link. The run may use only ring phases (world
    ring, and the ring of every group a collective names: ``table``, rankset's one group table of the
    set, comm-group file and METADATA), and no ring may route two of its members' messages over one
    link. Whether two senders' messages (a TP and a DP predecessor through one switch downlink) ever
    meet on a link is checked as the phases are evaluated: ``simulate`` reruns message by message when
    they do. Point-to-point sends and receives (pipeline activations) go message by message beside the
    rings; the links check their order against the evaluated ring messages the same way
    (``CongestionAwareNetwork.check_order``).
    It reads the traces and the whole config, so it runs here, where the layers are wired; the
    system layer only receives the answer (a ``RingCoordinator`` or none).
    """
    sysc, net = hw.system, hw.network
    concurrent = hw.num_queues_per_dim != 1 or sysc.active_chunks_per_dimension != 1
    if hw.rendezvous or net.dims != 1 or (concurrent and sysc.preferred_dataset_splits != 1):
        return False
    if any(a.base != "ring" for _, algos in sysc.implementations for a in algos):
        return False
    rings = _rings_used(trace_set, table, net.npus)
    if rings is None:
        return False
    for members in sorted(rings):
        if len(members) > 1:
            pairs = [(members[k - 1], members[k]) for k in range(len(members))]
            if not (network.one_sender_per_link(pairs) and network.one_sender_per_link([(b, a) for a, b in pairs])):
                return False
    return True


def _rings_used(trace_set, table: GroupTable, npus: int) -> set[tuple[int, ...]] | None:
    """Member lists (ring order) of the rings the collectives can run on; None when a rank names a group
    the table does not have."""
    world = tuple(range(npus))
    out: set[tuple[int, ...]] = set()
    named = table.members
    for rank, g in enumerate(trace_set.ranks):
        types = g.types
        for names in table.metadata[rank].values():  # kept: a METADATA node may run after the file's group is used
            out.update(_ring(named[name], world) for name in names)
        for i in np.nonzero(types == schema.COMM_COLL_NODE)[0].tolist():
            pg = g.pg_name.get(i, "")
            if i in g.involved_dim or (pg not in named and pg in WORLD_PG_NAMES):
                out.add(world)
            elif pg in named:
                out.add(_ring(named[pg], world))
            else:
                return None
    return out


def _ring(members: Sequence[int], world: tuple[int, ...]) -> tuple[int, ...]:
    """The logical ring of a group: the global ring when it has every NPU (``Sys._plan``)."""
    return world if len(members) == len(world) else tuple(members)


def _warn(analysis, timed: list[Finding]) -> None:
    """Print the errors the run goes ahead despite as validate's lines with severity ``warning``,
    once per analysis (a sweep simulates one set on many hardware points)."""
    if timed and not analysis.warned:
        analysis.warned = True
        for f in timed:
            logger(__name__).warning("%s (simulated as ASTRA-sim runs it)", replace(f, severity=WARNING).line())


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
    phases_fast = True
    try:
        while True:  # each rerun turns one fast path off, so at most two reruns
            try:
                return _simulate(trace_set, hw, comm_groups, fast, comm_groups_file, phases_fast=phases_fast)
            except FastPathDeclined:  # a direct phase hit a same-time tie only the event order settles
                phases_fast = False
            except LinkConflict as conflict:  # aware messages reach a link out of the order they were evaluated in
                logger(__name__).info("aware ring fast path: %s; rerun message by message", conflict)
                fast = False
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
    analysis = analyze(trace_set, comm_groups, groups_file, hw.system.preferred_dataset_splits)
    timed = analysis.refuse_input()  # input problems exit 2 with validate's problem lines
    fast = fast and not analysis.message_path_only
    queue = EventQueue()
    network = make_network(hw.backend, hw.network, queue)
    stats = RunStats()
    result = SimResult(hw.backend)
    memories = remote_memories(hw.memory, npus)
    coordinator = None
    if fast and hw.backend == UNAWARE.name and not hw.rendezvous:
        coordinator = RingCoordinator(network, queue, stats)
    elif fast and hw.backend == AWARE.name and aware_fast_path_is_exact(trace_set, hw, analysis.groups, network):
        coordinator = RingCoordinator(network, queue, stats, aware=True)
        from .network.aware import CongestionAwareNetwork  # loaded by make_network for this backend

        assert isinstance(network, CongestionAwareNetwork)
        network.check_order()  # pipeline sends share the links with the evaluated ring messages
    phases = PhaseCoordinator(network, queue, stats) if coordinator is not None and not coordinator.aware else None
    workloads = []
    rings: dict = {}
    table = analysis.groups
    start_groups = groups_at_start(table.from_file, npus)
    _prune_cache()
    twins: Twins[RankTrace] = Twins()
    for rank, graph in enumerate(trace_set.ranks):
        sys = Sys(rank, hw, queue, network, stats, coordinator, rings, phases if phases_fast else None)
        metadata = {i: [(g, list(table.members[g])) for g in names] for i, names in table.metadata[rank].items()}
        workloads.append(
            Workload(rank, rank_trace(graph, twins), sys, hw, start_groups[rank], memories[rank], result, metadata)
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
        from .system.deadlock import explain, queue_deadlock  # only a stuck run explains itself

        cycle = queue_deadlock([w.sys for w in workloads])
        why = None if cycle is None else explain(cycle, workloads[0].sys.threshold, hw.system.preferred_dataset_splits)
        done = (workloads[r] for r in result.finish_order)
        finished = {w.rank: (w.finish_ns, w.finish_ns - w.hardware.tics_gpu) for w in done}
        raise analysis.stuck_error(stuck, why, finished)  # exit 3, printed as set-deadlock problem lines
    result.messages = stats.messages
    result.fast_messages = stats.fast_messages
    result.finalize(workloads)
    _warn(analysis, timed)  # a run that stops lists them in its error instead
    return result
