"""Every parallel layout of a model on N GPUs that the generator can write.

Valid means what Megatron (and ``generate llm``) require: ``dp·tp·pp = N``; ``tp`` divides the heads
and the MLP width; ``pp`` divides the layers (equal stages, so no stage is the odd one out); ``ep``
divides ``dp`` and the experts (MoE only); the microbatch size ``b`` and count ``M`` give the global
batch exactly, ``dp·M·b = B``. Each such split is tried with ZeRO 0 and 1 and with activation
recomputation off and on, since those trade memory against time and the memory check decides.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..generate.models import ModelSpec


@dataclass(frozen=True)
class Candidate:
    """One layout: parallel degrees, microbatching, ZeRO stage and recomputation."""

    dp: int
    tp: int
    pp: int
    ep: int
    microbatches: int
    micro_batch: int
    zero: int
    recompute: bool

    @property
    def label(self) -> str:
        """``dp8.tp4.pp2.ep1.mb16x2.zero1.rc`` (stable: it names the layout in tables and trace files)."""
        return (
            f"dp{self.dp}.tp{self.tp}.pp{self.pp}.ep{self.ep}.mb{self.microbatches}x{self.micro_batch}"
            f".zero{self.zero}{'.rc' if self.recompute else ''}"
        )

    def options(self, base: dict[str, Any]) -> dict[str, Any]:
        """``generate llm`` options of this layout on top of ``base`` (model, seq, dtype, device)."""
        return {
            **base,
            "dp": self.dp,
            "tp": self.tp,
            "pp": self.pp,
            "ep": self.ep,
            "microbatches": self.microbatches,
            "global_batch": self.dp * self.microbatches * self.micro_batch,
            "zero": self.zero,
            "recompute": self.recompute,
        }


def divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


def enumerate_layouts(
    model: ModelSpec,
    gpus: int,
    global_batch: int,
    micro_batches: list[int],
    zero: tuple[int, ...] = (0, 1),
    recompute: tuple[bool, ...] = (False, True),
) -> list[Candidate]:
    """Every valid layout, ordered by (tp, pp, ep, microbatch size, zero, recompute)."""
    out = []
    for tp in divisors(gpus):
        if model.heads % tp or model.ffn % tp:
            continue
        for pp in divisors(gpus // tp):
            if model.layers % pp:
                continue
            dp = gpus // (tp * pp)
            eps = [e for e in divisors(dp) if model.experts % e == 0] if model.moe else [1]
            for ep in eps:
                for b in sorted(set(micro_batches)):
                    if global_batch % (dp * b):
                        continue
                    out += [
                        Candidate(dp, tp, pp, ep, global_batch // (dp * b), b, z, rc) for z in zero for rc in recompute
                    ]
    return out
