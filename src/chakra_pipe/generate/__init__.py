"""Synthetic Chakra workloads: ASTRA-sim-style collective microbenchmarks and LLM training steps.

* :mod:`.collective` — one collective per rank, byte-identical to ASTRA-sim's shipped examples.
* :mod:`.models` / :mod:`.layout` / :mod:`.llm` — Megatron-style TP × DP × PP (+ EP) training steps
  with exact FLOP accounting, process groups and matched pipeline send/recv.
* :mod:`chakra_pipe.convert.text` — ASTRA-sim 1.0 text workloads (lives with the converters).
"""

from .collective import COLLECTIVES, CollectiveSpec, generate_collective
from .layout import Layout
from .llm import GeneratedSet, TrainingSpec, generate_llm
from .models import PRESETS, ModelSpec, resolve_model
from .sizes import parse_size, size_label

__all__ = [
    "COLLECTIVES", "CollectiveSpec", "GeneratedSet", "Layout", "ModelSpec", "PRESETS", "TrainingSpec",
    "generate_collective", "generate_llm", "parse_size", "resolve_model", "size_label",
]
