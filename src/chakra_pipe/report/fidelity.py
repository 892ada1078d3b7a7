"""Measured vs simulated step time per workload: the figures behind the fidelity plot and summary.json.

The question a capture answers is "does the simulator, on the machine the trace came from, predict
the step that ran?". So each workload with a captured or replayed time is compared with one simulated
point: the first *calibrated* point it ran on (a measured platform: this machine, as the campaign's
calibrate stage fitted it), else its baseline point, else its first point. The relative error is
simulated / measured - 1 (positive: the simulator is slow), against each measured source.
"""

from __future__ import annotations

from typing import Any

from ..sweep.campaign import Campaign

MEASURED = ("captured", "replayed")


def reference_point(plan: Campaign, workload: str) -> tuple[str | None, bool]:
    """(point id to compare with, whether it is calibrated) for one workload."""
    w = plan.workloads[workload]
    ids = [p for shard in w.shards for p in shard]
    calibrated = next((p for p in ids if plan.points[p].calibrated), None)
    if calibrated:
        return calibrated, True
    return (w.baseline or (ids[0] if ids else None)), False


def _step(ok, workload: str, source: str, point: str | None = None) -> int | None:
    g = ok[(ok["workload"] == workload) & (ok["source"] == source)]
    if point is not None:
        g = g[g["point_id"] == point]
    return int(g["step_time_ns"].iloc[0]) if len(g) else None


def fidelity(plan: Campaign, results) -> dict[str, dict[str, Any]]:
    """Per workload with a measured time: the measured and simulated steps (ns) and relative errors."""
    ok = results[results["status"] == "ok"]
    out: dict[str, dict[str, Any]] = {}
    for name in plan.workloads:
        measured = {s: _step(ok, name, s) for s in MEASURED}
        if all(v is None for v in measured.values()):
            continue
        point, calibrated = reference_point(plan, name)
        simulated = _step(ok, name, "simulated", point) if point else None
        entry: dict[str, Any] = {
            "simulated_point": point,
            "calibrated": calibrated,
            **{f"{s}_ns": v for s, v in measured.items()},
            "simulated_ns": simulated,
        }
        for s, v in measured.items():
            entry[f"rel_error_vs_{s}"] = round(simulated / v - 1, 4) if simulated is not None and v else None
        out[name] = entry
    return out
