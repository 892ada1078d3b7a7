"""Collective microbenchmarks measured through the replay engine.

One rank set holds every (collective, size) once, in one chain per rank, so a single replay
(one process start-up per rank) measures them all: the replay's warm-up iterations warm gloo's
buffers and connections, and its timed iterations are the repeats. A call's time is, per
iteration, from the last member's issue to the last member's completion, both on the one clock
the ranks share (``time.monotonic_ns``: every rank runs on this host, and the replay records each
iteration's start on that clock, ``iteration_origin_ns``): a rank that arrived early waiting for a
late one is not counted, as nccl-tests' barrier-then-time does not count it. Times relative to each
rank's own iteration start would not do: the ranks leave the iteration barrier 2-4 ms apart on a
loaded 2-core host, so the late rank's calls would look that much shorter and the early rank's
longer, and the fitted latency would follow the barrier's skew instead of the collective. The
figure kept is the median over iterations, which shrugs off a descheduled rank on a shared
machine. Bandwidths follow nccl-tests (``results.busbw``).

**Point-to-point** (``p2p_sizes``): after the collectives and one untimed round (:func:`p2p_rounds`),
ranks 0 and 1 play ping-pong once per size: rank 0 sends to rank 1, rank 1 sends the same bytes
back (nodes ``P + 2j`` and ``P + 2j + 1``, ``P`` the collectives' node count plus the untimed
round's 2; the other ranks have no such nodes). The time kept is the round trip on rank 0 alone,
from its send's issue to its receive's completion, so no second clock and no barrier skew enters
it. Why it is measured: in ASTRA-sim's model a SEND pays ``hops x latency + bytes / bandwidth``
and no ``endpoint-delay`` (spec §2.4, §4.1), while every message of a collective pays both; at 2
ranks each collective carries them in a fixed proportion, so it cannot tell them apart, and a
pipeline's sends are priced by latency alone (``fit``).

**Under load** (``load="gemm"``): in a captured training step a collective rarely runs alone. DDP
reduces each gradient bucket on the backend's worker thread while the main thread computes the rest
of the backward pass, and on a host where ranks share cores (CPU/gloo: every rank's compute and
every rank's gloo threads on the same few cores) that compute competes with the collective for
the cores its sends, receives and reductions run on. A collective timed alone misses that cost.
The loaded pass replays the same set with a GEMM beside every collective: node ``2k`` is the k-th
collective, node ``2k + 1`` a GEMM on the compute slot (the replay engine's ``ops`` mode, one torch
thread as in ``capture``) issued with it, and the next pair waits for both, so each collective runs
while its rank's compute slot is busy. Each GEMM is sized to ``COVER`` times that collective's
unloaded median at the GEMM rate measured here, so it normally outlasts the collective;
:class:`LoadStats` says how often it did (when it did not, the collective's tail ran unloaded and
its loaded time is a lower bound). This is a methodology, not a correction factor: no number is
scaled, the collectives are simply timed under the kind of load a training step puts on them.
"""

from __future__ import annotations

import statistics
import tempfile
from dataclasses import dataclass
from pathlib import Path

from ..errors import StuckError
from ..et import schema
from ..et.attrs import set_attr
from ..et.collectives import ASTRA_SIM
from ..et.framing import write_trace
from ..et.traceset import write_order
from ..generate.collective import COLLECTIVES, METADATA_VERSION
from ..results.busbw import bandwidth

KINDS = tuple(c.key for c in ASTRA_SIM)
COVER = 2.0  # a loaded pass's GEMM lasts this many unloaded collective times (at the measured rate)
DEFAULT_SIZES = tuple(4 << 10 << (2 * k) for k in range(8))  # 4 KiB, 16 KiB, ... 64 MiB
P2P = "send_recv"  # the ping-pong rows' kind in measurements and the fit report
DEFAULT_P2P_SIZES = (256, 4 << 10, 64 << 10, 1 << 20)
P2P_TAG = 7000  # + case index: one tag per size, so receives posted up front match their own send


@dataclass(frozen=True)
class Measurement:
    """Median time of one collective of ``size`` bytes (Chakra ``comm_size`` semantics)."""

    kind: str
    size: int
    time_ns: int
    algbw_GBps: float
    busbw_GBps: float
    samples: int


@dataclass(frozen=True)
class LoadStats:
    """How the loaded pass went: the GEMM rate it was sized at, and in what share of (case,
    iteration, rank) the GEMM outlasted its collective (1.0: every collective fully under load)."""

    gemm_gflops: float
    covered_share: float
    unloaded_ns: dict[tuple[str, int], int]


def write_benchmark(
    prefix: str,
    ranks: int,
    sizes: tuple[int, ...],
    gemm_ops: list[int] | None = None,
    kinds: tuple[str, ...] = KINDS,
    p2p_sizes: tuple[int, ...] = (),
) -> list[tuple[str, int]]:
    """The rank set: the k-th (kind, size) after the (k - 1)-th; with ``gemm_ops``, each collective
    (node ``2k``) paired with a GEMM of ``gemm_ops[k]`` FLOPs (node ``2k + 1``) issued with it; then
    ranks 0 and 1 ping-pong once per ``p2p_sizes`` (:func:`ping_pong`). Returns the collective cases."""
    cases = [(kind, size) for size in sizes for kind in kinds]
    stride = 2 if gemm_ops else 1
    for rank in write_order(ranks):
        nodes = []
        first = stride * len(cases)
        last = [first - stride + j for j in range(stride)] if cases else []
        for j, size in enumerate(p2p_rounds(p2p_sizes) if rank < 2 else ()):
            nodes += ping_pong(rank, size, first + 2 * j, last if j == 0 else [first + 2 * j - 1], P2P_TAG + j)
        for k, (kind, size) in enumerate(cases):
            prev = [stride * (k - 1) + j for j in range(stride)] if k else []
            node = schema.Node(id=stride * k, name=f"{kind}_{size}", type=schema.COMM_COLL_NODE)
            node.data_deps.extend(prev)
            set_attr(node, "is_cpu_op", False)
            set_attr(node, "comm_type", COLLECTIVES[kind])
            set_attr(node, "comm_size", size)
            nodes.append(node)
            if gemm_ops:
                gemm = schema.Node(id=stride * k + 1, name=f"load_{kind}_{size}", type=schema.COMP_NODE)
                gemm.data_deps.extend(prev)
                set_attr(gemm, "is_cpu_op", False)
                set_attr(gemm, "num_ops", gemm_ops[k])
                nodes.append(gemm)
        nodes.sort(key=lambda n: n.id)
        write_trace(f"{prefix}.{rank}.et", schema.GlobalMetadata(version=METADATA_VERSION), nodes)
    return cases


def p2p_rounds(p2p_sizes: tuple[int, ...]) -> tuple[int, ...]:
    """The ping-pongs written: an untimed one of the first size, then one per size. Rank 1 may still
    be finishing the last collective when rank 0 sends (a 256 B round trip measured 1.2 ms first, 0.9
    ms at 4 KiB next); the untimed round starts the timed ones from a point both ranks have passed."""
    return p2p_sizes[:1] + p2p_sizes


def ping_pong(rank: int, size: int, first_id: int, deps: list[int], tag: int) -> list:
    """Rank 0's or rank 1's two nodes of one ping-pong of ``size`` bytes: ``first_id`` carries the
    ping (0 -> 1), ``first_id + 1`` the pong (1 -> 0), issued once the ping has arrived."""
    out = []
    for k, (src, dst) in enumerate(((0, 1), (1, 0))):
        node_type = schema.COMM_SEND_NODE if rank == src else schema.COMM_RECV_NODE
        node = schema.Node(id=first_id + k, name=f"{P2P}_{size}_{'ping' if k == 0 else 'pong'}", type=node_type)
        node.data_deps.extend(deps if k == 0 else [first_id])
        set_attr(node, "is_cpu_op", False)
        set_attr(node, "comm_src", src)
        set_attr(node, "comm_dst", dst)
        set_attr(node, "comm_tag", tag)
        set_attr(node, "comm_size", size)
        out.append(node)
    return out


def round_trip_ns(nodes: list[dict], first_id: int, it: int) -> int:
    """Iteration ``it`` of the ping-pong at ``first_id``: rank 0's send issue to its receive's end."""
    ping, pong = nodes[0][first_id], nodes[0][first_id + 1]
    return pong["start_ns"][it] + pong["duration_ns"][it] - ping["start_ns"][it]


def p2p_measurement(size: int, time_ns: int, samples: int) -> Measurement:
    """A ping-pong row; its bandwidths are the one-way ones (``size`` over half the round trip),
    algbw = busbw as nccl-tests' sendrecv reports them."""
    bw = 2 * size / time_ns if time_ns > 0 else 0.0  # bytes/ns = GB/s (GB = 10^9 B)
    return Measurement(P2P, size, time_ns, bw, bw, samples)


def gemm_gflops(seconds: float = 0.2) -> float:
    """This process's single-thread GEMM rate (GFLOP/s) at the replay engine's tile for ~1 ms GEMMs."""
    import time

    import torch

    from ..replay.engine import Gemm

    g = Gemm.for_ops(int(2e7))
    a = torch.rand(g.n, g.n)
    c = torch.empty_like(a)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # as every replay rank runs
    try:
        done, t0 = 0, time.perf_counter()
        while time.perf_counter() - t0 < seconds or done < 3:
            torch.mm(a, a, out=c)
            done += 1
        return done * 2 * g.n**3 / (time.perf_counter() - t0) / 1e9
    finally:
        torch.set_num_threads(threads)


def _replay(
    ranks: int,
    sizes: tuple[int, ...],
    backend: str,
    iterations: int,
    warmup: int,
    timeout_s: float,
    gemm_ops: list[int] | None,
    kinds: tuple[str, ...] = KINDS,
    p2p_sizes: tuple[int, ...] = (),
) -> tuple[list[tuple[str, int]], list[dict], dict]:
    """Replay the benchmark set once; per rank, its nodes by id."""
    from ..replay.launcher import ReplayConfig, replay_here

    with tempfile.TemporaryDirectory(prefix="chakra-calibrate-") as tmp:
        prefix = str(Path(tmp) / "bench")
        cases = write_benchmark(prefix, ranks, sizes, gemm_ops, kinds, p2p_sizes)
        result = replay_here(
            ReplayConfig(
                prefix=prefix,
                out=Path(tmp) / "replay.json",
                ranks=ranks,
                backend=backend,
                iterations=iterations,
                warmup=warmup,
                compute="ops" if gemm_ops else "skip",
                timeout_s=timeout_s,
            )
        )
    return cases, shared_clock(result), result


def shared_clock(result: dict) -> list[dict]:
    """Per rank, its nodes by id with ``start_ns`` moved onto the host's monotonic clock (the
    rank's ``iteration_origin_ns`` added), so ranks' issue and completion times compare."""
    out = []
    for r in result["ranks"]:
        origin = r["iteration_origin_ns"]
        out.append({n["id"]: {**n, "start_ns": [o + s for o, s in zip(origin, n["start_ns"])]} for n in r["nodes"]})
    return out


def call_ns(nodes: list[dict], i: int, it: int) -> int:
    """Iteration ``it`` of node ``i`` (shared-clock times): from the last rank's issue to the last
    rank's completion."""
    return max(r[i]["start_ns"][it] + r[i]["duration_ns"][it] for r in nodes) - max(r[i]["start_ns"][it] for r in nodes)


def _measurements(cases, nodes, ranks: int, iterations: int, stride: int) -> list[Measurement]:
    out = []
    for k, (kind, size) in enumerate(cases):
        med = int(statistics.median(call_ns(nodes, stride * k, it) for it in range(iterations)))
        bw = bandwidth(COLLECTIVES[kind], size, ranks, med)
        out.append(Measurement(kind, size, med, bw.algbw_GBps if bw else 0.0, bw.busbw_GBps if bw else 0.0, iterations))
    return out


def covered_share(nodes: list[dict], cases: int, iterations: int) -> float:
    """Share of (case, iteration, rank) whose GEMM (node 2k+1) ended no earlier than its collective (2k)."""
    hits = total = 0
    for r in nodes:
        for k in range(cases):
            coll, gemm = r[2 * k], r[2 * k + 1]
            for it in range(iterations):
                total += 1
                hits += gemm["start_ns"][it] + gemm["duration_ns"][it] >= coll["start_ns"][it] + coll["duration_ns"][it]
    return hits / total if total else 0.0


def measure(
    ranks: int,
    sizes: tuple[int, ...],
    backend: str,
    iterations: int,
    warmup: int,
    timeout_s: float,
    load: str = "none",
    p2p_sizes: tuple[int, ...] = (),
) -> tuple[list[Measurement], dict, LoadStats | None]:
    """Per (kind, size) the median of the slowest rank's times, then one ping-pong row per
    ``p2p_sizes`` (timed in the unloaded pass: they pin the latency, which a GEMM beside them would
    not change in the model); with ``load="gemm"`` a second, loaded pass (GEMMs sized from the first
    pass) gives the collective times returned."""
    import time

    deadline = time.monotonic() + timeout_s  # both passes share the one --timeout
    cases, nodes, result = _replay(ranks, sizes, backend, iterations, warmup, timeout_s, None, KINDS, p2p_sizes)
    alone = _measurements(cases, nodes, ranks, iterations, 1)
    p2p = [
        p2p_measurement(
            size,
            int(statistics.median(round_trip_ns(nodes, len(cases) + 2 * (j + 1), it) for it in range(iterations))),
            iterations,
        )
        for j, size in enumerate(p2p_sizes)
    ]
    meta = {"backend": result["settings"]["backend"], "environment": result["environment"]}
    if load == "none":
        return alone + p2p, meta, None
    rate = gemm_gflops()
    ops = [max(1, int(COVER * m.time_ns * rate)) for m in alone]  # ns x GFLOP/s = FLOPs
    left = deadline - time.monotonic()
    if left <= 0:
        raise StuckError(f"calibration did not finish within {timeout_s:g} s: the unloaded pass used it all")
    cases, nodes, _ = _replay(ranks, sizes, backend, iterations, warmup, left, ops)
    stats = LoadStats(
        round(rate, 3),
        round(covered_share(nodes, len(cases), iterations), 4),
        {(m.kind, m.size): m.time_ns for m in alone},
    )
    return _measurements(cases, nodes, ranks, iterations, 2) + p2p, meta, stats
