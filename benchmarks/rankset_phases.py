"""What the rank-set analysis and the symmetry proof cost on an existing set, per phase (issue #15).

Each round is a fresh process per source tree (the new one, and ``--old SRC``, e.g. a ``git
worktree add --detach`` snapshot of main, alternated round by round so both see the same load):
it loads the set, decodes every file's attributes (the loader's work, timed apart), then times in
CPU seconds the per-file rules with column sharing (``file_results``), the comm specs, the
cross-rank rules and the symmetry proof (``trace_problem``), as ``simulate`` runs them. Prints
medians, new/old ratios, and whether both trees' findings and proof are identical (a CRC of their
text). Memory by phase is ``benchmarks/memory.py``'s (here every file is decoded before the rules).

    python benchmarks/rankset_phases.py PREFIX SYSTEM NETWORK [--old /tmp/base/src] [--rounds 3]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

SRC = str(Path(__file__).resolve().parent.parent / "src")
PHASES = ("file_results", "comm_specs", "check_collectives", "check_collective_order", "check_point_to_point")

CHILD = r"""
import gc, json, sys, time, zlib
from chakra_pipe.et.traceset import TraceSet
import chakra_pipe.rankset.analysis as an
import chakra_pipe.sim.symmetric_files as sf
from chakra_pipe.sim.config import load_hardware

prefix, system, network, phases = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4].split(",")
hw = load_hardware(system, network)
ts = TraceSet.load(prefix)
t = time.process_time()
for g in ts.ranks:
    g.attr_kind
decode = time.process_time() - t
gc.collect()
gc.disable()
times = dict.fromkeys([*phases, "trace_problem"], 0.0)
def timed(mod, name):
    run = getattr(mod, name)
    def wrapper(*args, **kwargs):
        t = time.process_time()
        try:
            return run(*args, **kwargs)
        finally:
            times[name] += time.process_time() - t
    setattr(mod, name, wrapper)
for name in phases:
    timed(an, name)
timed(sf, "trace_problem")
t = time.process_time()
analysis = an.analyze(ts, None, None, hw.system.preferred_dataset_splits)
analysis.refuse_input()
sym, why = sf.find_symmetry(analysis.groups, len(ts.ranks), hw)
proof = sf._proof(ts, analysis.groups, sym) if sym is not None else (why, [])
total = time.process_time() - t
text = "\n".join(map(repr, analysis.findings)) + repr(sym) + repr(proof)
print(json.dumps({"decode": decode, "total": total, **times,
                  "crc": zlib.crc32(text.encode())}))
"""


def measure(src: str, args: argparse.Namespace) -> dict:
    env = {**os.environ, "PYTHONPATH": src}
    cmd = [sys.executable, "-c", CHILD, args.prefix, args.system, args.network, ",".join(PHASES)]
    out = subprocess.run(cmd, env=env, check=True, capture_output=True, text=True).stdout
    return json.loads(out.splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("prefix")
    ap.add_argument("system")
    ap.add_argument("network")
    ap.add_argument("--old", metavar="SRC", help="also measure this source tree (e.g. a snapshot of main)")
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    trees = {"new": SRC, **({"old": args.old} if args.old else {})}
    runs: dict[str, list[dict]] = {name: [] for name in trees}
    for _ in range(args.rounds):
        for name, src in trees.items():
            runs[name].append(measure(src, args))
    keys = ("decode", *PHASES, "trace_problem", "total")
    print(f"{args.prefix}: medians of {args.rounds} (CPU s); load average {os.getloadavg()[0]:.2f}")
    print(f"{'phase':24s}" + "".join(f"{name:>10s}" for name in trees) + ("  new/old" if "old" in trees else ""))
    for key in keys:
        med = {name: statistics.median(r[key] for r in runs[name]) for name in trees}
        ratio = f"  {med['new'] / med['old']:.2f}" if "old" in trees and med["old"] else ""
        print(f"{key:24s}" + "".join(f"{med[name]:10.3f}" for name in trees) + ratio)
    if "old" in trees:
        same = {r["crc"] for rs in runs.values() for r in rs}
        print(f"findings and proof {'identical' if len(same) == 1 else 'DIFFER'}")


if __name__ == "__main__":
    main()
