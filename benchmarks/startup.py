"""CLI start-up: ``python -X importtime`` summary and wall of ``chakra-pipe simulate --help`` / a tiny run.

Every sweep point and every Snakemake ``shell:`` job is its own process, so interpreter start-up and
imports are paid per point. Prints, each a median of N runs in fresh interpreters:

* ``help``: wall of ``chakra-pipe simulate --help``;
* ``first_event``: process start to the simulator's first event for an 8-NPU all-reduce (the
  ``EventQueue.run`` entry, timed from a wrapper that starts the clock before any import), as wall
  time and as the process's CPU time (``time.process_time``, interpreter start included): on a
  shared machine the CPU figure is what load does not inflate;
* ``split``: the first event's CPU time cut into interpreter start, ``import numpy`` and
  everything else (our modules, the stdlib they pull in, reading the configs and traces, the
  rank-set checks and the simulator's set-up), from a wrapper that imports numpy first (every run
  imports it anyway), and whether the run loaded protobuf (it should not: the loader walks the
  wire format itself, and protobuf plus the message classes cost ~55 ms);
* ``run``: wall of the whole ``chakra-pipe simulate`` on that workload;
* ``shard``: CPU time of a whole ``chakra-pipe sweep run`` job of one point on that workload (its
  plan made as the workflow makes it): every shard job pays it (with ``--baseline``, interleaved);
* the self import time summed per top-level package for both commands (``-X importtime``), so a
  heavy import sneaking into the CLI path shows up by name.

Bytecode is cached in a temporary ``PYTHONPYCACHEPREFIX`` (one warm-up run first), as an installed
package would have it: with ``PYTHONDONTWRITEBYTECODE`` set, every start recompiles all sources.
ASTRA-sim's analytical binaries start in 0.02-0.1 s on the 2-core reference machine; numpy alone
(``python -c "import numpy"``) is printed as the floor a numpy-based loader cannot go below, with
``OPENBLAS_NUM_THREADS=1`` as the CLI sets it for simulating verbs.

``--baseline SRC`` also times another checkout's ``src`` (e.g. ``git worktree add /tmp/old <rev>``),
interleaved run by run with this one, so a shared machine's load hits both alike; compare the minima.

    python benchmarks/startup.py [--repeat N] [--baseline OTHER/src]
"""

from __future__ import annotations

import argparse
import collections
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"
SYSTEM = (
    '{"scheduling-policy": "LIFO", "endpoint-delay": 10, "active-chunks-per-dimension": 1, '
    '"preferred-dataset-splits": 4, "collective-optimization": "localBWAware", "local-mem-bw": 1600, '
    '"all-reduce-implementation": ["ring"], "reduce-scatter-implementation": ["ring"], '
    '"all-gather-implementation": ["ring"], "all-to-all-implementation": ["ring"]}'
)
NETWORK = "topology: [Ring]\nnpus_count: [8]\nbandwidth: [50]\nlatency: [500]\n"
# Starts the clock before any chakra_pipe import and prints the wall and CPU times at the first
# simulated event; with SPLIT set, imports numpy first (as the CLI would: one OpenBLAS thread) and
# prints the CPU time before and after it.
FIRST_EVENT = """\
import os, sys, time
t0 = time.perf_counter()
if os.environ.get("SPLIT"):
    cpu0 = time.process_time()
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    import numpy
    sys.stderr.write(f"split {cpu0} {time.process_time()}\\n")
from chakra_pipe.sim import engine
run = engine.EventQueue.run
def timed(self):
    wall, cpu, pb = time.perf_counter() - t0 + float(sys.argv[1]), time.process_time(), "google.protobuf" in sys.modules
    sys.stderr.write(f"first_event {wall} {cpu} {int(pb)}\\n")
    engine.EventQueue.run = run
    return run(self)
engine.EventQueue.run = timed
from chakra_pipe.cli import main
sys.exit(main(sys.argv[2:]))
"""


def _env(cache: str, src: Path = SRC) -> dict[str, str]:
    env = dict(os.environ, PYTHONPYCACHEPREFIX=cache, PYTHONPATH=str(src))
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env.pop("OPENBLAS_NUM_THREADS", None)  # the CLI's own choice is part of what is measured
    return env


def _wall(cmd: list[str], env: dict[str, str]) -> tuple[float, str]:
    t0 = time.perf_counter()
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True)
    return time.perf_counter() - t0, done.stderr


# Writes a one-point campaign plan over the workload as the workflow does (config checked and its
# defaults filled in by the schema, then Campaign.from_config) and prints the plan's path.
PLAN = """\
import sys
from pathlib import Path
from snakemake.utils import validate
from chakra_pipe.sweep.campaign import Campaign
repo, tmp, prefix, system, network = sys.argv[1:]
cfg = {"campaign": "t", "outdir": f"{tmp}/reports",
       "workloads": {"ar8": {"kind": "trace", "prefix": prefix, "npus": 8, "platforms": ["ring"]}},
       "hardware": {"platforms": {"ring": {"network": network, "system": system}}}}
validate(cfg, f"{repo}/workflow/schemas/config.schema.yaml")
camp = Campaign.from_config(cfg, root=Path(tmp), torch_available=False)
camp.write()
print(camp.plan_path)
"""


def _cpu(cmd: list[str], env: dict[str, str]) -> float:
    """CPU seconds (user + system) of a command run to completion."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run(cmd, env=env, capture_output=True, check=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime


def _interpreter_start(env: dict[str, str]) -> float:
    """Seconds from process start to the first line of a script (subtracted by the wrapper)."""
    return statistics.median(_wall([sys.executable, "-c", "pass"], env)[0] for _ in range(5))


def _import_summary(cmd: list[str], env: dict[str, str], top: int = 8) -> str:
    _, err = _wall([sys.executable, "-X", "importtime", *cmd], env)
    self_us: collections.Counter[str] = collections.Counter()
    for line in err.splitlines():
        if not line.startswith("import time:") or "self [us]" in line:
            continue
        own, _, name = line.split(":", 1)[1].split("|")
        name = name.strip()
        parts = name.split(".")
        self_us[".".join(parts[:2]) if parts[0] == "chakra_pipe" else parts[0]] += int(own)
    total = sum(self_us.values()) / 1000
    rows = ", ".join(f"{k} {v / 1000:.0f}" for k, v in self_us.most_common(top))
    return f"{total:.0f} ms imports: {rows}"


def _first_event(env: dict[str, str], base: float, sim_args: list[str]) -> tuple[float, float]:
    """Wall and CPU seconds from process start to the first simulated event."""
    _, err = _wall([sys.executable, "-c", FIRST_EVENT, str(base), *sim_args], env)
    wall, cpu, _ = next(map(float, x.split()[1:]) for x in err.splitlines() if x.startswith("first_event"))
    return wall, cpu


def _split(env: dict[str, str], sim_args: list[str]) -> tuple[float, float, float, float]:
    """CPU seconds of the first event's parts (interpreter, numpy, the rest) and 1.0 when the run
    had imported protobuf by then."""
    _, err = _wall([sys.executable, "-c", FIRST_EVENT, "0", *sim_args], dict(env, SPLIT="1"))
    lines = {x.split()[0]: [float(v) for v in x.split()[1:]] for x in err.splitlines()}
    start, numpy = lines["split"]
    _, cpu, protobuf = lines["first_event"]
    return start, numpy - start, cpu - numpy, protobuf


def _versus(new: list[float], old: list[float], unit: str, baseline: Path) -> None:
    """The baseline's line under a figure: its median and minimum, and this tree's ratios to them."""
    med = statistics.median
    print(
        f"  baseline {baseline}: {med(old):6.3f} {unit}   (min {min(old):.3f}); "
        f"this / baseline {med(new) / med(old):.2f} (medians), {min(new) / min(old):.2f} (minima)"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--baseline", type=Path, help="another checkout's src folder, timed interleaved with this one")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        env = _env(os.path.join(tmp, "pycache"))
        prefix = os.path.join(tmp, "ar8")
        subprocess.run(
            [
                sys.executable,
                "-m",
                "chakra_pipe.cli",
                "generate",
                "collective",
                "--type",
                "all_reduce",
                "--npus",
                "8",
                "--size",
                "1MiB",
                "--out",
                prefix,
            ],
            env=env,
            check=True,
            capture_output=True,
        )
        Path(tmp, "sys.json").write_text(SYSTEM)
        Path(tmp, "net.yml").write_text(NETWORK)
        sim_args = [
            "simulate",
            f"--workload-configuration={prefix}",
            f"--system-configuration={tmp}/sys.json",
            f"--network-configuration={tmp}/net.yml",
        ]
        cli = [sys.executable, "-m", "chakra_pipe.cli"]
        plan = subprocess.run(
            [sys.executable, "-c", PLAN, str(SRC.parent), tmp, prefix, f"{tmp}/sys.json", f"{tmp}/net.yml"],
            env=env,
            check=True,
            capture_output=True,
            text=True,
        ).stdout.strip()
        shard = [*cli, "sweep", "run", "--plan", plan, "--workload", "ar8", "--shard", "0", "--out", f"{tmp}/s.csv"]
        _wall([*cli, *sim_args], env)  # fills the bytecode cache
        _wall(shard, env)
        old_env = None
        if args.baseline:
            old_env = _env(os.path.join(tmp, "pycache-baseline"), args.baseline.resolve())
            _wall([*cli, *sim_args], old_env)
            _wall(shard, old_env)
        base = _interpreter_start(env)
        numpy = [
            _wall([sys.executable, "-c", "import numpy"], dict(env, OPENBLAS_NUM_THREADS="1"))[0]
            for _ in range(args.repeat)
        ]
        helps = [_wall([*cli, "simulate", "--help"], env)[0] for _ in range(args.repeat)]
        runs = [_wall([*cli, *sim_args], env)[0] for _ in range(args.repeat)]
        firsts, old_firsts, splits, shards, old_shards = [], [], [], [], []
        for _ in range(args.repeat):
            firsts.append(_first_event(env, base, sim_args))
            shards.append(_cpu(shard, env))
            if old_env is not None:
                old_firsts.append(_first_event(old_env, base, sim_args))
                old_shards.append(_cpu(shard, old_env))
            splits.append(_split(env, sim_args))
        med = statistics.median
        print(f"load average            {os.getloadavg()[0]:6.2f}   (on 2 cores a load above ~1 inflates every figure)")
        print(f"interpreter start       {base:6.3f} s")
        print(f"import numpy (floor)    {med(numpy):6.3f} s   (OPENBLAS_NUM_THREADS=1)")
        print(f"simulate --help         {med(helps):6.3f} s   (min {min(helps):.3f})")
        for what, i in (("wall", 0), ("CPU", 1)):
            new = [f[i] for f in firsts]
            print(f"first event (8-NPU AR)  {med(new):6.3f} s {what}   (min {min(new):.3f}; target <= 0.2)")
            if old_firsts:
                _versus(new, [f[i] for f in old_firsts], f"s {what}", args.baseline)
        *parts, protobuf = [med(p) for p in zip(*splits)]
        print(
            "  CPU split (medians)    "
            + ", ".join(f"{k} {1000 * v:.0f} ms" for k, v in zip(("interpreter", "numpy", "rest"), parts))
            + f"; protobuf imported: {'yes' if protobuf else 'no'}"
        )
        print(f"whole run (8-NPU AR)    {med(runs):6.3f} s   (min {min(runs):.3f})")
        print(f"sweep shard job, 1 pt   {med(shards):6.3f} s CPU   (min {min(shards):.3f})")
        if old_shards:
            _versus(shards, old_shards, "s CPU", args.baseline)
        print(f"--help   {_import_summary(['-m', 'chakra_pipe.cli', 'simulate', '--help'], env)}")
        print(f"simulate {_import_summary(['-m', 'chakra_pipe.cli', *sim_args], env)}")


if __name__ == "__main__":
    main()
