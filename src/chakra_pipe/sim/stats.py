"""ASTRA-sim's per-rank statistics, computed after the run from the per-node start/end times.

ASTRA-sim's ``Statistics`` post-processing prints, after each ``sys[i] finished`` line: the wall time
(latest node end), the busy time of each operator type as a union of intervals (GPU, CPU, Comm,
Remote mem, Invalid), the compute-communication overlap ``GPU + Comm - Wall`` when positive, and with
``roofline-enabled`` the duration-weighted compute-bound share, compute and memory utilisation and
operational intensity of the compute nodes. They are derived here from the finished result rather
than recorded inside the engine, so the hot issue loop stays untouched.

Deliberate difference: ASTRA-sim's overlap step asserts on any operator that is not GPU or COMM
(CPU ops, INVALID, remote memory), so for such ranks it prints nothing after ``Post statistics
processing start``; we print the full statistics for every rank. The per-type lines come in the
fixed order GPU, CPU, Comm, Remote mem, Invalid; ASTRA-sim prints them in its hash map's iteration
order (Comm before GPU on some larger traces), so parse them by label, not position.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..et import schema as S
from .config import SystemConfig
from .result import union_ns

TYPE_ORDER = ("GPU", "CPU", "Comm", "Remote mem", "Invalid")


@dataclass(frozen=True)
class RooflinePoint:
    """One compute node on the roofline: ``perf`` FLOP/s, ``elapsed_s`` seconds (ASTRA-sim's debug line)."""

    operation_intensity: float
    perf: float
    elapsed_s: float
    compute_utilization: float
    memory_utilization: float
    memory_bound: bool
    tensor_size: int
    num_ops: int


def roofline_point(num_ops: int, tensor_size: int, system: SystemConfig) -> RooflinePoint:
    """The roofline of ASTRA-sim's workload layer (peak-perf in 10^12, local-mem-bw in 10^9 per second)."""
    oi = num_ops / tensor_size
    peak, mem_roof = system.peak_perf * 1e12, system.local_mem_bw * 1e9 * oi
    perf = min(mem_roof, peak)
    memory_bound = mem_roof < peak
    return RooflinePoint(
        oi,
        perf,
        num_ops / perf if perf else 0.0,
        perf / peak,
        1.0 if memory_bound else (perf / oi) / (system.local_mem_bw * 1e9),
        memory_bound,
        tensor_size,
        num_ops,
    )


@dataclass(frozen=True)
class RooflineAverages:
    """Duration-weighted over the rank's compute nodes (fractions; ``operation_intensity`` in FLOP/B)."""

    compute_bound: float
    compute_utilization: float
    memory_utilization: float
    operation_intensity: float


@dataclass(frozen=True)
class RankStatistics:
    """What ASTRA-sim's statistics logger prints for one rank (times in ns)."""

    rank: int
    finish_ns: int
    exposed_comm_ns: int
    wall_ns: int
    type_ns: tuple[tuple[str, int], ...]  # (label, union ns) for the types present, in TYPE_ORDER
    overlap_ns: int
    roofline: RooflineAverages | None = None  # None without roofline-enabled
    roofline_nodes: tuple[RooflinePoint, ...] = ()

    def lines(self) -> list[str]:
        """The statistics lines after ``finished``, without the logger prefix."""
        r = self.rank
        out = [
            f"sys[{r}]. Post statistics processing start.",
            f"sys[{r}]. Post statistics processing end.",
            f"sys[{r}], Wall time: {self.wall_ns}",
        ]
        out += [f"sys[{r}], {label} time: {ns}" for label, ns in self.type_ns]
        if self.overlap_ns > 0:
            out.append(f"sys[{r}], Total compute-communication overlap: {self.overlap_ns}")
        if self.roofline is not None:
            rf = self.roofline
            out += [
                f"sys[{r}], Compute bound percentage: {rf.compute_bound * 100:.3f}%",
                f"sys[{r}], Average compute utilization: {rf.compute_utilization * 100:.3f}%",
                f"sys[{r}], Average memory utilization: {rf.memory_utilization * 100:.3f}%",
                f"sys[{r}], Average operation intensity: {rf.operation_intensity:.3f}",
            ]
        return out


def _type_label(ty: int, cpu: bool) -> str | None:
    if ty == S.COMP_NODE:
        return "CPU" if cpu else "GPU"
    if ty in (S.COMM_COLL_NODE, S.COMM_SEND_NODE, S.COMM_RECV_NODE):
        return "Comm"
    if ty in (S.MEM_LOAD_NODE, S.MEM_STORE_NODE):
        return "Remote mem"
    if ty == S.INVALID_NODE:
        return "Invalid"
    return None  # METADATA: not an operator in ASTRA-sim's statistics


def rank_statistics(result, system: SystemConfig) -> list[RankStatistics]:
    """One :class:`RankStatistics` per rank of a finished :class:`SimResult`."""
    out = []
    for w, finish, exposed in zip(result.workloads, result.finish_ns, result.exposed_comm_ns):
        t = w.t
        intervals: dict[str, list[tuple[int, int]]] = {}
        wall = 0
        weighted = [0.0, 0.0, 0.0]  # compute utilisation, memory utilisation, intensity (× ns)
        bound_ns, compute_ns = 0, 1  # ASTRA-sim starts the denominator at 1 to avoid dividing by zero
        points = []
        for i, (s, e) in enumerate(zip(w.start, w.end)):
            label = _type_label(t.types[i], t.cpu[i])
            if s < 0 or label is None:
                continue
            wall = max(wall, e)
            intervals.setdefault(label, []).append((s, e))
            if label in ("GPU", "CPU"):
                compute_ns += e - s
                if (
                    system.roofline_enabled
                    and label == "GPU"
                    and not system.replay_only
                    and t.has["tensor_size"][i] == 1
                    and t.attrs["tensor_size"][i] > 0
                ):
                    p = roofline_point(t.attrs["num_ops"][i], t.attrs["tensor_size"][i], system)
                    points.append(p)
                    bound_ns += 0 if p.memory_bound else e - s
                    weighted[0] += p.compute_utilization * (e - s)
                    weighted[1] += p.memory_utilization * (e - s)
                    weighted[2] += p.operation_intensity * (e - s)
        type_ns = tuple((label, union_ns(intervals[label])) for label in TYPE_ORDER if label in intervals)
        by = dict(type_ns)
        overlap = by.get("GPU", 0) + by.get("Comm", 0) - wall
        roof = None
        if system.roofline_enabled:
            roof = RooflineAverages(
                bound_ns / compute_ns, weighted[0] / compute_ns, weighted[1] / compute_ns, weighted[2] / compute_ns
            )
        out.append(RankStatistics(w.rank, finish, exposed, wall, type_ns, max(overlap, 0), roof, tuple(points)))
    return out
