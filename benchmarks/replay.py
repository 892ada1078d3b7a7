"""Replay overheads: plan building, the issue loop's per-node cost, and a real gloo replay.

* Plan: nodes/s building a replay plan of a generated rank set (dependency union, static order,
  cross-rank checks), no torch.
* Issue loop: nodes/s of ``run_iteration`` with an engine whose work finishes instantly — the
  bookkeeping a replay adds to every node, which bounds the smallest operation it can time.
* gloo (needs torch): a 1 MiB all-reduce microbenchmark on 2 and 4 CPU ranks; median step time and
  busbw, plus the wall time of the whole command (start-up included).

    python benchmarks/replay.py [--nodes 20000] [--repeat 3] [--no-gloo]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from chakra_pipe.et import schema, set_attr, write_trace
from chakra_pipe.et.schema import GlobalMetadata, Node
from chakra_pipe.et.traceset import TraceSet
from chakra_pipe.replay.executor import run_iteration
from chakra_pipe.replay.plan import build_plan


def _write_dag(prefix: str, nodes: int, ranks: int) -> None:
    """Per rank: a chain of compute nodes with an all-reduce every 10th node (depends on the last)."""
    for r in range(ranks):
        out = []
        for i in range(nodes):
            deps = [i - 1] if i else []
            if i % 10 == 9:
                n = Node(id=i, name=f"ar{i}", type=schema.COMM_COLL_NODE, data_deps=deps)
                set_attr(n, "comm_type", schema.ALL_REDUCE)
                set_attr(n, "comm_size", 4096)
            else:
                n = Node(id=i, name=f"c{i}", type=schema.COMP_NODE, data_deps=deps, duration_micros=1)
            set_attr(n, "is_cpu_op", False)
            out.append(n)
        write_trace(f"{prefix}.{r}.et", GlobalMetadata(version="1.0.0"), out)


class _Instant:
    def start(self, i):
        return None

    def poll(self, handle):
        return True

    def due(self, handle):
        return None

    def idle(self, polls, timeout_ns):
        pass


def bench_plan_and_loop(nodes: int, repeat: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        prefix = f"{tmp}/dag"
        _write_dag(prefix, nodes, 2)
        ts = TraceSet.load(prefix)
        times = []
        for _ in range(repeat):
            t0 = time.perf_counter()
            plan = build_plan(ts)
            times.append(time.perf_counter() - t0)
        total = 2 * nodes
        print(f"plan:       {total / min(times):12,.0f} nodes/s  ({total} nodes, best of {repeat})")
        times = []
        for _ in range(repeat):
            t0 = time.perf_counter()
            run_iteration(plan.ranks[0], _Instant(), deadline_ns=time.monotonic_ns() + 10**12)
            times.append(time.perf_counter() - t0)
        print(f"issue loop: {nodes / min(times):12,.0f} nodes/s  ({1e6 * min(times) / nodes:.2f} µs per node)")


def bench_gloo(ranks: int) -> None:
    from chakra_pipe.replay.launcher import ReplayConfig, run_replay

    with tempfile.TemporaryDirectory() as tmp:
        prefix = f"{tmp}/ar"
        for r in range(ranks):
            n = Node(id=r, name="all_reduce_1MiB", type=schema.COMM_COLL_NODE)
            set_attr(n, "is_cpu_op", False)
            set_attr(n, "comm_type", schema.ALL_REDUCE)
            set_attr(n, "comm_size", 1 << 20)
            write_trace(f"{prefix}.{r}.et", GlobalMetadata(version="1.0.0"), [n])
        t0 = time.perf_counter()
        res = run_replay(
            ReplayConfig(
                prefix=prefix, out=Path(tmp) / "r.json", iterations=10, warmup=2, backend="gloo", timeout_s=120
            )
        )
        wall = time.perf_counter() - t0
    busbw = statistics.median(c["busbw_GBps"] for c in res["collectives"])
    print(
        f"gloo {ranks} ranks: median step {res['step_time_ns']['median'] / 1e3:9.1f} µs, "
        f"busbw {busbw:.3f} GB/s, command wall {wall:.1f} s"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=20000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--no-gloo", action="store_true", help="skip the torch/gloo part")
    args = ap.parse_args()
    bench_plan_and_loop(args.nodes, args.repeat)
    if not args.no_gloo:
        for ranks in (2, 4):
            bench_gloo(ranks)


if __name__ == "__main__":
    main()
