"""The results table's columns, their units and which direction is better.

One row per (workload, hardware point, backend, source). Column names carry their unit; this module is
the single place that says what each metric means, and ``summary.json`` is generated from it so that
leaderboards and other tools never guess units or directions.
"""

from __future__ import annotations

from dataclasses import dataclass

SOURCES = ("simulated", "replayed", "captured")
# Collective types reported as their own column; anything else is summed into ``comm_other_ns``.
COMM_TYPES = ("all_reduce", "all_gather", "reduce_scatter", "all_to_all", "broadcast")


@dataclass(frozen=True)
class Metric:
    name: str
    unit: str
    better: str  # "lower" | "higher"
    meaning: str


METRICS: tuple[Metric, ...] = (
    Metric(
        "step_time_ns",
        "ns",
        "lower",
        "one pass over the trace: simulated, the last rank's finish time; replayed, the median iteration; "
        "captured, the untraced median step time x the profiled steps the trace holds",
    ),
    Metric("compute_ns", "ns", "lower", "GPU compute time of the slowest rank (sum of its kernels)"),
    Metric("cpu_ns", "ns", "lower", "CPU-op time of the slowest rank (is_cpu_op compute nodes)"),
    Metric(
        "exposed_comm_ns",
        "ns",
        "lower",
        "communication not hidden by compute or CPU ops, slowest rank: step - compute - cpu - idle",
    ),
    Metric("idle_ns", "ns", "lower", "time during which no node of the slowest rank runs"),
    Metric("comm_ns", "ns", "lower", "time the slowest rank has communication in flight, hidden or not"),
    *(
        Metric(f"comm_{t}_ns", "ns", "lower", f"{t.replace('_', '-')} communication time of the slowest rank")
        for t in COMM_TYPES
    ),
    Metric("comm_other_ns", "ns", "lower", "other communication (send/recv, other collectives), slowest rank"),
    Metric("cost", "cost units (as declared in the config)", "lower", "price of the hardware point"),
    Metric("time_x_cost", "ns x cost units", "lower", "step time times cost: the price of one step"),
    Metric("speedup", "x", "higher", "baseline step time / this step time, same workload and source"),
)
METRIC_NAMES = tuple(m.name for m in METRICS)
NS_METRICS = tuple(m.name for m in METRICS if m.unit == "ns")

IDENTITY = ("campaign", "workload", "source", "point_id", "platform", "backend", "npus")
HARDWARE = ("settings", "topology", "npus_count", "bandwidth_gbps", "latency_ns", "bottleneck_bandwidth_gbps")
PROVENANCE = ("trace_sha256", "hardware_sha256", "config_sha256", "package_version", "git_commit")
# Columns a shard writes (speedup and time_x_cost are derived when aggregating).
SHARD_COLUMNS = (*IDENTITY, "cost", *HARDWARE, "status", *NS_METRICS, "trace_sha256")
# ``transform``: the op chain a derived workload was made with (empty for the others), to group by.
# Result rows: ``backend`` is the simulator backend (simulated rows only); a replay's or capture's
# torch backend/device is ``runtime``, and such rows have no ``point_id`` (they ran on this host).
# Campaign-specific typed columns (per-dimension, per-axis; see ``tidy``) follow these.
RESULT_COLUMNS = (
    *IDENTITY,
    "transform",
    "runtime",
    "cost",
    *HARDWARE,
    "status",
    *NS_METRICS,
    "time_x_cost",
    "speedup",
    *PROVENANCE,
)
UNITS = {
    **{m.name: m.unit for m in METRICS},
    "npus": "NPUs",
    "bandwidth_gbps": "GB/s per dimension, GB = 2^30 bytes (ASTRA-sim)",
    "latency_ns": "ns per dimension",
    "bottleneck_bandwidth_gbps": "GB/s, GB = 2^30 bytes (ASTRA-sim)",
}
