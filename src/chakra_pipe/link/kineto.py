"""Kineto (Chrome-trace JSON) events, split into the roles linking needs.

Only complete (``ph == "X"``) events matter: CPU ops and annotations (linked to host nodes by
``Record function id``), runtime launches (``cuda_runtime``/``cuda_driver``, keyed by
``correlation``) and device work (kernels, memcpys and memsets, which upstream drops).

Nesting on a thread is read from times: an event contains the later events that end inside it.
Two events with the very same ``[ts, dur]`` (a ``record_function`` wrapping exactly one op, as
zero-overhead wrappers and coarse clocks give) contain each other by times alone; as upstream's
linker does, the op entered first is the outer one: smaller ``Record function id``, then smaller
host ET id (both are taken at op entry), never the position in ``traceEvents`` (:func:`outer_first`).
"""

from __future__ import annotations

import math
import os
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..errors import InputError
from ..readfile import read_json

CPU_CATS = frozenset({"cpu_op", "user_annotation"})
LAUNCH_CATS = frozenset({"cuda_runtime", "cuda_driver"})
GPU_CATS = frozenset({"kernel", "gpu_memcpy", "gpu_memset"})
RF_KEY = "Record function id"
SYNC_CAT, STREAM_WAIT = "cuda_sync", "Stream Wait Event"  # with _ExperimentalConfig(enable_cuda_sync_events=True)
NO_HOST: Mapping[int, int] = {}


@dataclass
class KEvent:
    """One complete event; ``index`` is its position in ``traceEvents`` (a stable tie-breaker)."""

    index: int
    cat: str
    name: str
    pid: Any
    tid: Any
    ts: float
    dur: float
    args: dict[str, Any]
    end: float = field(init=False)

    def __post_init__(self) -> None:
        # Summed in whole ns: Kineto times are µs with ns decimals, often epoch-sized, where
        # ``ts + dur`` of a child ending at its parent's very ns can round one ulp past the parent's
        # sum (about 1 pair in 6) and leave the child out of its parent. ``n / 1000`` is the double
        # nearest the decimal, as a parsed ``ts`` is, so ends and starts at one ns compare equal.
        self.end = (round(self.ts * 1000) + round(self.dur * 1000)) / 1000

    def arg_int(self, key: str) -> int | None:
        """An integer argument that fits int64 (ids, streams, correlations), else None."""
        value = self.args.get(key)
        ok = isinstance(value, int) and not isinstance(value, bool) and -(1 << 63) <= value < 1 << 63
        return value if ok else None


@dataclass
class KinetoTrace:
    path: str
    header: dict[str, Any]
    cpu: list[KEvent] = field(default_factory=list)
    launches: list[KEvent] = field(default_factory=list)
    gpu: list[KEvent] = field(default_factory=list)
    # a stream's cudaStreamWaitEvent on the device (recorded only on request; see SYNC_CAT)
    stream_waits: list[KEvent] = field(default_factory=list)

    def main_pid(self) -> int | None:
        """The process id most CPU events carry (the traced process)."""
        pids = Counter(e.pid for e in self.cpu if isinstance(e.pid, int))
        return pids.most_common(1)[0][0] if pids else None

    def wall_start_s(self) -> float | None:
        """Epoch seconds of the first CPU event (``baseTimeNanoseconds`` + ``ts``), when recorded."""
        base = self.header.get("baseTimeNanoseconds")
        if not isinstance(base, int) or not self.cpu:
            return None
        return base / 1e9 + min(e.ts for e in self.cpu) / 1e6

    def events(self) -> list[KEvent]:
        """Every complete event kept: CPU ops, runtime calls and device ops (what commwait reads)."""
        return self.cpu + self.launches + self.gpu

    def has_rf_ids(self) -> bool:
        return any(RF_KEY in e.args for e in self.cpu)


def _number(value: Any, default: float | None) -> float | None:
    """A finite JSON number as float (JSON may carry NaN/Infinity tokens), else ``default``."""
    if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
        return float(value)
    return default


def parse_kineto(obj: Any, path: str) -> KinetoTrace:
    """Classify the events of a parsed Kineto JSON; malformed events are named by their index."""
    if not isinstance(obj, dict) or not isinstance(obj.get("traceEvents"), list):
        raise InputError("not a Kineto trace (no 'traceEvents' list)", file=path)
    trace = KinetoTrace(path=path, header={k: v for k, v in obj.items() if k != "traceEvents"})
    for i, ev in enumerate(obj["traceEvents"]):
        if not isinstance(ev, dict) or ev.get("ph") != "X":
            continue
        cat = ev.get("cat")
        if not isinstance(cat, str):
            continue
        role = (
            trace.cpu
            if cat in CPU_CATS
            else trace.launches
            if cat in LAUNCH_CATS
            else trace.gpu
            if cat in GPU_CATS
            else trace.stream_waits
            if cat == SYNC_CAT and ev.get("name") == STREAM_WAIT
            else None
        )
        if role is None:
            continue
        ts = _number(ev.get("ts"), None)
        if ts is None:
            raise InputError("complete event without a numeric 'ts'", file=path, where=f"traceEvents[{i}]")
        pid, tid = ev.get("pid"), ev.get("tid")
        if not all(isinstance(v, (int, str)) and not isinstance(v, bool) for v in (pid, tid)):
            raise InputError("'pid'/'tid' must be numbers or strings", file=path, where=f"traceEvents[{i}]")
        args = ev.get("args") if isinstance(ev.get("args"), dict) else {}
        role.append(KEvent(i, cat, str(ev.get("name", "")), pid, tid, ts, max(0.0, _number(ev.get("dur"), 0.0)), args))  # type: ignore[arg-type, type-var]
    return trace


def load_kineto(path: str | os.PathLike) -> KinetoTrace:
    return parse_kineto(read_json(path, strict=False), str(path))  # machine-written: see parse_json


def outer_first(events: list[KEvent], host_id: Mapping[int, int] = NO_HOST) -> list[KEvent]:
    """One thread's events, each before the events it contains.

    By start, then longer first; a run of equal spans by entry order: ``Record function id``,
    then the host ET id of the node the event is linked to (``host_id``: event index -> ET id;
    old Kineto has no rf ids), events without one after those with one; ``traceEvents`` position
    last, only to make the order total (it says nothing about nesting). Ties are rare, so only
    their runs pay for the entry key (a key for every event cost linking ~10% more CPU).
    """
    out = sorted(events, key=lambda e: (e.ts, -e.dur, e.index))
    spans = [(e.ts, e.dur) for e in out]
    if len(set(spans)) == len(spans):
        return out
    i = 0
    while i < len(out):
        j = i + 1
        while j < len(out) and spans[j] == spans[i]:
            j += 1
        if j - i > 1:
            out[i:j] = sorted(out[i:j], key=lambda e: _entry(e, host_id))
        i = j
    return out


def _entry(e: KEvent, host_id: Mapping[int, int]) -> tuple[bool, int, bool, int, int]:
    rf, hid = e.arg_int(RF_KEY), host_id.get(e.index)
    return (rf is None, rf or 0, hid is None, hid or 0, e.index)


def exclusive_durations(events: list[KEvent], host_id: Mapping[int, int] = NO_HOST) -> dict[int, float]:
    """Exclusive time per event (by ``index``): its duration minus its direct children's, per thread.

    Events of one thread nest (a stack, in :func:`outer_first` order); a child is an event that
    starts and ends inside its parent. Iterative, so deep call stacks cannot overflow (chakra
    issue #189).
    """
    by_thread: dict[tuple[Any, Any], list[KEvent]] = {}
    for e in events:
        by_thread.setdefault((e.pid, e.tid), []).append(e)
    child_sum: dict[int, float] = {}
    for evs in by_thread.values():
        stack: list[KEvent] = []
        for e in outer_first(evs, host_id):
            while stack and stack[-1].end <= e.ts:
                stack.pop()
            if stack and e.end <= stack[-1].end:
                child_sum[stack[-1].index] = child_sum.get(stack[-1].index, 0.0) + e.dur
            stack.append(e)
    return {e.index: max(0.0, e.dur - child_sum.get(e.index, 0.0)) for e in events}


def enclosing_ops(
    cpu: list[KEvent],
    launches: list[KEvent],
    accept: Callable[[KEvent], bool],
    host_id: Mapping[int, int] = NO_HOST,
) -> dict[int, KEvent]:
    """For each launch (by ``index``), the innermost accepted CPU op on its thread that contains it.

    ``accept`` filters ops (the linker accepts those matched to a host node, so a launch inside an
    op the host trace lacks climbs to its nearest matched ancestor). An accepted enclosing op with
    the launch's ``External id`` wins over a more deeply nested one (older traces attach kernels to
    the op that shares the External id). One sweep per thread with a stack of open ops, opened in
    :func:`outer_first` order (``host_id`` as there).
    """
    ops: dict[tuple[Any, Any], list[KEvent]] = {}
    for e in cpu:
        ops.setdefault((e.pid, e.tid), []).append(e)
    threads: dict[tuple[Any, Any], list[tuple[float, int, int, KEvent]]] = {}
    for key, evs in ops.items():
        threads[key] = [(e.ts, 0, k, e) for k, e in enumerate(outer_first(evs, host_id))]
    for k, e in enumerate(sorted(launches, key=lambda e: (e.ts, -e.dur, e.index))):
        threads.setdefault((e.pid, e.tid), []).append((e.ts, 1, k, e))
    found: dict[int, KEvent] = {}
    for items in threads.values():
        items.sort()  # (ts, kind, position) is unique: the events are never compared
        stack: list[KEvent] = []
        for ts, kind, _, e in items:
            while stack and stack[-1].end < ts:
                stack.pop()
            if kind == 0:
                stack.append(e)
                continue
            ext = e.arg_int("External id")
            candidates = [op for op in reversed(stack) if accept(op)]
            match = next((op for op in candidates if ext is not None and op.arg_int("External id") == ext), None)
            if match or candidates:
                found[e.index] = match or candidates[0]
    return found
