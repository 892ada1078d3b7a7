"""Transformer model shapes and their exact FLOP and parameter accounting.

Every number the LLM generator writes comes from the formulas below, so the sum of ``num_ops``
over all ranks of a generated step can be checked against the analytic training FLOPs.

Forward FLOPs of one transformer layer for ``t`` tokens of sequence length ``S`` (a multiply-add
counts 2; only matrix products count, element-wise work is ignored; ``d = h / a``):

* attention projections: ``2·t·h·(h + 2·kv·d)`` (QKV) + ``2·t·h·h`` (output)
* attention core: ``4·t·S·h`` (``Q·Kᵀ`` and ``softmax·V``, full S×S, no causal discount)
* dense MLP: ``2·n·t·h·f`` with ``n`` = 3 weight matrices for gated (SwiGLU) MLPs, 2 otherwise
* MoE MLP: ``2·t·h·E`` (router) + ``2·k·n·t·h·f`` (each token through its top-``k`` experts)

The LM head adds ``2·t·h·V`` once per microbatch on the last stage (embedding lookups are free).
Backward costs exactly twice the forward, so a training step over ``B`` sequences costs
``3 · [L · layer(B·S) + head(B·S)]`` FLOPs (no activation recomputation).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from ..errors import InputError

DTYPE_BYTES = {"fp32": 4, "bf16": 2, "fp16": 2, "fp8": 1}


@dataclass(frozen=True)
class ModelSpec:
    """Shape of a decoder-only transformer (``experts = 0`` means a dense MLP)."""

    name: str
    layers: int
    hidden: int
    heads: int
    kv_heads: int
    ffn: int
    vocab: int
    seq: int
    gated_mlp: bool
    experts: int = 0
    top_k: int = 2

    def __post_init__(self) -> None:
        for key in ("layers", "hidden", "heads", "kv_heads", "ffn", "vocab", "seq"):
            if getattr(self, key) < 1:
                raise InputError(f"{key} must be >= 1, got {getattr(self, key)}", where=f"--{key.replace('_', '-')}")
        if self.hidden % self.heads:
            raise InputError(f"hidden {self.hidden} is not divisible by heads {self.heads}", where="--heads")
        if self.heads % self.kv_heads:
            raise InputError(f"heads {self.heads} is not divisible by kv heads {self.kv_heads}", where="--heads")
        if self.experts < 0 or (self.experts and not 1 <= self.top_k <= self.experts):
            raise InputError(
                f"need 0 experts or 1 <= top-k ({self.top_k}) <= experts ({self.experts})", where="--experts"
            )

    @property
    def moe(self) -> bool:
        return self.experts > 0

    @property
    def mlp_mats(self) -> int:
        return 3 if self.gated_mlp else 2

    @property
    def qkv_out(self) -> int:
        """Output width of the fused QKV projection (grouped-query attention shrinks K and V)."""
        return self.hidden + 2 * self.kv_heads * (self.hidden // self.heads)

    # -- FLOPs (forward, t tokens) ---------------------------------------------------------------
    def attn_flops(self, tokens: int) -> int:
        h = self.hidden
        return 2 * tokens * h * self.qkv_out + 4 * tokens * self.seq * h + 2 * tokens * h * h

    def mlp_flops(self, tokens: int) -> int:
        dense = 2 * self.mlp_mats * tokens * self.hidden * self.ffn
        if not self.moe:
            return dense
        return 2 * tokens * self.hidden * self.experts + self.top_k * dense

    def head_flops(self, tokens: int) -> int:
        return 2 * tokens * self.hidden * self.vocab

    def step_flops(self, sequences: int) -> int:
        """Analytic training FLOPs of one step over ``sequences`` sequences (forward + 2× backward)."""
        tokens = sequences * self.seq
        return 3 * (self.layers * (self.attn_flops(tokens) + self.mlp_flops(tokens)) + self.head_flops(tokens))

    # -- parameters (matrix weights only) ---------------------------------------------------------
    @property
    def attn_params(self) -> int:
        return self.hidden * self.qkv_out + self.hidden * self.hidden

    @property
    def expert_params(self) -> int:
        """Weights of one expert (or of the dense MLP)."""
        return self.mlp_mats * self.hidden * self.ffn

    @property
    def router_params(self) -> int:
        return self.hidden * self.experts

    @property
    def embedding_params(self) -> int:
        return self.vocab * self.hidden


PRESETS: dict[str, ModelSpec] = {
    m.name: m
    for m in (
        ModelSpec(
            "gpt3-175b",
            layers=96,
            hidden=12288,
            heads=96,
            kv_heads=96,
            ffn=49152,
            vocab=50257,
            seq=2048,
            gated_mlp=False,
        ),
        ModelSpec(
            "gpt3-13b", layers=40, hidden=5120, heads=40, kv_heads=40, ffn=20480, vocab=50257, seq=2048, gated_mlp=False
        ),
        ModelSpec(
            "llama2-70b", layers=80, hidden=8192, heads=64, kv_heads=8, ffn=28672, vocab=32000, seq=4096, gated_mlp=True
        ),
        ModelSpec(
            "llama3-8b", layers=32, hidden=4096, heads=32, kv_heads=8, ffn=14336, vocab=128256, seq=8192, gated_mlp=True
        ),
        ModelSpec(
            "mixtral-8x7b",
            layers=32,
            hidden=4096,
            heads=32,
            kv_heads=8,
            ffn=14336,
            vocab=32000,
            seq=4096,
            gated_mlp=True,
            experts=8,
            top_k=2,
        ),
    )
}


def resolve_model(name: str, **overrides: int | None) -> ModelSpec:
    """A preset with the given dimensions replaced (``None`` keeps the preset's value).

    Changing ``heads`` keeps the preset's grouped-query ratio when it still divides, else falls
    back to plain multi-head attention, so ``--heads`` alone never yields an invalid shape.
    """
    if name not in PRESETS:
        raise InputError(f"unknown model {name!r} (choose from {', '.join(PRESETS)})", where="--model")
    base = PRESETS[name]
    changes: dict[str, Any] = {k: v for k, v in overrides.items() if v is not None}
    if "heads" in changes and "kv_heads" not in changes:
        heads = changes["heads"]
        kv = base.kv_heads * heads // base.heads if (base.kv_heads * heads) % base.heads == 0 else heads
        changes["kv_heads"] = kv if kv >= 1 and heads % kv == 0 else heads
    return replace(base, **changes)
