"""How long each thread waited for communication, measured on the Kineto timeline.

A gloo collective issued asynchronously (DDP's bucketed all-reduce, ``async_op=True``) runs on a
gloo worker thread (``gloo:*`` ranges); the issuing thread later sits in ``work.wait()``, which is
no recorded op. That idle time therefore lands in the exclusive time of whatever encloses it
(``ProfilerStep#N``, a ``record_function`` label) and conversion would freeze it into compute,
hiding it from any network what-if. A NCCL collective runs as a kernel on the device. Three
figures per thread are measured:

* **idle** — exclusive time of a *user annotation* (``ProfilerStep#N``, ``record_function``
  labels: their own time is the gaps between recorded ops, never a kernel) that overlaps
  collective work running on another thread of the process; it is credited to the annotation so
  conversion can take it out of that node's duration;
* **in calls** — time spent inside gloo's communication calls (``c10d::*``): these become COMM
  nodes, whose time the simulator models from the network, so it is not compute either;
* **in syncs** (NCCL) — time a thread sat blocked in a device synchronisation
  (``cuda{Stream,Event,Device}Synchronize``: ``work.wait()`` of a barrier, ``.item()``, ``.cpu()``,
  an explicit sync) while a NCCL kernel (``ncclDevKernel_*``, ``ncclKernel_*``) ran on the device
  and no other device work did (time the host waited for a kernel is the kernel's, as leaf ops
  below); credited per sync call, for the linker to take out of the op around it (the next op waits
  for the kernel: ``sync_dep``). A NCCL call (``record_param_comms``, or a ``c10d::`` op around one
  or around a ``nccl:*`` range) only enqueues the collective on the NCCL stream and returns: its
  microseconds are host launch time, not a wait, and its ``nccl:*`` range runs on the calling
  thread, so it is no collective work another thread could idle on either (a thread blocked on it
  is in *thread wait*). A one-member group launches no NCCL kernel and so waits for none. Told
  apart per call, so a trace mixing gloo and NCCL groups gets each rule where it applies; a trace
  without NCCL events measures as before.

Their sum is the thread's *communication wait*: the part of the measured step that a simulated
network replaces. Leaf ``cpu_op`` time outside such a sync is never counted, even when a
collective runs alongside: that is real computation overlapping communication.

A third figure, **thread wait**, is the rest of an annotation's own time that overlaps work of
*another* thread of the process (no collective work, no call of its own): its recorded ops, and the
own time of its annotations that began inside this gap (of two threads both between ops, the one
whose gap encloses the other's is the one blocked). The thread sat in an unrecorded blocking call
while the other one worked. On a GPU the main thread's
``loss.backward()`` hands the graph to the autograd device thread and blocks until it finishes;
kept as the annotation's compute, that wait would run the whole backward pass twice in a
simulation (once as the backward ops, once as ``ProfilerStep``'s own time). Conversion takes it out
of the annotation and orders the thread after the other one's ops instead (a cross-thread
dependency), so the wait is reproduced from the work it waited for.

Measured on one rank, the wait also holds the time a rank waited for a slower peer to reach the
same collective (skew), which is no network time: the simulator reproduces it from the ranks' own
work. :func:`network_wait_us` separates the two when every rank's timeline is at hand.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from .kineto import CPU_CATS, GPU_CATS, LAUNCH_CATS, NO_HOST, KEvent, outer_first

WORK_PREFIXES = ("gloo:",)  # ranges of gloo's worker thread doing the transfer
NCCL_RANGE_PREFIXES = ("nccl:",)  # ProcessGroupNCCL's range around the enqueue, on the calling thread
NCCL_RECORD = "record_param_comms"  # written by NCCL (and XCCL) process groups only, never by gloo
CALL_PREFIXES = ("c10d::",)
CALL_NAMES = frozenset({NCCL_RECORD})
IDLE_CAT = "user_annotation"
NCCL_KERNEL_MARKS = ("ncclDevKernel", "ncclKernel")  # as upstream's converter tests a kernel name


def is_call(e: KEvent) -> bool:
    return e.name.startswith(CALL_PREFIXES) or e.name in CALL_NAMES


def is_nccl_kernel(e: KEvent) -> bool:
    return e.cat == "kernel" and any(mark in e.name for mark in NCCL_KERNEL_MARKS)


def is_sync(e: KEvent) -> bool:
    """A runtime call that blocks the host until device work ends (the linker's sync points too)."""
    return e.cat in LAUNCH_CATS and "synchronize" in e.name.lower()


@dataclass
class CommWait:
    """Per event index: µs of idle overlapping collective work (``idle``), another thread's ops
    (``thread``) or a NCCL kernel (``sync``: the index of a runtime sync call); per thread: totals
    (µs)."""

    idle_by_event: dict[int, float] = field(default_factory=dict)
    idle_us: dict[Any, float] = field(default_factory=dict)
    in_calls_us: dict[Any, float] = field(default_factory=dict)
    thread_by_event: dict[int, float] = field(default_factory=dict)
    thread_us: dict[Any, float] = field(default_factory=dict)
    in_syncs_us: dict[Any, float] = field(default_factory=dict)  # NCCL: blocked on a collective's kernel
    sync_by_event: dict[int, float] = field(default_factory=dict)

    def total_us(self, tid: Any) -> float:
        return self.idle_us.get(tid, 0.0) + self.in_calls_us.get(tid, 0.0) + self.in_syncs_us.get(tid, 0.0)


def _merge(intervals: list[tuple[float, float]]) -> list[tuple[float, float]]:
    out: list[tuple[float, float]] = []
    for a, b in sorted(intervals):
        if out and a <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], b))
        elif b > a:
            out.append((a, b))
    return out


def _subtract(xs: list[tuple[float, float]], ys: list[tuple[float, float]]) -> list[tuple[float, float]]:
    """The parts of the sorted, disjoint intervals ``xs`` not covered by the sorted, disjoint ``ys``."""
    out: list[tuple[float, float]] = []
    j = 0
    for a, b in xs:
        while j < len(ys) and ys[j][1] <= a:
            j += 1
        k = j
        while k < len(ys) and ys[k][0] < b:
            if ys[k][0] > a:
                out.append((a, ys[k][0]))
            a = max(a, ys[k][1])
            k += 1
        if b > a:
            out.append((a, b))
    return out


def _overlap(a: float, b: float, merged: list[tuple[float, float]], starts: list[float]) -> float:
    """Length of [a, b) covered by the sorted, disjoint ``merged`` intervals."""
    total = 0.0
    i = max(0, bisect.bisect_right(starts, a) - 1)
    while i < len(merged) and merged[i][0] < b:
        total += max(0.0, min(b, merged[i][1]) - max(a, merged[i][0]))
        i += 1
    return total


def _exclusive_intervals(evs: list[KEvent], host_id: Mapping[int, int]) -> dict[int, list[tuple[float, float]]]:
    """Each event's own time on its thread as intervals: its span minus its direct children's
    (nesting in :func:`~.kineto.outer_first` order: of a label and the one op it wraps exactly, the
    label is the outer one, with no own time)."""
    out: dict[int, list[tuple[float, float]]] = {}
    stack: list[tuple[KEvent, float]] = []  # (event, start of its current own-time segment)

    def close(upto: float) -> None:
        e, seg = stack.pop()
        out.setdefault(e.index, []).append((seg, min(upto, e.end)))
        if stack:
            parent, _ = stack[-1]
            stack[-1] = (parent, min(e.end, parent.end))

    for e in outer_first(evs, host_id):
        # Close what ended before e, and what e sticks out of (not its parent: events should nest).
        while stack and (stack[-1][0].end <= e.ts or stack[-1][0].end < e.end):
            close(stack[-1][0].end)
        if stack:
            parent, seg = stack[-1]
            out.setdefault(parent.index, []).append((seg, e.ts))
        stack.append((e, e.ts))
    while stack:
        close(stack[-1][0].end)
    return out


def _cpu_threads(events: list[KEvent]) -> dict[tuple[Any, Any], list[KEvent]]:
    """The CPU ops and annotations of each (process, thread), in the order given."""
    threads: dict[tuple[Any, Any], list[KEvent]] = {}
    for e in events:
        if e.cat in CPU_CATS:
            threads.setdefault((e.pid, e.tid), []).append(e)
    return threads


def _nccl_calls(evs: list[KEvent]) -> list[KEvent]:
    """The calls of one thread that enqueue a NCCL collective: ``record_param_comms`` and the
    ``c10d::`` ops containing one or a ``nccl:*`` range (gloo's calls contain neither)."""
    marks = sorted(e.ts for e in evs if e.name == NCCL_RECORD or e.name.startswith(NCCL_RANGE_PREFIXES))
    if not marks:
        return []
    out = []
    for e in evs:
        if e.name == NCCL_RECORD:
            out.append(e)
        elif is_call(e):
            i = bisect.bisect_left(marks, e.ts)
            if i < len(marks) and marks[i] <= e.end:
                out.append(e)
    return out


def _in_syncs(device: list[KEvent], syncs: dict[Any, list[KEvent]]) -> dict[int, float]:
    """Per sync call (event index), the time it overlaps NCCL kernels while no other device work
    ran; a thread's overlapping calls count their common time once (for the earliest)."""
    nccl = _merge([(e.ts, e.end) for e in device if is_nccl_kernel(e)])
    if not nccl:
        return {}
    alone = _subtract(nccl, _merge([(e.ts, e.end) for e in device if e.cat in GPU_CATS and not is_nccl_kernel(e)]))
    starts = [a for a, _ in alone]
    out: dict[int, float] = {}
    for calls in syncs.values():
        reached = -math.inf
        for e in sorted(calls, key=lambda e: (e.ts, e.index)):
            wait = _overlap(max(e.ts, reached), e.end, alone, starts) if e.end > reached else 0.0
            reached = max(reached, e.end)
            if wait > 0:
                out[e.index] = wait
    return out


def measure(events: list[KEvent], host_id: Mapping[int, int] = NO_HOST) -> CommWait:
    """Idle-while-communicating, in-call, in-sync and waiting-on-another-thread time per thread, and
    the idle of each annotation event (``host_id``: event index -> linked ET id, for nesting).

    ``events`` may hold any Kineto events: CPU ops and annotations are measured, runtime syncs and
    device ops only serve the NCCL rule (a list of CPU events alone measures no NCCL wait)."""
    threads = _cpu_threads(events)
    syncs: dict[Any, list[KEvent]] = {}
    for e in events:
        if is_sync(e):
            syncs.setdefault(e.tid, []).append(e)
    device = [e for e in events if e.cat in GPU_CATS]
    work = {
        key: _merge([(e.ts, e.end) for e in evs if e.name.startswith(WORK_PREFIXES)]) for key, evs in threads.items()
    }
    own_of = {key: _exclusive_intervals(evs, host_id) for key, evs in threads.items()}
    # What a blocked thread can wait for on another thread: its recorded ops, and the own time of its
    # annotations (a label's Python, e.g. DDP's comm hook on the autograd thread) -- the latter only
    # when it began inside the waiting gap (see _waited).
    recorded = {key: _merge([(e.ts, e.end) for e in evs if e.cat != IDLE_CAT]) for key, evs in threads.items()}
    labels = {
        key: [seg for e in evs if _is_label(e) for seg in own_of[key].get(e.index, ())] for key, evs in threads.items()
    }
    result = CommWait(sync_by_event=_in_syncs(device, syncs))
    for tid, sync_calls in syncs.items():
        waits = [result.sync_by_event[e.index] for e in sync_calls if e.index in result.sync_by_event]
        if waits:
            result.in_syncs_us[tid] = sum(waits)
    for key, evs in threads.items():
        siblings = [k for k in threads if k != key and k[0] == key[0]]
        others = _merge([iv for k in siblings for iv in work[k]])
        ops = _merge([iv for k in siblings for iv in recorded[k]])
        their_labels = sorted(seg for k in siblings for seg in labels[k])
        calls = _merge([(e.ts, e.end) for e in evs if is_call(e)])
        nccl = {e.index for e in _nccl_calls(evs)}
        blocking = _merge([(e.ts, e.end) for e in evs if is_call(e) and e.index not in nccl])
        if blocking:
            result.in_calls_us[key[1]] = sum(b - a for a, b in blocking)
        if not others and not ops and not their_labels:
            continue
        for e in evs:
            if not _is_label(e):
                continue
            segments = own_of[key].get(e.index, ())
            idle = _idle(segments, others, calls)
            blocked = sum(_idle([seg], _waited(seg, ops, their_labels, others), calls) for seg in segments)
            for wait, by_event, per_thread in (
                (idle, result.idle_by_event, result.idle_us),
                (blocked, result.thread_by_event, result.thread_us),
            ):
                if wait > 0:
                    by_event[e.index] = wait
                    per_thread[key[1]] = per_thread.get(key[1], 0.0) + wait
    return result


def _is_label(e: KEvent) -> bool:
    """A user annotation whose own time is a gap between recorded ops (a worker's range is the work
    itself, a ``nccl:*`` range part of its enqueueing call)."""
    return e.cat == IDLE_CAT and not e.name.startswith(WORK_PREFIXES + NCCL_RANGE_PREFIXES)


def _waited(
    seg: tuple[float, float],
    ops: list[tuple[float, float]],
    labels: list[tuple[float, float]],
    others: list[tuple[float, float]],
) -> list[tuple[float, float]]:
    """The parts of the own-time gap ``seg`` during which another thread worked, collective work aside.

    Other threads' recorded ops count wherever they fall. Another thread's label own time counts only
    when it began inside this gap (at its start: ended inside it): of two threads both in a gap, the
    one whose gap encloses the other's was the one blocked -- the main thread in ``backward()`` while
    the DDP comm hook's label runs on the autograd thread, not the other way round.
    """
    a, b = seg
    covered: list[tuple[float, float]] = []
    i = max(0, bisect.bisect_right(ops, (a, a)) - 1)
    while i < len(ops) and ops[i][0] < b:
        if ops[i][1] > a:
            covered.append((max(a, ops[i][0]), min(b, ops[i][1])))
        i += 1
    j = bisect.bisect_left(labels, (a, a))
    while j < len(labels) and labels[j][0] < b:
        x, y = labels[j]
        if x > a or y < b:
            covered.append((x, min(b, y)))
        j += 1
    return _subtract(_merge(covered), others)


def _idle(segments, merged: list[tuple[float, float]], calls: list[tuple[float, float]]) -> float:
    """Length of the ``segments`` covered by ``merged``, less what a call covers (counted as in-call)."""
    if not merged:
        return 0.0
    starts = [a for a, _ in merged]
    call_starts = [a for a, _ in calls]
    return sum(
        _overlap(a, b, merged, starts) - _overlap_in(a, b, merged, starts, calls, call_starts) for a, b in segments
    )


def _overlap_in(a: float, b: float, others, starts, calls, call_starts) -> float:
    """Part of [a, b) covered both by other threads' work and by a call (counted as in-call already)."""
    total = 0.0
    i = max(0, bisect.bisect_right(call_starts, a) - 1)
    while i < len(calls) and calls[i][0] < b:
        lo, hi = max(a, calls[i][0]), min(b, calls[i][1])
        if hi > lo:
            total += _overlap(lo, hi, others, starts)
        i += 1
    return total


def network_wait_us(ranks: list[list[KEvent]]) -> list[float]:
    """Per rank, the part of its communication wait (µs) after the last rank reached each collective.

    Every gloo work range and call and every NCCL kernel is clipped to start when the *last* rank
    started the same one — the n-th event of that name on each rank, in time order (collectives of
    a group run in the same order on every member; Kineto's clocks agree across the processes of one
    host) — and the wait is measured again on the clipped timeline (NCCL calls stay whole). What is
    left is the network's part: an infinite network removes that much, while the skew stays. NCCL
    waits are measured only when the ranks' lists hold their runtime and device events too
    (``KinetoTrace.events()``).
    """
    paired: dict[tuple[str, int], list[KEvent]] = {}
    for events in ranks:
        threads = _cpu_threads(events)
        # A NCCL call is no wait, clipped or not; clipping it could cut it off the record or range
        # that marks it as NCCL, and what was left would count as a blocking (gloo) call.
        nccl = {e.index for evs in threads.values() for e in _nccl_calls(evs)}
        seen: dict[str, int] = {}
        for e in sorted(events, key=lambda e: (e.ts, e.index)):
            if e.index in nccl:
                continue
            if e.name.startswith(WORK_PREFIXES) or is_call(e) or is_nccl_kernel(e):
                n = seen[e.name] = seen.get(e.name, -1) + 1
                paired.setdefault((e.name, n), []).append(e)
    last = {id(e): max(x.ts for x in group) for group in paired.values() if len(group) == len(ranks) for e in group}
    out = []
    for events in ranks:
        clipped = [
            replace(e, ts=min(last[id(e)], e.end), dur=max(0.0, e.end - last[id(e)]))
            if last.get(id(e), e.ts) > e.ts
            else e
            for e in events
        ]
        w = measure(clipped)
        out.append(sum(w.idle_us.values()) + sum(w.in_calls_us.values()) + sum(w.in_syncs_us.values()))
    return out
