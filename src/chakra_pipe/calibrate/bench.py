"""Collective microbenchmarks measured through the replay engine.

One rank set holds every (collective, size) once, in one chain per rank, so a single replay
(one process start-up per rank) measures them all: the replay's warm-up iterations warm gloo's
buffers and connections, and its timed iterations are the repeats. A call's time is, per
iteration, from the last member's issue to the last member's completion (iterations start at a
world barrier, so the ranks' clocks are aligned to within the barrier's skew): a rank that
arrived early waiting for a late one is not counted, as nccl-tests' barrier-then-time does not
count it. The figure kept is the median over iterations, which shrugs off a descheduled rank on
a shared machine. Bandwidths follow nccl-tests (``results.busbw``).
"""

from __future__ import annotations

import statistics
import tempfile
from dataclasses import dataclass
from pathlib import Path

from ..et import schema
from ..et.attrs import set_attr
from ..et.framing import write_trace
from ..et.traceset import write_order
from ..generate.collective import COLLECTIVES, METADATA_VERSION
from ..results.busbw import bandwidth

KINDS = ("all_reduce", "all_gather", "reduce_scatter", "all_to_all")
DEFAULT_SIZES = tuple(4 << 10 << (2 * k) for k in range(8))  # 4 KiB, 16 KiB, ... 64 MiB


@dataclass(frozen=True)
class Measurement:
    """Median time of one collective of ``size`` bytes (Chakra ``comm_size`` semantics)."""

    kind: str
    size: int
    time_ns: int
    algbw_GBps: float
    busbw_GBps: float
    samples: int


def write_benchmark(prefix: str, ranks: int, sizes: tuple[int, ...]) -> list[tuple[str, int]]:
    """The rank set: node ``k`` of every rank is the k-th (kind, size), after node ``k - 1``."""
    cases = [(kind, size) for size in sizes for kind in KINDS]
    for rank in write_order(ranks):
        nodes = []
        for k, (kind, size) in enumerate(cases):
            node = schema.Node(id=k, name=f"{kind}_{size}", type=schema.COMM_COLL_NODE)
            if k:
                node.data_deps.append(k - 1)
            set_attr(node, "is_cpu_op", False)
            set_attr(node, "comm_type", COLLECTIVES[kind])
            set_attr(node, "comm_size", size)
            nodes.append(node)
        write_trace(f"{prefix}.{rank}.et", schema.GlobalMetadata(version=METADATA_VERSION), nodes)
    return cases


def measure(
    ranks: int, sizes: tuple[int, ...], backend: str, iterations: int, warmup: int, timeout_s: float
) -> tuple[list[Measurement], dict]:
    """Replay the benchmark set once; per (kind, size) the median of the slowest rank's times."""
    from ..replay.launcher import ReplayConfig, replay_here

    with tempfile.TemporaryDirectory(prefix="chakra-calibrate-") as tmp:
        prefix = str(Path(tmp) / "bench")
        cases = write_benchmark(prefix, ranks, sizes)
        result = replay_here(
            ReplayConfig(
                prefix=prefix,
                out=Path(tmp) / "replay.json",
                ranks=ranks,
                backend=backend,
                iterations=iterations,
                warmup=warmup,
                compute="skip",
                timeout_s=timeout_s,
            )
        )
    nodes = [{n["id"]: n for n in r["nodes"]} for r in result["ranks"]]
    out = []
    for k, (kind, size) in enumerate(cases):
        calls = [
            max(r[k]["start_ns"][it] + r[k]["duration_ns"][it] for r in nodes)
            - max(r[k]["start_ns"][it] for r in nodes)
            for it in range(iterations)
        ]
        med = int(statistics.median(calls))
        bw = bandwidth(COLLECTIVES[kind], size, ranks, med)
        out.append(Measurement(kind, size, med, bw.algbw_GBps if bw else 0.0, bw.busbw_GBps if bw else 0.0, iterations))
    return out, {"backend": result["settings"]["backend"], "environment": result["environment"]}
