"""Simulator speed and memory: one 1 MiB all-reduce (Ring_4chunks system) on 64/256/1,024 NPUs.

Prints wall time and peak traced memory per (topology, backend, NPUs), plus the optional largest
generated trace given on the command line (``python benchmarks/simulator.py [PREFIX SYS NET]``).
Reference: ASTRA-sim takes ~12 s / 365 MB for the 1,024-NPU ring all-reduce; target <= 1 s / 200 MB.
Set ``SIM_BENCH_EVENT=1`` to also time the message-by-message path (slow at 1,024 NPUs).
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

from chakra_pipe.et import schema
from chakra_pipe.et.attrs import set_attr
from chakra_pipe.et.framing import write_trace
from chakra_pipe.et.traceset import TraceSet
from chakra_pipe.sim import HardwareConfig, NetworkConfig, SystemConfig, load_hardware, simulate

SYSTEM = {"scheduling-policy": "LIFO", "endpoint-delay": 10, "active-chunks-per-dimension": 1,
          "preferred-dataset-splits": 4, "collective-optimization": "localBWAware", "local-mem-bw": 1600,
          **{k: ["ring"] for k in ("all-reduce-implementation", "reduce-scatter-implementation",
                                  "all-gather-implementation", "all-to-all-implementation")}}


def all_reduce_set(folder: Path, npus: int) -> TraceSet:
    prefix = folder / f"ar{npus}"
    for r in range(npus):
        n = schema.Node(id=0, name="all_reduce_1MiB", type=schema.COMM_COLL_NODE)
        set_attr(n, "comm_type", schema.ALL_REDUCE)
        set_attr(n, "comm_size", 1 << 20)
        write_trace(f"{prefix}.{r}.et", schema.GlobalMetadata(version="0.0.4"), [n])
    return TraceSet.load(prefix)


def measure(ts: TraceSet, hw: HardwareConfig, fast: bool = True) -> tuple[float, float, float, int]:
    """(first-call wall, repeat wall, peak traced MiB of a repeat, max finish ns).

    The first call on a TraceSet also builds the per-rank columns (cached for later calls, as in a
    sweep); memory is traced in a separate run because tracemalloc slows Python down severalfold.
    """
    t0 = time.perf_counter()
    res = simulate(ts, hw, fast=fast)
    first = time.perf_counter() - t0
    t0 = time.perf_counter()
    simulate(ts, hw, fast=fast)
    repeat = time.perf_counter() - t0
    tracemalloc.start()
    simulate(ts, hw, fast=fast)
    peak = tracemalloc.get_traced_memory()[1] / 2**20
    tracemalloc.stop()
    return first, repeat, peak, max(res.finish_ns)


def main(argv: list[str]) -> None:
    event_too = os.environ.get("SIM_BENCH_EVENT") == "1"
    print(f"{'topology':15s} {'backend':19s} {'npus':>5s} {'path':6s} {'first_s':>8s} {'repeat_s':>8s} "
          f"{'peak_MiB':>9s} {'finish_ns':>10s}")
    with tempfile.TemporaryDirectory() as tmp:
        for npus in (64, 256, 1024):
            ts = all_reduce_set(Path(tmp), npus)
            for topo in ("Ring", "Switch", "FullyConnected"):
                net = NetworkConfig.from_dict({"topology": [topo], "npus_count": [npus], "bandwidth": [50],
                                               "latency": [500]}, source=f"{topo}_{npus}")
                for backend in ("congestion_unaware", "congestion_aware"):
                    hw = HardwareConfig(SystemConfig.from_dict(SYSTEM, source="Ring_4chunks"), net, backend=backend)
                    for fast in ([True, False] if event_too else [True]):
                        first, repeat, peak, fin = measure(ts, hw, fast)
                        print(f"{topo:15s} {backend:19s} {npus:5d} {'fast' if fast else 'event':6s} {first:8.3f} "
                              f"{repeat:8.3f} {peak:9.1f} {fin:10d}", flush=True)
    if len(argv) >= 3:
        ts = TraceSet.load(argv[0])
        for backend in ("congestion_unaware", "congestion_aware"):
            hw = load_hardware(argv[1], argv[2], backend=backend)
            first, repeat, peak, fin = measure(ts, hw)
            print(f"{Path(argv[0]).name}: {backend} {len(ts.ranks)} ranks first {first:.3f} s repeat {repeat:.3f} s "
                  f"peak {peak:.1f} MiB finish {fin} ns")


if __name__ == "__main__":
    main(sys.argv[1:])
