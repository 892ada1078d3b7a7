"""Merge a host ET with its Kineto trace into one "ET+" JSON (host + device), without HTA.

Differences from upstream ``chakra_trace_link`` (pytorch-traces.md §5, §6.4 item 10): no
``ProfilerStep`` needed (the whole trace is one step), gzip accepted on both inputs, original host
ids kept (GPU nodes get fresh ids above them), memsets included, annotation durations kept, and
a pair from different runs is refused instead of silently producing an unlinked file. Where
times alone cannot say which of two events contains the other (equal ``[ts, dur]``), the one
entered first (rf_id, then ET id) is the outer one, as upstream (``kineto.outer_first``).
"""

from __future__ import annotations

import bisect
import json
import math
import os
from dataclasses import asdict, dataclass
from datetime import UTC
from itertools import accumulate
from typing import Any, cast

from ..atomic import atomic_open
from ..errors import InputError
from . import commwait
from .hostet import HostTrace, attr, device_of, is_root, is_thread, load_host_trace
from .kineto import RF_KEY, KEvent, KinetoTrace, enclosing_ops, exclusive_durations, load_kineto

MIN_MATCHED = 0.5
EXTERNAL_KEY = "External id"
# Kineto from torch < 2.1 has no rf ids; its External id equals the host rf_id in some traces
# (HTA's simple-add pair: 36/36 names agree) and is unrelated in others (PARAM's DLRM: at most
# 801/1,673, the linear fixture 218/928). Below this share of agreeing names the fallback refuses.
MIN_EXTERNAL_AGREEMENT = 0.9
# The host ET's "time" is local wall time of unknown zone; zones span UTC-12..UTC+14, so two
# clocks further apart than this cannot be one run.
MAX_CLOCK_GAP_S = 26 * 3600
# Kineto args copied onto GPU nodes: what conversion may need (collective metadata, bytes).
GPU_ARGS = (
    "device",
    "stream",
    "correlation",
    "bytes",
    "Collective name",
    "dtype",
    "In msg nelems",
    "Out msg nelems",
    "Group size",
    "Process Group Name",
    "Process Group Description",
    "Process Group Ranks",
    "Rank",
    "Src Rank",
    "Dst Rank",
    "Seq",
)


@dataclass
class LinkStats:
    """Coverage of one link: what the CLI prints and ``ET+["link"]`` records."""

    host_ops: int
    matched: int
    name_mismatch: int
    gpu_ops: int
    attached: int
    no_launch: int
    sync_deps: int = 0
    comm_idle_us: float = 0.0  # idle while a collective ran on another thread (taken out of compute)
    comm_call_us: float = 0.0  # inside gloo communication calls (modelled by the network, not compute)
    thread_wait_us: float = 0.0  # blocked while another thread's ops ran (a dependency, not compute)
    correlation: str = RF_KEY  # the Kineto arg matched against the host rf_id
    # NCCL: blocked in a device sync while a NCCL kernel ran alone (a NCCL call only enqueues)
    comm_sync_us: float = 0.0
    # Kineto "Stream Wait Event"s naming their event's record (then convert takes the streams' waits from them)
    stream_wait_events: int = 0
    # cudaStreamWaitEvent calls that hold their thread's current stream (ET+ "stream_wait_calls")
    stream_wait_calls: int = 0

    @property
    def comm_wait_us(self) -> float:
        """The measured communication wait: what a simulated network replaces."""
        return self.comm_idle_us + self.comm_call_us + self.comm_sync_us

    def line(self) -> str:
        pct = 100.0 * self.matched / self.host_ops if self.host_ops else 0.0
        return (
            f"host ops matched {self.matched}/{self.host_ops} ({pct:.1f}%)"
            + (f" by '{self.correlation}' == rf_id" if self.correlation != RF_KEY else "")
            + f", GPU ops attached {self.attached}/{self.gpu_ops}"
            + (f", {self.sync_deps} host ops wait for the GPU" if self.sync_deps else "")
            + (f", {self.no_launch} without a launch record" if self.no_launch else "")
            + (f", {self.wait_line()}" if self.comm_wait_us else "")
            + (f", {self.thread_line()}" if self.thread_wait_us else "")
        )

    def wait_line(self) -> str:
        """The measured communication wait: a result (what a network what-if can shorten), not a diagnostic."""
        return (
            f"communication wait {self.comm_wait_us / 1e3:.3f} ms ({self.comm_idle_us / 1e3:.3f} ms idle "
            f"while a collective ran, {self.comm_call_us / 1e3:.3f} ms in collective calls"
            + (f", {self.comm_sync_us / 1e3:.3f} ms in device syncs on a NCCL kernel" if self.comm_sync_us else "")
            + ")"
        )

    def result_lines(self) -> list[str]:
        """The measured waits worth printing by default (results, not diagnostics)."""
        lines = [self.wait_line()] if self.comm_wait_us else []
        return lines + ([self.thread_line()] if self.thread_wait_us else [])

    def thread_line(self) -> str:
        """Time the traced threads sat blocked on another thread's ops (e.g. ``backward()`` on a GPU)."""
        return f"thread wait {self.thread_wait_us / 1e3:.3f} ms (blocked while another thread's ops ran)"


def _pct(part: int, whole: int) -> str:
    return f"{100.0 * part / whole:.1f}%" if whole else "n/a"


def _linkable(node: dict[str, Any]) -> bool:
    return not (is_root(node) or is_thread(node))


def _check_pair(host: HostTrace, kineto: KinetoTrace) -> None:
    kpid = kineto.main_pid()
    if host.pid is not None and kpid is not None and host.pid != kpid:
        raise InputError(
            f"host trace is from pid {host.pid} but the Kineto trace from pid {kpid}: "
            "the two files are from different runs",
            file=kineto.path,
        )
    host_wall, kineto_wall = _host_wall_s(host), kineto.wall_start_s()
    if host_wall is not None and kineto_wall is not None and abs(host_wall - kineto_wall) > MAX_CLOCK_GAP_S:
        raise InputError(
            f"host trace recorded at {host.header['time']} but the Kineto trace "
            f"{abs(host_wall - kineto_wall) / 86400:.1f} days apart: "
            "the two files are from different runs",
            file=kineto.path,
        )


def _host_wall_s(host: HostTrace) -> float | None:
    """The ET's ``time`` ("YYYY-MM-DD HH:MM:SS", local) read as if UTC, in epoch seconds."""
    from datetime import datetime

    try:
        return datetime.strptime(str(host.header.get("time")), "%Y-%m-%d %H:%M:%S").replace(tzinfo=UTC).timestamp()
    except ValueError:
        return None


def _gpu_node(e: KEvent, nid: int, parent: int, launch: KEvent) -> dict[str, Any]:
    """A device op as an ET+ node; ``launch_ts`` is when its runtime call launched it (µs), which
    orders a thread's launches (convert's device-side ``work.wait()``); ``ts`` is the device start."""
    return {
        "id": nid,
        "name": e.name,
        "ctrl_deps": parent,
        "inputs": {"values": [], "shapes": [], "types": []},
        "outputs": {"values": [], "shapes": [], "types": []},
        "attrs": [],
        "cat": e.cat,
        "ph": "X",
        "ts": e.ts,
        "launch_ts": launch.ts,
        "inclusive_dur": e.dur,
        "exclusive_dur": e.dur,
        "stream": max(0, e.arg_int("stream") or 0),
        "args": {k: e.args[k] for k in GPU_ARGS if k in e.args},
    }


def link_traces(host: HostTrace, kineto: KinetoTrace) -> tuple[dict[str, Any], LinkStats]:
    """The ET+ object and its coverage; raises InputError for a mismatched or unlinkable pair."""
    _check_pair(host, kineto)
    key = RF_KEY if kineto.has_rf_ids() else EXTERNAL_KEY
    by_rf: dict[int, KEvent] = {}
    for e in kineto.cpu:
        rf = e.arg_int(key)
        if rf is not None:
            by_rf.setdefault(rf, e)
    host_of_event: dict[int, int] = {}
    linked: list[tuple[dict[str, Any], KEvent]] = []
    linkable = [n for n in host.nodes if _linkable(n)]
    mismatch = 0
    for node in linkable:
        rf = attr(node, "rf_id")
        e = by_rf.get(rf) if isinstance(rf, int) else None  # type: ignore[assignment]
        if e is None:
            continue
        if e.name != node["name"]:
            mismatch += 1
            continue
        host_of_event[e.index] = node["id"]
        linked.append((node, e))
    excl = exclusive_durations(kineto.cpu, host_of_event)  # equal spans nest by entry (kineto.outer_first)
    for node, e in linked:
        node["ts"] = e.ts
        node["inclusive_dur"] = e.dur
        node["exclusive_dur"] = excl[e.index]
    matched = len(linked)
    if key == EXTERNAL_KEY and matched < MIN_EXTERNAL_AGREEMENT * len(linkable):
        raise InputError(
            f"Kineto CPU events carry no '{RF_KEY}' (trace from torch < 2.1?) and correlating "
            f"'{EXTERNAL_KEY}' with the host rf_id gives {matched}/{len(linkable)} agreeing op names "
            f"({_pct(matched, len(linkable))}, at least {MIN_EXTERNAL_AGREEMENT:.0%} needed): host ops "
            "cannot be linked; convert the host trace alone instead",
            file=kineto.path,
        )
    if linkable and matched < MIN_MATCHED * len(linkable):
        raise InputError(
            f"only {matched} of {len(linkable)} host ops match a Kineto event by rf_id and name "
            f"({mismatch} name mismatches): the two files are not from the same run",
            file=kineto.path,
        )

    launch_by_corr: dict[int, KEvent] = {}
    for e in kineto.launches:
        corr = e.arg_int("correlation")
        if corr is not None:
            launch_by_corr.setdefault(corr, e)
    owner = enclosing_ops(
        kineto.cpu, list(launch_by_corr.values()), lambda op: op.index in host_of_event, host_of_event
    )
    next_id = max((n["id"] for n in host.nodes), default=0) + 1
    gpu_nodes: list[dict[str, Any]] = []
    launched: list[tuple[KEvent, dict[str, Any]]] = []
    no_launch = 0
    for e in sorted(kineto.gpu, key=lambda e: (e.ts, e.index)):
        corr = e.arg_int("correlation")
        launch = launch_by_corr.get(corr) if corr is not None else None
        if launch is None:
            no_launch += 1
            continue
        op = owner.get(launch.index)
        if op is None:
            continue
        gpu_nodes.append(_gpu_node(e, next_id, host_of_event[op.index], launch))
        launched.append((launch, gpu_nodes[-1]))
        next_id += 1
    gpu_by_id = {node["id"]: node for node in gpu_nodes}
    for gid, producers in _stream_waits(kineto, launched).items():
        gpu_by_id[gid]["stream_wait"] = producers
    wait_calls = _stream_wait_calls(kineto, host, host_of_event)
    waits = _sync_deps(kineto, launched, host_of_event)
    for hid, gpu_ids in waits.items():
        host.by_id[hid]["sync_dep"] = gpu_ids
    wait = commwait.measure(kineto.events(), host_of_event)
    for field_name, by_event in (("comm_wait", wait.idle_by_event), ("thread_wait", wait.thread_by_event)):
        for index, idle in by_event.items():
            if index in host_of_event:
                host.by_id[host_of_event[index]][field_name] = idle
    # A sync blocked on a NCCL kernel is no runtime event of the host trace: its op (the innermost
    # matched one around it, as for a launch) holds that time, which is communication, not compute.
    syncs = [e for e in kineto.launches if e.index in wait.sync_by_event]
    for index, op in enclosing_ops(kineto.cpu, syncs, lambda op: op.index in host_of_event, host_of_event).items():
        node = host.by_id[host_of_event[op.index]]
        node["comm_wait"] = node.get("comm_wait", 0.0) + wait.sync_by_event[index]
    stats = LinkStats(
        len(linkable),
        matched,
        mismatch,
        len(kineto.gpu),
        len(gpu_nodes),
        no_launch,
        len(waits),
        sum(wait.idle_us.values()),
        sum(wait.in_calls_us.values()),
        sum(wait.thread_us.values()),
        correlation=key,
        comm_sync_us=sum(wait.in_syncs_us.values()),
        stream_wait_events=sum(_wait_ends(e) is not None for e in kineto.stream_waits),
        stream_wait_calls=len(wait_calls),
    )
    out = dict(host.header)
    if "distributedInfo" in kineto.header:
        out["distributedInfo"] = kineto.header["distributedInfo"]
    out["link"] = dict(asdict(stats), comm_wait_us=stats.comm_wait_us)
    if wait_calls:
        out["stream_wait_calls"] = wait_calls
    out["nodes"] = sorted(host.nodes, key=lambda n: n["id"]) + gpu_nodes
    return out, stats


def _sync_deps(
    kineto: KinetoTrace, launched: list[tuple[KEvent, dict[str, Any]]], host_of_event: dict[int, int]
) -> dict[int, list[int]]:
    """Host ops that must wait for device work: ``{host id: [GPU node ids]}`` (upstream PR #221).

    At each ``*Synchronize`` runtime call, the last GPU op of every stream launched before it must
    finish before the first host-matched op that starts on that thread after the call returns.
    Kineto does not say which stream a stream/event sync waited on, so every sync is treated as
    device-wide; a sync empties the pending set, so each GPU op is waited on at most once.
    """
    syncs = sorted((e for e in kineto.launches if "synchronize" in e.name.lower()), key=lambda e: (e.ts, e.index))
    if not syncs or not launched:
        return {}
    threads: dict[tuple[Any, Any], list[tuple[float, int]]] = {}
    for e in kineto.cpu:
        if e.index in host_of_event:
            threads.setdefault((e.pid, e.tid), []).append((e.ts, host_of_event[e.index]))
    for evs in threads.values():
        evs.sort()
    launched = sorted(launched, key=lambda t: (t[0].ts, t[1]["id"]))
    pending: dict[tuple[Any, int], dict[str, Any]] = {}
    waits: dict[int, set[int]] = {}
    i = 0
    for sync in syncs:
        while i < len(launched) and launched[i][0].ts < sync.ts:
            node = launched[i][1]
            key = (device_of(node), node["stream"])
            if key not in pending or node["ts"] >= pending[key]["ts"]:
                pending[key] = node
            i += 1
        evs = threads.get((sync.pid, sync.tid), [])
        j = bisect.bisect_left(evs, (sync.end, -1))
        if pending and j < len(evs):
            waits.setdefault(evs[j][1], set()).update(n["id"] for n in pending.values())
            pending.clear()
    return {hid: sorted(ids) for hid, ids in sorted(waits.items())}


def _wait_ends(e: KEvent) -> tuple[Any, int, int, int, int] | None:
    """A "Stream Wait Event"'s (device, stream, wait call's correlation, ``wait_on_stream``, the
    record's correlation), or None when it names no event record: Kineto writes -1 for a record it
    did not see (made before the profiler started, or CUDA event activities not collected)."""
    ends = [e.arg_int(k) for k in ("stream", "correlation", "wait_on_stream", "wait_on_cuda_event_record_corr_id")]
    if any(v is None or v < 0 for v in ends):
        return None
    stream, wait_corr, source, record_corr = cast(list[int], ends)
    return device_of({"args": e.args}), stream, wait_corr, source, record_corr


def _stream_waits(kineto: KinetoTrace, launched: list[tuple[KEvent, dict[str, Any]]]) -> dict[int, list[int]]:
    """GPU node id -> the GPU nodes a ``cudaStreamWaitEvent`` made its stream wait for.

    A Kineto "Stream Wait Event" (``cuda_sync``) names the waiting ``stream``, the wait call's
    ``correlation``, and the stream and correlation of the ``cudaEventRecord`` it waits for
    (``wait_on_stream``, ``wait_on_cuda_event_record_corr_id``). CUPTI numbers runtime calls in
    issue order, so the event marks the last op launched on ``wait_on_stream`` before the record,
    and the wait holds the first op launched on ``stream`` after the wait call (later ones follow
    it in the stream's order). So NCCL's ``work.wait()`` holds the compute stream, a collective's
    NCCL stream waits for the compute stream before its kernel, and FSDP orders its streams.
    """
    by_stream: dict[tuple[Any, int], list[tuple[int, int]]] = {}  # (device, stream) -> [(correlation, id)]
    for launch, node in launched:
        corr = launch.arg_int("correlation")
        if corr is not None:
            by_stream.setdefault((device_of(node), node["stream"]), []).append((corr, node["id"]))
    for ops in by_stream.values():
        ops.sort()
    out: dict[int, set[int]] = {}
    for e in kineto.stream_waits:
        ends = _wait_ends(e)
        if ends is None or ends[1] == ends[3]:
            continue
        device, stream, wait_corr, source, record_corr = ends
        before, after = by_stream.get((device, source), []), by_stream.get((device, stream), [])
        i = bisect.bisect_left(before, (record_corr,)) - 1
        j = bisect.bisect_left(after, (wait_corr + 1,))
        if i >= 0 and j < len(after):
            out.setdefault(after[j][1], set()).add(before[i][1])
    return {gid: sorted(ids) for gid, ids in sorted(out.items())}


def _is_enqueue(e: KEvent) -> bool:
    """A collective's enqueue call (its ``syncStream`` makes the NCCL stream wait, not the caller's)."""
    return e.name.startswith("c10d::") or e.name == "record_param_comms"


def _et_threads(host: HostTrace, host_of_event: dict[int, int], cpu: list[KEvent]) -> dict[tuple[Any, Any], int]:
    """Kineto (pid, tid) -> the ET thread id of the first linked op of ``cpu`` on it (its ``tid``
    attr, else its nearest ancestor's: the ET observer names one thread for all of a thread's ops);
    threads without a linked op are left out."""
    found: dict[tuple[Any, Any], int] = {}
    for e in cpu:
        nid = host_of_event.get(e.index)
        if nid is None or (e.pid, e.tid) in found:
            continue
        seen: set[int] = set()
        while nid in host.by_id and nid not in seen:
            tid = attr(host.by_id[nid], "tid")
            if isinstance(tid, int):
                found[e.pid, e.tid] = tid
                break
            seen.add(nid)
            nid = host.by_id[nid]["ctrl_deps"]
    return found


def _stream_wait_calls(kineto: KinetoTrace, host: HostTrace, host_of_event: dict[int, int]) -> list[list[Any]]:
    """``[ET thread id, ts (µs)]`` of the ``cudaStreamWaitEvent`` calls that hold the calling thread's
    current stream, in time order: what convert makes the stream wait for NCCL kernels with where
    Kineto recorded no "Stream Wait Event"s (DDP's Reducer waits for its buckets through futures,
    which write no ``wait`` record in the host trace).

    The runtime call carries no event handle nor stream, so which calls wait on the current stream
    for a collective is read from where they are made; left out are the calls

    * inside a collective's enqueue (``c10d::*``, ``record_param_comms``): ``syncStream`` makes the
      NCCL stream wait for the current one, and ``work.wait()`` has its own ``wait`` record;
    * of a future callback: ``Future.then`` on a completed CUDA future (ProcessGroupNCCL's are
      complete at the enqueue) runs the callback inline, in the op that called the collective, on a
      pool stream that waits for the future's events, and then records the child future's events
      there. A wait whose innermost enclosing op holds an earlier enqueue and whose thread next
      records an event before it launches device work is that: it holds nothing launched (the
      callback launched nothing; a DDP default hook's), and what waits for the recorded event (the
      Reducer's ``future.wait()`` in ``finalize_backward``) is kept. Taken as a wait on the current
      stream, it would hold the next backward kernel behind the bucket's all-reduce.
    """
    calls = [e for e in kineto.launches if "streamwaitevent" in e.name.lower()]
    spans_of_calls: dict[tuple[Any, Any], list[tuple[float, float]]] = {}  # one thread's calls never overlap
    for e in calls:
        spans_of_calls.setdefault((e.pid, e.tid), []).append((e.ts, e.end))
    for at in spans_of_calls.values():
        at.sort()
    cpu = [e for e in kineto.cpu if (e.pid, e.tid) in spans_of_calls]
    threads = _et_threads(host, host_of_event, cpu)
    if not threads:
        return []
    enqueues: dict[tuple[Any, Any], list[tuple[float, float]]] = {}  # -> [(start, end)] by start
    around: list[KEvent] = []  # the ops that hold a call (the first call from their start on ends in them)
    for e in cpu:
        if _is_enqueue(e):
            enqueues.setdefault((e.pid, e.tid), []).append((e.ts, e.end))
        at = spans_of_calls[e.pid, e.tid]
        i = bisect.bisect_left(at, (e.ts, -math.inf))
        if i < len(at) and at[i][1] <= e.end:
            around.append(e)
    innermost = enclosing_ops(around, calls, lambda op: True, host_of_event)
    reach: dict[tuple[Any, Any], list[float]] = {}  # the latest end of the enqueues started so far
    for key, spans in enqueues.items():
        spans.sort()
        reach[key] = list(accumulate((end for _, end in spans), max))
    device_corrs = {c for e in kineto.gpu if (c := e.arg_int("correlation")) is not None}
    marks: dict[tuple[Any, Any], list[tuple[float, int, bool]]] = {}  # -> [(ts, index, is a record)]
    for e in kineto.launches:
        record = "eventrecord" in e.name.lower()
        if (e.pid, e.tid) in spans_of_calls and (record or e.arg_int("correlation") in device_corrs):
            marks.setdefault((e.pid, e.tid), []).append((e.ts, e.index, record))
    for mine in marks.values():
        mine.sort()
    out: list[list[Any]] = []
    for call in calls:
        key = (call.pid, call.tid)
        spans = enqueues.get(key, [])
        begun = bisect.bisect_right(spans, (call.ts, math.inf))  # enqueues started by the call
        if key not in threads or begun and reach[key][begun - 1] >= call.end:  # inside one
            continue
        op = innermost.get(call.index)
        if op is not None:
            mine = marks.get(key, [])
            after = bisect.bisect_right(mine, (call.ts, call.index, True))
            next_is_record = after < len(mine) and mine[after][2]
            if next_is_record and bisect.bisect_left(spans, (op.ts, -math.inf)) < begun:
                continue
        out.append([threads[key], call.ts])
    return sorted(out, key=lambda c: (c[1], c[0]))


def write_linked(obj: dict[str, Any], path: str | os.PathLike) -> None:
    """Compact, key-order-stable JSON (gzip when the name ends in .gz), written atomically."""
    with atomic_open(path, "w") as f:
        json.dump(obj, f, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
        f.write("\n")


def link_files(host_path: str | os.PathLike, device_path: str | os.PathLike, out_path: str | os.PathLike) -> LinkStats:
    host = load_host_trace(host_path)
    kineto = load_kineto(device_path)
    obj, stats = link_traces(host, kineto)
    write_linked(obj, out_path)
    return stats
