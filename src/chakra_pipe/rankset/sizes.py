"""Size rules that depend on the target system, in a module light enough for the simulator's config.

``chakra_pipe.sim.config`` is imported when a sweep is planned; it must not pull in protobuf or the
analysis to share this one rule with validate.
"""

from __future__ import annotations


def all_gather_too_small(size: int, splits: int) -> str | None:
    """Why an all-gather of ``size`` bytes cannot run with ``preferred-dataset-splits`` = ``splits``
    (None when it can): its chunk ``size // splits`` would be 0 bytes, and ASTRA-sim, which does not
    round all-gather chunks up (spec §3.2), divides by zero. Simulate and validate share this rule."""
    if size >= splits:
        return None
    return (
        f"ALL_GATHER comm_size {size} B is smaller than preferred-dataset-splits {splits}: its chunks would be "
        "0 bytes (ASTRA-sim divides by zero); use comm_size >= preferred-dataset-splits"
    )
