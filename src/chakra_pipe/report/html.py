"""``report.html``: one self-contained page (tables inline, plots as data URIs), no external assets."""

from __future__ import annotations

import base64
import html
from pathlib import Path
from typing import Any

from .leaderboard import BOARD_VIEW, fmt
from .plots import PLOTS

MAX_ROWS = 500  # the full table is in results.csv; a browser page need not hold 10,000 rows
STYLE = """body{font-family:system-ui,sans-serif;margin:2em;max-width:80em}
table{border-collapse:collapse;font-size:.85em;margin:.5em 0 1.5em}
td,th{border:1px solid #ccc;padding:.2em .5em;text-align:right}td:nth-child(-n+3){text-align:left}
th{background:#f2f2f2}img{max-width:100%;border:1px solid #eee}code{font-size:.9em}"""


def _table(df, columns: list[str], headers: list[str] | None = None) -> str:
    head = "".join(f"<th>{html.escape(c)}</th>" for c in headers or columns)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(fmt(v))}</td>" for v in row) + "</tr>"
                   for row in df[columns].itertuples(index=False))
    return f"<table><tr>{head}</tr>{body}</table>"


def render(summary: dict[str, Any], results, board, plot_dir: Path) -> str:
    e = html.escape
    parts = [f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>chakra-pipe: {e(summary['campaign'])}"
             f"</title><style>{STYLE}</style></head><body>",
             f"<h1>Campaign <code>{e(summary['campaign'])}</code></h1>",
             f"<p>{summary['counts']['simulated_ok']} successful simulations of {len(summary['workloads'])} "
             f"workloads over {summary['counts']['grid_points']} hardware points; "
             f"{summary['counts']['failed']} failed points. Config SHA-256 <code>{e(summary['config_sha256'])}"
             f"</code>, chakra-pipe {e(summary['package_version'])}, commit <code>{e(summary['git_commit'])}</code>."
             "</p>"]
    if summary["notes"]:
        parts.append("<h2>Notes</h2><ul>" + "".join(f"<li>{e(n)}</li>" for n in summary["notes"]) + "</ul>")
    parts.append("<h2>Leaderboard</h2><p>Ranked per workload by simulated step time (lower is better); "
                 "speed-up against the workload's baseline point.</p>")
    for workload, g in board.groupby("workload", sort=False):
        base = summary["workloads"][workload]["baseline"]
        parts.append(f"<h3>{e(workload)}</h3><p>baseline: <code>{e(str(base))}</code></p>")
        parts.append(_table(g, *BOARD_VIEW))
    parts.append("<h2>Plots</h2>")
    for name, caption in PLOTS.items():
        data = base64.b64encode((plot_dir / name).read_bytes()).decode("ascii")
        parts.append(f"<figure><img alt='{e(caption)}' src='data:image/png;base64,{data}'>"
                     f"<figcaption>{e(caption)}</figcaption></figure>")
    for name, best in (summary.get("searches") or {}).items():
        parts.append(f"<h2>Parallelism search <code>{e(name)}</code></h2><p>Fastest layout per point that fits its "
                     f"memory; every layout, its memory per GPU and verdict: <code>search/{e(name)}/layouts.md</code>."
                     "</p><table><tr><th>point</th><th>layout</th><th>step time (ms)</th><th>memory/GPU (GiB)</th>"
                     "<th>tokens/s</th><th>MFU</th></tr>"
                     + "".join(f"<tr><td>{e(p)}</td><td>{e(b['layout'])}</td><td>{b['step_time_ns'] / 1e6:.3f}</td>"
                               f"<td>{b['mem_total_gib']:.2f}</td><td>{b['tokens_per_s']:.0f}</td>"
                               f"<td>{b['mfu']:.3f}</td></tr>" for p, b in best.items()) + "</table>")
        pareto = plot_dir.parent / "search" / name / "pareto.png"
        data = base64.b64encode(pareto.read_bytes()).decode("ascii")
        parts.append(f"<figure><img alt='Pareto' src='data:image/png;base64,{data}'><figcaption>{e(name)}: step "
                     "time against memory per GPU</figcaption></figure>")
    failed = results[results["status"] != "ok"]
    if len(failed):
        parts.append("<h2>Failed points</h2>" + _table(failed, ["workload", "point_id", "backend", "status"]))
    parts.append("<h2>Metrics</h2>" + "<table><tr><th>metric</th><th>unit</th><th>better</th><th>meaning</th></tr>"
                 + "".join(f"<tr><td>{e(k)}</td><td>{e(m['unit'])}</td><td>{e(m['better'])}</td>"
                           f"<td>{e(m['meaning'])}</td></tr>" for k, m in summary["metrics"].items()) + "</table>")
    shown = results.head(MAX_ROWS)
    more = f" (first {MAX_ROWS} of {len(results)}; all rows in results.csv)" if len(results) > MAX_ROWS else ""
    parts.append(f"<h2>Results{more}</h2>" + _table(shown, ["workload", "source", "point_id", "backend", "status",
                                                          "step_time_ns", "compute_ns", "exposed_comm_ns",
                                                          "idle_ns", "speedup", "cost"]))
    parts.append("</body></html>\n")
    return "\n".join(parts)
