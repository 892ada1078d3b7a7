"""The metric columns of one simulated point, computed from the simulator's result.

Why here and not in ``sweep``: the shard job and ``search`` both turn a simulation into the same
metric columns (:data:`chakra_pipe.results.schema.NS_METRICS`), and what each column means is the
results schema's business, not the job's.
"""

from __future__ import annotations

from typing import Any

from .schema import COMM_TYPES


def _critical(values: list[int], rank: int) -> int:
    return int(values[rank]) if values else 0


def metrics(result: Any) -> dict[str, int]:
    """Per-point metrics of the slowest rank (the one that sets the step time; lowest rank on ties).

    Reporting one rank keeps the parts consistent with the step time (compute + cpu + exposed
    communication + idle = step time), which maxima over different ranks would not. Exposed
    communication here leaves out CPU-op time and idle time, unlike ASTRA-sim's printed figure
    (step - GPU compute), so a CPU-op trace is not reported as all communication.
    """
    finish = [int(x) for x in result.finish_ns]
    rank = max(range(len(finish)), key=lambda r: (finish[r], -r)) if finish else 0
    parts = {key: _critical(getattr(result, key), rank) for key in ("compute_ns", "cpu_ns", "idle_ns")}
    row = {
        "step_time_ns": max(finish, default=0),
        **parts,
        "exposed_comm_ns": _critical(result.finish_ns, rank) - sum(parts.values()),
        "comm_ns": _critical(result.comm_ns, rank),
    }
    other = 0
    for rec in result.collectives:  # per-rank records: comm_time_by_type_ns() sums over all ranks
        if rec.rank != rank:
            continue
        key = str(rec.kind).lower()
        ns = int(rec.end_ns) - int(rec.start_ns)
        if key in COMM_TYPES:
            row[f"comm_{key}_ns"] = row.get(f"comm_{key}_ns", 0) + ns
        else:
            other += ns
    for t in COMM_TYPES:
        row.setdefault(f"comm_{t}_ns", 0)
    row["comm_other_ns"] = other
    return row
