"""Benchmark: a 1,000-point hardware grid over one LLM trace set through the Snakemake workflow.

Prints the total wall time, the simulator's own time per point (measured in-process on a sample of the
same points), and the orchestration overhead per point: what the workflow adds on top of simulating
(Snakemake planning, job start-up, trace loading per shard, CSV writing, aggregation and report).
Targets (issue 7): under 5 minutes in all, under 50 ms of overhead per point.

    python benchmarks/sweep.py [--points 1000] [--shard-size 100] [--cores 2] [--keep DIR]
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parent.parent


def grid_axes(points: int) -> dict[str, list]:
    """Three axes whose product is at least ``points`` (bandwidth x latency x chunking)."""
    side = max(1, round(points ** (1 / 3)))
    while side**3 < points:
        side += 1
    return {
        "network.bandwidth": [50 * (i + 1) for i in range(side)],
        "network.latency": [100.0 * (i + 1) for i in range(side)],
        "system.preferred-dataset-splits": [i + 1 for i in range(side)],
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--points", type=int, default=1000)
    ap.add_argument("--shard-size", type=int, default=100)
    ap.add_argument("--cores", type=int, default=2)
    ap.add_argument("--layers", type=int, default=1, help="transformer layers of the llama3-8b trace")
    ap.add_argument("--sample", type=int, default=20, help="points simulated in-process to time the simulator")
    ap.add_argument("--keep", type=Path, help="work in this folder and keep it (default: a temporary one)")
    args = ap.parse_args()

    work = args.keep or Path(tempfile.mkdtemp(prefix="chakra-sweep-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, PATH=str(Path(sys.executable).parent) + os.pathsep + os.environ.get("PATH", ""))
    prefix = work / "trace" / "llama"
    prefix.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run(
        [
            "chakra-pipe",
            "generate",
            "llm",
            "--model",
            "llama3-8b",
            "--layers",
            str(args.layers),
            "--dp",
            "8",
            "--out",
            str(prefix),
        ],
        check=True,
        env=env,
        capture_output=True,
    )
    shutil.copytree(REPO / "config" / "hardware", work / "hardware", dirs_exist_ok=True)
    axes = grid_axes(args.points)
    config = {
        "campaign": "bench",
        "tracedir": "traces",
        "outdir": "reports",
        "shard_size": args.shard_size,
        "capture": "never",
        "replay": "never",
        "replay_iterations": 1,
        "workloads": {"llama": {"kind": "trace", "prefix": str(prefix), "npus": 8}},
        "hardware": {
            "platforms": {
                "hgx": {
                    "network": "hardware/hgx_h100/network.yml",
                    "system": "hardware/hgx_h100/system.json",
                    "backend": "congestion_unaware",
                    "axes": axes,
                }
            }
        },
    }
    (work / "bench.yaml").write_text(yaml.safe_dump(config, sort_keys=False))

    from chakra_pipe.et.traceset import TraceSet
    from chakra_pipe.sim import simulate
    from chakra_pipe.sweep.campaign import Campaign
    from chakra_pipe.sweep.shard import hardware_config

    camp = Campaign.from_config(config, root=work, torch_available=False)
    n = len(camp.points)
    traces = TraceSet.load(prefix)
    sample = list(itertools.islice(camp.points.values(), 0, n, max(1, n // args.sample)))
    t0 = time.perf_counter()
    for point in sample:
        simulate(traces, hardware_config(point, point.id))
    sim_s = (time.perf_counter() - t0) / len(sample)

    cpu0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "snakemake",
            "-s",
            str(REPO / "workflow" / "Snakefile"),
            "-d",
            str(work),
            "--configfile",
            "bench.yaml",
            "--cores",
            str(args.cores),
            "--scheduler",
            "greedy",
            "--quiet",
            "all",
        ],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
    )
    total = time.perf_counter() - t0
    cpu1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (cpu1.ru_utime - cpu0.ru_utime) + (cpu1.ru_stime - cpu0.ru_stime)
    if run.returncode != 0:
        print(run.stderr[-4000:], file=sys.stderr)
        return 1
    summary = json.loads((work / "reports/bench/summary.json").read_text())
    jobs = sum(len(w.shards) for w in camp.workloads.values())
    overhead = total / n - sim_s / args.cores
    print(
        f"grid points          {n} ({summary['counts']['simulated_ok']} simulated ok, "
        f"{summary['counts']['failed']} failed) in {jobs} shard jobs of <= {args.shard_size}"
    )
    print(f"total wall time      {total:8.1f} s   (target < 300 s)")
    print(f"simulator per point  {sim_s * 1e3:8.1f} ms  (in-process, {len(sample)} sampled points)")
    print(f"overhead per point   {overhead * 1e3:8.1f} ms  (total / points - simulator / cores; target < 50 ms)")
    print(
        f"CPU time             {cpu:8.1f} s   (workflow processes; overhead "
        f"{(cpu / n - sim_s) * 1e3:.1f} ms CPU per point, independent of other load on the machine)"
    )
    if not args.keep:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
