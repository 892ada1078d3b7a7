"""Transform throughput: ``dp --to`` of a generated LLM step, against generating the wide set directly.

``dp --to`` holds the whole set in memory as protobuf nodes (so nothing is written before every op has
succeeded); this measures what that costs. Prints wall time, nodes/s and peak RSS of the transform, and
its time as a ratio of ``generate llm`` writing the same wide set (which patches pre-serialized bytes).

    python benchmarks/transform.py [--model llama3-8b] [--layers 8] [--dp 8] [--to 32] [--tp 4] [--pp 2]
"""

from __future__ import annotations

import argparse
import resource
import shutil
import tempfile
import time
from pathlib import Path

from chakra_pipe.generate import Layout, TrainingSpec, generate_llm, resolve_model
from chakra_pipe.transform.cli import build_steps
from chakra_pipe.transform.pipeline import run_transforms


def peak_rss_bytes() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # Linux reports KiB


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="llama3-8b")
    ap.add_argument("--layers", type=int, default=8)
    ap.add_argument("--dp", type=int, default=8)
    ap.add_argument("--to", type=int, default=32)
    ap.add_argument("--tp", type=int, default=4)
    ap.add_argument("--pp", type=int, default=2)
    ap.add_argument("--microbatches", type=int, default=4)
    args = ap.parse_args()

    model = resolve_model(args.model, layers=args.layers)
    folder = Path(tempfile.mkdtemp(prefix="chakra-transform-"))
    try:

        def spec(dp: int) -> TrainingSpec:
            layout = Layout(dp=dp, tp=args.tp, pp=args.pp, moe=model.moe)
            return TrainingSpec(layout, microbatches=args.microbatches, global_batch=dp * args.microbatches)

        generate_llm(model, spec(args.dp), folder / "src")
        t0 = time.perf_counter()
        wide = generate_llm(model, spec(args.to), folder / "ref")
        generate_s = time.perf_counter() - t0
        rss_before = peak_rss_bytes()
        t0 = time.perf_counter()
        result = run_transforms(str(folder / "src"), str(folder / "out"), build_steps(["dp", "--to", str(args.to)]))
        transform_s = time.perf_counter() - t0
        peak = peak_rss_bytes()
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    nodes = result.stats[-1].after.nodes
    print(
        f"dp {args.dp} -> {args.to} ({args.model}, {args.layers} layers, tp={args.tp} pp={args.pp}): "
        f"{len(result.files)} ranks, {nodes:,} nodes"
    )
    print(
        f"  transform {transform_s:.2f} s, {nodes / transform_s:,.0f} nodes/s; generate llm --dp {args.to} "
        f"{generate_s:.2f} s ({wide.nodes / generate_s:,.0f} nodes/s); ratio transform/generate "
        f"{transform_s / generate_s:.1f}"
    )
    print(f"  peak RSS {peak / 2**20:.0f} MiB (before the transform {rss_before / 2**20:.0f} MiB)")


if __name__ == "__main__":
    main()
