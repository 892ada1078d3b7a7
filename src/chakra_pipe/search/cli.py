"""``chakra-pipe search``: the fastest parallel layouts of a model on N GPUs of each platform."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ..generate.options import MODEL_KEYS


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "search",
        help="rank every valid parallel layout of a model by simulated step time",
        description="Enumerate every valid dp·tp·pp(·ep) layout of a model on N GPUs (with "
        "microbatching, ZeRO 0/1 and recomputation), prune those that do not fit the "
        "platform's per-GPU memory (hbm_gib), simulate the rest with the campaign's "
        "generator and simulator, and rank them.",
    )
    p.add_argument("--model", required=True, help="model preset (see generate llm --help)")
    p.add_argument("--gpus", required=True, type=int, help="GPUs (NPUs) of the machine")
    p.add_argument(
        "--platform",
        required=True,
        action="append",
        help="platform of the campaign config (repeat for several); its grid points with --gpus NPUs",
    )
    src = p.add_mutually_exclusive_group()
    src.add_argument(
        "--config",
        type=Path,
        default=Path("config/config.yaml"),
        help="campaign config whose hardware section defines the platforms (default config/config.yaml)",
    )
    src.add_argument("--plan", type=Path, help="a campaign plan.json instead of --config")
    p.add_argument("--global-batch", type=int, help="sequences per step (default: --gpus)")
    p.add_argument("--micro-batch", type=int, nargs="+", default=[1], help="microbatch sizes to try (default 1)")
    for key in MODEL_KEYS:
        p.add_argument(f"--{key}", type=int, help=f"model {key} (overrides the preset)")
    p.add_argument("--dtype", help="training dtype (default bf16)")
    p.add_argument("--peak-tflops", type=float, help="device peak TFLOP/s (default 989)")
    p.add_argument("--mem-bw", type=float, help="device memory bandwidth GB/s (default 3350)")
    p.add_argument("--hbm-gib", type=float, help="per-GPU memory, GiB (overrides the platforms' hbm_gib)")
    p.add_argument(
        "--exhaustive",
        action="store_true",
        help="also simulate recomputation / ZeRO-1 on layouts that fit without them",
    )
    p.add_argument(
        "--memory-only",
        action="store_true",
        help="list every layout with its memory and verdict without simulating (verdict 'fits')",
    )
    p.add_argument(
        "--keep-top",
        type=int,
        default=0,
        metavar="K",
        help="write the rank files of the K fastest layouts per point under OUT/traces/",
    )
    p.add_argument(
        "--out", required=True, type=Path, help="output folder: layouts.{parquet,csv,md}, best.json, pareto.png"
    )
    p.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    from ..errors import ConfigError
    from ..sweep.grid import select_points
    from .run import SearchSpec, search, write_outputs
    from .traces import keep_top

    if args.gpus < 1:
        raise ConfigError(f"must be >= 1, got {args.gpus}", where="--gpus")
    if args.keep_top < 0:
        raise ConfigError(f"must be >= 0, got {args.keep_top}", where="--keep-top")
    options = {
        k: getattr(args, k) for k in (*MODEL_KEYS, "dtype", "peak_tflops", "mem_bw") if getattr(args, k) is not None
    }
    spec = SearchSpec(
        model=args.model,
        gpus=args.gpus,
        global_batch=args.global_batch or args.gpus,
        micro_batches=args.micro_batch,
        options=options,
        exhaustive=args.exhaustive,
        memory_only=args.memory_only,
    )
    points = select_points(_all_points(args), args.platform, args.gpus, args.hbm_gib)
    rows = search(spec, points)
    files = write_outputs(rows, args.out)
    kept = keep_top(rows, spec, args.out / "traces", args.keep_top) if args.keep_top else []
    ok = sum(r["verdict"] == "ok" for r in rows)
    print(
        f"search: {len(rows)} layout×point rows, {ok} simulated; wrote {', '.join(str(f) for f in files)}"
        + (f" and {len(kept)} rank sets" if kept else "")
    )
    for r in rows:
        if r.get("rank") == 1:
            print(
                f"  best on {r['point_id']}: {r['layout']} {r['step_time_ns'] / 1e6:.3f} ms, "
                f"{r['mem_total_gib']:.1f} GiB/GPU, MFU {r['mfu']:.3f}"
            )
    if not ok and not args.memory_only:  # not an error: the table says why each layout was refused
        print("search: no layout fits and simulates on any point (see the verdict column)", file=sys.stderr)
    return 0


def _all_points(args: argparse.Namespace) -> list:
    from ..readfile import read_yaml
    from ..sweep.campaign import Campaign
    from ..sweep.grid import expand

    if args.plan:
        return list(Campaign.load(args.plan).points.values())
    config = read_yaml(args.config)
    platforms = (config.get("hardware") or {}).get("platforms") if isinstance(config, dict) else None
    if not isinstance(platforms, dict):
        from ..errors import ConfigError

        raise ConfigError("no hardware.platforms section", file=str(args.config))
    return expand(platforms, Path("."))
