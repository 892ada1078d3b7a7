"""Capture overhead and link/convert throughput of the post-execution path.

* Capture overhead: a 2-rank gloo capture (needs torch) times each step without tracing and with
  ET + Kineto tracing; prints the medians and their ratio (the spec measured ≈ 4× on CPU).
* Link: host ops/s and Kineto events/s linking rank 0 of the capture (best of N).
* Convert: host ops/s converting the linked rank 0, and the 14k-node resnet host ET fixture.
* Scale: link + convert of a synthetic GPU-style pair (``--scale`` host ops, two kernels per
  three ops, a device sync every 300 ops), to show both stay O(n log n).

    python benchmarks/capture.py [--model mlp] [--steps 3] [--capture DIR] [--repeat 3] [--scale 60000]

``--capture DIR`` reuses an existing capture folder instead of recording one (no torch needed).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from pathlib import Path

from chakra_pipe.convert.pytorch import convert_trace
from chakra_pipe.link.hostet import load_host_trace, parse_host_trace
from chakra_pipe.link.kineto import load_kineto, parse_kineto
from chakra_pipe.link.linker import link_traces

RESNET = Path(__file__).resolve().parents[2] / "shared" / "fixtures" / "pytorch" / "resnet_et.json.gz"


def best_of(repeat: int, fn) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def record(model: str, steps: int, out: Path) -> None:
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    from chakra_pipe.capture.runner import CaptureConfig, run_capture

    t0 = time.perf_counter()
    run_capture(CaptureConfig(model=model, ranks=2, steps=steps, backend="gloo", out=out))
    print(
        f"capture: 2 ranks, {model}, {steps} profiled steps: {time.perf_counter() - t0:.1f} s wall "
        "(spawn, rendezvous, warm-up, timing, tracing)"
    )


def report_overhead(folder: Path) -> None:
    cap = json.loads((folder / "capture.json").read_text())
    untraced = statistics.median(x for v in cap["step_time_ms_untraced"].values() for x in v)
    traced = statistics.median(x for v in cap["step_time_ms_traced"].values() for x in v)
    print(
        f"capture overhead: step {untraced:.2f} ms untraced, {traced:.2f} ms with ET + Kineto "
        f"-> x{traced / untraced:.2f}"
    )


def bench_link_convert(folder: Path, repeat: int) -> None:
    host_path, kineto_path = folder / "rank0.host_et.json.gz", folder / "rank0.kineto.json.gz"
    host_raw = load_host_trace(host_path)
    kineto = load_kineto(kineto_path)
    n_host = len(host_raw.nodes)
    n_events = len(kineto.cpu) + len(kineto.launches) + len(kineto.gpu)

    def link_once():
        return link_traces(load_host_trace(host_path), load_kineto(kineto_path))

    t = best_of(repeat, link_once)
    print(
        f"link (parse + link, rank 0): {n_host} host ops, {n_events} Kineto events in {t * 1e3:.1f} ms "
        f"-> {n_host / t:,.0f} host ops/s, {n_events / t:,.0f} events/s"
    )
    obj, _ = link_once()

    linked = parse_host_trace(obj, "linked")
    t = best_of(repeat, lambda: convert_trace(linked, 0))
    print(f"convert (linked rank 0): {n_host} host ops in {t * 1e3:.1f} ms -> {n_host / t:,.0f} ops/s")


def bench_fixture(repeat: int) -> None:
    if not RESNET.is_file():
        print(f"convert (resnet fixture): skipped, {RESNET} not found")
        return
    trace = load_host_trace(RESNET)
    n = len(trace.nodes)
    t = best_of(repeat, lambda: convert_trace(load_host_trace(RESNET), 0))
    print(f"convert (resnet host ET, load + convert): {n} host ops in {t:.2f} s -> {n / t:,.0f} ops/s")


def synthetic_gpu_pair(n_ops: int) -> tuple[dict, dict]:
    """Host ET + Kineto of ``n_ops`` ops: a linear op with two mm children each launching a kernel."""
    host = [
        {"id": 1, "name": "[pytorch|profiler|execution_trace|process]", "ctrl_deps": 1},
        {"id": 2, "name": "[pytorch|profiler|execution_trace|thread]", "ctrl_deps": 1},
    ]
    events: list[dict] = []

    def op(nid: int, name: str, parent: int, ts: float, dur: float) -> None:
        host.append(
            {
                "id": nid,
                "name": name,
                "ctrl_deps": parent,
                "attrs": [{"name": "rf_id", "value": nid}, {"name": "tid", "value": 1}],
            }
        )
        events.append(
            {
                "ph": "X",
                "cat": "cpu_op",
                "name": name,
                "pid": 1,
                "tid": 1,
                "ts": ts,
                "dur": dur,
                "args": {"Record function id": nid, "External id": nid},
            }
        )

    nid, ts = 3, 0.0
    for i in range(n_ops // 3):
        parent = nid
        op(parent, "aten::linear", 2, ts, 10)
        for c in range(2):
            nid += 1
            op(nid, "aten::mm", parent, ts + 1 + 4 * c, 3)
            events.append(
                {
                    "ph": "X",
                    "cat": "cuda_runtime",
                    "name": "cudaLaunchKernel",
                    "pid": 1,
                    "tid": 1,
                    "ts": ts + 2 + 4 * c,
                    "dur": 0.5,
                    "args": {"correlation": nid, "External id": nid},
                }
            )
            events.append(
                {
                    "ph": "X",
                    "cat": "kernel",
                    "name": "gemm",
                    "pid": 0,
                    "tid": 7,
                    "ts": ts + 5 + 4 * c,
                    "dur": 2,
                    "args": {"correlation": nid, "stream": 7, "device": 0},
                }
            )
        if i % 100 == 0:
            events.append(
                {
                    "ph": "X",
                    "cat": "cuda_runtime",
                    "name": "cudaDeviceSynchronize",
                    "pid": 1,
                    "tid": 1,
                    "ts": ts + 10.2,
                    "dur": 0.5,
                    "args": {"correlation": -1 - i},
                }
            )
        nid += 1
        ts += 12
    return {"schema": "1.1.1-chakra.0.0.4", "pid": 1, "nodes": host}, {"traceEvents": events}


def bench_scale(n_ops: int) -> None:
    host, kineto = synthetic_gpu_pair(n_ops)
    t0 = time.perf_counter()
    obj, stats = link_traces(parse_host_trace(host, "host"), parse_kineto(kineto, "kineto"))
    t1 = time.perf_counter()
    conv = convert_trace(parse_host_trace(obj, "linked"), 0)
    t2 = time.perf_counter()
    print(
        f"scale: {stats.host_ops} host ops + {stats.attached} kernels: link {t1 - t0:.2f} s "
        f"({stats.host_ops / (t1 - t0):,.0f} host ops/s), convert {t2 - t1:.2f} s "
        f"({len(conv.nodes) / (t2 - t1):,.0f} nodes/s)"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="mlp")
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--capture", type=Path, help="existing capture folder (skip recording)")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--scale", type=int, default=60000, help="host ops of the synthetic GPU pair (0: skip)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-capture-") as tmp:
        folder = args.capture or Path(tmp) / "cap"
        if args.capture is None:
            record(args.model, args.steps, folder)
        report_overhead(folder)
        bench_link_convert(folder, args.repeat)
    bench_fixture(args.repeat)
    if args.scale:
        bench_scale(args.scale)


if __name__ == "__main__":
    main()
