"""What the shared rank-set analysis costs next to the simulation it guards.

``simulate`` and ``replay`` now run :func:`chakra_pipe.rankset.analyze` (per-file rules, one Kahn
order per rank, groups, matching, the untimed finish proof) before anything else; a sweep pays it
once per trace set (the analysis is cached per TraceSet). This prints, per generated LLM step, the
cold analysis time, the simulation time with the analysis already cached, and their ratio, plus the
validate-mode analysis (full protobuf decode) for comparison.

    python benchmarks/rankset.py [--max-ranks N]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from chakra_pipe.et.traceset import TraceSet
from chakra_pipe.rankset import analyze
from chakra_pipe.sim import HardwareConfig, NetworkConfig, SystemConfig, simulate

sys.path.insert(0, str(Path(__file__).parent))
from simulator import SYSTEM  # noqa: E402 -- the realistic cases' system, shared

CASES = [
    ("gpt3-13b t8d4", ["--model", "gpt3-13b", "--tp", "8", "--dp", "4"], 32),
    ("llama3-8b t8d8 zero1", ["--model", "llama3-8b", "--tp", "8", "--dp", "8", "--zero", "1"], 64),
]


def timed(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--max-ranks", type=int, default=64)
    args = ap.parse_args()
    print(f"{'case':22s} {'ranks':>5s} {'nodes':>8s} {'analyze_s':>9s} {'sim_s':>7s} {'ratio':>6s} {'full_s':>7s}")
    with tempfile.TemporaryDirectory() as tmp:
        for label, flags, ranks in CASES:
            if ranks > args.max_ranks:
                continue
            prefix = str(Path(tmp) / label.split()[0])
            subprocess.run(
                [sys.executable, "-m", "chakra_pipe.cli", "generate", "llm", *flags, "--out", prefix], check=True
            )
            net = {"topology": ["Switch"], "npus_count": [ranks], "bandwidth": [400], "latency": [936.25]}
            hw = HardwareConfig(SystemConfig.from_dict(SYSTEM, source="sys"), NetworkConfig.from_dict(net, source="n"))
            ts = TraceSet.load(prefix)
            cold = timed(lambda: analyze(ts, dataset_splits=hw.system.preferred_dataset_splits))  # noqa: B023
            sim = timed(lambda: simulate(ts, hw))  # noqa: B023 -- the analysis is cached now
            full = timed(lambda: analyze(TraceSet.load(prefix), full=True))  # noqa: B023
            nodes = sum(len(g) for g in ts.ranks)
            print(f"{label:22s} {ranks:5d} {nodes:8d} {cold:9.3f} {sim:7.3f} {cold / sim:6.2f} {full:7.3f}")


if __name__ == "__main__":
    main()
