"""Per-GPU training memory of a generated layout: model states plus 1F1B activations (Korthikanti et al. 2022).

Why a model and not a measurement: ``search`` must refuse layouts that cannot run before spending a
simulation on them, and the figures must describe the *same* step the generator writes (same parameter
split, same microbatch size, same schedule). Every byte count below is documented in the README
("Memory model") with the formulas; the symbols are ``s`` sequence length, ``b`` microbatch size
(sequences), ``h`` hidden size, ``a`` heads, ``V`` vocabulary, ``t`` tp, ``p`` pp, ``M`` microbatches,
``B`` bytes of the training dtype.

* Parameters held by a GPU of stage ``i``: its layers' matrices split over ``t`` (MoE: the router plus
  ``experts/ep`` experts), plus the embedding on the first stage and the LM head on the last (untied,
  as the generator reduces both), all ``/ t``.
* Weights ``B·Ψ``; gradients ``B·Ψ``; Adam states ``K·Ψ`` with ``K = 12`` (fp32 master copy, momentum,
  variance) when ``B < 4`` and ``K = 8`` in fp32. ZeRO-1 divides the Adam states over the group that
  reduces them (``dp`` for dense parameters, ``dp/ep`` for experts).
* Activations of one layer and one microbatch, tensor parallel without sequence parallelism (the
  generator's Megatron ``f``/``g`` all-reduces): ``s·b·h·(10 + 24/t + 5·a·s/(h·t))`` bytes for 16-bit
  activations (Korthikanti Table 2, ``t = 1`` gives ``34 + 5·a·s/h``). Full recomputation keeps only each
  layer's input, ``2·s·b·h``, plus one layer's full activations while it is recomputed.
* 1F1B keeps ``min(p - i, M)`` microbatches in flight on stage ``i``. Stage 0 also keeps the embedding
  dropout mask (``s·b·h``) per microbatch in flight; the last stage the fp32 logits for the loss
  (``4·s·b·V/t``) of its one microbatch in flight.
* Activations are 16-bit for bf16/fp16/fp8 (fp8 GEMMs keep 16-bit activations) and scaled ×2 for fp32.

The peak GPU is the stage with the largest total.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..generate.llm import TrainingSpec, stage_layers
from ..generate.models import ModelSpec

GIB = 1 << 30


@dataclass(frozen=True)
class Memory:
    """Bytes on the fullest GPU (``stage`` is its pipeline stage)."""

    stage: int
    weights: int
    gradients: int
    optimizer: int
    activations: int

    @property
    def total(self) -> int:
        return self.weights + self.gradients + self.optimizer + self.activations

    @property
    def total_gib(self) -> float:
        return self.total / GIB


def layer_activation_bytes(model: ModelSpec, spec: TrainingSpec) -> int:
    """One layer, one microbatch, no recomputation: ``s·b·h·(10 + 24/t + 5·a·s/(h·t))`` (16-bit), exact.

    Multiplied out as ``s·b·(10·h·t + 24·h + 5·a·s) / t`` so the integer division happens once."""
    s, b, h, a, t = model.seq, spec.micro_batch_size, model.hidden, model.heads, spec.layout.tp
    return _act_scale(spec) * s * b * (10 * h * t + 24 * h + 5 * a * s) // (2 * t)


def _act_scale(spec: TrainingSpec) -> int:
    """Twice the activation-byte factor (2 for 16-bit, 4 for fp32), kept integral."""
    return 4 if spec.dtype_bytes == 4 else 2


def stage_params(model: ModelSpec, spec: TrainingSpec, stage: int) -> tuple[int, int]:
    """``(dense, expert)`` parameters held by one GPU of ``stage``."""
    lay = spec.layout
    _, count = stage_layers(model.layers, lay.pp)[stage]
    mlp_dense = model.router_params if model.moe else model.expert_params
    dense = count * (model.attn_params + mlp_dense) // lay.tp
    expert = count * (model.experts // lay.ep) * model.expert_params // lay.tp if model.moe else 0
    dense += model.embedding_params // lay.tp * ((stage == 0) + (stage == lay.pp - 1))
    return dense, expert


def stage_memory(model: ModelSpec, spec: TrainingSpec, stage: int, recompute: bool) -> Memory:
    lay, nbytes = spec.layout, spec.dtype_bytes
    dense, expert = stage_params(model, spec, stage)
    adam = 12 if nbytes < 4 else 8
    if spec.zero:
        optimizer = adam * dense // lay.dp + adam * expert // (lay.dp // lay.ep)
    else:
        optimizer = adam * (dense + expert)
    _, count = stage_layers(model.layers, lay.pp)[stage]
    inflight = min(lay.pp - stage, spec.microbatches)
    s, b, h = model.seq, spec.micro_batch_size, model.hidden
    layer = layer_activation_bytes(model, spec)
    if recompute:
        act = inflight * count * _act_scale(spec) * s * b * h + layer
    else:
        act = inflight * count * layer
    if stage == 0:
        act += inflight * s * b * h
    if stage == lay.pp - 1:
        act += 4 * s * b * model.vocab // lay.tp
    return Memory(stage, nbytes * (dense + expert), nbytes * (dense + expert), optimizer, act)


def memory_per_gpu(model: ModelSpec, spec: TrainingSpec, recompute: bool | None = None) -> Memory:
    """The fullest GPU's memory (``recompute`` defaults to the spec's own setting)."""
    rc = spec.recompute if recompute is None else recompute
    return max((stage_memory(model, spec, i, rc) for i in range(spec.layout.pp)), key=lambda m: (m.total, -m.stage))
