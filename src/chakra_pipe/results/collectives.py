"""``collectives.parquet``: one row per (point, rank, collective) for simulated points and replays.

So simulated collectives can be set beside nccl-tests numbers: ``algbw_GBps`` and ``busbw_GBps`` are
nccl-tests' algorithm and bus bandwidth (GB = 10^9 bytes, size column as nccl-tests counts it, see
``results.busbw``), next to the network's ``bandwidth_gbps_dK`` in results (GB = 2^30 bytes, as
ASTRA-sim). Each shard job writes its part beside its CSV (``NNNN.collectives.parquet``, written
before the CSV so a finished CSV always has one); aggregation concatenates the parts in plan order
and adds the replays (median time per node over the timed iterations; no start or end).
"""

from __future__ import annotations

import functools
import io
import json
from pathlib import Path
from typing import Any

from ..atomic import write_bytes
from ..et.collectives import BY_NAME
from ..rankset.comm import lookup_group
from .busbw import bandwidth

COLUMNS = (
    "campaign",
    "workload",
    "source",
    "point_id",
    "backend",
    "rank",
    "node_id",
    "comm_type",
    "group",
    "group_size",
    "comm_size_bytes",
    "nccl_size_bytes",
    "start_ns",
    "end_ns",
    "duration_ns",
    "algbw_GBps",
    "busbw_GBps",
)
DTYPES = {
    "rank": "Int64",
    "node_id": "UInt64",
    "group_size": "Int64",
    "comm_size_bytes": "Int64",
    "nccl_size_bytes": "Int64",
    "start_ns": "Int64",
    "end_ns": "Int64",
    "duration_ns": "Int64",
    "algbw_GBps": "float64",
    "busbw_GBps": "float64",
}
UNITS = {
    "comm_size_bytes": "bytes (Chakra comm_size)",
    "nccl_size_bytes": "bytes (nccl-tests size column)",
    "start_ns": "ns",
    "end_ns": "ns",
    "duration_ns": "ns",
    "algbw_GBps": "GB/s, GB = 10^9 bytes (nccl-tests algbw)",
    "busbw_GBps": "GB/s, GB = 10^9 bytes (nccl-tests busbw)",
}


def sidecar_path(shard_csv: str | Path) -> Path:
    p = Path(shard_csv)
    return p.with_name(p.name.removesuffix(".csv") + ".collectives.parquet")


def _row(
    ident: dict[str, Any],
    rank: int,
    node_id: int,
    kind: str,
    group: str,
    group_size: int,
    size: int,
    start: int | None,
    end: int | None,
    duration: int,
) -> dict[str, Any]:
    known = BY_NAME.get(kind)  # None: SEND / RECV, point-to-point
    bw = bandwidth(known.comm_type if known else None, size, group_size, duration)
    return {
        **ident,
        "rank": rank,
        "node_id": node_id,
        "comm_type": kind,
        "group": group,
        "group_size": group_size,
        "comm_size_bytes": size,
        "nccl_size_bytes": None if bw is None else bw.size_bytes,
        "start_ns": start,
        "end_ns": end,
        "duration_ns": duration,
        "algbw_GBps": None if bw is None else bw.algbw_GBps,
        "busbw_GBps": None if bw is None else bw.busbw_GBps,
    }


def simulated_rows(result, campaign: str, workload: str, point_id: str, backend: str) -> list[dict[str, Any]]:
    """Every collective, send and receive of every rank of one simulated point."""
    ident = {
        "campaign": campaign,
        "workload": workload,
        "source": "simulated",
        "point_id": point_id,
        "backend": backend,
    }
    npus = len(result.finish_ns)
    members = {w.rank: {name: len(g.members) for name, g in w.groups.items()} for w in result.workloads}
    rows = []
    for c in result.collectives:
        n = 2
        if c.kind not in ("SEND", "RECV"):
            size = lookup_group(members.get(c.rank, {}), c.group)  # "03" is group 3 (canonical_group)
            n = npus if size is None else size
        rows.append(
            _row(
                ident,
                c.rank,
                c.node_id,
                c.kind,
                c.group or "world",
                n,
                c.bytes,
                c.start_ns,
                c.end_ns,
                c.end_ns - c.start_ns,
            )
        )
    return rows


# What an integer column's 64-bit arrow type holds (frame()'s pandas dtype -> lowest, highest).
_INT_RANGE = {"Int64": (-(1 << 63), (1 << 63) - 1), "UInt64": (0, (1 << 64) - 1)}


def out_of_range(rows: list[dict[str, Any]]) -> str | None:
    """``column=value`` of the first integer a 64-bit column cannot hold (None when all fit).

    Why: absurd hardware (a latency of 10^17 ns) makes a simulation's times overflow int64; the shard
    job reports such a point as failed rather than dying in the parquet writer.
    """
    for col, dtype in DTYPES.items():
        bounds = _INT_RANGE.get(dtype)
        if bounds is None:
            continue
        values = [v for v in (row[col] for row in rows) if isinstance(v, int)]
        bad = [v for v in (min(values, default=0), max(values, default=0)) if not bounds[0] <= v <= bounds[1]]
        if bad:
            return f"{col}={bad[0]}"
    return None


def replayed_rows(replay: dict[str, Any], campaign: str, workload: str) -> list[dict[str, Any]]:
    """The collectives and point-to-point calls of a replay's RESULT.json (median durations)."""
    ident = {"campaign": campaign, "workload": workload, "source": "replayed", "point_id": "", "backend": ""}
    rows = [
        _row(
            ident,
            c["rank"],
            c["node"],
            c["comm_type"],
            str(c["group"]),
            int(c["group_size"]),
            int(c["comm_size"]),
            None,
            None,
            int(c["median_time_ns"]),
        )
        for c in replay.get("collectives", [])
    ]
    rows += [
        _row(
            ident,
            p["rank"],
            p["node"],
            str(p["kind"]).upper(),
            "p2p",
            2,
            int(p["comm_size"]),
            None,
            None,
            int(p["median_time_ns"]),
        )
        for p in replay.get("p2p", [])
    ]
    return rows


def frame(rows: list[dict[str, Any]]):
    import pandas as pd

    df = pd.DataFrame(rows, columns=list(COLUMNS))
    for col in COLUMNS:
        df[col] = df[col].astype(DTYPES.get(col, "string"))
    return df


def write_table(df, path: str | Path) -> None:
    """Parquet with the units in the schema metadata (atomic, byte-reproducible)."""
    import pyarrow as pa

    _write(pa.Table.from_pandas(df, preserve_index=False), path)


def write_rows(rows: list[dict[str, Any]], path: str | Path) -> None:
    """``write_table(frame(rows), path)`` without pandas: the very same bytes.

    Why: a shard job writes one part and never reads it; importing pandas for it cost ~0.5 s CPU per
    shard, more than the rest of a 100-point shard's overhead. The arrow columns and the ``pandas``
    schema entry are those ``Table.from_pandas`` makes from :func:`frame`'s dtypes (pinned by
    tests/test_sweep_shard.py), so the aggregation reads the part back with the same dtypes. Rows
    holding anything but the sweep's own value types (ints in integer columns, numbers in float
    columns, strings in string columns, or None), and pandas releases before 3 (whose writer
    records string columns differently), take the pandas writer itself: same bytes, always.
    """
    import pyarrow as pa

    if not _plain(rows) or int(_pandas_version().split(".")[0]) < 3:
        write_table(frame(rows), path)
        return
    arrays = [_array(pa, _ARROW[DTYPES.get(col, "string")], [row[col] for row in rows]) for col in COLUMNS]
    table = pa.Table.from_arrays(arrays, names=list(COLUMNS))
    _write(table.replace_schema_metadata({b"pandas": _pandas_schema(pa.__version__)}), path)


_PLAIN = {
    "large_string": (str,),
    "int64": (int,),
    "uint64": (int,),
    "float64": (int, float),
}


def _plain(rows: list[dict[str, Any]]) -> bool:
    """Whether every value is None or of its column's plain type (bool, a float NaN in an integer
    or string column, a numeric string: ``astype`` would convert or refuse them, ``_array`` not)."""
    for col in COLUMNS:
        types = _PLAIN[_ARROW[DTYPES.get(col, "string")]]
        for row in rows:
            v = row[col]
            if v is not None and (type(v) not in types):
                return False
    return True


@functools.cache
def _pandas_version() -> str:
    """``importlib.metadata.version("pandas")``, read without importing importlib.metadata.

    Why: that import (email, zipfile, csv, ...) cost a shard job ~30-60 ms CPU, every job, for one
    header line. Its lookup is the same: the first ``pandas-*.dist-info`` / ``.egg-info`` entry
    along ``sys.path`` (names compared as it normalises them), the ``Version:`` header of its
    ``METADATA`` / ``PKG-INFO``. Anything else (no such folder, a zipped path entry, no header) asks
    importlib.metadata itself. Cached: a shard asks once per process.
    """
    import os
    import sys

    for root in sys.path:
        folder = root or "."
        try:
            children = os.listdir(folder)
        except NotADirectoryError:  # a zip file: importlib.metadata reads inside it, so ask it
            break
        except OSError:  # a missing entry
            continue
        info = next((c for c in children if _is_pandas_info(c.lower())), None)
        if info is None:
            continue
        for meta in ("METADATA", "PKG-INFO"):
            try:
                with open(os.path.join(folder, info, meta), encoding="utf-8") as fh:
                    for line in fh:
                        if line.startswith("Version:"):
                            return line.removeprefix("Version:").strip()
                        if not line.strip():
                            break  # the end of the header block
            except OSError:
                continue
        break  # the first such entry is the one importlib.metadata reads too
    from importlib.metadata import version

    return version("pandas")


def _is_pandas_info(low: str) -> bool:
    """Whether a lower-cased folder name is a pandas dist-info / egg-info (importlib.metadata's test)."""
    return low.endswith((".dist-info", ".egg-info")) and low.rpartition(".")[0].partition("-")[0] == "pandas"


def _array(pa, kind: str, values: list[Any]):
    """One arrow column from its buffers, with ``astype`` + ``from_pandas``'s nulls (None, and NaN in
    floats). Why buffers: ``pa.array`` of a list imports pandas to ask whether it is pandas-like."""
    import numpy as np

    if kind == "float64":
        data = np.array(values, dtype=np.float64)  # None -> NaN
        valid = ~np.isnan(data)
        data[~valid] = 0.0
    elif kind == "large_string":
        valid = np.array([v is not None for v in values], dtype=bool)
        encoded = [str(v).encode() if v is not None else b"" for v in values]
        offsets = np.zeros(len(values) + 1, dtype=np.int64)
        np.cumsum([len(e) for e in encoded], out=offsets[1:])
        data = None
    else:
        try:  # most columns have no nulls
            data, valid = np.array(values, dtype=np.dtype(kind)), np.ones(len(values), dtype=bool)
        except TypeError:
            valid = np.array([v is not None for v in values], dtype=bool)
            data = np.array([0 if v is None else v for v in values], dtype=np.dtype(kind))
    nulls = len(values) - int(valid.sum())
    bitmap = pa.py_buffer(np.packbits(valid, bitorder="little").tobytes()) if nulls else None
    if data is None:
        buffers = [bitmap, pa.py_buffer(offsets.tobytes()), pa.py_buffer(b"".join(encoded))]
    else:
        buffers = [bitmap, pa.py_buffer(data.tobytes())]
    return pa.Array.from_buffers(getattr(pa, kind)(), len(values), buffers, null_count=nulls)


# frame()'s pandas dtype -> the arrow type, and -> (pandas_type, numpy_type), as Table.from_pandas
# records them
_ARROW = {"string": "large_string", "Int64": "int64", "UInt64": "uint64", "float64": "float64"}
_PANDAS_TYPES = {
    "string": ("object", "string"),
    "Int64": ("int64", "Int64"),
    "UInt64": ("uint64", "UInt64"),
    "float64": ("float64", "float64"),
}


def _pandas_schema(arrow_version: str) -> bytes:
    """The ``pandas`` schema entry ``Table.from_pandas(frame(rows), preserve_index=False)`` writes."""
    columns = []
    for col in COLUMNS:
        pandas_type, numpy_type = _PANDAS_TYPES[DTYPES.get(col, "string")]
        columns.append(
            {"name": col, "field_name": col, "pandas_type": pandas_type, "numpy_type": numpy_type, "metadata": None}
        )
    doc = {
        "index_columns": [],
        "column_indexes": [],
        "columns": columns,
        "attributes": {},
        "creator": {"library": "pyarrow", "version": arrow_version},
        "pandas_version": _pandas_version(),
    }
    return json.dumps(doc).encode()


def _write(table, path: str | Path) -> None:
    import pyarrow.parquet as pq

    meta = {**(table.schema.metadata or {}), b"chakra_pipe.units": json.dumps(UNITS, sort_keys=True).encode()}
    buf = io.BytesIO()
    pq.write_table(table.replace_schema_metadata(meta), buf, compression="zstd")
    write_bytes(path, buf.getvalue())


def read_table(path: str | Path):
    import pandas as pd

    df = pd.read_parquet(path)
    if tuple(df.columns) != COLUMNS:
        raise ValueError(f"columns are not the {len(COLUMNS)} this version writes")
    want = {c: pd.api.types.pandas_dtype(DTYPES.get(c, "string")) for c in COLUMNS}
    if all(df[c].dtype == kind for c, kind in want.items()):  # what this version writes: as read
        return df
    return df.astype(want)
