"""ASTRA-sim's ``HardwareResource``: the slot each node occupies and the nodes holding each slot (spec §2.3).

A rank has one CPU slot, one GPU-compute slot and one GPU-communication slot, each held by at most
one node; receives take none and are always issuable. The slot of a node is decided in one place
for every stage, :func:`chakra_pipe.rankset.slots.slot_of`.
"""

from __future__ import annotations

from ..rankset.slots import SLOT_NONE


class HardwareResource:
    """Occupancy of one rank's slots and its busy-time counters (ASTRA-sim's ``tics_*_ops``)."""

    __slots__ = ("busy", "tics_gpu", "tics_cpu")

    def __init__(self) -> None:
        self.busy = [0, 0, 0]  # nodes holding each slot in SLOTS (the issue pass reads it directly)
        self.tics_gpu = 0  # GPU compute time, overlap not removed (ASTRA-sim's tics_gpu_ops)
        self.tics_cpu = 0  # CPU-op time (one CPU slot, so never overlapping itself)

    def occupy(self, slot: int) -> None:
        if slot != SLOT_NONE:
            self.busy[slot] += 1

    def release(self, slot: int) -> None:
        if slot != SLOT_NONE:
            self.busy[slot] -= 1
