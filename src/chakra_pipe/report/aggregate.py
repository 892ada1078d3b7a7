"""Merge shard CSVs, replay results and capture timings into ``results.parquet`` / ``results.csv``.

Derived columns (``time_x_cost``, ``speedup``) and provenance (config digest, package version, git
commit) are added here, once, so every shard stays a plain record of what the simulator said.
Row order is the plan's (workload order, then source, then grid order), never file-system order.
"""

from __future__ import annotations

import io
import json
import statistics
import subprocess
from pathlib import Path
from typing import Any

from .. import __version__
from ..atomic import write_bytes, write_text
from ..errors import InputError
from ..sweep.campaign import Campaign
from .schema import NS_METRICS, RESULT_COLUMNS, SOURCES

FLOAT_COLUMNS = ("cost", "bottleneck_bandwidth_gbps", "time_x_cost", "speedup")
INT_COLUMNS = ("npus", *NS_METRICS)


def git_commit(cwd: str | Path = ".") -> str:
    """The checkout's commit (``unknown`` outside git), recorded so a result can be traced to code."""
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], cwd=cwd, capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return out.stdout.strip() if out.returncode == 0 and out.stdout.strip() else "unknown"


def _read_json(path: str | Path) -> dict[str, Any]:
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as exc:
        raise InputError(f"cannot read: {exc.strerror}", file=str(path)) from None
    except json.JSONDecodeError as exc:
        raise InputError(f"invalid JSON: {exc.msg}", file=str(path), where=f"line {exc.lineno}") from None
    if not isinstance(data, dict):
        raise InputError("expected a JSON object", file=str(path))
    return data


def replay_step_ns(path: str | Path) -> tuple[int, str]:
    """(time of one pass over the trace in ns, replay device) from a ``chakra-pipe replay`` result.

    Accepts ``step_time_ns`` or a list ``iteration_ns`` (median taken, so a warm-up outlier does not
    dominate).
    """
    d = _read_json(path)
    device = str(d.get("device", d.get("backend", "torch")))
    if isinstance(d.get("step_time_ns"), (int, float)):
        return int(round(d["step_time_ns"])), device
    iters = d.get("iteration_ns")
    if isinstance(iters, list) and iters and all(isinstance(x, (int, float)) for x in iters):
        return int(round(statistics.median(iters))), device
    raise InputError("replay result has neither step_time_ns nor a non-empty iteration_ns list", file=str(path))


def capture_step_ns(capture_dir: str | Path) -> tuple[int, str]:
    """(median untraced step time in ns, capture backend) from ``capture.json``."""
    path = Path(capture_dir) / "capture.json"
    d = _read_json(path)
    ms = d.get("median_step_time_ms_untraced")
    if not isinstance(ms, (int, float)):
        raise InputError("capture.json has no median_step_time_ms_untraced", file=str(path))
    return int(round(ms * 1_000_000)), str(d.get("backend", "torch"))


def aggregate(plan: Campaign, commit: str | None = None):
    """The results table of a finished campaign (a pandas DataFrame with :data:`RESULT_COLUMNS`)."""
    import pandas as pd

    frames = []
    for path in plan.shard_files():
        try:
            frames.append(pd.read_csv(path, dtype=str, keep_default_na=False))
        except FileNotFoundError:
            raise InputError("shard result missing (run the workflow, or `chakra-pipe sweep run`)",
                             file=path) from None
        except (pd.errors.ParserError, pd.errors.EmptyDataError) as exc:
            raise InputError(f"unreadable shard CSV: {exc}", file=path) from None
    simulated = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=RESULT_COLUMNS)
    missing = [c for c in RESULT_COLUMNS if c not in simulated.columns and c not in
               ("time_x_cost", "speedup", "config_sha256", "package_version", "git_commit")]
    if missing:
        raise InputError(f"shard CSVs lack columns {missing}", file=plan.shard_files()[0])
    sha_by_workload = dict(zip(simulated["workload"], simulated["trace_sha256"]))
    extra = []
    for w in plan.workloads.values():
        measured = []
        if w.kind == "capture":
            measured.append(("captured", "capture", *capture_step_ns(plan.capture_dir(w.name))))
        if w.replay:
            measured.append(("replayed", "replay", *replay_step_ns(plan.replay_path(w.name))))
        for source, point_id, ns, backend in measured:
            extra.append({"campaign": plan.name, "workload": w.name, "source": source, "point_id": point_id,
                          "platform": "host", "backend": backend, "npus": str(w.npus), "status": "ok",
                          "step_time_ns": str(ns), "trace_sha256": sha_by_workload.get(w.name, "")})
    df = pd.concat([simulated, pd.DataFrame(extra, dtype=str)], ignore_index=True) if extra else simulated
    df = df.reindex(columns=RESULT_COLUMNS, fill_value="").astype(object)
    df = df.where(df.notna(), "")
    for col in INT_COLUMNS:
        df[col] = pd.to_numeric(df[col].replace("", None), errors="raise").astype("Int64")
    for col in FLOAT_COLUMNS:
        df[col] = pd.to_numeric(df[col].replace("", None), errors="raise").astype("float64")
    ok = df["status"] == "ok"
    df["time_x_cost"] = (df["step_time_ns"].astype("float64") * df["cost"]).where(ok)
    base = {}
    for w in plan.workloads.values():
        hit = df[ok & (df["workload"] == w.name) & (df["point_id"] == w.baseline) & (df["source"] == "simulated")]
        if len(hit):
            base[w.name] = float(hit["step_time_ns"].iloc[0])
    baseline = df["workload"].map(base).astype("float64")
    df["speedup"] = (baseline / df["step_time_ns"].astype("float64")).where(ok & (df["source"] == "simulated"))
    df["config_sha256"] = plan.config_sha256
    df["package_version"] = __version__
    df["git_commit"] = commit if commit is not None else git_commit()
    order_w = {n: i for i, n in enumerate(plan.workloads)}
    order_p = {p: i for i, p in enumerate(plan.points)}
    df["_w"] = df["workload"].map(order_w)
    df["_s"] = df["source"].map({s: i for i, s in enumerate(SOURCES)})
    df["_p"] = df["point_id"].map(order_p).fillna(-1)
    df = df.sort_values(["_w", "_s", "_p"], kind="stable").drop(columns=["_w", "_s", "_p"]).reset_index(drop=True)
    string_cols = [c for c in RESULT_COLUMNS if c not in INT_COLUMNS + FLOAT_COLUMNS]
    df[string_cols] = df[string_cols].astype("string")
    return df


def write_results(df, out_dir: str | Path) -> tuple[Path, Path]:
    """``results.parquet`` and ``results.csv`` (atomic, byte-reproducible for equal tables)."""
    out = Path(out_dir)
    buf = io.BytesIO()
    df.to_parquet(buf, index=False, engine="pyarrow", compression="zstd")
    write_bytes(out / "results.parquet", buf.getvalue())
    write_text(out / "results.csv", df.to_csv(index=False, lineterminator="\n"))
    return out / "results.parquet", out / "results.csv"


def read_results(path: str | Path):
    import pandas as pd

    try:
        return pd.read_parquet(path) if str(path).endswith(".parquet") else pd.read_csv(path)
    except FileNotFoundError:
        raise InputError("results table not found (run `chakra-pipe report aggregate`)", file=str(path)) from None
    except (OSError, ValueError) as exc:  # pyarrow's errors derive from these
        raise InputError(f"unreadable results table: {exc}", file=str(path)) from None
