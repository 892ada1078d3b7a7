"""Achieved bandwidth of one collective, as nccl-tests defines it.

``algbw = size / time`` where ``size`` is nccl-tests' size column, and ``busbw = algbw × factor``
with the factor that makes busbw comparable to the link bandwidth (nccl-tests PERFORMANCE.md).
Chakra's ``comm_size`` does not always mean nccl-tests' size (astra-sim-semantics.md §6.1):
all-gather records the *per-rank input*, so nccl-tests' size is ``P × comm_size``; gather and
scatter (replayed with a per-rank chunk of ``comm_size``) likewise move ``P × comm_size``.
Bandwidths are in GB/s with GB = 10⁹ bytes, as nccl-tests prints them.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..et import schema


@dataclass(frozen=True)
class Bandwidth:
    size_bytes: int
    algbw_GBps: float
    busbw_GBps: float


def nccl_size(comm_type: int, comm_size: int, group_size: int) -> int:
    """nccl-tests' "size" for a Chakra collective of ``comm_size`` bytes over ``group_size`` ranks."""
    if comm_type in (schema.ALL_GATHER, schema.GATHER, schema.SCATTER):
        return comm_size * group_size
    return comm_size


def bus_factor(comm_type: int | None, group_size: int) -> float:
    """busbw / algbw; ``None`` means point-to-point (send/recv, factor 1)."""
    p = group_size
    if comm_type == schema.ALL_REDUCE:
        return 2.0 * (p - 1) / p
    if comm_type in (
        schema.ALL_GATHER,
        schema.REDUCE_SCATTER,
        schema.REDUCE_SCATTER_BLOCK,
        schema.ALL_TO_ALL,
        schema.GATHER,
        schema.SCATTER,
    ):
        return (p - 1) / p
    return 1.0  # broadcast, reduce, p2p


def bandwidth(comm_type: int | None, comm_size: int, group_size: int, time_ns: int) -> Bandwidth | None:
    """Bandwidth of one measured call; None for a barrier or a call that took no measurable time."""
    if comm_type == schema.BARRIER or time_ns <= 0:
        return None
    size = comm_size if comm_type is None else nccl_size(comm_type, comm_size, group_size)
    algbw = size / time_ns  # bytes per ns == GB/s (10⁹ B/s)
    return Bandwidth(size, algbw, algbw * bus_factor(comm_type, group_size))
