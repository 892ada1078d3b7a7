"""Build a campaign's report from its results table: leaderboard, plots, summary.json, report.html."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..atomic import write_json, write_text
from ..readfile import read_json
from ..results.collectives import UNITS as COLLECTIVE_UNITS
from ..results.schema import METRICS
from ..sweep.campaign import Campaign
from . import html, leaderboard, plots
from .aggregate import units


def summary(plan: Campaign, results) -> dict[str, Any]:
    """What a tool needs to read the results without guessing: units, directions, counts, best points."""
    sim = results[results["source"] == "simulated"]
    ok = sim[sim["status"] == "ok"]
    workloads = {}
    for w in plan.workloads.values():
        g = ok[ok["workload"] == w.name]
        best = g.loc[g["step_time_ns"].astype("float64").idxmin()] if len(g) else None
        workloads[w.name] = {
            "kind": w.kind,
            "npus": w.npus,
            "grid_points": sum(len(s) for s in w.shards),
            "baseline": w.baseline,
            "best_point": None if best is None else str(best["point_id"]),
            "best_step_time_ns": None if best is None else int(best["step_time_ns"]),
            "sources": sorted(set(results[results["workload"] == w.name]["source"].astype(str))),
        }
    commit = str(results["git_commit"].iloc[0]) if len(results) else "unknown"
    return {
        "campaign": plan.name,
        "config_sha256": plan.config_sha256,
        "package_version": str(results["package_version"].iloc[0]) if len(results) else "",
        "git_commit": commit,
        "metrics": {m.name: {"unit": m.unit, "better": m.better, "meaning": m.meaning} for m in METRICS},
        "units": {"results": units(results.columns), "collectives": COLLECTIVE_UNITS},
        "counts": {
            "rows": len(results),
            "grid_points": len(plan.points),
            "simulated_ok": len(ok),
            "failed": int((sim["status"] != "ok").sum()),
        },
        "workloads": workloads,
        "notes": plan.notes,
        "files": {
            "results": ["results.parquet", "results.csv"],
            "collectives": ["collectives.parquet"],
            "leaderboard": ["leaderboard.md", "leaderboard.csv"],
            "plots": [f"plots/{p}" for p in plots.PLOTS] + [f"plots/{p[:-4]}.svg" for p in plots.PLOTS],
            "page": "report.html",
        },
    }


def why_no_fidelity(plan: Campaign) -> str:
    """The real reason a campaign has no captured or replayed numbers, for the fidelity plot."""
    missing_torch = [n for n in plan.notes if "PyTorch is not installed" in n]
    if missing_torch:
        return "; ".join(missing_torch) + " (pip install -e '.[torch]')"
    return (
        "capture and replay are disabled for this campaign (config capture/replay: never, "
        "or no capture workload and no workload with replay: true)"
    )


def build(plan: Campaign, results, out_dir: str | Path) -> dict[str, Any]:
    out = Path(out_dir)
    baselines = {w.name: w.baseline for w in plan.workloads.values()}
    board = leaderboard.write_campaign_board(results, out, plan.name, baselines)
    plots.write_plots(results, out, baselines, why_no_fidelity(plan))
    info = summary(plan, results)
    if plan.searches:  # best layout per point of each search (search/<name>/best.json, written by its job)
        info["searches"] = {n: read_json(out / "search" / n / "best.json") for n in plan.searches}
    write_json(out / "summary.json", info)
    write_text(out / "report.html", html.render(info, results, board, out / "plots"))
    return info
