"""``chakra-pipe replay`` (torch imported in the handler)."""

from __future__ import annotations

import argparse
from pathlib import Path


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "replay", help="execute a rank set on real devices (gloo on CPU, NCCL on GPUs) and measure it",
        description="Spawn one process per rank; each walks its DAG honouring data and ctrl deps with CPU, "
                    "compute and comm slots as the simulator models them, issuing real torch.distributed "
                    "collectives and p2p of the recorded sizes. Writes per-iteration wall times, per-node "
                    "durations and per-collective algbw/busbw to RESULT.json.")
    p.add_argument("prefix", help="rank-set prefix (PREFIX.<rank>.et) or a single .et file")
    p.add_argument("--ranks", type=int, default=None, help="number of ranks (default: the prefix's rank count)")
    p.add_argument("--backend", choices=("auto", "gloo", "nccl"), default="auto",
                   help="auto: nccl when every rank gets a GPU, else gloo on CPU")
    p.add_argument("--iterations", type=int, default=3, help="measured iterations (default 3)")
    p.add_argument("--warmup", type=int, default=1, help="unmeasured iterations first (default 1)")
    p.add_argument("--compute", choices=("duration", "skip", "ops"), default="duration",
                   help="COMP nodes: busy-wait duration_micros, skip them, or run a GEMM of num_ops FLOPs")
    p.add_argument("--timeout", type=float, default=300.0,
                   help="seconds after which the whole replay is stopped (default 300)")
    p.add_argument("--comm-groups", default=None,
                   help="communicator-group JSON (default: PREFIX.comm_groups.json when present)")
    p.add_argument("--out", required=True, type=Path, help="RESULT.json to write")
    p.set_defaults(func=_replay)


def _replay(args) -> int:
    from .launcher import ReplayConfig, run_replay

    result = run_replay(ReplayConfig(prefix=args.prefix, out=args.out, ranks=args.ranks, backend=args.backend,
                                     iterations=args.iterations, warmup=args.warmup, compute=args.compute,
                                     timeout_s=args.timeout, comm_groups=args.comm_groups))
    step = result["step_time_ns"]
    print(f"replay: {result['trace']['ranks']} ranks on {result['environment']['backend']}/"
          f"{result['environment']['device']}, median step {step['median'] / 1e6:.3f} ms over "
          f"{len(step['per_iteration'])} iterations; wrote {args.out}")
    return 0

