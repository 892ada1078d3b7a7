"""``chakra-pipe sweep``: simulate shards of a campaign's hardware grid (one process per shard)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "sweep",
        help="simulate hardware-grid shards of a campaign plan",
        description="Simulate the grid points of a campaign plan (plan.json, written by the "
        "workflow) in shards: one process loads a trace set once and simulates "
        "every point of its shard.",
    )
    verbs = p.add_subparsers(dest="sweep_command", metavar="VERB", required=True)
    run = verbs.add_parser("run", help="simulate one shard and write its results CSV")
    run.add_argument("--plan", required=True, type=Path, help="campaign plan.json")
    run.add_argument("--workload", required=True, help="workload name in the plan")
    run.add_argument("--shard", required=True, type=int, help="shard index (0-based)")
    run.add_argument(
        "--trace",
        help="rank-set prefix (default: the plan's prefix, or for a set the plan keeps in memory, generated here)",
    )
    run.add_argument("--out", required=True, type=Path, help="results CSV for this shard")
    run.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    from .campaign import Campaign
    from .shard import run_shard

    plan = Campaign.load(args.plan, shard=(args.workload, args.shard))
    failed = run_shard(plan, args.workload, args.shard, args.out, prefix=args.trace)
    total = len(plan.workload(args.workload).shards[args.shard])
    if failed:
        print(
            f"sweep: {args.workload} shard {args.shard}: {failed} of {total} points failed "
            f"(see the status column of {args.out})",
            file=sys.stderr,
        )
    return 0
