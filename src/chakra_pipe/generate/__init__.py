"""Synthetic Chakra workloads: ASTRA-sim-style collective microbenchmarks and LLM training steps.

* :mod:`.collective` — one collective per rank, byte-identical to ASTRA-sim's shipped examples.
* :mod:`.models` / :mod:`.layout` / :mod:`.llm` — Megatron-style TP × DP × PP (+ EP) training steps
  with exact FLOP accounting, process groups and matched pipeline send/recv.
* :mod:`chakra_pipe.convert.text` — ASTRA-sim 1.0 text workloads (lives with the converters).

Names are resolved lazily so ``chakra-pipe --help`` does not import protobuf or numpy through here.
"""

from __future__ import annotations

from ..lazy import lazy_getattr

_EXPORTS = {
    "COLLECTIVES": "collective",
    "CollectiveSpec": "collective",
    "generate_collective": "collective",
    "Layout": "layout",
    "GeneratedSet": "llm",
    "TrainingSpec": "llm",
    "generate_llm": "llm",
    "PRESETS": "models",
    "ModelSpec": "models",
    "resolve_model": "models",
    "parse_size": "sizes",
    "size_label": "sizes",
}
__all__ = sorted(_EXPORTS)

__getattr__ = lazy_getattr(__name__, _EXPORTS)
