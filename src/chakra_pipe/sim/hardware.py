"""ASTRA-sim's ``HardwareResource``: the slot each node occupies and the nodes holding each slot (spec §2.3).

A rank has one CPU slot, one GPU-compute slot and one GPU-communication slot, each held by at most
one node; receives take none and are always issuable. The slot of a node is decided in one place,
:func:`slot_table`, for the whole rank at once.
"""

from __future__ import annotations

import numpy as np

from ..et import schema

SLOT_NONE, SLOT_CPU, SLOT_GPU, SLOT_COMM = -1, 0, 1, 2
SLOTS = (SLOT_CPU, SLOT_GPU, SLOT_COMM)  # the slots that hold nodes, as indices of HardwareResource.busy
SLOT_NAMES = {SLOT_NONE: "recv", SLOT_CPU: "cpu", SLOT_GPU: "gpu", SLOT_COMM: "comm"}


def slot_table(types: np.ndarray, is_cpu_op: np.ndarray) -> np.ndarray:
    """The SLOT_* of every node: COMP by ``is_cpu_op``, COMM_RECV none, every other type the comm slot."""
    return np.where(
        types == schema.COMP_NODE,
        np.where(is_cpu_op, SLOT_CPU, SLOT_GPU),
        np.where(types == schema.COMM_RECV_NODE, SLOT_NONE, SLOT_COMM),
    )


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
