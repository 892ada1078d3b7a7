"""Generated campaign workloads simulated in memory: the shard job generates the rank set it simulates.

Why: a campaign point of a generated workload used to cost one ``.et`` file per rank (a 131,072-rank
step: 131,072 files) written by the ``generate`` job, validated, then read back by every shard. The
generator's bytes are now decoded straight into trace graphs inside the shard job — the bytes the
files would hold, so the same simulation and the same ``trace_sha256`` — and an ``llm`` step runs on
the symmetric simulator where :func:`chakra_pipe.sim.symmetric.symmetry_problem` finds it exact (only
one representative rank per class is generated), on the full engine otherwise, saying why. Files are
written only for workloads that ask (``keep_traces: true``) or that a file-reading stage needs
(replay, a transform's source): :attr:`chakra_pipe.sweep.campaign.Workload.in_memory`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..generate.cli import dry_run
from ..generate.collective import CollectiveSpec, rank_bytes
from .campaign import Workload
from .generated_layout import GeneratedLayout, InMemorySet


class GeneratedCollective(InMemorySet):
    """A ``generate collective`` microbenchmark in memory; always the full engine (its one group spans
    every rank, which the symmetric run leaves to the full engine), decoded once for all points."""

    def __init__(self, spec: CollectiveSpec, name: str):
        self.spec, self.name, self.world = spec, name, spec.npus

    def rank_bytes(self, rank: int) -> bytes:
        return rank_bytes(self.spec, rank)

    def simulate(self, hw: Any) -> tuple[Any, str]:
        from ..sim import simulate

        return simulate(self.traces(), hw), "full engine: a collective microbenchmark"


def generated_set(w: Workload) -> GeneratedLayout | GeneratedCollective:
    """The rank set ``chakra-pipe generate`` would write for ``w`` (same arguments, same checks), in memory.

    Named as its files would be (the prefix's last component), so the digest and any error name them.
    """
    prepared = dry_run(w.generate_args(), in_memory=True)
    name = Path(w.prefix).name
    if w.kind == "llm":
        model, spec = prepared
        return GeneratedLayout(model, spec, name)
    return GeneratedCollective(prepared, name)
