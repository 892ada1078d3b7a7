"""One table of collective names: each Chakra ``CollectiveCommType`` and how every tool spells it.

Why one table: the same ten collectives are named by Chakra's enum (``ALL_REDUCE``: simulator
records, ``RESULT.json``, error text), by our CLI, configs and results columns (``all_reduce``,
also torch.distributed's), by NCCL's ``record_param_comms`` and kernel names (``allreduce``), by
ASTRA-sim 1.0 text workloads (``ALLREDUCE``) and by ASTRA-sim's system file
(``all-reduce-implementation``). Each stage used to keep its own partial map; they now all read
this one, so a new collective or a changed rule is one edit. Stdlib only (no protobuf): CLIs read
it while registering their options. ``tests/test_et_collectives.py`` checks it against the proto.
"""

from __future__ import annotations

from dataclasses import dataclass

# What ASTRA-sim does with a collective node of this type (astra-sim-semantics.md).
SIMULATED = "simulated"  # a collective algorithm from the system file's ``*-implementation`` key
REPLAYED = "replayed"  # BROADCAST: the node's duration_micros is replayed, nothing is sent
UNSUPPORTED = "unsupported"  # runtime error "Unsupported collective comm type"


@dataclass(frozen=True)
class Collective:
    """One collective and its spellings (``name`` is the proto's enum name, ``key`` its lower case)."""

    comm_type: int  # CollectiveCommType number in et_def.proto
    name: str  # Chakra's enum name: ALL_REDUCE
    nccl: str | None  # NCCL / record_param_comms spelling, normalised (lower case, no '_'): allreduce
    astra_sim: str  # SIMULATED, REPLAYED or UNSUPPORTED

    @property
    def key(self) -> str:
        """``all_reduce``: CLI choices, configs, results columns (``comm_all_reduce_ns``), torch ops."""
        return self.name.lower()

    @property
    def text_name(self) -> str:
        """``ALLREDUCE``: the comm-type column of an ASTRA-sim 1.0 text workload."""
        return self.name.replace("_", "")

    @property
    def impl_key(self) -> str:
        """``all-reduce-implementation``: the ASTRA-sim system key listing its algorithms."""
        return self.key.replace("_", "-") + "-implementation"


# Rows in the order results, generators and calibration list them (ASTRA-sim's four, broadcast, the rest).
COLLECTIVES: tuple[Collective, ...] = (
    Collective(0, "ALL_REDUCE", "allreduce", SIMULATED),
    Collective(2, "ALL_GATHER", "allgather", SIMULATED),
    Collective(7, "REDUCE_SCATTER", "reducescatter", SIMULATED),
    Collective(6, "ALL_TO_ALL", "alltoall", SIMULATED),
    Collective(5, "BROADCAST", "broadcast", REPLAYED),
    Collective(1, "REDUCE", "reduce", UNSUPPORTED),
    Collective(3, "GATHER", "gather", UNSUPPORTED),
    Collective(4, "SCATTER", "scatter", UNSUPPORTED),
    Collective(8, "REDUCE_SCATTER_BLOCK", None, UNSUPPORTED),  # no record_param_comms name of its own
    Collective(9, "BARRIER", "barrier", UNSUPPORTED),
)
BY_TYPE: dict[int, Collective] = {c.comm_type: c for c in COLLECTIVES}
BY_NAME: dict[str, Collective] = {c.name: c for c in COLLECTIVES}
BY_KEY: dict[str, Collective] = {c.key: c for c in COLLECTIVES}
# The four ASTRA-sim runs through a collective algorithm, and BROADCAST (replayed from its duration).
ASTRA_SIM: tuple[Collective, ...] = tuple(c for c in COLLECTIVES if c.astra_sim == SIMULATED)
WITH_BROADCAST: tuple[Collective, ...] = tuple(c for c in COLLECTIVES if c.astra_sim != UNSUPPORTED)


def name_of(comm_type: int) -> str:
    """Chakra's name of ``comm_type`` for messages, or the number itself when it is no known type."""
    c = BY_TYPE.get(comm_type)
    return c.name if c else str(comm_type)
