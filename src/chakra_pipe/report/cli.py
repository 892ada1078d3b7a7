"""``chakra-pipe report``: aggregate shard results, build a campaign report, update the standing board."""

from __future__ import annotations

import argparse
from pathlib import Path

from ..errors import InputError


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "report",
        help="campaign results, leaderboards, plots and HTML report",
        description="Turn a campaign's shard results into results.parquet/csv, leaderboards, "
        "plots, summary.json and report.html.",
    )
    verbs = p.add_subparsers(dest="report_command", metavar="VERB", required=True)
    agg = verbs.add_parser("aggregate", help="merge shards, replays and captures into results.parquet/csv")
    agg.add_argument("--plan", required=True, type=Path, help="campaign plan.json")
    agg.add_argument("--out-dir", type=Path, help="report folder (default: the plan's reports/<campaign>)")
    agg.set_defaults(func=_aggregate)
    build = verbs.add_parser("build", help="leaderboard, plots, summary.json and report.html from results")
    build.add_argument("--plan", required=True, type=Path, help="campaign plan.json")
    build.add_argument("--results", type=Path, help="results.parquet or .csv (default: OUT_DIR/results.parquet)")
    build.add_argument("--out-dir", type=Path, help="report folder (default: the plan's reports/<campaign>)")
    build.add_argument(
        "--board",
        type=Path,
        help="also replace this campaign's rows of this standing leaderboard CSV, as `report standing` does",
    )
    build.add_argument("--date", help="with --board: date to record (default: today, UTC, or SOURCE_DATE_EPOCH)")
    build.add_argument("--stamp", type=Path, help="with --board: also write the replaced keys to this JSON file")
    build.set_defaults(func=_build)
    standing = verbs.add_parser("standing", help="replace this campaign's rows of the standing leaderboard")
    standing.add_argument("--results", required=True, type=Path, help="the campaign's results.parquet or .csv")
    standing.add_argument("--board", required=True, type=Path, help="standing leaderboard CSV (.md written beside)")
    standing.add_argument("--date", help="date to record (default: today, UTC, or SOURCE_DATE_EPOCH)")
    standing.add_argument("--stamp", type=Path, help="also write the replaced keys to this JSON file")
    standing.set_defaults(func=_standing)


def _aggregate(args: argparse.Namespace) -> int:
    from ..results.collectives import write_table
    from ..sweep.campaign import Campaign
    from .aggregate import aggregate, aggregate_collectives, write_results

    plan = Campaign.load(args.plan)
    out = args.out_dir or Path(plan.report_dir)
    parquet, csv = write_results(aggregate(plan), out)
    write_table(aggregate_collectives(plan), out / "collectives.parquet")
    print(f"report: wrote {parquet}, {csv} and {out / 'collectives.parquet'}")
    return 0


def _build(args: argparse.Namespace) -> int:
    if (args.stamp or args.date) and not args.board:
        raise InputError("report build: --stamp and --date go with --board (the standing leaderboard to update)")
    from ..sweep.campaign import Campaign
    from .aggregate import read_results
    from .build import build

    plan = Campaign.load(args.plan)
    out = args.out_dir or Path(plan.report_dir)
    results = read_results(args.results or out / "results.parquet")
    info = build(plan, results, out)
    print(
        f"report: wrote {out / 'report.html'} ({info['counts']['simulated_ok']} simulations, "
        f"{info['counts']['failed']} failed)"
    )
    if args.board:
        _update_standing(results, args)
    return 0


def _standing(args: argparse.Namespace) -> int:
    from .aggregate import read_results

    _update_standing(read_results(args.results), args)
    return 0


def _update_standing(results, args: argparse.Namespace) -> None:
    """``report standing``'s update, from a results table already read: the workflow's report job
    does it after the build, sparing a second process its pandas import and parquet read (~0.7 s CPU
    of a 1,000-point campaign, benchmarks/sweep.py)."""
    from ..atomic import write_json
    from .leaderboard import KEY, rows_of, update_standing

    board = update_standing(results, args.board, date=args.date)
    campaigns = sorted(set(results["campaign"].astype(str)))
    mine = board[board["campaign"].astype(str).isin(campaigns)]
    if args.stamp:
        write_json(
            args.stamp,
            {
                "board": str(args.board),
                "campaigns": campaigns,
                "rows": [dict(zip(KEY, map(str, k))) for k in rows_of(mine, KEY)],
            },
        )
    print(f"report: {len(mine)} rows of {', '.join(campaigns)} in {args.board} ({len(board)} rows in all)")
