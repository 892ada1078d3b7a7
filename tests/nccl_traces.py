"""Synthetic NCCL host ET + Kineto traces for the convert tests: one rank of a 2-rank DDP-like step.

Host nodes, Kineto events (cpu ops, runtime launches, kernels, "Stream Wait Event"s) and the linked
step ``linked_step`` (one bucket) and ``ddp_step`` (three buckets on the autograd thread) that
tests/test_convert_nccl_*.py and test_robust_nccl_stream_wait.py build on.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from chakra_pipe.link.hostet import parse_host_trace
from chakra_pipe.link.kineto import parse_kineto
from chakra_pipe.link.linker import link_traces
from chakra_pipe.sim.config import HardwareConfig, NetworkConfig, SystemConfig

DATA = Path(__file__).parent / "data" / "capture"
NUMEL = 1 << 20  # a 4 MiB all-reduce
PG_INIT = json.dumps(
    [{"pg_name": "0", "pg_desc": "default_pg", "backend_config": "cuda:nccl", "ranks": [], "group_size": 2}]
)
COMPUTE, NCCL = 7, 20  # streams
OPT_US = 1000.0  # the optimizer kernel: longer than the all-reduce, so it hid the network before
MAIN, AUTOGRAD = 1, 2  # ddp_step's host threads
ALL_REDUCE = "ncclDevKernel_AllReduce_Sum_f32_RING_LL"


def host_op(nid: int, name: str, parent: int, values: list | None = None, outputs: list | None = None, **extra) -> dict:
    """A host ET node on thread 1 (``rf_id`` = its id); ``extra`` fields are set on it."""
    node = {
        "id": nid,
        "name": name,
        "ctrl_deps": parent,
        "inputs": {"values": values or [], "shapes": [], "types": []},
        "outputs": {"values": outputs or [], "shapes": [], "types": []},
        "attrs": [{"name": "tid", "type": "uint64", "value": 1}, {"name": "rf_id", "type": "uint64", "value": nid}],
    }
    node.update(extra)
    return node


def inplace_op(nid: int, name: str, parent: int, values: list | None = None) -> dict:
    """A host ET node whose outputs are its inputs (in-place ops, collectives on their buffer)."""
    return host_op(nid, name, parent, values, values)


def cpu_event(name: str, rf: int, ts: float, dur: float, **args) -> dict:
    """A Kineto ``cpu_op`` on thread 1 for the host op of Record function id ``rf``; ``args`` adds
    event args (e.g. ``**{"External id": rf}``)."""
    return {
        "ph": "X",
        "cat": "cpu_op",
        "name": name,
        "pid": 9,
        "tid": 1,
        "ts": ts,
        "dur": dur,
        "args": {"Record function id": rf} | args,
    }


def launch(ts: float, corr: int, name: str = "cudaLaunchKernel") -> dict:
    """A runtime call on thread 1: a launch, or ``name`` (``cudaEventRecord``, ``cudaStreamWaitEvent``)."""
    return {
        "ph": "X",
        "cat": "cuda_runtime",
        "name": name,
        "pid": 9,
        "tid": 1,
        "ts": ts,
        "dur": 1,
        "args": {"correlation": corr},
    }


def kernel(name: str, ts: float, dur: float, stream: int, corr: int) -> dict:
    args = {"correlation": corr, "stream": stream, "device": 0}
    return {"ph": "X", "cat": "kernel", "name": name, "pid": 0, "tid": stream, "ts": ts, "dur": dur, "args": args}


def stream_wait(stream: int, corr: int, on_stream: int, record_corr: int) -> dict:
    """Kineto's record of ``cudaStreamWaitEvent`` (call ``corr``) on the device: ``stream`` waits for the
    event recorded on ``on_stream`` by the ``cudaEventRecord`` call ``record_corr``."""
    args = {"stream": stream, "device": 0, "correlation": corr, "wait_on_stream": on_stream}
    args["wait_on_cuda_event_record_corr_id"] = record_corr
    return {"ph": "X", "cat": "cuda_sync", "name": "Stream Wait Event", "pid": 0, "tid": stream, "ts": 1, "args": args}


def linked_step(
    wait_inside_launcher: bool = False,
    sync_events: tuple[str, ...] = (),
    gemm_us: float = 100.0,
    sync_all_reduce: bool = False,
    edit: Callable[[list[dict], list[dict]], object] | None = None,
) -> dict:
    """One rank of a 2-rank DDP-like step, linked: a GEMM on the compute stream, a bucket's
    all-reduce (``c10d`` > record > ``nccl:all_reduce`` launching a NCCL kernel on its stream),
    ``work.wait()`` (a ``wait`` record of seq 1), then the optimizer's ``add_`` and a ``mul``.
    With ``wait_inside_launcher`` the wait runs inside ``add_``, which launches its kernel after it
    (an op that began before the wait launched after it: the launch's own time decides).
    ``sync_events`` adds Kineto's "Stream Wait Event"s (runtime calls numbered in issue order):
    ``"enqueue"``, the NCCL stream waiting for the compute stream before the kernel (correlations
    2, 3), ``"wait"``, ``work.wait()``'s compute stream waiting for the NCCL end event (5, 6),
    ``"unknown"``, both waits naming no event record (Kineto did not see the records).
    ``gemm_us``: the GEMM's device time (a long one still runs when the all-reduce is called).
    ``sync_all_reduce`` adds, after ``mul``, an ``async_op=False`` all-reduce (seq 2), whose NCCL
    kernel ProcessGroupNCCL puts on the current (compute) stream. ``edit(host nodes, Kineto
    events)`` changes the inputs before they are linked (odd or broken traces)."""
    x = [200, 201, 0, NUMEL, 4, "cuda:0"]
    wait_id, wait_parent = (10, 9) if wait_inside_launcher else (8, 2)  # ids are taken at op entry
    host = [
        inplace_op(1, "[pytorch|profiler|execution_trace|process]", 1),
        inplace_op(2, "[pytorch|profiler|execution_trace|thread]", 1),
        inplace_op(3, "## process_group:init ##", 2, [PG_INIT]),
        inplace_op(4, "aten::mm", 2),
        inplace_op(5, "c10d::allreduce_", 2, [[x], "<Object>", "<Object>", "<None>", False, -1]),
        inplace_op(6, "record_param_comms", 5, [[x], [1, False], ["0", "default_pg"], 0, "allreduce", [], [], 0, 1, 2]),
        inplace_op(7, "nccl:all_reduce", 6, [x]),
        inplace_op(9, "aten::add_", 2, [x]),
        inplace_op(
            wait_id, "record_param_comms", wait_parent, [[1, False], ["0", "default_pg"], 0, "wait", [], [], -1, -1, 1]
        ),
        inplace_op(11, "aten::mul", 2),
    ]
    wait_ts, add_ts = (163.0, 160.0) if wait_inside_launcher else (150.0, 160.0)
    events = [
        cpu_event("aten::mm", 4, 100, 10),
        launch(105, 1),
        cpu_event("c10d::allreduce_", 5, 120, 20),
        cpu_event("record_param_comms", 6, 121, 18),
        cpu_event("nccl:all_reduce", 7, 122, 16),
        launch(125, 4),
        cpu_event("aten::add_", 9, add_ts, 10),
        cpu_event("record_param_comms", wait_id, wait_ts, 2),
        launch(167, 7),
        cpu_event("aten::mul", 11, 175, 5),
        launch(176, 8),
        kernel("ampere_sgemm_128x64_nn", 110, gemm_us, COMPUTE, 1),
        kernel("ncclDevKernel_AllReduce_Sum_f32_RING_LL", 210, 400, NCCL, 4),
        kernel("vectorized_elementwise_kernel<add>", 610, OPT_US, COMPUTE, 7),
        kernel("vectorized_elementwise_kernel<mul>", 1610, 10, COMPUTE, 8),
    ]
    if sync_all_reduce:  # ids 12-14 (host ids are taken at op entry; the linker numbers GPU ops after them)
        y = [202, 203, 0, NUMEL, 4, "cuda:0"]
        host += [
            inplace_op(12, "c10d::allreduce_", 2, [[y], "<Object>", "<Object>", "<None>", False, -1]),
            inplace_op(
                13, "record_param_comms", 12, [[y], [2, False], ["0", "default_pg"], 0, "allreduce", [], [], 0, 1, 2]
            ),
            inplace_op(14, "nccl:all_reduce", 13, [y]),
        ]
        events += [
            cpu_event("c10d::allreduce_", 12, 185, 10),
            cpu_event("record_param_comms", 13, 186, 8),
            cpu_event("nccl:all_reduce", 14, 187, 6),
            launch(190, 9),
            kernel("ncclDevKernel_AllReduce_Sum_f32_RING_LL", 1620, 400, COMPUTE, 9),
        ]
    if "enqueue" in sync_events:
        events.append(stream_wait(NCCL, 3, COMPUTE, 2))
    if "wait" in sync_events:
        events.append(stream_wait(COMPUTE, 6, NCCL, 5))
    if "unknown" in sync_events:  # both waits, on events whose record Kineto did not see (-1)
        events += [stream_wait(NCCL, 3, -1, -1), stream_wait(COMPUTE, 6, -1, -1)]
    if edit is not None:
        edit(host, events)
    obj, _ = link_traces(
        parse_host_trace({"schema": "1.1.1-chakra.0.0.4", "pid": 9, "nodes": host}, "h"),
        parse_kineto({"traceEvents": events}, "k"),
    )
    return obj


POOL = 30  # a stream from PyTorch's pool: a CUDA future's callback runs on it


def future_wait(callback: str = "") -> Callable[[list[dict], list[dict]], None]:
    """A ``linked_step`` edit: the add kernel waits for the all-reduce through a future, as DDP's
    Reducer does, so the ``wait`` record (8, at 150) gives way to a ``cudaStreamWaitEvent`` call at
    150 outside any op. ``callback``: ``"noop"`` adds, inside the autograd hook that called the
    all-reduce (a Kineto op the host trace lacks, 119-146), ``Future.then``'s callback waiting on a
    pool stream (142) and recording its result's event (144); ``"copy"`` has that callback launch
    a copy on the pool stream (``aten::copy_``, host id 8, launched at 143) between the two."""

    def edit(host: list[dict], events: list[dict]) -> None:
        host[:] = [h for h in host if h["id"] != 8]
        events[:] = [e for e in events if (e.get("args") or {}).get("Record function id") != 8]
        events.append(launch(150, 6, "cudaStreamWaitEvent"))
        if callback:
            events.append(cpu_event("autograd::engine::evaluate_function: AccumulateGrad", 900, 119, 27))
            events += [launch(142, 5, "cudaStreamWaitEvent"), launch(144, 12, "cudaEventRecord")]
        if callback == "copy":
            host.append(inplace_op(8, "aten::copy_", 2))
            events += [cpu_event("aten::copy_", 8, 142.5, 1), launch(143, 11), kernel("copy_kernel", 612, 5, POOL, 11)]

    return edit


def ring_hardware(gbps: float, npus: int = 2) -> HardwareConfig:
    """A Ring of ``npus`` at ``gbps``, no latency, with the capture tests' ring system file."""
    network = NetworkConfig.from_dict({"topology": ["Ring"], "npus_count": [npus], "bandwidth": [gbps], "latency": [0]})
    return HardwareConfig(system=SystemConfig.from_file(DATA / "system_ring.json"), network=network)


def on_thread(node_or_event: dict, tid: int) -> dict:
    """A host node or Kineto event moved to thread ``tid``."""
    if "attrs" in node_or_event:
        node_or_event["attrs"][0]["value"] = tid
    else:
        node_or_event["tid"] = tid
    return node_or_event


def _tensor(b: int) -> list:
    return [300 + b, 400 + b, 0, NUMEL, 4, "cuda:0"]


def _all_reduce(nid: int, parent: int, seq: int, b: int) -> list[dict]:
    x = _tensor(b)
    return [
        inplace_op(nid, "c10d::allreduce_", parent, [[x], "<Object>", "<Object>", "<None>", False, -1]),
        inplace_op(
            nid + 1,
            "record_param_comms",
            nid,
            [[x], [seq, False], ["0", "default_pg"], 0, "allreduce", [], [], 0, 1, 2],
        ),
        inplace_op(nid + 2, "nccl:all_reduce", nid + 1, [x]),
    ]


def _all_reduce_events(nid: int, ts: float, corr: int) -> list[dict]:
    names = ("c10d::allreduce_", "record_param_comms", "nccl:all_reduce")
    return [cpu_event(name, nid + i, ts + i, 20 - 2 * i) for i, name in enumerate(names)] + [launch(ts + 10, corr)]


def ddp_step(
    recorded: bool = False, wait_calls: bool = False, edit: Callable[[list[dict], list[dict]], object] | None = None
) -> dict:
    """One rank of a 2-rank DDP step, linked. Host ids (op entry order): 4 forward mm; 5 the autograd
    thread; 6, 7, 11, 15 backward GEMMs; 8-10, 12-14, 16-18 the buckets' all-reduces (seq 1-3);
    19-21 the waits; 22 the optimizer, 23 ``mul``; 24-26 the loss all-reduce (seq 4). Runtime calls
    are numbered in issue order (``recorded``: each enqueue records an event on stream 7 that
    stream 20 waits for; each ``work.wait()`` makes stream 7 wait for an event recorded after the
    bucket's kernel). ``wait_calls``: as DDP's Reducer really waits, through futures, so without
    the ``wait`` records 19-21 and only with the runtime calls Kineto records: in each enqueue
    ``syncStream``'s ``cudaEventRecord`` + ``cudaStreamWaitEvent``; after it, inside the autograd
    hook that called it (a Kineto op the host trace lacks), the comm hook's ``Future.then`` callback
    waiting on a pool stream and recording its result's event; at 330-335 on the autograd thread,
    outside any op, ``finalize_backward``'s ``future.wait()``s (an event record, then the wait).
    ``edit(host nodes, Kineto events)`` as in ``linked_step``."""
    host = [
        inplace_op(1, "[pytorch|profiler|execution_trace|process]", 1),
        inplace_op(2, "[pytorch|profiler|execution_trace|thread]", 1),
        inplace_op(3, "## process_group:init ##", 2, [PG_INIT]),
        inplace_op(4, "aten::mm", 2),
        on_thread(inplace_op(5, "[pytorch|profiler|execution_trace|thread]", 1), AUTOGRAD),
        inplace_op(6, "MmBackward0", 5),
        inplace_op(7, "MmBackward0", 5),
        *_all_reduce(8, 5, 1, 0),
        inplace_op(11, "MmBackward0", 5),
        *_all_reduce(12, 5, 2, 1),
        inplace_op(15, "MmBackward0", 5),
        *_all_reduce(16, 5, 3, 2),
    ]
    for n in host[5:]:
        on_thread(n, AUTOGRAD)
    for nid, seq in () if wait_calls else ((19, 1), (20, 2), (21, 3)):
        host.append(
            inplace_op(nid, "record_param_comms", 2, [[seq, False], ["0", "default_pg"], 0, "wait", [], [], -1, -1, 1])
        )
    host += [
        inplace_op(22, "aten::_foreach_add_", 2, [_tensor(0)]),
        inplace_op(23, "aten::mul", 2),
        *_all_reduce(24, 2, 4, 3),
    ]
    c = 10  # correlations 10 apart leave room for the recorded event records and waits
    autograd = [
        cpu_event("MmBackward0", 6, 198, 5),
        launch(200, 2 * c),
        cpu_event("MmBackward0", 7, 208, 5),
        launch(210, 3 * c),
        *_all_reduce_events(8, 220, 4 * c),
        cpu_event("MmBackward0", 11, 248, 5),
        launch(250, 5 * c),
        *_all_reduce_events(12, 260, 6 * c),
        cpu_event("MmBackward0", 15, 288, 5),
        launch(290, 7 * c),
        *_all_reduce_events(16, 300, 8 * c),
    ]
    if wait_calls:
        for bucket, ts in ((4, 220), (6, 260), (8, 300)):
            autograd += [
                cpu_event("autograd::engine::evaluate_function: AccumulateGrad", 900 + bucket, ts - 1, 28),
                launch(ts + 2, bucket * c - 2, "cudaEventRecord"),
                launch(ts + 3, bucket * c - 1, "cudaStreamWaitEvent"),
                launch(ts + 22, bucket * c + 2, "cudaStreamWaitEvent"),
                launch(ts + 24, bucket * c + 3, "cudaEventRecord"),
            ]
        for i in range(3):
            autograd += [
                launch(330 + 2 * i, 81 + i, "cudaEventRecord"),
                launch(330.5 + 2 * i, 85 + i, "cudaStreamWaitEvent"),
            ]
    events = [cpu_event("aten::mm", 4, 100, 10), launch(105, c), *(on_thread(e, AUTOGRAD) for e in autograd)]
    if not wait_calls:
        events += [cpu_event("record_param_comms", nid, 330 + 2 * i, 1) for i, nid in enumerate((19, 20, 21))]
    events += [cpu_event("aten::_foreach_add_", 22, 340, 10), launch(345, 9 * c), cpu_event("aten::mul", 23, 360, 5)]
    events += [launch(365, 10 * c), *_all_reduce_events(24, 370, 11 * c)]
    events += [
        kernel("fwd_gemm", 110, 190, COMPUTE, c),
        kernel("bwd_gemm_a", 300, 200, COMPUTE, 2 * c),
        kernel("bwd_gemm_b", 500, 200, COMPUTE, 3 * c),
        kernel(ALL_REDUCE, 700, 400, NCCL, 4 * c),
        kernel("bwd_gemm_c", 700, 200, COMPUTE, 5 * c),
        kernel("bwd_gemm_d", 900, 200, COMPUTE, 7 * c),
        kernel(ALL_REDUCE, 1100, 400, NCCL, 6 * c),
        kernel(ALL_REDUCE, 1500, 400, NCCL, 8 * c),
        kernel("multi_tensor_apply_kernel", 1900, 1000, COMPUTE, 9 * c),
        kernel("vectorized_elementwise_kernel<mul>", 2900, 10, COMPUTE, 10 * c),
        kernel(ALL_REDUCE, 2910, 400, COMPUTE, 11 * c),
    ]
    if recorded:
        for bucket in (4, 6, 8):
            events.append(stream_wait(NCCL, bucket * c - 1, COMPUTE, bucket * c - 2))
        for i, bucket in enumerate((4, 6, 8)):
            events.append(stream_wait(COMPUTE, 85 + i, NCCL, bucket * c + 1))
    if edit is not None:
        edit(host, events)
    obj, stats = link_traces(
        parse_host_trace({"schema": "1.1.1-chakra.0.0.4", "pid": 9, "nodes": host}, "h"),
        parse_kineto({"traceEvents": events}, "k"),
    )
    assert stats.stream_wait_events == (6 if recorded else 0)
    return json.loads(json.dumps(obj))


def batch_p2p_rank(rank: int, ops: tuple[str, ...] = ("recv", "send")) -> dict:
    """One rank of a host-only 2-rank NCCL exchange, ``batch_isend_irecv`` of ``ops`` with the peer
    (``c10d::send``/``c10d::recv_`` > their ``record_param_comms``, 4 MiB each, ids 4-7), coalesced:
    every record carries the batch's one p2p sequence number [3, True]; then the one work's
    ``wait`` (8), ``aten::relu`` (9) and a last ``send`` of seq 4 (10-11)."""
    peer = 1 - rank

    def p2p(nid: int, op: str, storage: int, seq: int) -> list[dict]:
        x = [storage, storage + 1, 0, NUMEL, 4, "cuda:0"]
        values = [[x], [seq, True], ["0", "default_pg"], peer, op, [], [], 0, 1, 2]
        caller = "c10d::send" if op == "send" else "c10d::recv_"
        return [host_op(nid, caller, 2, [[x], peer, 0]), host_op(nid + 1, "record_param_comms", nid, values, [x])]

    nodes = [
        host_op(1, "[pytorch|profiler|execution_trace|process]", 1),
        host_op(2, "[pytorch|profiler|execution_trace|thread]", 1),
        host_op(3, "## process_group:init ##", 2, [PG_INIT]),
        *(n for i, op in enumerate(ops) for n in p2p(4 + 2 * i, op, 200 + 100 * i, 3)),
    ]
    nid = 4 + 2 * len(ops)
    nodes += [
        host_op(nid, "record_param_comms", 2, [[3, True], ["0", "default_pg"], 0, "wait", [], [], -1, -1, 1]),
        host_op(nid + 1, "aten::relu", 2),
        *p2p(nid + 2, "send" if rank == 0 else "recv", 500, 4),
    ]
    return {"schema": "1.1.1-chakra.0.0.4", "pid": 1, "time": "t", "start_ts": 0, "nodes": nodes, "finish_ts": 1}
