"""Collective microbenchmarks laid out exactly like ASTRA-sim's shipped examples.

Upstream's ``microbenchmarks/<coll>/<N>npus_1MB/<coll>.<rank>.et`` files hold GlobalMetadata
``version="0.0.4"`` and one ``COMM_COLL_NODE`` per rank: id = rank, name ``<coll>_<N>npus_<size>``,
attributes ``is_cpu_op`` (bool false), ``comm_type`` (int64), ``comm_size`` (int64). Reproducing
them byte for byte lets simulator results be compared with upstream's published numbers.

With ``iterations`` K > 1 each rank issues K collectives chained by data deps (iteration k has id
``k * N + rank`` and name suffix ``_<k>``), so the simulator runs them back to back.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from ..errors import InputError
from ..et import schema
from ..et.attrs import set_attr
from ..et.collectives import WITH_BROADCAST
from ..et.framing import encode_trace, write_trace
from ..et.traceset import clear_rank_set, write_order
from .limits import check_output
from .sizes import INT64_MAX, size_label

METADATA_VERSION = "0.0.4"  # what ASTRA-sim's example microbenchmarks carry
# What ASTRA-sim runs: its four collective algorithms and broadcast (replayed from its duration).
COLLECTIVES: dict[str, int] = {c.key: c.comm_type for c in WITH_BROADCAST}


@dataclass(frozen=True)
class CollectiveSpec:
    """One microbenchmark: ``comm_size`` follows ASTRA-sim semantics (AG: per-rank input)."""

    collective: str
    npus: int
    size: int
    iterations: int = 1

    def __post_init__(self) -> None:
        if self.collective not in COLLECTIVES:
            raise InputError(
                f"unknown collective {self.collective!r} (choose from {', '.join(COLLECTIVES)})", where="--type"
            )
        if self.npus < 1:
            raise InputError(f"need at least 1 NPU, got {self.npus}", where="--npus")
        if not 0 <= self.size <= INT64_MAX:
            raise InputError(f"size {self.size} out of the int64 range", where="--size")
        if self.size == 0 and self.collective == "all_gather":
            raise InputError(
                "a 0-byte all_gather cannot be simulated (ASTRA-sim divides by zero chunking it)", where="--size"
            )
        if self.iterations < 1:
            raise InputError(f"need at least 1 iteration, got {self.iterations}", where="--iterations")

    @property
    def name(self) -> str:
        return f"{self.collective}_{self.npus}npus_{size_label(self.size)}"

    def nodes(self, rank: int) -> list:
        """The rank's nodes: the collective repeated ``iterations`` times, each after the previous."""
        out: list = []
        for k in range(self.iterations):
            node = schema.Node(
                id=k * self.npus + rank,
                type=schema.COMM_COLL_NODE,
                name=self.name if self.iterations == 1 else f"{self.name}_{k}",
            )
            if k:
                node.data_deps.append(out[-1].id)
            set_attr(node, "is_cpu_op", False)
            set_attr(node, "comm_type", COLLECTIVES[self.collective])
            set_attr(node, "comm_size", self.size)
            out.append(node)
        return out


def check_collective(spec: CollectiveSpec, *, allow_large: bool = False, in_memory: bool = False) -> None:
    """The output-size check :func:`generate_collective` makes (the workflow makes it at plan time)."""
    check_output(
        spec.npus,
        spec.npus * spec.iterations,
        "--iterations" if spec.iterations > spec.npus else "--npus",
        allow_large=allow_large,
        in_memory=in_memory,
    )


def generate_collective(
    spec: CollectiveSpec, out_prefix: str | os.PathLike, *, allow_large: bool = False
) -> list[Path]:
    """Write ``PREFIX.<rank>.et`` for every rank; returns the paths in rank order."""
    check_collective(spec, allow_large=allow_large)
    clear_rank_set(out_prefix)
    for rank in write_order(spec.npus):
        write_trace(f"{out_prefix}.{rank}.et", _metadata(), spec.nodes(rank))
    return [Path(f"{out_prefix}.{rank}.et") for rank in range(spec.npus)]


def rank_bytes(spec: CollectiveSpec, rank: int) -> bytes:
    """Rank ``rank``'s ``.et`` content, as :func:`generate_collective` writes it (kept in memory)."""
    return b"".join(encode_trace(_metadata(), spec.nodes(rank)))


def _metadata() -> schema.GlobalMetadata:
    return schema.GlobalMetadata(version=METADATA_VERSION)
