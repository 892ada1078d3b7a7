"""Simulate one shard: load a trace set once, then call ``simulate`` for each of its grid points.

Why shards: a Python start-up plus trace load costs far more than one analytical simulation of a small
collective, so 1,000 grid points as 1,000 jobs would spend most of the campaign starting processes.
Bad hardware values were already refused when the plan was made; a point that fails only when simulated
(remote-memory nodes on a machine without memory expansion, a trace that cannot finish on that
hardware) becomes a row with that error in ``status``: one bad corner of a grid must not
stop the other 999 points, and the report lists it.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from ..atomic import write_text
from ..console import track
from ..errors import ChakraPipeError
from ..results import collectives
from ..results.csvtext import rows_csv
from ..results.metrics import metrics
from ..results.schema import SHARD_COLUMNS
from .campaign import Campaign
from .grid import Point


def hardware_config(point: Point, source: str) -> Any:
    """The simulator's :class:`HardwareConfig` for a grid point (``source`` names it in errors)."""
    from ..sim import HardwareConfig, MemoryConfig, NetworkConfig, SystemConfig

    memory = MemoryConfig.from_dict(point.memory, source=f"{source}:memory") if point.memory else None
    return HardwareConfig(
        system=SystemConfig.from_dict(point.system, source=f"{source}:system"),
        network=NetworkConfig.from_dict(point.network, source=f"{source}:network"),
        memory=memory,
        backend=point.backend,
    )


def hardware_columns(point: Point) -> dict[str, Any]:
    """Readable hardware columns (per-dimension values joined with '/') plus a numeric one to plot."""
    net = point.network

    def joined(key: str) -> str:
        value = net.get(key, [])
        return "/".join(str(v) for v in value) if isinstance(value, list) else str(value)

    bandwidth = net.get("bandwidth") or []
    return {
        "settings": ";".join(f"{k}={v}" for k, v in point.settings.items()),
        "topology": joined("topology"),
        "npus_count": joined("npus_count"),
        "bandwidth_gbps": joined("bandwidth"),
        "latency_ns": joined("latency"),
        "bottleneck_bandwidth_gbps": float(min(bandwidth)) if isinstance(bandwidth, list) and bandwidth else None,
    }


def analysis_order(points: list[Point]) -> list[int]:
    """Indices of ``points`` with the points that share a ``preferred-dataset-splits`` value together
    (first appearance first, plan order within a value).

    Why: checking a rank set (``rankset.analyze``, run by every ``simulate``) depends on the set and on
    that one system key (the all-gather rule), and the simulator keeps the last analysis per set. A grid
    whose fastest axis is the splits value would otherwise redo the whole check for every point — in a
    1,000-point sweep of an 8-rank LLM step that was 2/3 of each point's time. Rows are still written
    in plan order, so the CSV does not depend on this order.
    """
    groups: dict[str, list[int]] = {}
    for i, point in enumerate(points):
        groups.setdefault(repr(point.system.get("preferred-dataset-splits")), []).append(i)
    return [i for group in groups.values() for i in group]


class _Files:
    """A rank set read from its files (the ``simulate`` of :mod:`.generated`'s in-memory sets)."""

    def __init__(self, prefix: str, npus: int):
        from ..et.traceset import TraceSet

        self.traces = TraceSet.load(prefix)
        if len(self.traces.ranks) != npus:
            raise ChakraPipeError(
                f"trace set has {len(self.traces.ranks)} ranks but the plan expects {npus}", file=prefix
            )

    def sha256(self) -> str:
        return self.traces.sha256()

    def simulate(self, hw: Any) -> tuple[Any, str]:
        from ..sim import simulate

        result = simulate(self.traces, hw)
        simulated = getattr(result, "simulated_ranks", 0)  # a proven symmetric set (sim/symmetric_files.py)
        if simulated:
            return result, f"symmetric: {simulated} of {len(self.traces.ranks)} ranks simulated (rank files)"
        return result, "full engine: rank files"


def _check_fits(values: dict[str, int], coll: list[dict[str, Any]]) -> None:
    """Refuse a simulation whose times the 64-bit result columns cannot hold (the aggregation's
    0..2^63-1 ns for metrics, each collectives column's range): the point's row says so."""
    big = next((f"{k}={v}" for k, v in values.items() if v >= 1 << 63), None) or collectives.out_of_range(coll)
    if big:
        raise ChakraPipeError(f"simulated values overflow the 64-bit result columns ({big})")


def run_shard(
    plan: Campaign, workload: str, shard: int, out: str | Path, prefix: str | None = None, log=sys.stderr
) -> int:
    """Simulate every point of one shard and write its CSV; returns the number of failed points.

    A workload the plan keeps in memory is generated here (:mod:`.generated`) unless ``prefix`` names
    rank files to read instead; ``log`` gets one line per point saying how it ran.
    """
    w = plan.workload(workload)
    if not 0 <= shard < len(w.shards):
        raise ChakraPipeError(f"workload {workload} has shards 0..{len(w.shards) - 1}, not {shard}")
    if w.in_memory and prefix is None:
        from .generated import generated_set

        source: Any = generated_set(w)
    else:
        source = _Files(prefix or w.prefix, w.npus)
    sha = source.sha256()
    points = [plan.points[point_id] for point_id in w.shards[shard]]
    for point in points:  # a measured point reads its calibrate stage's files (missing: an error, not a row)
        point.resolve()
    rows: list[dict[str, Any]] = [{}] * len(points)
    coll_rows: list[list[dict[str, Any]]] = [[] for _ in points]
    failed = 0
    for i in track(analysis_order(points), f"sweep {workload} shard {shard}", len(points), "points"):
        point = points[i]
        row: dict[str, Any] = {
            "campaign": plan.name,
            "workload": workload,
            "source": "simulated",
            "point_id": point.id,
            "platform": point.platform,
            "backend": point.backend,
            "npus": point.npus,
            "cost": point.cost,
            **hardware_columns(point),
            "trace_sha256": sha,
        }
        try:
            result, how = source.simulate(hardware_config(point, f"point {point.id}"))
            print(f"sweep: {point.id}: {how}", file=log, flush=True)
            values = metrics(result)
            coll = collectives.simulated_rows(result, plan.name, workload, point.id, point.backend)
            _check_fits(values, coll)
            row.update(values)
            row["status"] = "ok"
            coll_rows[i] = coll
        except ChakraPipeError as exc:
            failed += 1
            row["status"] = f"{type(exc).__name__}: {exc.line()}"
        rows[i] = row
    # the per-collective part first: a finished shard CSV always has its part beside it
    collectives.write_rows([r for part in coll_rows for r in part], collectives.sidecar_path(out))
    write_text(out, rows_csv(rows, SHARD_COLUMNS))
    return failed
