"""Leaderboards: per campaign (workloads x hardware, ranked) and the standing one across campaigns.

The standing board is a CSV other campaigns share, so it is updated under a file lock, read-modify-
write, keyed by content (see ``KEY``) and read back as text only. A row whose measurements did not
change keeps its old ``updated`` date, so rerunning an unchanged campaign leaves the file
byte-identical.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import fcntl
import os
from collections.abc import Iterator
from pathlib import Path

from ..atomic import write_text
from ..errors import InputError
from ..results.csvtext import frame_csv

BOARD_COLUMNS = (
    "workload",
    "rank_time",
    "point_id",
    "platform",
    "backend",
    "step_time_ns",
    "speedup",
    "cost",
    "time_x_cost",
    "rank_time_x_cost",
)
# Standing entries are keyed by content, not by who produced them: the trace's SHA-256, the hardware
# (a digest of the full network/system/memory/backend description) and the simulator version.
KEY = ("workload", "trace_sha256", "backend", "hardware_sha256", "package_version")
STANDING_COLUMNS = (
    *KEY,
    "topology",
    "npus_count",
    "bandwidth_gbps",
    "latency_ns",
    "settings",
    "npus",
    "platform",
    "point_id",
    "campaign",
    "step_time_ns",
    "reference",
    "vs_reference",
    "cost",
    "time_x_cost",
    "config_sha256",
    "git_commit",
    "updated",
)


def campaign_board(results):
    """Simulated, successful rows ranked per workload by step time (ties: grid order), and by time x cost."""
    import pandas as pd

    ok = results[(results["source"] == "simulated") & (results["status"] == "ok")].copy()
    ok["_order"] = range(len(ok))
    parts = []
    for _, g in ok.groupby("workload", sort=False):
        g = g.sort_values(["step_time_ns", "_order"], kind="stable").copy()
        g["rank_time"] = range(1, len(g) + 1)
        if g["cost"].notna().any():
            by_cost = g.sort_values(["time_x_cost", "_order"], kind="stable", na_position="last")
            g["rank_time_x_cost"] = pd.Series(range(1, len(g) + 1), index=by_cost.index).where(
                by_cost["time_x_cost"].notna()
            )
        else:
            g["rank_time_x_cost"] = float("nan")
        parts.append(g)
    if not parts:
        return pd.DataFrame(columns=BOARD_COLUMNS)
    board = pd.concat(parts)
    board["rank_time_x_cost"] = board["rank_time_x_cost"].astype("Int64")
    return board.reindex(columns=BOARD_COLUMNS).reset_index(drop=True)


def fmt(value, digits: int = 3) -> str:
    import pandas as pd

    if value is None or (not isinstance(value, str) and pd.isna(value)):
        return "–"
    if isinstance(value, float):
        return f"{value:,.{digits}f}" if abs(value) < 1e6 else f"{value:,.0f}"
    if isinstance(value, int) or hasattr(value, "__index__"):
        return f"{int(value):,}"
    return str(value).replace("|", "\\|")


def rows_of(df, columns) -> list[tuple]:
    """The rows of ``df[columns]`` as plain tuples, read a column at a time (``tolist``).

    Why: ``itertuples`` walks every cell through pandas' per-element iterator, which for arrow-backed
    text is ~1 µs a cell: ~40% of a 4,096-point standing update's profile, and it grows with every
    campaign's rows on the shared board. The values are the same; integers come back as ``int``
    rather than ``numpy.int64``, which :func:`fmt` and :func:`_text` write alike.
    """
    return list(zip(*(df[c].tolist() for c in columns)))


def markdown_table(df, columns: list[str], headers: list[str]) -> str:
    lines = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
    for row in rows_of(df, columns):
        lines.append("| " + " | ".join(fmt(v) for v in row) + " |")
    return "\n".join(lines)


# The columns a reader sees, with units, for the markdown and HTML leaderboards alike.
BOARD_VIEW = (
    ["rank_time", "point_id", "backend", "step_time_ns", "speedup", "cost", "time_x_cost", "rank_time_x_cost"],
    [
        "#",
        "hardware point",
        "backend",
        "step time (ns)",
        "speed-up (x)",
        "cost",
        "time x cost (ns x cost)",
        "# by time x cost",
    ],
)


def board_markdown(board, title: str, baselines: dict[str, str | None]) -> str:
    """One table per workload, fastest first."""
    out = [
        f"# {title}",
        "",
        "Ranked by simulated step time (lower is better); speed-up is baseline step time / step time; "
        "time x cost is step time (ns) times the point's declared cost.",
        "",
    ]
    cols, heads = BOARD_VIEW
    for workload, g in board.groupby("workload", sort=False):
        base = baselines.get(workload)
        out += [
            f"## {workload}",
            "",
            f"Baseline: `{base}`" if base else "Baseline: none declared for this workload",
            "",
            markdown_table(g, cols, heads),
            "",
        ]
    return "\n".join(out)


def write_campaign_board(results, out_dir: str | Path, campaign: str, baselines: dict[str, str | None]):
    board = campaign_board(results)
    out = Path(out_dir)
    write_text(out / "leaderboard.csv", frame_csv(board))
    write_text(out / "leaderboard.md", board_markdown(board, f"Leaderboard: campaign {campaign}", baselines))
    return board


@contextlib.contextmanager
def locked(path: Path) -> Iterator[None]:
    """Exclusive lock beside the standing board: two campaigns finishing together must not lose rows."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path.with_name("." + path.name + ".lock"), "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def today() -> str:
    """UTC date of the update; ``SOURCE_DATE_EPOCH`` pins it for reproducible builds and tests."""
    epoch = os.environ.get("SOURCE_DATE_EPOCH")
    now = dt.datetime.fromtimestamp(int(epoch), dt.UTC) if epoch else dt.datetime.now(dt.UTC)
    return now.date().isoformat()


def _text(value) -> str:
    """One cell as the board's text: integers plainly, floats to 10 significant digits, NA empty."""
    import pandas as pd

    if value is None or (not isinstance(value, str) and pd.isna(value)):
        return ""
    if isinstance(value, float):
        return format(value, ".10g")
    return str(value)


def read_board(board_csv: Path):
    """The standing board as text, every cell verbatim: a campaign or workload called ``NA``, ``null``,
    ``007`` or ``1e3`` must come back as written, or reruns duplicate rows and rename others'."""
    import pandas as pd

    if not board_csv.exists():
        return pd.DataFrame(columns=STANDING_COLUMNS, dtype=str)
    try:
        old = pd.read_csv(board_csv, dtype=str, keep_default_na=False, na_filter=False, encoding="utf-8")
    except (OSError, ValueError) as exc:
        raise InputError(f"unreadable standing leaderboard: {exc}", file=str(board_csv)) from None
    if list(old.columns) != list(STANDING_COLUMNS):
        raise InputError(
            f"standing leaderboard has columns {list(old.columns)}, expected "
            f"{list(STANDING_COLUMNS)} (a board from an older version: move it aside)",
            file=str(board_csv),
        )
    return old


def update_standing(results, board_csv: str | Path, date: str | None = None):
    """Add or replace this campaign's entries on the standing board; returns the new board (all text).

    An entry is one trace (by content) on one hardware description with one simulator version, so a
    different trace under a known workload name is a new entry and a rerun replaces its own entries.
    """
    import pandas as pd

    # A symlinked board is shared: lock and rewrite the real file behind it, never the link.
    board_csv = Path(os.path.realpath(board_csv))
    ok = results[(results["source"] == "simulated") & (results["status"] == "ok")]
    new = pd.DataFrame(
        {c: [_text(v) for v in ok[c].tolist()] if c in ok.columns else [""] * len(ok) for c in STANDING_COLUMNS},
        dtype=str,
    )
    is_baseline = [_text(v) == "1" for v in ok["speedup"].tolist()]
    n = len(KEY)
    at = {c: i for i, c in enumerate(STANDING_COLUMNS)}  # old and new both hold STANDING_COLUMNS, in order
    compare = [at[c] for c in STANDING_COLUMNS if c not in ("updated", "reference", "vs_reference")]
    with locked(board_csv):
        old = read_board(board_csv)
        previous = {r[:n]: r for r in rows_of(old, STANDING_COLUMNS)}
        new_rows = rows_of(new, STANDING_COLUMNS)
        new_keys = {r[:n] for r in new_rows}
        keep = old[[k not in new_keys for k in rows_of(old, KEY)]]
        dates, refs = [], []
        for r in new_rows:
            prev = previous.get(r[:n])
            same = prev is not None and all(prev[i] == r[i] for i in compare)
            dates.append(prev[at["updated"]] if prev is not None and same else (date or today()))
            refs.append(prev[at["reference"]] if prev is not None else "")
        new["updated"], new["reference"] = dates, refs
        merged = pd.concat([keep, new], ignore_index=True)
        merged = _references(merged, new, is_baseline)
        step = pd.to_numeric(merged["step_time_ns"])
        merged = (
            merged.assign(_t=step)
            .sort_values(["backend", "workload", "trace_sha256", "_t", *KEY], kind="stable")
            .drop(columns="_t")
            .reset_index(drop=True)
        )
        write_text(board_csv, frame_csv(merged))
        write_text(board_csv.with_suffix(".md"), standing_markdown(merged))
    return merged


def _references(board, new, is_baseline: list[bool]):
    """Mark one fixed reference entry per (workload, trace, backend) and normalise against it.

    The reference is chosen once, when a trace first reaches the board (the campaign's baseline point,
    else its first point), and stays while that entry exists, so ``vs_reference`` of an entry does not
    change when other campaigns add faster or slower hardware.
    """
    import pandas as pd

    group = ["workload", "trace_sha256", "backend"]
    marked = set(rows_of(board.loc[board["reference"] == "yes"], group))
    candidates = sorted(range(len(new)), key=lambda i: not is_baseline[i])  # baselines first, then plan order
    # Keys as plain tuples: one pass over the board, not a DataFrame row and a whole-board comparison
    # per candidate (~0.8 s of a 1,000-point campaign's standing job).
    new_keys = rows_of(new, KEY)
    at = [KEY.index(c) for c in group]
    chosen = set()
    for i in candidates:
        g = tuple(new_keys[i][j] for j in at)
        if g not in marked:
            chosen.add(new_keys[i])
            marked.add(g)
    if chosen:
        hit = [k in chosen for k in rows_of(board, KEY)]
        board.loc[hit, "reference"] = "yes"
    step = pd.to_numeric(board["step_time_ns"]).astype("float64")
    ref_rows = board[board["reference"] == "yes"]
    ref = {k: float(t) for k, t in zip(rows_of(ref_rows, group), ref_rows["step_time_ns"].tolist())}
    ref_step = [ref.get(k, float("nan")) for k in rows_of(board, group)]
    board["vs_reference"] = [_text(a / b) if b > 0 else "" for a, b in zip(ref_step, step)]
    return board


def standing_markdown(board) -> str:
    import pandas as pd

    cols = [
        "rank",
        "campaign",
        "topology",
        "npus_count",
        "bandwidth_gbps",
        "latency_ns",
        "settings",
        "step_time_ns",
        "vs_reference",
        "updated",
    ]
    heads = [
        "#",
        "campaign",
        "topology",
        "NPUs per dim",
        "bandwidth (GB/s, 2^30)",
        "latency (ns)",
        "settings",
        "step time (ns)",
        "speed-up vs reference (x)",
        "updated",
    ]
    md = [
        "# Standing leaderboard",
        "",
        (
            "Every campaign's simulated entries, one per trace (by content) x hardware description x simulator "
            "version, ranked by step time (lower is better) within a backend division and a trace. "
            "`vs_reference` is the division's fixed reference step time / this step time (reference marked *)."
        ),
        "",
    ]
    for backend, division in board.groupby("backend", sort=False):
        md += [f"## Division {backend}", ""]
        for (workload, sha, version), g in division.groupby(
            ["workload", "trace_sha256", "package_version"], sort=False
        ):
            g = g.copy()
            g["rank"] = [f"{i}{' *' if ref == 'yes' else ''}" for i, ref in enumerate(g["reference"], start=1)]
            g["step_time_ns"] = pd.to_numeric(g["step_time_ns"]).astype("Int64")  # shown with separators
            g["vs_reference"] = pd.to_numeric(g["vs_reference"].replace("", None)).astype("float64")
            md += [f"### {workload} (trace {sha[:12]}, simulator {version})", "", markdown_table(g, cols, heads), ""]
    return "\n".join(md)
