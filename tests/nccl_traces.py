"""Synthetic NCCL host ET + Kineto traces for the convert tests: one rank of a 2-rank DDP-like step.

Host nodes, Kineto events (cpu ops, runtime launches, kernels, "Stream Wait Event"s) and the linked
step ``linked_step`` that tests/test_convert_nccl_*.py and test_robust_nccl_stream_wait.py build on.
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


def launch(ts: float, corr: int) -> dict:
    return {
        "ph": "X",
        "cat": "cuda_runtime",
        "name": "cudaLaunchKernel",
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


def ring_hardware(gbps: float, npus: int = 2) -> HardwareConfig:
    """A Ring of ``npus`` at ``gbps``, no latency, with the capture tests' ring system file."""
    network = NetworkConfig.from_dict({"topology": ["Ring"], "npus_count": [npus], "bandwidth": [gbps], "latency": [0]})
    return HardwareConfig(system=SystemConfig.from_file(DATA / "system_ring.json"), network=network)
