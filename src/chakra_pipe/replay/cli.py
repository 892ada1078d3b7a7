"""``chakra-pipe replay`` and ``chakra-pipe compare`` (torch and the simulator imported in handlers)."""

from __future__ import annotations

import argparse
from pathlib import Path

from ..aliases import comm_groups_option
from ..launch.options import add_launcher_option


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "replay",
        help="execute a rank set on real devices (gloo on CPU, NCCL on GPUs) and measure it",
        description="Spawn one process per rank; each walks its DAG honouring data and ctrl deps with CPU, "
        "compute and comm slots as the simulator models them, issuing real torch.distributed "
        "collectives and p2p of the recorded sizes. Writes per-iteration wall times, per-node "
        "durations and per-collective algbw/busbw to RESULT.json.",
    )
    p.add_argument("prefix", help="rank-set prefix (PREFIX.<rank>.et) or a single .et file")
    p.add_argument("--ranks", type=int, default=None, help="number of ranks (default: the prefix's rank count)")
    p.add_argument(
        "--backend",
        choices=("auto", "gloo", "nccl"),
        default="auto",
        help="auto: nccl when every rank gets a GPU, else gloo on CPU",
    )
    p.add_argument("--iterations", type=int, default=3, help="measured iterations (default 3)")
    p.add_argument("--warmup", type=int, default=1, help="unmeasured iterations first (default 1)")
    p.add_argument(
        "--compute",
        choices=("duration", "skip", "ops"),
        default="duration",
        help="COMP nodes: busy-wait duration_micros, skip them, or run a GEMM of num_ops FLOPs",
    )
    p.add_argument(
        "--timeout", type=float, default=300.0, help="seconds after which the whole replay is stopped (default 300)"
    )
    comm_groups_option(p)
    p.add_argument("--out", required=True, type=Path, help="RESULT.json to write (by rank 0)")
    add_launcher_option(p)
    p.set_defaults(func=_replay)

    c = sub.add_parser(
        "compare",
        help="captured vs replayed vs simulated step time of one trace, with ratios",
        description="Put the captured step time (untraced median from a capture folder's capture.json), the "
        "replayed step time and the simulated time of the same trace side by side, per step. "
        "Without --replay the trace is replayed now; without --sim it is simulated when --system "
        "and --network are given; a capture folder is converted when a trace is needed.",
    )
    c.add_argument("source", help="capture folder (with capture.json) or rank-set prefix")
    c.add_argument("--prefix", default=None, help="rank set converted from the capture (default: convert it now)")
    c.add_argument("--replay", type=Path, default=None, help="replay RESULT.json (default: replay now)")
    c.add_argument("--sim", type=Path, default=None, help="simulator result JSON (simulate --output-json)")
    c.add_argument("--system", default=None, help="ASTRA-sim system JSON, to simulate now")
    c.add_argument("--network", default=None, help="ASTRA-sim network YAML, to simulate now")
    c.add_argument("--iterations", type=int, default=3, help="replay iterations when replaying now (default 3)")
    c.add_argument("--timeout", type=float, default=300.0, help="replay timeout in seconds (default 300)")
    c.add_argument("--out", type=Path, default=None, help="also write the comparison as JSON")
    c.set_defaults(func=_compare)


def _replay(args) -> int:
    from .launcher import ReplayConfig, load_plan, run_replay

    cfg = ReplayConfig(
        prefix=args.prefix,
        out=args.out,
        ranks=args.ranks,
        backend=args.backend,
        iterations=args.iterations,
        warmup=args.warmup,
        compute=args.compute,
        timeout_s=args.timeout,
        comm_groups=args.comm_groups,
        launcher=args.launcher,
    )
    if args.launcher == "srun":
        from ..launch.srun import run_srun

        world = load_plan(cfg).world_size  # static mismatches are refused before SLURM starts anything
        task = [
            "replay",
            args.prefix,
            "--ranks",
            str(world),
            "--backend",
            args.backend,
            "--iterations",
            str(args.iterations),
            "--warmup",
            str(args.warmup),
            "--compute",
            args.compute,
            "--timeout",
            repr(args.timeout),
            "--out",
            str(args.out),
        ]
        if args.comm_groups is not None:
            task += ["--comm-groups", args.comm_groups]
        return run_srun(task, world, args.backend, args.timeout)
    result = run_replay(cfg)
    if result is None:  # a task other than rank 0's: rank 0 reports
        return 0
    step = result["step_time_ns"]
    print(
        f"replay: {result['trace']['ranks']} ranks on {result['environment']['backend']}/"
        f"{result['environment']['device']}, median step {step['median'] / 1e6:.3f} ms over "
        f"{len(step['per_iteration'])} iterations; wrote {args.out}"
    )
    return 0


def _compare(args) -> int:
    from .compare import compare_main

    return compare_main(args)
