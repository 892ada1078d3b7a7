"""End-to-end time of ``chakra-pipe search``: enumeration + memory model, then per-layout simulation.

Prints the layouts enumerated, how many fit / were pruned / dominated, the wall time of the memory-only
pass, and (unless ``--memory-only``) the wall time of the full search with the mean and worst seconds
per simulated layout, so the cost of a larger search can be extrapolated.

    python benchmarks/search.py [--model gpt3-13b] [--gpus 64] [--global-batch 64] [--layers N]
                                [--hbm-gib 80] [--memory-only]

The machine is a 2-level scale-out network (8 GPUs per NVSwitch node, ``gpus/8`` nodes, 50 GB/s NICs).
"""

from __future__ import annotations

import argparse
import io
import time
from collections import Counter
from pathlib import Path

from chakra_pipe.search.run import SearchSpec, search
from chakra_pipe.sweep.grid import expand, select_points

REPO = Path(__file__).resolve().parents[1]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="gpt3-13b")
    ap.add_argument("--gpus", type=int, default=64)
    ap.add_argument("--global-batch", type=int, default=64)
    ap.add_argument("--layers", type=int, help="override the preset's layers (a shorter model simulates faster)")
    ap.add_argument("--hbm-gib", type=float, default=80.0)
    ap.add_argument("--memory-only", action="store_true")
    args = ap.parse_args()
    platform = {
        "p": {
            "network": "config/hardware/scaleout_2d/network.yml",
            "system": "config/hardware/scaleout_2d/system.json",
            "backend": "congestion_unaware",
            "axes": {"network.npus_count": [[8, max(1, args.gpus // 8)]]},
        }
    }
    points = select_points(expand(platform, REPO), ["p"], args.gpus, args.hbm_gib)
    options = {"layers": args.layers} if args.layers else {}
    spec = SearchSpec(args.model, args.gpus, args.global_batch, [1], options, memory_only=True)
    t = time.perf_counter()
    rows = search(spec, points, log=io.StringIO())
    memory_s = time.perf_counter() - t
    verdicts = Counter(r["verdict"].split(":")[0] for r in rows)
    print(
        f"{args.model} on {args.gpus} GPUs, global batch {args.global_batch}: {len(rows)} layouts "
        f"({dict(verdicts)}); enumeration + memory model {memory_s:.2f} s"
    )
    if args.memory_only:
        return
    spec.memory_only = False
    log = io.StringIO()
    t = time.perf_counter()
    rows = search(spec, points, log=log)
    total = time.perf_counter() - t
    simulated = sum(r["verdict"] == "ok" for r in rows)
    print(f"full search {total:.1f} s: {simulated} layouts simulated, {total / max(simulated, 1):.1f} s per layout")
    best = next((r for r in rows if r.get("rank") == 1), None)
    if best:
        print(
            f"best {best['layout']}: {best['step_time_ns'] / 1e6:.3f} ms, {best['mem_total_gib']:.1f} GiB/GPU, "
            f"MFU {best['mfu']:.3f}"
        )


if __name__ == "__main__":
    main()
