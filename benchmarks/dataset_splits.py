"""Simulation time against ``preferred-dataset-splits``: chunk handling must stay linear.

Each split is one chunk stream per collective and NPU; queue insertion once scanned the queue and a
finished chunk left from a list's front, so time grew with splits². Prints seconds per run and the
ratio of time per split between the largest and smallest value (about 1 when linear).

    python benchmarks/dataset_splits.py [--npus 8] [--splits 1000 4000 16000]
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

from chakra_pipe.et.traceset import TraceSet
from chakra_pipe.generate.collective import CollectiveSpec, generate_collective
from chakra_pipe.sim import load_hardware, simulate

HW = Path(__file__).resolve().parent.parent / "config" / "hardware" / "hgx_h100"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--npus", type=int, default=8)
    ap.add_argument("--splits", type=int, nargs="+", default=[1000, 4000, 16000])
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        generate_collective(CollectiveSpec("all_reduce", args.npus, 1 << 20), root / "ar")
        traces = TraceSet.load(root / "ar")
        net = root / "net.yml"
        net.write_text(
            f"topology: [ Switch ]\nnpus_count: [ {args.npus} ]\nbandwidth: [ 400.0 ]\nlatency: [ 936.25 ]\n"
        )
        per_split = []
        for splits in args.splits:
            system = json.loads((HW / "system.json").read_text())
            system["preferred-dataset-splits"] = splits
            (root / "sys.json").write_text(json.dumps(system))
            hw = load_hardware(root / "sys.json", net)
            start = time.perf_counter()
            finish = max(simulate(traces, hw).finish_ns)
            seconds = time.perf_counter() - start
            per_split.append(seconds / splits)
            print(
                f"splits {splits:>7,}: {seconds:8.2f} s  ({seconds / splits * 1e6:7.1f} µs per split), "
                f"finish {finish:,} ns"
            )
    print(f"time per split, largest / smallest: {per_split[-1] / per_split[0]:.2f} (1.0 = linear)")


if __name__ == "__main__":
    main()
