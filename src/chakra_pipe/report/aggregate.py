"""Merge shard CSVs, replay results and capture timings into ``results.parquet`` / ``results.csv``.

Derived columns (``time_x_cost``, ``speedup``) and provenance (config digest, package version, git
commit) are added here, once, so every shard stays a plain record of what the simulator said.
Row order is the plan's (workload order, then source, then grid order), never file-system order.
"""

from __future__ import annotations

import collections
import io
import json
import re
import subprocess
from pathlib import Path

from .. import __version__
from ..atomic import write_bytes, write_text
from ..errors import ChakraPipeError, InputError
from ..results import collectives
from ..results.csvtext import frame_csv
from ..results.documents import capture_pass, read_replay_document, replay_pass
from ..results.schema import NS_METRICS, RESULT_COLUMNS, SHARD_COLUMNS, SOURCES, UNITS
from ..sweep.campaign import Campaign
from . import tidy

FLOAT_COLUMNS = ("cost", "bottleneck_bandwidth_gbps", "time_x_cost", "speedup")
INT_COLUMNS = ("npus", *NS_METRICS)


_PACKAGE_DIR = Path(__file__).resolve().parent


def git_commit(cwd: str | Path = _PACKAGE_DIR) -> str:
    """The commit of the chakra-pipe checkout that produced a result (``unknown`` for an installed
    package outside git) — looked up beside this file, not in the working directory, which under
    ``snakemake -d DIR`` is another folder."""
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], cwd=cwd, capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return out.stdout.strip() if out.returncode == 0 and out.stdout.strip() else "unknown"


def read_shard(path: str, workload: str, point_ids: list[str], campaign: str):
    """One shard CSV, checked against the plan: a shard that a crash, a full disk or a hand edit left
    short or garbled must stop the aggregation, naming the file, not silently drop grid points."""
    import pandas as pd

    try:
        df = pd.read_csv(path, dtype=str, keep_default_na=False, encoding="utf-8")
    except FileNotFoundError:
        raise InputError("shard result missing (run the workflow, or `chakra-pipe sweep run`)", file=path) from None
    except UnicodeDecodeError as exc:
        raise InputError(
            f"not UTF-8 text (byte offset {exc.start}): a damaged shard, delete it to recompute", file=path
        ) from None
    except (pd.errors.ParserError, pd.errors.EmptyDataError) as exc:
        raise InputError(
            f"unreadable shard CSV ({str(exc).splitlines()[0]}): delete it to recompute", file=path
        ) from None
    if tuple(df.columns) != SHARD_COLUMNS:
        raise InputError(
            f"shard columns are not the {len(SHARD_COLUMNS)} this version writes "
            "(damaged, or from another version): delete it to recompute",
            file=path,
        )
    got = list(df["point_id"])
    if got != point_ids or set(df["workload"]) != {workload}:
        missing = [p for p in point_ids if p not in got]
        detail = f"missing {len(missing)} of them, first '{missing[0]}'" if missing else "in another order or extra"
        raise InputError(
            f"shard holds {len(got)} rows but the plan has {len(point_ids)} points for "
            f"workload {workload} ({detail}): delete it to recompute",
            file=path,
        )
    # The checked columns as lists, zipped into rows: ``itertuples`` over all of a shard's columns took
    # 9 of a 100-point shard's 16 ms here (profile of `report aggregate` on a 1,000-point campaign).
    for i, values in enumerate(zip(*(df[c].tolist() for c in _CHECKED)), start=2):
        problem = _row_problem(_ShardRow._make(values), campaign)
        if problem:
            raise InputError(f"{problem}: delete the shard to recompute", file=path, where=f"line {i}")
    return df


# What `sweep run` writes in ``status``: "ok", or the error class and its one-line message.
def _error_classes(base: type[ChakraPipeError] = ChakraPipeError) -> list[str]:
    """Names of ``base`` and its subclasses: the prefixes a failed point's status can carry."""
    subs: list[type[ChakraPipeError]] = base.__subclasses__()
    return [base.__name__, *(name for sub in subs for name in _error_classes(sub))]


_FAILED_STATUS = re.compile(rf"^(?:{'|'.join(_error_classes())}): \S")
_SHA256 = re.compile(r"^[0-9a-f]{64}$")
_NS = re.compile(r"^[0-9]{1,19}$")


# The columns :func:`_row_problem` reads, and a row of them.
_CHECKED = ("campaign", "source", "trace_sha256", "status", *NS_METRICS)
_ShardRow = collections.namedtuple("_ShardRow", _CHECKED)  # type: ignore[misc]


def _row_problem(row, campaign: str) -> str | None:
    """Why one shard row is not one `sweep run` of this campaign could have written (None if it is)."""
    if row.campaign != campaign:
        return f"row of campaign '{row.campaign}', not of this plan's '{campaign}'"
    if row.source != "simulated":
        return f"source '{row.source}' (shards hold simulated rows only)"
    if not _SHA256.match(row.trace_sha256):
        return "trace digest is not 64 hex digits"
    if row.status == "ok":
        for c in NS_METRICS:
            value = str(getattr(row, c))
            if not _NS.match(value) or int(value) >= 1 << 63:
                return f"{c} '{value[:40]}' is not a whole number of ns in 0..2^63-1"
        return None
    if not _FAILED_STATUS.match(row.status):
        return f"unknown status '{row.status[:60]}' (expected ok or an error line)"
    if any(str(getattr(row, c)) for c in NS_METRICS):
        return "a failed point with metrics"
    return None


def aggregate(plan: Campaign, commit: str | None = None):
    """The results table of a finished campaign (a pandas DataFrame with :data:`RESULT_COLUMNS`)."""
    import pandas as pd

    frames = [
        read_shard(plan.shard_path(w.name, i), w.name, ids, plan.name)
        for w in plan.workloads.values()
        for i, ids in enumerate(w.shards)
    ]
    simulated = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=SHARD_COLUMNS)
    sha_by_workload = dict(zip(simulated["workload"], simulated["trace_sha256"]))
    extra = []
    for w in plan.workloads.values():
        measured = []
        if w.kind == "capture":
            measured.append(("captured", "capture", *capture_pass(plan.capture_dir(w.name))))
        if w.replay:
            measured.append(("replayed", "replay", *replay_pass(plan.replay_path(w.name))))
        for source, _, ns, runtime in measured:
            extra.append(
                {
                    "campaign": plan.name,
                    "workload": w.name,
                    "source": source,
                    "point_id": "",
                    "platform": "host",
                    "backend": "",
                    "runtime": runtime,
                    "npus": str(w.npus),
                    "status": "ok",
                    "step_time_ns": str(ns),
                    "trace_sha256": sha_by_workload.get(w.name, ""),
                }
            )
    df = pd.concat([simulated, pd.DataFrame(extra, dtype=str)], ignore_index=True) if extra else simulated
    df = df.reindex(columns=RESULT_COLUMNS, fill_value="")
    df["transform"] = (
        df["workload"]
        .map({w.name: w.spec.get("transform", "") if w.kind == "transform" else "" for w in plan.workloads.values()})
        .fillna("")
    )
    df = _typed(pd.concat([df, _dynamic(plan, df)], axis=1))
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
    return df


def aggregate_collectives(plan: Campaign):
    """``collectives.parquet``: the shards' per-collective parts in plan order, then the replays."""
    import pandas as pd

    parts = []
    for w in plan.workloads.values():
        for i in range(len(w.shards)):
            path = collectives.sidecar_path(plan.shard_path(w.name, i))
            try:
                parts.append(collectives.read_table(path))
            except FileNotFoundError:
                raise InputError(
                    "per-collective part of the shard is missing: delete the shard CSV beside it to recompute",
                    file=str(path),
                ) from None
            except (OSError, ValueError) as exc:
                raise InputError(
                    f"unreadable per-collective part ({str(exc).splitlines()[0]}): delete the shard "
                    "CSV beside it to recompute",
                    file=str(path),
                ) from None
        if w.replay:
            doc = read_replay_document(plan.replay_path(w.name))
            parts.append(collectives.frame(collectives.replayed_rows(doc, plan.name, w.name)))
    parts = [p for p in parts if len(p)]
    return pd.concat(parts, ignore_index=True) if parts else collectives.frame([])


def _dynamic(plan: Campaign, df):
    """Per-dimension and per-axis text columns of each row, plus the hardware digest (see ``tidy``)."""
    import pandas as pd

    rows = []
    for r in df[["workload", "source", "point_id"]].itertuples(index=False):
        w = plan.workloads.get(r.workload)
        row = tidy.workload_columns(w.spec) if w is not None else {}
        point = plan.points.get(r.point_id) if r.source == "simulated" else None
        if point is not None:
            row.update(tidy.point_columns(point))
        rows.append(row)
    extra = pd.DataFrame(rows, index=df.index, dtype=object)
    extra = extra.reindex(columns=tidy.order(extra.columns)).fillna("")
    df["hardware_sha256"] = [
        tidy.hardware_sha256(plan.points[p]) if s == "simulated" and p in plan.points else ""
        for s, p in zip(df["source"], df["point_id"])
    ]
    return extra


def units(columns) -> dict[str, str]:
    """Unit of every column that has one (also stored in the parquet schema metadata)."""
    out = {c: UNITS[c] for c in columns if c in UNITS}
    out.update({c: tidy.unit_of(c) for c in columns if tidy.is_dynamic(c) and tidy.unit_of(c)})
    return out


def write_results(df, out_dir: str | Path) -> tuple[Path, Path]:
    """``results.parquet`` and ``results.csv`` (atomic, byte-reproducible for equal tables)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    out = Path(out_dir)
    buf = io.BytesIO()
    table = pa.Table.from_pandas(df, preserve_index=False)
    meta = {
        **(table.schema.metadata or {}),
        b"chakra_pipe.units": json.dumps(units(df.columns), sort_keys=True).encode(),
    }
    pq.write_table(table.replace_schema_metadata(meta), buf, compression="zstd")
    write_bytes(out / "results.parquet", buf.getvalue())
    write_text(out / "results.csv", frame_csv(df))
    return out / "results.parquet", out / "results.csv"


def _typed(df):
    """Result columns as text, with the integer and float metrics typed ("" = not applicable)."""
    import pandas as pd

    df = df.astype(object)
    df = df.where(df.notna(), "")
    kinds = {c: "Int64" for c in INT_COLUMNS} | {c: "float64" for c in FLOAT_COLUMNS}
    for col in df.columns:
        if tidy.is_dynamic(col):
            df[col] = df[col].map(str)  # parquet's 400 / 400.0 and the CSV's "400" / "400.0" agree
            kinds[col] = tidy.dtype_of(col, df[col])
    for col in df.columns:
        kind = kinds.get(col, "string")
        if kind == "string":
            df[col] = df[col].astype(str).astype("string")
        else:
            df[col] = pd.to_numeric(df[col].replace("", None), errors="raise").astype(kind)
    return df


def read_results(path: str | Path):
    """A results table written by :func:`write_results`, checked and typed the same way from either
    format (a CSV's empty text cells must not come back as NaN floats)."""
    import pandas as pd

    try:
        if str(path).endswith(".parquet"):
            df = pd.read_parquet(path)
        else:
            df = pd.read_csv(path, dtype=str, keep_default_na=False, encoding="utf-8")
    except FileNotFoundError:
        raise InputError("results table not found (run `chakra-pipe report aggregate`)", file=str(path)) from None
    except (OSError, ValueError) as exc:  # pyarrow's and pandas' parse errors derive from these
        raise InputError(f"unreadable results table: {str(exc).splitlines()[0]}", file=str(path)) from None
    fixed = tuple(c for c in df.columns if not tidy.is_dynamic(c))
    if fixed != tuple(RESULT_COLUMNS) or list(df.columns[len(fixed) :]) != tidy.order(df.columns[len(fixed) :]):
        raise InputError(
            f"not a results table of this version (expected the {len(RESULT_COLUMNS)} columns "
            "`report aggregate` writes)",
            file=str(path),
        )
    try:
        return _typed(df)
    except ValueError as exc:
        raise InputError(f"a metric column holds a non-number: {exc}", file=str(path)) from None
