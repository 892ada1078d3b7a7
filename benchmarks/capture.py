"""Capture overhead and link/convert throughput of the post-execution path.

* Capture overhead: a 2-rank gloo capture (needs torch) times each step without tracing and with
  ET + Kineto tracing; prints the medians and their ratio (the spec measured ≈ 4× on CPU).
* Link: host ops/s and Kineto events/s linking rank 0 of the capture (best of N).
* Convert: host ops/s converting the linked rank 0, and the 14k-node resnet host ET fixture.

    python benchmarks/capture.py [--model mlp] [--steps 3] [--capture DIR] [--repeat 3]

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
from chakra_pipe.link.kineto import load_kineto
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
    print(f"capture: 2 ranks, {model}, {steps} profiled steps: {time.perf_counter() - t0:.1f} s wall "
          "(spawn, rendezvous, warm-up, timing, tracing)")


def report_overhead(folder: Path) -> None:
    cap = json.loads((folder / "capture.json").read_text())
    untraced = statistics.median(x for v in cap["step_time_ms_untraced"].values() for x in v)
    traced = statistics.median(x for v in cap["step_time_ms_traced"].values() for x in v)
    print(f"capture overhead: step {untraced:.2f} ms untraced, {traced:.2f} ms with ET + Kineto "
          f"-> x{traced / untraced:.2f}")


def bench_link_convert(folder: Path, repeat: int) -> None:
    host_path, kineto_path = folder / "rank0.host_et.json.gz", folder / "rank0.kineto.json.gz"
    host_raw = load_host_trace(host_path)
    kineto = load_kineto(kineto_path)
    n_host = len(host_raw.nodes)
    n_events = len(kineto.cpu) + len(kineto.launches) + len(kineto.gpu)

    def link_once():
        return link_traces(load_host_trace(host_path), load_kineto(kineto_path))
    t = best_of(repeat, link_once)
    print(f"link (parse + link, rank 0): {n_host} host ops, {n_events} Kineto events in {t * 1e3:.1f} ms "
          f"-> {n_host / t:,.0f} host ops/s, {n_events / t:,.0f} events/s")
    obj, _ = link_once()

    def convert_once():
        return convert_trace(parse_host_trace(json.loads(json.dumps(obj)), "linked"), 0)
    t = best_of(repeat, convert_once)
    print(f"convert (linked rank 0): {n_host} host ops in {t * 1e3:.1f} ms -> {n_host / t:,.0f} ops/s")


def bench_fixture(repeat: int) -> None:
    if not RESNET.is_file():
        print(f"convert (resnet fixture): skipped, {RESNET} not found")
        return
    trace = load_host_trace(RESNET)
    n = len(trace.nodes)
    t = best_of(repeat, lambda: convert_trace(load_host_trace(RESNET), 0))
    print(f"convert (resnet host ET, load + convert): {n} host ops in {t:.2f} s -> {n / t:,.0f} ops/s")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="mlp")
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--capture", type=Path, help="existing capture folder (skip recording)")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-capture-") as tmp:
        folder = args.capture or Path(tmp) / "cap"
        if args.capture is None:
            record(args.model, args.steps, folder)
        report_overhead(folder)
        bench_link_convert(folder, args.repeat)
    bench_fixture(args.repeat)


if __name__ == "__main__":
    main()
