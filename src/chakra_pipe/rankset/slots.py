"""The hardware slot each node occupies on its NPU (astra-sim-semantics.md §2.3), decided once.

ASTRA-sim's ``HardwareResource`` tests ``is_cpu_op`` first, for every node type: a CPU op holds the
CPU slot whatever its type (a METADATA node our converter marks ``is_cpu_op = true`` included);
otherwise a COMP node holds the GPU-compute slot, a receive holds none, and everything else —
collectives, sends, remote memory, METADATA, INVALID — holds the GPU-communication slot. (A
communication node marked ``is_cpu_op`` is refused as a ``comm-node`` problem before any stage
runs it.) The simulator's issue loop, the replay executor and the validator's schedule all read
this table, so the three cannot put one node on different slots.
"""

from __future__ import annotations

import numpy as np

from ..et import schema

SLOT_NONE = -1  # receives: no slot, always issuable
SLOT_CPU, SLOT_GPU, SLOT_COMM = 0, 1, 2
SLOTS = (SLOT_CPU, SLOT_GPU, SLOT_COMM)
SLOT_NAMES = {SLOT_NONE: "recv", SLOT_CPU: "cpu", SLOT_GPU: "gpu", SLOT_COMM: "comm"}


def slot_of(types: np.ndarray, is_cpu_op: np.ndarray) -> np.ndarray:
    """``SLOT_*`` of every node from its type and ``is_cpu_op`` column (is_cpu_op decides first)."""
    return np.where(
        is_cpu_op,
        SLOT_CPU,
        np.where(
            types == schema.COMP_NODE,
            SLOT_GPU,
            np.where(types == schema.COMM_RECV_NODE, SLOT_NONE, SLOT_COMM),
        ),
    )
