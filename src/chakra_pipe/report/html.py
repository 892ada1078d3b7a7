"""``report.html``: one self-contained page rendered from a jinja2 template (no external assets).

Tables carry every number twice: a readable cell (step times in ns, µs or ms as fits, thousands
separators) and its exact value in ``data-v``, which the page's small script sorts by; a filter box
above each table hides rows that do not contain the typed text. Wide tables scroll inside their box
instead of widening the page. Every plot is embedded as a PNG with a numbered caption.
"""

from __future__ import annotations

import base64
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .leaderboard import BOARD_VIEW, fmt
from .plots import PLOTS

MAX_ROWS = 500  # the full table is in results.csv; a browser page need not hold 10,000 rows
TEXT_COLUMNS = {
    "workload",
    "source",
    "point_id",
    "backend",
    "runtime",
    "status",
    "platform",
    "metric",
    "unit",
    "better",
    "meaning",
    "hardware point",
}
WIDE_COLUMNS = {"point_id", "meaning"}  # long text that wraps anywhere; other cells stay on one line
WRAP_COLUMNS = {"status", "settings"}  # errors and settings wrap at spaces
RESULT_VIEW = (
    [
        "workload",
        "source",
        "point_id",
        "backend",
        "runtime",
        "status",
        "step_time_ns",
        "compute_ns",
        "exposed_comm_ns",
        "idle_ns",
        "speedup",
        "cost",
    ],
    [
        "workload",
        "source",
        "hardware point",
        "backend",
        "runtime",
        "status",
        "step time",
        "compute",
        "exposed comm",
        "idle",
        "speed-up (x)",
        "cost",
    ],
)


def duration(ns: float | None) -> str:
    """A duration in the unit that keeps 3-4 significant digits readable: 950 ns, 12.3 µs, 4.56 ms, 1.2 s."""
    if ns is None or (isinstance(ns, float) and math.isnan(ns)):
        return "–"
    for scale, unit in ((1e9, "s"), (1e6, "ms"), (1e3, "µs")):
        if abs(ns) >= scale:
            v = ns / scale
            return f"{v:.3g} {unit}" if abs(v) < 100 else f"{v:,.0f} {unit}"
    return f"{ns:,.0f} ns"


@dataclass
class Table:
    headers: list[tuple[str, bool]]  # (title, is text)
    rows: list[list[tuple[str, str | None, str]]]  # (shown text, sort value or None for text, css class)


def make_table(df, columns: list[str], headers: list[str] | None = None) -> Table:
    import pandas as pd

    heads = headers or columns
    text = [c in TEXT_COLUMNS or h in TEXT_COLUMNS for c, h in zip(columns, heads)]
    rows = []
    for values in df[columns].itertuples(index=False):
        row: list[tuple[str, str | None, str]] = []
        for col, v, is_text in zip(columns, values, text):
            na = v is None or (not isinstance(v, str) and pd.isna(v))
            if is_text or isinstance(v, str):
                css = "t w" if col in WIDE_COLUMNS else "t s" if col in WRAP_COLUMNS else "t"
                row.append(("" if na else str(v), None, css))
            elif col.endswith("_ns"):
                row.append((duration(None if na else float(v)), "" if na else repr(float(v)), "n"))
            else:
                row.append((fmt(v), "" if na else repr(float(v)), "n"))
        rows.append(row)
    return Table(list(zip(heads, text)), rows)


def _render_table(t: Table) -> str:
    from markupsafe import Markup, escape

    head = "".join(f"<th class='{'t' if txt else 'n'}' scope='col'>{escape(h)}</th>" for h, txt in t.headers)
    body = []
    for row in t.rows:
        cells = []
        for shown, value, css in row:
            if value is None:
                text = str(escape(shown))
                if "w" in css.split():  # point ids break after their separators, not mid-word
                    for sep in (",", "[", ";"):
                        text = text.replace(sep, sep + "<wbr>")
                cells.append(f"<td class='{css}'>{text}</td>")
            else:
                cells.append(f"<td data-v='{escape(value)}'>{escape(shown)}</td>")
        body.append("<tr>" + "".join(cells) + "</tr>")
    return Markup(
        f"<div class='scroll'><table class='data'><thead><tr>{head}</tr></thead>"
        f"<tbody>{''.join(body)}</tbody></table></div>"
    )


def render(summary: dict[str, Any], results, board, plot_dir: Path) -> str:
    import jinja2
    import pandas as pd

    env = jinja2.Environment(
        loader=jinja2.PackageLoader("chakra_pipe.report", "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
    )
    boards = [
        {"workload": w, "baseline": str(summary["workloads"][w]["baseline"]), "table": make_table(g, *_board_view())}
        for w, g in board.groupby("workload", sort=False)
    ]
    plots = [
        {"name": name, "caption": caption, "data": base64.b64encode((plot_dir / name).read_bytes()).decode("ascii")}
        for name, caption in PLOTS.items()
    ]
    searches = []
    for name, best in (summary.get("searches") or {}).items():
        rows = pd.DataFrame(
            [
                {
                    "point": p,
                    "layout": b["layout"],
                    "step_time_ms": round(b["step_time_ns"] / 1e6, 3),
                    "mem_gib": round(b["mem_total_gib"], 2),
                    "tokens_per_s": round(b["tokens_per_s"]),
                    "mfu": round(b["mfu"], 3),
                }
                for p, b in best.items()
            ]
        )
        pareto = plot_dir.parent / "search" / name / "pareto.png"
        searches.append(
            {
                "name": name,
                "pareto": base64.b64encode(pareto.read_bytes()).decode("ascii"),
                "table": make_table(
                    rows,
                    ["point", "layout", "step_time_ms", "mem_gib", "tokens_per_s", "mfu"],
                    ["point", "layout", "step time (ms)", "memory/GPU (GiB)", "tokens/s", "MFU"],
                ),
            }
        )
    failed = results[results["status"] != "ok"]
    shown = results.head(MAX_ROWS)
    metrics = pd.DataFrame(
        [
            {"metric": k, "unit": m["unit"], "better": m["better"], "meaning": m["meaning"]}
            for k, m in summary["metrics"].items()
        ]
    )
    sections = (
        ([{"id": "notes", "title": "Notes"}] if summary["notes"] else [])
        + [{"id": "leaderboard", "title": "Leaderboard"}, {"id": "plots", "title": f"Plots ({len(plots)})"}]
        + [{"id": f"search-{i}", "title": f"Parallelism search {x['name']}"} for i, x in enumerate(searches, 1)]
        + ([{"id": "failed", "title": f"Failed points ({len(failed)})"}] if len(failed) else [])
        + [{"id": "results", "title": "Results"}, {"id": "metrics", "title": "Metrics and units"}]
    )
    page = env.get_template("report.html.j2").render(
        s=summary,
        sections=sections,
        boards=boards,
        plots=plots,
        searches=searches,
        table=_render_table,
        failed=make_table(failed, ["workload", "point_id", "backend", "status"]) if len(failed) else None,
        results=make_table(shown, *_non_empty(shown, *RESULT_VIEW)),
        more=len(results) > MAX_ROWS,
        shown=MAX_ROWS,
        total=len(results),
        metrics=make_table(metrics, ["metric", "unit", "better", "meaning"]),
    )
    return page


def _non_empty(df, columns: list[str], headers: list[str]) -> tuple[list[str], list[str]]:
    """Drop columns with nothing in them (no replays: no runtime) so the table fits the page."""
    keep = [(c, h) for c, h in zip(columns, headers) if df[c].astype(str).replace({"<NA>": "", "nan": ""}).ne("").any()]
    return [c for c, _ in keep], [h for _, h in keep]


def _board_view() -> tuple[list[str], list[str]]:
    cols, heads = BOARD_VIEW
    return cols, [h.replace("step time (ns)", "step time") for h in heads]
