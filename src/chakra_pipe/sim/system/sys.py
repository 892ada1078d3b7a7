"""One NPU's system layer (ASTRA-sim ``Sys``): event batching, streams, queues and collectives.

Event batching matters for exact same-time ordering: each NPU keeps a map tick -> callbacks and only
the first callback for a tick schedules a backend event; callbacks registered for the tick being
processed (delay 0) run in the same pass. A collective is cut into chunk streams (§3.2), each stream
is a chain of phases, and each phase waits in its dimension's queue where only the first
``ceil(active-chunks / queues)`` streams run (§3.3). A custom collective is one stream of one phase
in dimension 0's queue 0 (``generate_custom``).
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable
from typing import Any

from ...errors import ConfigError
from .algorithm import AG, AR
from .custom import CUSTOM_QUEUE, CustomProgram, CustomRun
from .decompose import FIRST, NEXT, phase_chain
from .ring import Ring
from .ring_fast import FastRing
from .stream import DataSet, Phase, Stream
from .topology import ANTICLOCKWISE, CLOCKWISE, LogicalTopology

RENDEZVOUS_BYTES = 8192
# One constant, two coupled uses (spec §2.4, quirk 16): the workload layer takes a send/receive tag
# modulo TAG_SPACE, and the rendezvous handshake of a message with tag t travels with tag t + TAG_SPACE.
# Reduced tags lie below TAG_SPACE and handshake tags at or above it, so a handshake can never match a
# data message; changing one use without the other would let them collide.
TAG_SPACE = 500_000_000


def chunking(ctype: str, size: int, splits: int, total_nodes: int) -> tuple[int, int, int]:
    """ASTRA-sim's ``determine_chunk_size`` and stream count (spec §3.2 item 1): ``(chunk, size,
    streams)``, ``size`` rewritten to ``splits × total_nodes`` when a non-all-gather chunk is below the
    NPU count. ``generate_collective`` cuts native collectives with it; the workload layer checks a
    custom collective against it, since upstream sizes the custom data set by these streams too. The
    caller keeps all-gathers with ``size < splits`` (chunk 0) out (``all_gather_too_small``)."""
    chunk = size // splits
    if ctype != AG and total_nodes > chunk:
        chunk = total_nodes
        size = splits * total_nodes
    return chunk, size, -(-size // chunk)


class _QueueLevel:
    """Queues of one dimension and the three round-robin allocators ASTRA-sim keeps for them."""

    def __init__(self, queues: list[int]):
        self.queues = queues
        self.alloc = 0
        self.first = 0
        self.last = len(queues) // 2

    def next(self) -> tuple[int, int]:
        n = len(self.queues)
        # Upstream exempts level 0 only on the Garnet backend; on the analytical backends the upper half
        # of dimension 0's queues runs anticlockwise too.
        direction = ANTICLOCKWISE if (n > 1 and self.alloc >= n // 2) else CLOCKWISE
        q = self.queues[self.alloc]
        self.alloc = (self.alloc + 1) % n
        return q, direction

    def next_first(self) -> tuple[int, int]:
        q = self.queues[self.first]
        self.first += 1
        if self.first >= max(1, len(self.queues) // 2):  # upstream reads past a 1-queue level here
            self.first = 0
        return q, CLOCKWISE

    def next_last(self) -> tuple[int, int]:
        q = self.queues[self.last]
        self.last += 1
        if self.last == len(self.queues):
            self.last = len(self.queues) // 2
        return q, ANTICLOCKWISE


class Group:
    """A communicator group as one NPU sees it: id, members, stream counter, cached plans."""

    def __init__(self, gid: int, members: list[int], name: str):
        if gid <= 0:
            raise ConfigError(f"communicator group ids must be > 0, got {gid}", where=f"group {name!r}")
        self.gid, self.members, self.name = gid, members, name
        self.num_streams = gid * 1_000_000
        self.plans: dict[str, LogicalTopology] = {}
        # collective type -> the custom prefix (None: native) its first collective on this group took;
        # upstream's get_collective_plan caches the whole plan, implementation included, per type
        self.custom: dict[str, str | None] = {}


class Sys:
    def __init__(
        self, npu: int, hw, queue, network, stats, ring_coordinator=None, shared_rings=None, phase_coordinator=None
    ):
        self.id = npu
        self.hw = hw
        self.cfg = hw.system
        self.queue = queue
        self.network = network
        self.stats = stats
        self.endpoint_delay = hw.endpoint_delay
        self._mem_bw = self.cfg.local_mem_bw * 1_000_000_000
        self.physical = hw.network.npus_count
        self.total_nodes = hw.network.npus
        nq = hw.num_queues_per_dim
        self.levels = [_QueueLevel(list(range(d * nq, (d + 1) * nq))) for d in range(len(self.physical))]
        # deques: a finished stream leaves from the front, and a list's front delete moves every waiting
        # chunk (quadratic in preferred-dataset-splits)
        self.active: dict[int, deque[Stream]] = {q: deque() for q in range(nq * len(self.physical))}
        self.running: dict[int, int] = dict.fromkeys(self.active, 0)
        self.threshold = math.ceil(self.cfg.active_chunks_per_dimension / nq)
        self.priority_counter = 0
        self.num_streams = 0
        self._ticks: dict[int, list[Callable[[], None]]] = {}
        self._topologies: dict[str, LogicalTopology] = {}
        # Per-shape caches (LLM steps repeat a few dozen (type, size, group) shapes thousands of times).
        # Keys hold ids of plans / dimensions; each value keeps its plan or dimension alive, so an id
        # is never reused for another one while its entry exists.
        self._chains: dict[tuple, tuple[LogicalTopology, list]] = {}  # (type, plan, involved) -> steps
        self._prototypes: dict[tuple, tuple[Any, Any]] = {}  # (dimension, type, size, direction) -> phase
        self.rendezvous = hw.rendezvous
        self.ring_coordinator = ring_coordinator  # set when ring phases may use the exact fast path
        self.shared_rings = {} if shared_rings is None else shared_rings
        self.phase_coordinator = phase_coordinator  # set when direct / tree phases may use their fast paths
        self.custom_runs: set[CustomRun] = set()  # custom collectives still running (a stuck run's report)

    @property
    def now(self) -> int:
        return self.queue.now

    # -- events -----------------------------------------------------------------------------
    def register_event(self, fn: Callable[[], None], delay: int) -> None:
        t = self.queue.now + delay
        lst = self._ticks.get(t)
        if lst is None:
            self._ticks[t] = [fn]
            self.queue.schedule(t, self._call_events, t)
        else:
            lst.append(fn)

    def _call_events(self, t: int) -> None:
        for fn in self._ticks[t]:  # a list iterator also runs what the callbacks append (delay 0)
            fn()
        del self._ticks[t]

    def reduction_delay(self, size: int) -> int:
        """Pd: one write and two reads, each truncated separately (§3.4)."""
        one = int(size / self._mem_bw * 1e9)
        return 3 * one

    # -- point to point ---------------------------------------------------------------------
    def send(self, dst: int, size: int, tag: int, on_arrival: Callable[[], None] | None) -> None:
        self.stats.messages += 1
        if self.rendezvous:
            self.network.recv(
                self.id,
                dst,
                RENDEZVOUS_BYTES,
                tag + TAG_SPACE,
                lambda: self.network.send(self.id, dst, size, tag, on_arrival),
            )
        else:
            self.network.send(self.id, dst, size, tag, on_arrival)

    def recv(self, src: int, size: int, tag: int, on_arrival: Callable[[], None]) -> None:
        if self.rendezvous:
            self.network.send(
                self.id,
                src,
                RENDEZVOUS_BYTES,
                tag + TAG_SPACE,
                lambda: self.network.recv(self.id, src, size, tag, on_arrival),
            )
        else:
            self.network.recv(self.id, src, size, tag, on_arrival)

    # -- collectives --------------------------------------------------------------------------
    def _plan(self, ctype: str, group: Group | None) -> LogicalTopology:
        # the configured algorithms are looked up only to build a plan: a cached plan's type resolved
        if group is not None and len(group.members) != self.total_nodes:
            plan = group.plans.get(ctype)
            if plan is None:
                algos = self.cfg.implementation(ctype)
                plan = group.plans[ctype] = LogicalTopology.group_ring(self.id, group.members, algos, self.shared_rings)
            return plan
        plan = self._topologies.get(ctype)
        if plan is None:
            plan = self._topologies[ctype] = LogicalTopology.global_plan(
                self.id, self.physical, self.cfg.implementation(ctype), self.shared_rings
            )
        return plan

    def _priority(self, explicit: int) -> int:
        policy = self.cfg.scheduling_policy
        if policy == "LIFO":
            self.priority_counter += 1
            return self.priority_counter - 1
        if policy == "FIFO":
            self.priority_counter -= 1
            return self.priority_counter + 1
        return explicit

    def _algorithm(self, ctype: str, dim, size: int, direction: int):
        """A new, unstarted algorithm object for one phase of ``dim`` (the fast path where it applies)."""
        algo = dim.algorithm
        base = algo.base
        topo = dim.basic()
        if base == "ring":
            return (FastRing if self.ring_coordinator is not None else Ring)(ctype, self, topo, size, direction)
        # The other algorithms are imported by the first plan that uses them: a ring-only run (most
        # small runs, each its own process in a sweep) never pays for them (issue #15).
        if base == "direct":
            from .direct import Direct
            from .direct_fast import FastDirect, fast_direct_applies

            fast = self.phase_coordinator is not None and fast_direct_applies(algo.window, topo.size)
            return (FastDirect if fast else Direct)(ctype, self, topo, size, direction, algo.window)
        if base == "halvingDoubling":
            from .halving_doubling import FastHalvingDoubling, HalvingDoubling

            coord = self.ring_coordinator  # on the aware network its steps go through the phase coordinator
            fast = coord is not None and (not coord.aware or self.phase_coordinator is not None)
            return (FastHalvingDoubling if fast else HalvingDoubling)(ctype, self, topo, size)
        if ctype != AR:
            raise ConfigError(
                f"doubleBinaryTree implements ALL_REDUCE only, not {ctype} (a "
                f"localBWAware all-reduce on several dimensions needs reduce-scatter phases)",
                file=self.cfg.source,
                where="all-reduce-implementation",
            )
        from .double_binary_tree import DoubleBinaryTree
        from .tree_fast import FastDoubleBinaryTree

        return (DoubleBinaryTree if self.phase_coordinator is None else FastDoubleBinaryTree)(self, topo, size)

    def _prototype(self, ctype: str, dim, size: int, direction: int, protos: dict) -> Any:
        """The never-started algorithm of one phase shape, kept for copying per chunk.

        Ring, direct and halving-doubling objects depend only on (dimension, type, size, direction)
        until they start: one per shape, copied per chunk (a copy is a few times cheaper). ``protos``
        is the chain step's own (size, direction) shortcut into ``_prototypes``."""
        key = (id(dim), ctype, size, direction)
        hit = self._prototypes.get(key)
        if hit is None:
            hit = self._prototypes[key] = (dim, self._algorithm(ctype, dim, size, direction))
        proto = protos[(size, direction)] = hit[1]
        return proto

    def _chain(self, ctype: str, plan: LogicalTopology, involved: list[bool] | None, group: Group | None) -> list:
        """``[(phase type, dimension, queue allocator, prototypes)]`` of every chunk of a collective on
        ``plan`` (built once per collective type, plan and involved dimensions); ``prototypes`` maps
        (size, direction) to the step's unstarted algorithm (``_prototype``), None on a tree dimension."""
        key = (ctype, id(plan), None if involved is None or group is not None else tuple(involved))
        hit = self._chains.get(key)
        if hit is not None:
            return hit[1]
        dims = plan.dims
        if key[2] is None:
            used = [True] * len(dims)  # every dimension (upstream: a 10-entry all-true vector)
        else:
            used = list(involved) + [True] * max(0, len(dims) - len(involved))  # type: ignore[arg-type]
        order = list(range(len(dims)))
        if ctype == AG:
            order.reverse()

        def active(i: int) -> bool:
            return dims[order[i]].size != 1 and used[order[i]]

        steps: list[tuple[str, Any, Callable[[], tuple[int, int]], dict | None]] = []
        for ptype, i, allocator in phase_chain(ctype, len(dims), active, self.cfg.collective_optimization):
            level = self.levels[order[i]]
            alloc = level.next if allocator == NEXT else level.next_first if allocator == FIRST else level.next_last
            dim = dims[order[i]]
            steps.append((ptype, dim, alloc, {} if dim.dbt is None else None))
        self._chains[key] = (plan, steps)
        return steps

    def generate_collective(
        self, ctype: str, size: int, involved: list[bool] | None, group: Group | None, explicit_priority: int
    ) -> DataSet:
        """Cut a collective into chunk streams and queue them (spec §3.2)."""
        steps = self._chain(ctype, self._plan(ctype, group), involved, group)
        chunk, size, streams = chunking(ctype, size, self.cfg.preferred_dataset_splits, self.total_nodes)
        dataset = DataSet(streams, self.queue.now)
        pri = self._priority(explicit_priority)
        if not steps or streams <= 0:
            # Nothing to communicate (every dimension has one NPU or is excluded): done at once.
            dataset.total_streams = 1
            self.register_event(dataset.stream_finished, 0)
            return dataset
        # Per chunk and phase: a copy of the step's prototype (a tree dimension alternates its two
        # trees phase by phase: a new object each time), pointed at its stream.
        ids = self if group is None else group  # the stream-id counter: the group's, or this NPU's
        proceed = self.proceed_to_next_phase
        for _ in range(streams):
            sid = ids.num_streams
            ids.num_streams = sid + 1
            stream = Stream(dataset, sid, pri)
            phases = stream.phases
            remain = chunk
            for ptype, dim, alloc, protos in steps:
                q, direction = alloc()
                if protos is None:
                    a = self._algorithm(ptype, dim, remain, direction)
                else:
                    proto = protos.get((remain, direction))
                    if proto is None:
                        proto = self._prototype(ptype, dim, remain, direction, protos)
                    a = proto.unstarted_copy()
                a.stream = stream
                phases.append(Phase(q, a))
                remain = a.final_data_size
            phases.reverse()  # the first phase last: proceed_to_next_phase pops it
            proceed(stream)
        return dataset

    def generate_custom(
        self, program: CustomProgram, members: list[int], group: Group | None, explicit_priority: int
    ) -> DataSet:
        """Run a Chakra-defined custom collective over ``members`` (spec §3.5): one stream, no chunks,
        dimensions or memory-bus delay (``system/custom.py``), built as upstream's custom branch of
        ``Sys::generate_collective`` builds it: a priority step (LIFO / FIFO counter), a stream id
        from ``group``'s counter (this NPU's for the world group; native chunks use theirs as
        message tags, so later collectives' tags depend on it) and one phase in dimension 0's queue
        0, entered as a native chunk's first phase: it starts now unless the queue already runs its
        ``ceil(active-chunks / queues)`` streams (the previous collective's last stream, which
        leaves its queue after the workload heard of its end and issued this one)."""
        dataset = DataSet(1, self.queue.now)
        pri = self._priority(explicit_priority)
        ids = self if group is None else group
        stream = Stream(dataset, ids.num_streams, pri)
        ids.num_streams += 1
        run = CustomRun(self, program, members, stream)
        stream.phases.append(Phase(CUSTOM_QUEUE, run))
        self.custom_runs.add(run)
        self.proceed_to_next_phase(stream)
        return dataset

    # -- queues -------------------------------------------------------------------------------
    @staticmethod
    def _insert(queue: deque[Stream], stream: Stream) -> None:
        """After every started stream and every unstarted one of priority >= its own."""
        # Started streams lead the queue and unstarted ones follow in non-increasing priority, so when the
        # last one qualifies, all do: append in O(1) (chunks of one collective share a priority, and a
        # scan per chunk made preferred-dataset-splits quadratic).
        if not queue or queue[-1].initialized or queue[-1].priority >= stream.priority:
            queue.append(stream)
            return
        i = 0
        n = len(queue)
        while i < n and (queue[i].initialized or queue[i].priority >= stream.priority):
            i += 1
        queue.insert(i, stream)

    def _start_waiting(self, q: int) -> None:
        running, threshold = self.running, self.threshold
        if running[q] >= threshold:  # the common case: the queue's running streams are all it may run
            return
        lst = self.active[q]
        ptr = running[q]
        while ptr < len(lst) and running[q] < threshold:
            lst[ptr].init()
            running[q] += 1
            ptr += 1

    def proceed_to_next_phase(self, stream: Stream) -> None:
        prev = stream.queue_id  # the queue of the phase that just ended (-1 before the first)
        phases = stream.phases
        if not phases:
            # before the stream leaves its queue: the collective's notifier may issue new ones that see it
            stream.dataset.stream_finished()
        running = self.running
        if prev >= 0:
            lst = self.active[prev]
            if lst and lst[0] is stream:
                lst.popleft()
            else:
                for i, s in enumerate(lst):
                    if s is stream:
                        del lst[i]
                        break
        if not phases:
            stream.phase = None  # drop the stream <-> algorithm cycle (the GC is paused during a run)
            if prev >= 0:
                running[prev] -= 1
                if running[prev] < self.threshold:
                    self._start_waiting(prev)
            return
        stream.steps_finished += 1
        phase = stream.phase = phases.pop()
        q = stream.queue_id = phase.queue_id
        stream.initialized = False
        self._insert(self.active[q], stream)
        threshold = self.threshold
        if prev >= 0:
            running[prev] -= 1
            if running[prev] < threshold:
                self._start_waiting(prev)
        if running[q] < threshold:
            self._start_waiting(q)
