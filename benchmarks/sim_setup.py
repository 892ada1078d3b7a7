"""Set-up of a fresh ``simulate`` call at scale: rank-set analysis, trace columns, wiring, run (CPU s).

Cases: gpt3-175b t8d16p8 with 8 layers on a 1,024-NPU switch (unaware, ring; ``generate llm``) and
one 1 MiB all-reduce on 4,096 NPUs (byte-identical one-node rank files, ``simulator.py``'s system).
Each measurement is a fresh process; ``--old SRC`` alternates it with another source tree (e.g. a
``git worktree add --detach`` snapshot of main) and prints both medians and the ratio, so a
loaded machine slows both alike. Finish times are compared between the trees (they must agree).

    python benchmarks/sim_setup.py [--reps 3] [--old /tmp/base/src]
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
SRC = str(HERE.parent / "src")

STAGES = """
import json, resource, sys, time
sys.path.insert(0, sys.argv[3])
from simulator import SYSTEM, _llm_system, _network
from chakra_pipe.et.traceset import TraceSet
from chakra_pipe.sim import HardwareConfig, NetworkConfig, SystemConfig, simulate
from chakra_pipe.sim.engine import EventQueue
S = sys.modules["chakra_pipe.sim.simulate"]
ts = TraceSet.load(sys.argv[1])
system = _llm_system("ring", 1) if sys.argv[2] == "llm" else SYSTEM
hw = HardwareConfig(SystemConfig.from_dict(system, source="s"), NetworkConfig.from_dict(_network([len(ts.ranks)]),
                    source="n"), backend="congestion_unaware")
t = {"analyze": 0.0, "columns": 0.0}
def timed(name, f):
    def g(*a, **k):
        c = time.process_time()
        try:
            return f(*a, **k)
        finally:
            t[name] += time.process_time() - c
    return g
S.analyze, S.rank_trace = timed("analyze", S.analyze), timed("columns", S.rank_trace)
run = EventQueue.run
def first_event(self):
    t["setup"] = time.process_time() - c0
    run(self)
EventQueue.run = first_event
c0 = time.process_time()
res = simulate(ts, hw)
t["total"] = time.process_time() - c0
t["run"] = t["total"] - t["setup"]
t["rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
t["finish"] = res.finish_ns
print(json.dumps(t))
"""


def make_sets(tmp: Path) -> dict[str, str]:
    env = dict(os.environ, PYTHONPATH=SRC)
    llm = tmp / "gpt" / "gpt"
    flags = ["--model", "gpt3-175b", "--tp", "8", "--dp", "16", "--pp", "8", "--layers", "8"]
    subprocess.run(
        [sys.executable, "-m", "chakra_pipe.cli", "generate", "llm", *flags, "--out", str(llm)],
        env=env,
        check=True,
        capture_output=True,
    )
    code = f"import sys; sys.path.insert(0, {str(HERE)!r}); from pathlib import Path; import simulator; "
    code += f"simulator.all_reduce_set(Path({str(tmp)!r}), 4096)"
    subprocess.run([sys.executable, "-c", code], env=env, check=True)
    return {"gpt3-175b t8d16p8 L8 (1,024)": str(llm), "all-reduce (4,096)": str(tmp / "ar4096")}


def measure(src: str, prefix: str, kind: str) -> dict:
    env = dict(os.environ, PYTHONPATH=src)
    out = subprocess.run(
        [sys.executable, "-c", STAGES, prefix, kind, str(HERE)], env=env, check=True, capture_output=True, text=True
    )
    return json.loads(out.stdout.splitlines()[-1])


def main(argv: list[str]) -> None:
    reps = int(argv[argv.index("--reps") + 1]) if "--reps" in argv else 3
    old = argv[argv.index("--old") + 1] if "--old" in argv else None
    trees = {"new": SRC, **({"old": old} if old else {})}
    print(f"load average {os.getloadavg()[0]:.1f}; CPU seconds, medians of {reps}")
    with tempfile.TemporaryDirectory() as tmp:
        for label, prefix in make_sets(Path(tmp)).items():
            kind = "llm" if "gpt" in label else "collective"
            runs: dict[str, list[dict]] = {name: [] for name in trees}
            for _ in range(reps):
                for name, src in trees.items():  # alternated: both see the same load
                    runs[name].append(measure(src, prefix, kind))
            finishes = {json.dumps(r["finish"]) for rs in runs.values() for r in rs}
            for name, rs in runs.items():
                med = {k: statistics.median(r[k] for r in rs) for k in ("analyze", "columns", "setup", "run", "total")}
                rss = max(r["rss_mb"] for r in rs)
                print(
                    f"{label:28s} {name:3s} set-up {med['setup']:6.2f} (analysis {med['analyze']:5.2f}, "
                    f"columns {med['columns']:5.2f})  run {med['run']:5.2f}  total {med['total']:6.2f}  "
                    f"peak RSS {rss:4.0f} MB"
                )
            if old:
                new_s = statistics.median(r["setup"] for r in runs["new"])
                old_s = statistics.median(r["setup"] for r in runs["old"])
                print(f"{'':28s} set-up old/new {old_s / new_s:.1f}x; finish times equal: {len(finishes) == 1}")
            print(f"load average {os.getloadavg()[0]:.1f}", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
