"""``simulate(trace_set, hw)``: build one ``Sys`` + ``Workload`` per NPU on a shared event queue and run.

Per-call setup is small: the per-rank columns (``RankTrace``) are cached on the ``TraceGraph``
objects, so a sweep that simulates one ``TraceSet`` for many hardware points decodes it once. The
``TraceSet`` itself is never modified.
"""

from __future__ import annotations

import gc
import weakref
from collections.abc import Callable, Sequence
from dataclasses import replace
from functools import partial

import numpy as np

from ..console import logger
from ..errors import ConfigError, InputError
from ..et import schema
from ..rankset import WARNING, Finding, analyze
from ..rankset.comm import lookup_group
from ..rankset.groups import GroupTable
from ..rankset.progress import STUCK_LIST_LIMIT
from ..rankset.twins import Twins
from .backends import AWARE, UNAWARE
from .config import HardwareConfig
from .custom import CustomCollectives
from .engine import EventQueue
from .groups import groups_at_start
from .memory import remote_memories
from .network import make_network
from .network.common import LinkConflict
from .result import SimResult
from .system.phase_fast import FastPathDeclined, PhaseCoordinator
from .system.ring_fast import RingCoordinator
from .system.sys import Sys
from .system.topology import LogicalTopology, RingTopology
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

    What makes the recurrence exact is one property of every link: it takes its ring messages in the
    order the coordinator evaluates them (a phase at a time, when its last member starts), and within
    a phase one member's messages only. The first is checked on every link as the run goes
    (``FifoRingLinks``: a phase's first message on a link must arrive after the same sender's or a
    point-to-point message's last one, and after another sender's last one has left; the messages
    after it follow, each send following a receive), the second here, before the run, for every ring
    a collective can run on (no ring routes two of its members' messages over one link). A run that
    breaks the first is redone message by message; this function only declines the runs in which the
    check would refuse every time or which the recurrence does not model at all:

    - rendezvous sends. Direct, halving-doubling and double-binary-tree phases take their own aware
      fast path (``system/direct_aware.py``, ``halving_doubling.evaluate_aware``,
      ``system/tree_aware.py``: each window's, step's or tree pass's hops evaluated at once over the
      FIFO links, the order checked on every link; trees only in runs whose collectives are
      all-reduces one after another on each rank, ``_all_reduces_in_sequence``) where ``_batches_exact``
      holds — a 1-D switch or fully-connected network, windows covering every peer, one chunk of a
      collective at a time — or, for direct phases with several chunks of a collective in flight
      and one queue, ``_direct_chunks_batched`` (the chunks' windows evaluated as one batch,
      ``direct_aware.outcome_chunks``: every chunk at once, or, on a fully-connected network, fewer
      active chunks than splits, held until the ns before the batch's earliest exit), else the run
      goes message by message;
    - several queues per dimension *and* ``preferred_dataset_splits`` > 1 (and several chunks in
      flight) where a ring's two directions share a link: half of a collective's chunks then run
      the other way round, over the same senders' links in another order (a switch's up- and
      downlinks), which the check would refuse on the first collective; such runs start message by
      message instead of being tried and redone. Where the two directions of every ring cross
      disjoint links (fully-connected and ring dimensions of three or more NPUs: ``i → i+1`` and
      ``i → i−1`` are different links) and only rings run, each direction's chunks are batched and
      held as below (``chunk_batching``: queues admit chunks one by one), and the two directions
      share nothing. With one queue and several active
      chunks the chunks of one collective run the same phase on the same ring at once.
      ``RingCoordinator`` batches them (one collective, ring, chain step and shape) and evaluates
      them as one FIFO recurrence, chunk k's messages behind chunk k−1's step by step on each link,
      checking that order on every link as it goes (``RingCoordinator._flush`` has the argument):
      at the end of the ns when every chunk runs at once on a 1-D network
      (``_chunks_evaluated_together``: they start in one pass), else (a queue admitting chunks one
      by one, a chunk entering a dimension when it leaves the one before: ``stagger``) held until
      the ns before the batch's earliest possible exit, the chunks completing meanwhile joining it
      (``RingCoordinator._batch``). With one chunk per collective only different collectives
      overlap, and the check decides.

    Multi-dimensional networks (routed dimension by dimension, each dimension group with its own
    links, ``network/aware.py``): a hierarchical collective is a chain of ring phases, each inside
    one dimension's group (``Sys._chain`` over ``LogicalTopology.global_plan``), whose members
    differ in that coordinate only, so every message of the phase crosses links of that dimension
    group only. With one queue and one active chunk per dimension an NPU runs at most one phase per
    dimension at a time, and phases of different dimensions share no link; so on each link the same
    sender's ring messages come phase after phase, exactly the 1-D argument per dimension. What else
    meets on a link — a sub-group ring (which runs in dimension 0's queue whatever dimensions its
    messages cross, so beside a world phase of another dimension), a ``one*`` ring over every NPU
    (whose messages cross several dimensions), point-to-point sends, or another collective's phase —
    is traffic of different phases, left to the run-time check like any two senders on a 1-D switch.
    The rings checked here are those of every dimension of every collective type's global plan (all
    ring by now) and those of the groups the collectives name (``table``, rankset's one group table of
    the set: comm-group file and METADATA); a sub-group ring whose paths cross several dimensions
    passes only when no two of its members' routes share a link.

    It reads the traces and the whole config, so it runs here, where the layers are wired; the
    system layer only receives the answer (a ``RingCoordinator`` or none).
    """
    sysc = hw.system
    if hw.rendezvous or sysc.uses_custom:  # custom collectives: message by message (``system/custom.py``)
        return False
    # chunks of one collective running both ways round at once (several queues per dimension)
    both_ways = _chunks_at_once(hw) and hw.num_queues_per_dim != 1
    algos = [a for _, kind in sysc.implementations for a in kind]
    if any(a.base not in ("ring", "direct", "halvingDoubling", "doubleBinaryTree") for a in algos):
        return False
    if any(a.base != "ring" for a in algos) and not (_batches_exact(hw) or _direct_chunks_batched(hw)):
        return False
    if any(a.base == "doubleBinaryTree" for a in algos) and not _all_reduces_in_sequence(trace_set):
        return False
    rings = _rings_used(trace_set, table, hw)
    if rings is None:
        return False
    for members in sorted(rings):
        if len(members) > 1:
            pairs = [(members[k - 1], members[k]) for k in range(len(members))]
            back = [(b, a) for a, b in pairs]
            if not (network.one_sender_per_link(pairs) and network.one_sender_per_link(back)):
                return False
            if both_ways and network.shares_link(pairs, back):
                return False
    return True


def _batches_exact(hw: HardwareConfig) -> bool:
    """Whether direct, halving-doubling and double-binary-tree phases may take the aware fast path
    (``system/direct_aware.py``, ``halving_doubling.evaluate_aware``, ``system/tree_aware.py``): a 1-D switch or
    fully-connected network (each link carries the same number of a window's or step's messages,
    the layout ``FifoBatchLinks`` evaluates; a ring's multi-hop routes are not), windows covering
    every peer (``direct<W>`` below that sends as receives come, message by message), and one chunk
    of a collective at a time (chunks at once would interleave their windows on each uplink; the
    full engine and the symmetric quotient batch them where ``_direct_chunks_batched`` holds)."""
    net = hw.network
    one_batch = net.dims == 1 and net.topology[0] in ("Switch", "FullyConnected")
    return one_batch and _windows_cover_every_peer(hw) and not _chunks_at_once(hw)


def _direct_chunks_batched(hw: HardwareConfig) -> bool:
    """Whether direct phases with several chunks of a collective in flight may take the aware fast
    path: a 1-D switch or fully-connected network with one queue (one direction, chunks admitted in
    issue order), windows covering every peer, rings for the rest. Every chunk at once
    (``_chunks_evaluated_together``) starts in one pass, so ``PhaseCoordinator.hold`` evaluates the
    chunks as one batch at the end of that ns (``direct_aware.outcome_chunks``; an all-reduce's
    all-gather halves as a second batch, checked to reach every link after all chunks' reduce-scatter
    messages); fewer active chunks than splits (2026-12-04: chunk c+a starting when chunk c leaves)
    are held until the ns before their earliest exit (``chunk_batching``'s ``stagger``,
    ``direct_aware.earliest_exit``), the chunks completing meanwhile joining the batch, and every
    batch's order is checked on its links as any two phases' are — on a fully-connected network only:
    through a switch the check refused every generated step tried (llama3-8b t8d8 ZeRO-1, gpt3-13b
    t8d4, mixtral t2d8 ep4; 2 of 4 chunks; on mixtral chunk 3's reduce-scatter send leaves a member's
    uplink before chunk 2's all-gather sends, evaluated before it, since chunk 3 starts after chunk
    2's batch is due), so those runs go message by message from the start instead of being tried and
    redone."""
    net = hw.network
    if not (net.dims == 1 and hw.num_queues_per_dim == 1 and net.topology[0] in ("Switch", "FullyConnected")):
        return False
    if not _chunks_at_once(hw) or (not _chunks_evaluated_together(hw) and net.topology[0] != "FullyConnected"):
        return False
    ring_or_direct = all(a.base in ("ring", "direct") for _, impl in hw.system.implementations for a in impl)
    return ring_or_direct and _windows_cover_every_peer(hw)


def _windows_cover_every_peer(hw: HardwareConfig) -> bool:
    """Whether every ``direct<W>`` window covers all peers: a narrower one sends as its receives come,
    which the batches do not model (message by message)."""
    npus = hw.network.npus
    return all(a.window == -1 or a.window >= npus - 1 for _, kind in hw.system.implementations for a in kind)


def _all_reduces_in_sequence(trace_set) -> bool:
    """Whether every rank's collectives are all-reduces of one size, each depending directly on the
    one before it.

    A tree phase is evaluated ahead of the clock, and a later phase's message reaching a link before
    its tail is placed among the link's messages only where it moves none of them
    (``network.aware.insert_kept``). All-reduces of one rank running at once (gradient buckets
    overlapping the backward pass), collectives on rings or direct windows beside the trees (whose
    fast paths place no message before a link's last one) and all-reduces of different sizes (a
    bigger chunk's message overtaking the tail of a smaller one's tree does not fit between its
    messages) interleave on the links in ways that refuse nearly every time (generated DP steps,
    whose gradient buckets differ in size, did each time), so such runs go message by message from
    the start instead of being tried and redone."""
    sizes: set[int] = set()
    for g in trace_set.ranks:
        colls = np.flatnonzero(g.types == schema.COMM_COLL_NODE)
        if (g.int_attr("comm_type", -1)[colls] != schema.ALL_REDUCE).any():
            return False
        sizes.update(g.int_attr("comm_size", -1)[colls].tolist())
        if len(sizes) > 1:
            return False
        for before, i in zip(colls.tolist(), colls[1:].tolist()):
            prev = int(g.ids[before])
            if prev not in g.data_deps(i).tolist() and prev not in g.ctrl_deps(i).tolist():
                return False
    return True


def _chunks_at_once(hw: HardwareConfig) -> bool:
    """Whether an NPU may run several chunks of one collective at once (several queues or active
    chunks per dimension, and more than one chunk per collective)."""
    sysc = hw.system
    concurrent = hw.num_queues_per_dim != 1 or sysc.active_chunks_per_dimension != 1
    return concurrent and sysc.preferred_dataset_splits != 1


def _chunks_evaluated_together(hw: HardwareConfig) -> bool:
    """Whether the chunks of every collective run their phase together, which ``RingCoordinator``
    then evaluates as one recurrence (``_flush``): a 1-D network (one phase per collective), one queue
    (one direction, chunks in issue order) and room in it for every chunk at once."""
    sysc = hw.system
    return (
        hw.network.dims == 1
        and hw.num_queues_per_dim == 1
        and sysc.active_chunks_per_dimension >= sysc.preferred_dataset_splits
    )


def chunk_batching(hw: HardwareConfig) -> tuple[bool, bool]:
    """How the aware ring coordinator batches a collective's chunks, for the full engine and the
    symmetric one alike: (several chunks at once, held until their earliest exit because they start
    at different times — always with several queues per dimension, whose chunks alternate between
    the directions and queues; the batches are per direction)."""
    chunks = _chunks_at_once(hw)
    return chunks, chunks and not _chunks_evaluated_together(hw)


def _rings_used(trace_set, table: GroupTable, hw: HardwareConfig) -> set[tuple[int, ...]] | None:
    """Member lists (ring order) of the rings the collectives can run on; None when a rank names a group
    the table does not have."""
    npus = hw.network.npus
    world: set[tuple[int, ...]] | None = None  # the global plans' rings, made on first use
    out: set[tuple[int, ...]] = set()
    named = table.members

    def add(members: Sequence[int]) -> None:
        nonlocal world
        if len(members) != npus:  # a group of every NPU runs the global plan
            out.add(tuple(members))
        elif world is None:
            world = _global_rings(hw)
            out.update(world)

    for rank, g in enumerate(trace_set.ranks):
        types = g.types
        for names in table.metadata[rank].values():  # kept: a METADATA node may run after the file's group is used
            for name in names:
                add(named[name])
        for i in np.nonzero(types == schema.COMM_COLL_NODE)[0].tolist():
            # a named group's ring, involved_dim or not (comm.py, Sys._plan); the world group (every
            # NPU, "" or "0") runs the global plan, restricted or not by involved_dim
            members = lookup_group(named, g.pg_name.get(i, ""))
            if members is None:
                return None
            add(members)
    return out


def _global_rings(hw: HardwareConfig) -> set[tuple[int, ...]]:
    """The rings of every dimension of every collective type's global plan (``Sys._plan``): one per
    dimension group, or one over every NPU for a ``one*`` algorithm; built by the system layer's own
    ``LogicalTopology.global_plan`` so the rings are the ones the run walks."""
    physical = hw.network.npus_count
    shared: dict = {}  # ring objects, shared across NPUs and types as in a run
    for algos in {algos for _, algos in hw.system.implementations}:
        for me in range(hw.network.npus):
            LogicalTopology.global_plan(me, physical, algos, shared)
    return {tuple(ring.members) for ring in shared.values() if isinstance(ring, RingTopology)}


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
    symmetric: bool = True,
) -> SimResult:
    """Simulate every rank of ``trace_set`` on ``hw``; see :class:`SimResult` for the outputs.

    ``symmetric``: simulate one representative per class when the set's DP×TP×PP(×EP) symmetry is
    proven (``symmetric_files.py``: exact on every rank, else the full engine); False forces the full engine.

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
                run = partial(
                    _simulate,
                    trace_set,
                    hw,
                    comm_groups,
                    fast,
                    comm_groups_file,
                    phases_fast=phases_fast,
                    symmetric=symmetric,
                )
                return clocked(run, hw)
            except FastPathDeclined:  # a direct phase hit a same-time tie only the event order settles
                phases_fast = symmetric = False
            except LinkConflict as conflict:  # aware messages reach a link out of the order they were evaluated in
                logger(__name__).info("aware fast path: %s; rerun message by message", conflict)
                fast = symmetric = False
    finally:
        if was_enabled:
            gc.enable()


CLOCK_NS = 1 << 63  # the simulator's clock and the results' time columns are int64 ns (~292 years)


def clocked(run: Callable[[], SimResult], hw: HardwareConfig) -> SimResult:
    """``run()``, refused when its times leave ``[0, 2^63)`` ns rather than printed or stored.

    Why: most of the engine counts in Python ints, which never overflow, but its array paths count
    in int64 (an overflow there raises or, in a cast, wraps): the same absurd hardware must give
    one clear error on every path (files, generated layouts), not a traceback on one and a 20-digit
    time on another.
    """
    try:
        result = run()
        # finish times only: a rank finishes after its collectives, and a symmetric run's records
        # of every rank are a lazy view that reading them would build (+67 MB, +1 s at 1,024 ranks)
        times = result.finish_ns
        if not times or (0 <= min(times) and max(times) < CLOCK_NS):
            return result
    except OverflowError:  # a time too large for an int64 column on the way
        pass
    raise InputError(
        "simulated times pass the 64-bit ns clock (2^63 ns, about 292 years) that the simulator and its"
        " results count in: the network's latency or bandwidth, or the trace's durations, are out of scale",
        file=hw.network.source,
    )


def _simulate(
    trace_set,
    hw: HardwareConfig,
    comm_groups,
    fast: bool,
    groups_file: str | None,
    phases_fast: bool = True,
    symmetric: bool = False,
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
    if fast and symmetric:
        from .symmetric_files import simulate_file_set  # wiring too; imports this module

        quotient = simulate_file_set(trace_set, hw, analysis.groups)
        if quotient is not None:
            _warn(analysis, timed)
            return quotient
    queue = EventQueue()
    network = make_network(hw.backend, hw.network, queue)
    stats = RunStats()
    result = SimResult(hw.backend)
    memories = remote_memories(hw.memory, npus)
    coordinator = None
    if fast and hw.backend == UNAWARE.name and not hw.rendezvous:
        coordinator = RingCoordinator(network, queue, stats)
    elif fast and hw.backend == AWARE.name and aware_fast_path_is_exact(trace_set, hw, analysis.groups, network):
        chunks, stagger = chunk_batching(hw)
        coordinator = RingCoordinator(network, queue, stats, aware=True, chunks=chunks, stagger=stagger)
        from .network.aware import CongestionAwareNetwork  # loaded by make_network for this backend

        assert isinstance(network, CongestionAwareNetwork)
        network.check_order()  # pipeline sends share the links with the evaluated ring messages
    phases = None
    if coordinator is not None:
        phases = PhaseCoordinator(
            network, queue, stats, aware=coordinator.aware, chunks=coordinator.chunks, stagger=coordinator.stagger
        )
    workloads = []
    rings: dict = {}
    table = analysis.groups
    start_groups = groups_at_start(table.from_file, npus)
    _prune_cache()
    twins: Twins[RankTrace] = Twins()
    custom = CustomCollectives()  # the custom traces, each file loaded once for every rank
    for rank, graph in enumerate(trace_set.ranks):
        sys = Sys(rank, hw, queue, network, stats, coordinator, rings, phases if phases_fast else None)
        metadata = {i: [(g, list(table.members[g])) for g in names] for i, names in table.metadata[rank].items()}
        workloads.append(
            Workload(
                rank, rank_trace(graph, twins), sys, hw, start_groups[rank], memories[rank], result, metadata, custom
            )
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
        waits = [run.pending() for w in workloads for run in w.sys.custom_runs]
        if waits and why is None:  # name the custom trace nodes the stuck collectives wait on
            why = "; ".join(sorted(waits)[:STUCK_LIST_LIMIT])
        done = (workloads[r] for r in result.finish_order)
        finished = {w.rank: (w.finish_ns, w.finish_ns - w.hardware.tics_gpu) for w in done}
        raise analysis.stuck_error(stuck, why, finished)  # exit 3, printed as set-deadlock problem lines
    result.messages = stats.messages
    result.fast_messages = stats.fast_messages
    result.finalize(workloads)
    _warn(analysis, timed)  # a run that stops lists them in its error instead
    return result
