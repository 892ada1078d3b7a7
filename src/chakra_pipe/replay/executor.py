"""One rank's issue loop: walk the DAG with the simulator's slots, polling what is in flight.

Mirrors astra-sim-semantics.md §2.2–2.3: a node issues once every data *and* ctrl parent has
finished; the CPU, compute and comm slots hold one node each; a RECV needs no slot. The compute
and CPU slots pick the ready node with the smallest id, as ASTRA-sim does; the comm slot walks the
plan's static order (see ``plan`` for why). The loop never blocks in a device call: it issues
asynchronous work and polls it, and between polls pauses only in ``Engine.idle``, bounded by the
deadline and the next busy-wait's end, so compute busy-waits, communication progress and the
deadline are all handled by the one thread, and a stuck rank can always say which node it is on.

Torch-free on purpose: the device work lives behind :class:`Engine`, so the scheduling rules are
unit-tested with a fake engine and no processes.
"""

from __future__ import annotations

import heapq
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from .plan import SLOT_COMM, SLOT_COMP, SLOT_CPU, SLOT_NONE, RankPlan

# Polling policy, for engines whose work cannot signal its end (CUDA events): spin (yielding) for a
# while after the last change, then nap briefly. Pure spinning starves gloo's worker threads when
# ranks outnumber cores (8 ranks on 2 cores hung for minutes); a nap bounds the added latency per
# completion to about one sleep quantum (~0.1 ms on Linux). Busy-waits the engine can date
# (``Engine.due``) are neither napped nor yielded through.
SPIN_POLLS = 200
BACKOFF_S = 50e-6
BACKOFF_NS = int(BACKOFF_S * 1e9)


def idle_poll(polls: int) -> None:
    """The policy's pause after the ``polls``-th idle poll in a row: a yield, then naps."""
    if polls < SPIN_POLLS:
        os.sched_yield()
    else:
        time.sleep(BACKOFF_S)


def wait_work(work, deadline_ns: int | None = None) -> bool:
    """Wait for a ``torch.distributed`` work handle under the polling policy (a blocking ``wait``
    would hold no deadline); False when ``time.monotonic_ns()`` passes ``deadline_ns`` first."""
    polls = 0
    while not work.is_completed():
        if deadline_ns is not None and time.monotonic_ns() > deadline_ns:
            return False
        polls += 1
        idle_poll(polls)
    work.wait()
    return True


class Engine(Protocol):
    """Device side of the replay: start a node's work and poll it."""

    def start(self, i: int) -> object | None:
        """Issue node ``i``; return a handle to poll, or None when it already finished."""

    def poll(self, handle: object) -> bool:
        """True once the work behind ``handle`` finished; raises if it failed."""

    def due(self, handle: object) -> int | None:
        """When ``handle`` is known to finish (clock ns; a busy-wait's end), else None."""

    def idle(self, polls: int, timeout_ns: int) -> None:
        """Pause after the ``polls``-th poll in a row that found nothing finished: until some work
        may have finished, at most ``timeout_ns`` (till the deadline or a busy-wait's end). An
        engine whose work signals its end sleeps on that signal (a yield hands a 2-core host's
        whole time slice to a busy thread, a nap adds its quantum to every completion); one whose
        work cannot signal uses :func:`idle_poll`."""

    def finished_at(self, handle: object) -> int | None:
        """When the work behind a finished ``handle`` completed (clock ns), stamped by the backend's
        own thread; None when only the poll saw it. The poll is late by however long this thread
        waited for a core (on a shared machine, a whole time slice after a yield), which is not
        the work's time."""


class NodeFailed(Exception):
    """The work of node ``index`` raised (a peer died, a backend error)."""

    def __init__(self, index: int, message: str):
        super().__init__(message)
        self.index = index


class ReplayTimeout(Exception):
    """The deadline passed with ``in_flight`` nodes unfinished (``waiting`` = not yet issued)."""

    def __init__(self, in_flight: list[int], waiting: list[int]):
        super().__init__("deadline passed")
        self.in_flight = in_flight
        self.waiting = waiting


@dataclass
class IterationTiming:
    """Issue and completion times (ns since the iteration started) of every node, and when the
    iteration started on the clock itself (``origin_ns``). The clock is ``time.monotonic_ns``:
    CLOCK_MONOTONIC is one system-wide clock, so the origins of ranks on one host are comparable
    and ``origin_ns + start_ns[i]`` puts every rank's node on one time line (ranks leave the
    iteration barrier milliseconds apart on a loaded host; times relative to each rank's own start
    cannot be compared across ranks)."""

    wall_ns: int
    start_ns: list[int]
    end_ns: list[int]
    origin_ns: int


def run_iteration(
    plan: RankPlan,
    engine: Engine,
    deadline_ns: int,
    on_change: Callable[[list[int]], None] | None = None,
    clock: Callable[[], int] = time.monotonic_ns,
) -> IterationTiming:
    """Execute every node of ``plan`` once; ``deadline_ns`` is on ``clock``'s scale."""
    n = len(plan)
    waiting = [len(p) for p in plan.parents]
    heaps: dict[int, list[tuple[int, int]]] = {SLOT_CPU: [], SLOT_COMP: []}
    recv_ready: list[int] = []
    busy: dict[int, tuple[int, object] | None] = {SLOT_CPU: None, SLOT_COMP: None, SLOT_COMM: None}
    recvs: list[tuple[int, object]] = []
    order, pos = plan.comm_order, 0
    start = [-1] * n
    end = [-1] * n
    done = 0
    idle = 0
    t0 = clock()

    def make_ready(i: int) -> None:
        slot = plan.slots[i]
        if slot in heaps:
            heapq.heappush(heaps[slot], (plan.ids[i], i))
        elif slot == SLOT_NONE:
            recv_ready.append(i)

    def finish(i: int, now: int) -> None:
        nonlocal done
        end[i] = now - t0
        done += 1
        for c in plan.children[i]:
            waiting[c] -= 1
            if waiting[c] == 0:
                make_ready(c)

    def issue(i: int) -> object | None:
        now = clock()
        start[i] = now - t0
        try:
            handle = engine.start(i)
        except Exception as exc:  # noqa: BLE001 - any backend error is reported against its node
            raise NodeFailed(i, _one_line(exc)) from exc
        if handle is None:
            finish(i, clock())
        return handle

    def check(i: int, handle: object) -> bool:
        try:
            ok = engine.poll(handle)
        except Exception as exc:  # noqa: BLE001
            raise NodeFailed(i, _one_line(exc)) from exc
        if ok:
            now = clock()
            stamped = engine.finished_at(handle)
            finish(i, now if stamped is None else max(start[i] + t0, min(stamped, now)))
        return ok

    for i in range(n):
        if waiting[i] == 0:
            make_ready(i)
    while done < n:
        changed = False
        for slot in (SLOT_CPU, SLOT_COMP):
            while busy[slot] is None and heaps[slot]:
                _, i = heapq.heappop(heaps[slot])
                changed = True
                handle = issue(i)
                if handle is not None:
                    busy[slot] = (i, handle)
        while busy[SLOT_COMM] is None and pos < len(order) and waiting[order[pos]] == 0:
            i = order[pos]
            pos += 1
            changed = True
            handle = issue(i)
            if handle is not None:
                busy[SLOT_COMM] = (i, handle)
        while recv_ready:
            i = recv_ready.pop()
            changed = True
            handle = issue(i)
            if handle is not None:
                recvs.append((i, handle))
        for slot, item in busy.items():
            if item is not None and check(*item):
                busy[slot] = None
                changed = True
        still = [(i, h) for i, h in recvs if not check(i, h)]
        if len(still) != len(recvs):
            recvs = still
            changed = True
        if changed:
            idle = 0
            if on_change is not None:
                on_change([item[0] for item in busy.values() if item is not None] + [i for i, _ in recvs])
            continue
        if done < n and all(item is None for item in busy.values()) and not recvs and not recv_ready:
            raise RuntimeError(f"{plan.file}: nothing in flight and nothing issuable with {n - done} nodes left")
        if clock() > deadline_ns:
            in_flight = [item[0] for item in busy.values() if item is not None] + [i for i, _ in recvs]
            raise ReplayTimeout(sorted(in_flight), [i for i in range(n) if start[i] < 0])
        idle += 1
        now = clock()
        due = _next_due(engine, busy)
        if due is not None and due - now < 2 * BACKOFF_NS:
            continue  # a busy-wait is ending: hold the core (a yield can cost a whole time slice)
        until = deadline_ns if due is None else min(deadline_ns, due - 2 * BACKOFF_NS)
        engine.idle(idle, max(0, until - now))
    return IterationTiming(clock() - t0, start, end, t0)


def _next_due(engine: Engine, busy: dict) -> int | None:
    """When the first busy-wait in flight ends (None: none is): the loop spins through its last two
    naps so its end is not overshot, and sleeps no longer than until then."""
    dues = [engine.due(item[1]) for item in busy.values() if item is not None]
    return min((d for d in dues if d is not None), default=None)


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}".rstrip(": ")
