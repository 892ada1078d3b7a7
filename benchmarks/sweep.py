"""Benchmark: a 1,000-point hardware grid over one LLM trace set through the Snakemake workflow.

Prints the total wall time, the simulator's own CPU time per point (in-process, on a sample of the same
points, each simulated twice and the second run timed: the rank-set check is once per set and splits
value, not per point), and the orchestration overhead per point: the workflow's CPU time per point
minus that simulation (Snakemake planning, job start-up and imports, trace loading and checking per
shard, CSV and parquet writing, aggregation and report), split by job kind, and overhead / simulation.
CPU time is the figure to compare: wall time depends on what else the machine runs.
Targets: under 5 minutes in all (issue 7); overhead per point below the simulation itself (issue 15).

    python benchmarks/sweep.py [--points 1000] [--shard-size N] [--cores 2] [--keep DIR]

``--shard-size`` defaults to the schema's ``shard_size`` default, so the benchmark measures what a
campaign that leaves the key out gets.
"""

from __future__ import annotations

import argparse
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

# Put first on the workflow's PATH as `chakra-pipe`: runs the real command and appends its verb and
# CPU time to $SWEEP_BENCH_JOBS, so the workflow's CPU time splits into job kinds and Snakemake itself.
WRAPPER = """#!{python}
import json, os, resource, subprocess, sys
rc = subprocess.run([sys.executable, {real!r}, *sys.argv[1:]]).returncode
job = resource.getrusage(resource.RUSAGE_CHILDREN)
me = resource.getrusage(resource.RUSAGE_SELF)
verb = " ".join(a for a in sys.argv[1:3] if a.isidentifier())  # "sweep run", "validate"
line = {{"verb": verb, "cpu": job.ru_utime + job.ru_stime, "wrapper": me.ru_utime + me.ru_stime}}
with open(os.environ["SWEEP_BENCH_JOBS"], "a") as f:
    f.write(json.dumps(line) + "\\n")
sys.exit(rc)
"""


def cpu_now() -> float:
    """This process's CPU seconds (user + system)."""
    return time.process_time()


def simulated_cpu(traces, points, hardware_config, simulate) -> float:
    """Median CPU seconds of one ``simulate`` call per point, each point's second run timed."""
    times = []
    for point in points:
        hw = hardware_config(point, point.id)
        simulate(traces, hw)
        t0 = cpu_now()
        simulate(traces, hw)
        times.append(cpu_now() - t0)
    times.sort()
    return times[len(times) // 2]


def wrap_cli(work: Path, env: dict[str, str]) -> Path:
    """Install the timing wrapper as ``chakra-pipe`` in ``work/bin``; returns the job log it appends to."""
    real = shutil.which("chakra-pipe", path=env["PATH"])
    if real is None:
        raise SystemExit("chakra-pipe is not on PATH (install the package into this environment)")
    wrapper = work / "bin" / "chakra-pipe"
    wrapper.parent.mkdir(parents=True, exist_ok=True)
    wrapper.write_text(WRAPPER.format(python=sys.executable, real=real))
    wrapper.chmod(0o755)
    jobs = work / "jobs.jsonl"
    jobs.write_text("")
    env["PATH"] = str(wrapper.parent) + os.pathsep + env["PATH"]
    env["SWEEP_BENCH_JOBS"] = str(jobs)
    return jobs


def default_shard_size() -> int:
    """``shard_size``'s default in the workflow's config schema (the only place defaults live)."""
    schema = yaml.safe_load((REPO / "workflow" / "schemas" / "config.schema.yaml").read_text())
    return int(schema["properties"]["shard_size"]["default"])


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
    ap.add_argument("--shard-size", type=int, help="grid points per shard job (default: the config schema's default)")
    ap.add_argument("--cores", type=int, default=2)
    ap.add_argument("--layers", type=int, default=1, help="transformer layers of the llama3-8b trace")
    ap.add_argument("--sample", type=int, default=20, help="points simulated in-process to time the simulator")
    ap.add_argument("--keep", type=Path, help="work in this folder and keep it (default: a temporary one)")
    args = ap.parse_args()
    shard_size = args.shard_size or default_shard_size()

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
        "shard_size": shard_size,
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
    first_shard = next(iter(camp.workloads.values())).shards[0]
    sample = [camp.points[p] for p in first_shard[: args.sample]]  # every splits value, several latencies
    sim_s = simulated_cpu(traces, sample, hardware_config, simulate)

    jobs_log = wrap_cli(work, env)
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
    by_verb: dict[str, list[float]] = {}
    wrappers = 0.0
    for line in jobs_log.read_text().splitlines():
        job = json.loads(line)
        by_verb.setdefault(job["verb"], []).append(job["cpu"])
        wrappers += job["wrapper"]
    cpu -= wrappers  # the timing wrapper's own start-up is not the workflow's
    shards = sum(len(w.shards) for w in camp.workloads.values())
    overhead = cpu / n - sim_s
    print(
        f"grid points          {n} ({summary['counts']['simulated_ok']} simulated ok, "
        f"{summary['counts']['failed']} failed) in {shards} shard jobs of <= {shard_size}"
    )
    print(f"total wall time      {total:8.1f} s   (target < 300 s; load average {os.getloadavg()[0]:.1f})")
    print(f"workflow CPU time    {cpu:8.1f} s   ({cpu / n * 1e3:.2f} ms per point)")
    print(f"simulation per point {sim_s * 1e3:8.2f} ms CPU (in-process median of {len(sample)} points)")
    print(f"overhead per point   {overhead * 1e3:8.2f} ms CPU (workflow CPU / points - simulation)")
    print(f"overhead/simulation  {overhead / sim_s:8.2f}     (target < 1)")
    print("overhead by job kind (ms CPU per point; sweep run: less the simulation):")
    shard_cpu = sum(by_verb.get("sweep run", []))
    rows = {"sweep run": shard_cpu - sim_s * n}
    rows.update((verb, sum(times)) for verb, times in by_verb.items() if verb != "sweep run")
    rows["snakemake itself"] = cpu - sum(sum(times) for times in by_verb.values())
    for verb, seconds in rows.items():
        count = len(by_verb.get(verb, []))
        jobs = f"{count} job{'s' * (count != 1)}" if count else ""
        print(f"  {verb:20s} {seconds / n * 1e3:8.2f}   {jobs}")
    if not args.keep:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
