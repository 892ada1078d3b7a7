"""Explain a stuck run as a cycle of chunk streams waiting on each other through the dimension queues.

Each queue of a dimension runs only its first ``ceil(active-chunks-per-dimension / queues)`` streams
(spec §3.3) and queues the others in arrival order. When ranks reach a queue in different orders —
staggered starts, unequal links — NPU a can run chunk S while its peer b runs chunk T in the same
queue with its own copy of S queued behind T, and the other way round: neither phase ever gets the
peer's messages. ASTRA-sim's queues behave exactly like this (its issues #137 and #370), so such a
run hangs there too; we stop with a message naming the cycle instead. This module only reads the
queues left at the end of the run; it changes nothing in the simulation.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from .custom import CustomRun
from .stream import Stream

CYCLE_LIST_LIMIT = 4  # waits spelled out in the message; longer cycles end with "..."


@dataclass(frozen=True)
class _Running:
    """A stream that runs a phase on one NPU: the vertex of the wait-for graph."""

    npu: int
    stream: Stream
    queue: int
    dim: int


@dataclass(frozen=True)
class QueueWait:
    """``waiter`` needs messages from ``blocker.npu``, whose copy of the waiter's stream sits unstarted
    behind ``blocker`` in queue ``blocker.queue`` (or still runs an earlier phase, then ``behind`` is
    False and ``blocker`` is that copy)."""

    waiter: _Running
    blocker: _Running
    behind: bool

    def describe(self) -> str:
        w, b = self.waiter, self.blocker
        text = (
            f"NPU {w.npu} runs chunk stream {w.stream.stream_id} ({_phase_name(w.stream)}, dimension {w.dim}, "
            f"queue {w.queue}) and waits for NPU {b.npu}"
        )
        if self.behind:
            return (
                f"{text}, whose queue {b.queue} runs stream {b.stream.stream_id} ({_phase_name(b.stream)}) "
                f"with stream {w.stream.stream_id} queued behind it"
            )
        return f"{text}, which still runs that stream's {_phase_name(b.stream)} phase on dimension {b.dim}"


def _phase_name(stream: Stream) -> str:
    # the double binary tree implements all-reduce only and carries no collective type
    return getattr(stream.phase.algorithm, "ctype", "ALL_REDUCE")  # type: ignore[union-attr]


def _peers(stream: Stream, me: int) -> list[int]:
    """The NPUs whose messages the stream's current phase needs (its ring, or its tree neighbours)."""
    algo = stream.phase.algorithm  # type: ignore[union-attr]
    if isinstance(algo, CustomRun):
        # Its one phase waits in queue 0 only within the ns it was issued in (behind the stream that
        # just ended there), so no peer's copy of it is ever left queued: no queue wait to explain
        # (``CustomRun.pending`` names the nodes a stuck one waits for).
        return []
    ring = getattr(algo, "ring", None)
    if ring is not None:
        return [m for m in ring.members if m != me]
    return [n for n in (algo.parent, algo.left, algo.right) if n >= 0]


def queue_deadlock(systems: Sequence) -> list[QueueWait] | None:
    """The first cycle of queue waits among the NPUs' ``Sys`` objects after a run, or None.

    Vertices are running streams; ``a:S -> b:T`` when a's stream S needs NPU b and b's copy of S is
    queued behind T (or still runs an earlier phase, T = S). A cycle is a deadlock no event can break.
    """
    where: dict[tuple[int, int], tuple[int, Stream, Stream | None]] = {}  # (npu, sid) -> (queue, it, head)
    for sys in systems:
        for q, streams in sys.active.items():
            head = next((s for s in streams if s.initialized), None)
            for s in streams:
                where[sys.id, s.stream_id] = (q, s, head)
    nq = systems[0].hw.num_queues_per_dim if systems else 1  # queue q serves dimension q // nq

    def running(npu: int, s: Stream, q: int) -> _Running:
        return _Running(npu, s, q, q // nq)

    edges: dict[tuple[int, int], QueueWait] = {}
    for (npu, sid), (q, s, _) in where.items():
        if not s.initialized:
            continue
        for peer in _peers(s, npu):
            hit = where.get((peer, sid))
            if hit is None:
                continue  # the peer is done with this stream (or never issued it): not a queue wait
            pq, copy, head = hit
            if copy.initialized and copy.steps_finished >= s.steps_finished:
                continue  # the peer runs the same phase (or later): it sends what we need
            if copy.initialized:
                edges[npu, sid] = QueueWait(running(npu, s, q), running(peer, copy, pq), False)
            elif head is not None:
                edges[npu, sid] = QueueWait(running(npu, s, q), running(peer, head, pq), True)
            else:
                continue
            break
    for start in sorted(edges):
        seen: dict[tuple[int, int], int] = {}
        path: list[QueueWait] = []
        node = start
        while node in edges and node not in seen:
            seen[node] = len(path)
            path.append(edges[node])
            b = edges[node].blocker
            node = (b.npu, b.stream.stream_id)
        if node in seen:
            return path[seen[node] :]
    return None


def explain(cycle: list[QueueWait], threshold: int, splits: int) -> str:
    """One sentence per wait of the cycle (at most ``CYCLE_LIST_LIMIT``), then why and the way out."""
    waits = "; ".join(w.describe() for w in cycle[:CYCLE_LIST_LIMIT])
    if len(cycle) > CYCLE_LIST_LIMIT:
        waits += f"; ... ({len(cycle)} waits in the cycle)"
    return (
        f"chunk queues deadlock: {waits}. Each dimension queue runs only {threshold} stream(s) at a time "
        f"(ceil(active-chunks-per-dimension / queues per dimension)) and the NPUs queued these chunks in "
        f"different orders; ASTRA-sim's queues deadlock the same way (its issues #137 and #370, spec §3.3). "
        f"Set active-chunks-per-dimension >= preferred-dataset-splits ({splits}), or for a localBWAware "
        f"all-reduce use --num-queues-per-dim 2 so reduce-scatter and all-gather phases queue apart"
    )
