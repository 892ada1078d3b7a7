"""Leaderboards: per campaign (workloads x hardware, ranked) and the standing one across campaigns.

The standing board is a CSV other campaigns share, so it is updated under a file lock, read-modify-
write, keyed by (campaign, workload, point_id, backend): a campaign replaces exactly its own rows.
A row whose measurements did not change keeps its old ``updated`` date, so rerunning an unchanged
campaign leaves the file byte-identical.
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

BOARD_COLUMNS = ("workload", "rank_time", "point_id", "platform", "backend", "step_time_ns", "speedup",
                 "cost", "time_x_cost", "rank_time_x_cost")
KEY = ("campaign", "workload", "point_id", "backend")
STANDING_COLUMNS = (*KEY, "platform", "npus", "step_time_ns", "speedup", "cost", "time_x_cost",
                    "trace_sha256", "config_sha256", "package_version", "git_commit", "updated")


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
                by_cost["time_x_cost"].notna())
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


def markdown_table(df, columns: list[str], headers: list[str]) -> str:
    lines = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
    for row in df[columns].itertuples(index=False):
        lines.append("| " + " | ".join(fmt(v) for v in row) + " |")
    return "\n".join(lines)


# The columns a reader sees, with units, for the markdown and HTML leaderboards alike.
BOARD_VIEW = (["rank_time", "point_id", "backend", "step_time_ns", "speedup", "cost", "time_x_cost",
               "rank_time_x_cost"],
              ["#", "hardware point", "backend", "step time (ns)", "speed-up (x)", "cost", "time x cost (ns x cost)",
               "# by time x cost"])


def board_markdown(board, title: str, baselines: dict[str, str | None]) -> str:
    """One table per workload, fastest first."""
    out = [f"# {title}", "",
           "Ranked by simulated step time (lower is better); speed-up is baseline step time / step time; "
           "time x cost is step time (ns) times the point's declared cost.", ""]
    cols, heads = BOARD_VIEW
    for workload, g in board.groupby("workload", sort=False):
        base = baselines.get(workload)
        out += [f"## {workload}", "", f"Baseline: `{base}`" if base else "Baseline: none declared for this workload",
                "", markdown_table(g, cols, heads), ""]
    return "\n".join(out)


def write_campaign_board(results, out_dir: str | Path, campaign: str, baselines: dict[str, str | None]):
    board = campaign_board(results)
    out = Path(out_dir)
    write_text(out / "leaderboard.csv", board.to_csv(index=False, lineterminator="\n"))
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


def update_standing(results, board_csv: str | Path, date: str | None = None):
    """Replace this campaign's rows of the standing board; returns the new board."""
    import pandas as pd

    board_csv = Path(board_csv)
    campaigns = set(results["campaign"].astype(str))
    new = results[(results["source"] == "simulated") & (results["status"] == "ok")].copy()
    new = new.reindex(columns=STANDING_COLUMNS).astype({"step_time_ns": "Int64", "npus": "Int64"})
    with locked(board_csv):
        if board_csv.exists():
            try:
                old = pd.read_csv(board_csv, dtype={"step_time_ns": "Int64", "npus": "Int64"},
                                  keep_default_na=True)
            except (OSError, ValueError) as exc:
                raise InputError(f"unreadable standing leaderboard: {exc}", file=str(board_csv)) from None
            if list(old.columns) != list(STANDING_COLUMNS):
                raise InputError(f"standing leaderboard has columns {list(old.columns)}, expected "
                                 f"{list(STANDING_COLUMNS)}", file=str(board_csv))
        else:
            old = pd.DataFrame(columns=STANDING_COLUMNS)
        mine = old[old["campaign"].astype(str).isin(campaigns)]
        others = old[~old["campaign"].astype(str).isin(campaigns)]
        new["updated"] = date or today()
        # keep the previous date where nothing but the date would change
        previous = {tuple(str(x) for x in r[:len(KEY)]): r for r in mine.itertuples(index=False)}
        compare = [c for c in STANDING_COLUMNS if c != "updated"]
        dates = []
        for r in new.itertuples(index=False):
            key = tuple(str(x) for x in r[:len(KEY)])
            old_row = previous.get(key)
            same = old_row is not None and all(
                _same(getattr(old_row, c), getattr(r, c)) for c in compare)
            dates.append(old_row.updated if same else r.updated)  # type: ignore[union-attr]
        new["updated"] = dates
        merged = pd.concat([others, new], ignore_index=True) if len(others) else new
        merged = merged.sort_values(["workload", "step_time_ns", "campaign", "point_id", "backend"],
                                    kind="stable").reset_index(drop=True)
        write_text(board_csv, merged.to_csv(index=False, lineterminator="\n", float_format="%.10g"))
        ranked = merged.copy()
        ranked["rank_time"] = ranked.groupby("workload", sort=False).cumcount() + 1
        cols = ["rank_time", "campaign", "point_id", "backend", "step_time_ns", "speedup", "cost", "updated"]
        heads = ["#", "campaign", "hardware point", "backend", "step time (ns)", "speed-up (x)", "cost", "updated"]
        md = ["# Standing leaderboard", "",
              "All campaigns, ranked per workload by simulated step time (lower is better). Each campaign "
              "replaces its own rows when it finishes.", ""]
        for workload, g in ranked.groupby("workload", sort=False):
            md += [f"## {workload}", "", markdown_table(g, cols, heads), ""]
        write_text(board_csv.with_suffix(".md"), "\n".join(md))
    return merged


def _same(a, b) -> bool:
    import pandas as pd

    a_na = a is None or (not isinstance(a, str) and pd.isna(a))
    b_na = b is None or (not isinstance(b, str) and pd.isna(b))
    if a_na or b_na:
        return a_na and b_na
    if isinstance(a, (int, float)) or isinstance(b, (int, float)):
        try:
            return abs(float(a) - float(b)) <= 1e-9 * max(1.0, abs(float(b)))
        except ValueError:
            return False
    return str(a) == str(b)
