"""``chakra-pipe capture``: record a multi-rank PyTorch run (torch imported inside the handler)."""

from __future__ import annotations

import argparse
from pathlib import Path

from ..launch.options import add_launcher_option


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "capture",
        help="record host ET + Kineto traces of an N-rank PyTorch run",
        description="Spawn N ranks (gloo on CPU, nccl on GPUs), run warm-up and profiled steps, "
        "write DIR/rank{r}.host_et.json.gz, DIR/rank{r}.kineto.json.gz, DIR/capture.json.",
    )
    p.add_argument(
        "--model",
        required=True,
        help="mlp | resnet-tiny | gpt-tiny | path/to/script.py defining train_step(rank, world_size)",
    )
    p.add_argument("--ranks", type=int, default=2, help="number of ranks (processes)")
    p.add_argument("--steps", type=int, default=1, help="profiled steps (after one profiler warm-up step)")
    p.add_argument("--backend", choices=("auto", "gloo", "nccl"), default="auto")
    p.add_argument(
        "--bucket-mb",
        type=float,
        default=None,
        metavar="MB",
        help="DDP bucket_cap_mb of a built-in model (default: DDP's 25 MB, one bucket for these tiny "
        "models); a small value such as 0.01 splits the gradients into several all-reduces",
    )
    p.add_argument("--out", required=True, type=Path, help="output folder")
    p.add_argument(
        "--timeout",
        type=float,
        default=600.0,
        metavar="S",
        help="give up (and kill every rank) after S seconds (default 600)",
    )
    add_launcher_option(p)
    p.set_defaults(func=_capture)


def _capture(args) -> int:
    from .runner import CaptureConfig, check_config, run_capture

    cfg = CaptureConfig(
        model=args.model,
        ranks=args.ranks,
        steps=args.steps,
        backend=args.backend,
        out=args.out,
        bucket_mb=args.bucket_mb,
        timeout_s=args.timeout,
        launcher=args.launcher,
    )
    if args.launcher == "srun":
        from ..launch.srun import run_srun

        check_config(cfg)
        return run_srun(
            [
                "capture",
                "--model",
                args.model,
                "--ranks",
                str(args.ranks),
                "--steps",
                str(args.steps),
                "--backend",
                args.backend,
                *(() if args.bucket_mb is None else ("--bucket-mb", repr(args.bucket_mb))),
                "--timeout",
                repr(args.timeout),
                "--out",
                str(args.out),
            ],
            args.ranks,
            args.backend,
            args.timeout,
        )
    path = run_capture(cfg)
    if path is not None:  # None: a task other than rank 0's, which writes the folder
        print(f"capture: wrote {path}")
    return 0
