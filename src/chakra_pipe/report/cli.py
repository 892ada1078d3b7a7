"""``chakra-pipe report``: aggregate shard results, build a campaign report, update the standing board."""

from __future__ import annotations

import argparse
from pathlib import Path


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
    from ..sweep.campaign import Campaign
    from .aggregate import read_results
    from .build import build

    plan = Campaign.load(args.plan)
    out = args.out_dir or Path(plan.report_dir)
    info = build(plan, read_results(args.results or out / "results.parquet"), out)
    print(
        f"report: wrote {out / 'report.html'} ({info['counts']['simulated_ok']} simulations, "
        f"{info['counts']['failed']} failed)"
    )
    return 0


def _standing(args: argparse.Namespace) -> int:
    from ..atomic import write_json
    from .aggregate import read_results
    from .leaderboard import KEY, update_standing

    results = read_results(args.results)
    board = update_standing(results, args.board, date=args.date)
    campaigns = sorted(set(results["campaign"].astype(str)))
    mine = board[board["campaign"].astype(str).isin(campaigns)]
    if args.stamp:
        write_json(
            args.stamp,
            {
                "board": str(args.board),
                "campaigns": campaigns,
                "rows": [dict(zip(KEY, map(str, k))) for k in mine[list(KEY)].itertuples(index=False)],
            },
        )
    print(f"report: {len(mine)} rows of {', '.join(campaigns)} in {args.board} ({len(board)} rows in all)")
    return 0
