"""Tidy columns of the results table: one typed column per grid axis and per network dimension.

Analysts group and filter results by axis (``df.groupby("hw.network.bandwidth")``) and by dimension
(``bandwidth_gbps_d1``) without parsing ``point_id`` or the joined ``"200/50"`` strings. They are
derived from the plan (the grid point's full network dict and axis labels, the workload's spec), so
shards stay plain records of what the simulator said.

Column families (their number depends on the campaign, so they follow the fixed columns):
* ``topology_dK`` (text), ``npus_dK`` (integer), ``bandwidth_gbps_dK`` (GB/s with GB = 2^30 bytes, as
  ASTRA-sim), ``latency_ns_dK`` (ns) for every network dimension K;
* ``hw.<axis>`` for every hardware grid axis (the axis name as written in the config);
* ``wl.<key>`` for every workload parameter (``wl.size_bytes`` for sizes).
Typing is one rule applied to the text of a column, so CSV and parquet read back to the same dtypes:
all integers (no leading zeros) -> Int64, all decimal numbers -> float64, anything else -> string.
"""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any

from ..generate.sizes import parse_size

DIM_COLUMNS = {
    "topology": ("topology_d", "string"),
    "npus_count": ("npus_d", "Int64"),
    "bandwidth": ("bandwidth_gbps_d", "float64"),
    "latency": ("latency_ns_d", "float64"),
}
DIM_PATTERN = re.compile(r"^(topology|npus|bandwidth_gbps|latency_ns)_d[0-9]+$")
AXIS_PREFIXES = ("hw.", "wl.")
WORKLOAD_SKIP = ("prefix", "replay", "keep_traces")  # paths and switches, not parameters of the workload
_INT = re.compile(r"^-?(0|[1-9][0-9]*)$")
_FLOAT = re.compile(r"^-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][-+]?[0-9]+)?$")
UNITS = {
    "topology_d": "",
    "npus_d": "NPUs",
    "bandwidth_gbps_d": "GB/s, GB = 2^30 bytes (ASTRA-sim)",
    "latency_ns_d": "ns",
}


def is_dynamic(column: str) -> bool:
    return bool(DIM_PATTERN.match(column)) or column.startswith(AXIS_PREFIXES)


def hardware_sha256(point) -> str:
    """Digest of everything the simulator reads about a grid point (network, system, memory, backend)."""
    doc = {"network": point.network, "system": point.system, "memory": point.memory, "backend": point.backend}
    return hashlib.sha256(json.dumps(doc, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def _text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return str(value).lower()
    return str(value)


def point_columns(point) -> dict[str, str]:
    """Per-dimension and per-axis values of one grid point, as text (typed later, once)."""
    out: dict[str, str] = {}
    for key, (prefix, _) in DIM_COLUMNS.items():
        values = point.network.get(key, [])
        for k, v in enumerate(values if isinstance(values, list) else [values]):
            out[f"{prefix}{k}"] = _text(v)
    for axis, label in point.settings.items():
        out[f"hw.{axis}"] = _text(label)
    return out


def workload_columns(spec: dict[str, Any]) -> dict[str, str]:
    out = {}
    for key, value in spec.items():
        if key in WORKLOAD_SKIP or isinstance(value, (dict, list)):
            continue
        if key == "size":
            out["wl.size_bytes"] = str(parse_size(value, where="size"))
        else:
            out[f"wl.{key}"] = _text(value)
    return out


def dtype_of(column: str, texts) -> str:
    """The dtype of a dynamic column from its text (empty = not applicable)."""
    if DIM_PATTERN.match(column):
        return next(t for p, t in DIM_COLUMNS.values() if column.startswith(p))
    present = [t for t in texts if t != ""]
    if present and all(_INT.match(t) for t in present):
        return "Int64"
    if present and all(_FLOAT.match(t) for t in present):
        return "float64"
    return "string"


def order(columns) -> list[str]:
    """Dynamic columns in a stable order: dimensions by family then index, then hw.*, then wl.*."""
    dims = sorted(
        (c for c in columns if DIM_PATTERN.match(c)),
        key=lambda c: (list(UNITS).index(c.rsplit("_d", 1)[0] + "_d"), int(c.rsplit("_d", 1)[1])),
    )
    return dims + sorted(c for c in columns if c.startswith("hw.")) + sorted(c for c in columns if c.startswith("wl."))


def unit_of(column: str) -> str:
    for prefix, unit in UNITS.items():
        if column.startswith(prefix) and DIM_PATTERN.match(column):
            return unit
    if column == "wl.size_bytes":
        return "bytes"
    return ""
