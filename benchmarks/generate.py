"""Generator throughput: one training step of gpt3-175b on dp=8 × tp=8 × pp=16 (1,024 rank files).

Target (issue 4): under 60 s and under 2 GB peak memory on 2 cores. Prints wall time, peak RSS,
nodes/s, bytes written and the ratios to the targets (< 1 = within target).

    python benchmarks/generate.py [--model gpt3-175b] [--dp 8] [--tp 8] [--pp 16] [--microbatches 16]
                                  [--out DIR] [--keep]
"""

from __future__ import annotations

import argparse
import resource
import shutil
import tempfile
import time
from pathlib import Path

from chakra_pipe.generate import CollectiveSpec, Layout, TrainingSpec, generate_collective, generate_llm, resolve_model

TARGET_S = 60.0
TARGET_BYTES = 2 << 30


def peak_rss_bytes() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # Linux reports KiB


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="gpt3-175b")
    ap.add_argument("--dp", type=int, default=8)
    ap.add_argument("--tp", type=int, default=8)
    ap.add_argument("--pp", type=int, default=16)
    ap.add_argument("--microbatches", type=int, help="default: pp")
    ap.add_argument("--out", help="folder for the rank files (default: a temporary folder, removed)")
    ap.add_argument("--keep", action="store_true", help="keep the temporary folder")
    args = ap.parse_args()

    folder = Path(args.out) if args.out else Path(tempfile.mkdtemp(prefix="chakra-gen-"))
    model = resolve_model(args.model)
    layout = Layout(dp=args.dp, tp=args.tp, pp=args.pp, moe=model.moe)
    mbs = args.microbatches or args.pp
    spec = TrainingSpec(layout, microbatches=mbs, global_batch=args.dp * mbs)
    rss_before = peak_rss_bytes()
    try:
        t0 = time.perf_counter()
        result = generate_llm(model, spec, folder / args.model)
        llm_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        micro = generate_collective(CollectiveSpec("all_reduce", 1024, 1 << 20, iterations=8), folder / "ar")
        micro_s = time.perf_counter() - t0
    finally:
        if not (args.out or args.keep):
            shutil.rmtree(folder, ignore_errors=True)
    peak = peak_rss_bytes()
    print(
        f"llm {args.model} dp={args.dp} tp={args.tp} pp={args.pp} microbatches={mbs}: "
        f"{layout.world} ranks, {result.nodes:,} nodes, {result.bytes:,} bytes"
    )
    print(
        f"  time {llm_s:.2f} s ({llm_s / TARGET_S:.3f} of the {TARGET_S:.0f} s target), "
        f"{result.nodes / llm_s:,.0f} nodes/s, {result.bytes / llm_s / 1e6:.1f} MB/s"
    )
    print(
        f"  peak RSS {peak / 2**20:.0f} MiB ({peak / TARGET_BYTES:.3f} of the 2 GiB target; "
        f"{rss_before / 2**20:.0f} MiB before generating)"
    )
    print(f"  step FLOPs {result.flops:.4e} (analytic {model.step_flops(spec.global_batch):.4e})")
    print(f"collective all_reduce 1,024 ranks × 8 iterations: {micro_s:.2f} s, {len(micro) * 8 / micro_s:,.0f} nodes/s")
    if args.keep and not args.out:
        print(f"files kept in {folder}")


if __name__ == "__main__":
    main()
