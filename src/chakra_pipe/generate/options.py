"""The options of ``generate llm`` / ``generate collective`` as data, shared by the CLI, campaigns and search.

Why one table: a campaign config sweeps these options as axes, ``search`` enumerates them and the CLI
parses them; each must mean the same thing and be checked by the same code (``resolve_llm``), so a
layout a planner accepts is one the generator accepts, with the same error when it is not.
"""

from __future__ import annotations

from typing import Any

from ..errors import InputError

# config key -> CLI flag, in the order ``generate llm`` lists them.
MODEL_KEYS = ("layers", "hidden", "heads", "ffn", "vocab", "experts", "seq")
LLM_FLAGS = {
    "model": "--model",
    **{k: f"--{k}" for k in MODEL_KEYS},
    "dp": "--dp",
    "tp": "--tp",
    "pp": "--pp",
    "ep": "--ep",
    "microbatches": "--microbatches",
    "global_batch": "--global-batch",
    "dtype": "--dtype",
    "zero": "--zero",
    "peak_tflops": "--peak-tflops",
    "mem_bw": "--mem-bw",
    "bucket_mb": "--bucket-mb",
    "recompute": "--recompute",
}
COLLECTIVE_FLAGS = {"type": "--type", "npus": "--npus", "size": "--size", "iterations": "--iterations"}


def cli_args(flags: dict[str, str], options: dict[str, Any]) -> list[str]:
    """``--flag value`` for every option present (booleans as bare flags when true)."""
    args: list[str] = []
    for key, flag in flags.items():
        value = options.get(key)
        if value is None or value is False:
            continue
        args += [flag] if value is True else [flag, str(value)]
    return args


def resolve_llm(options: dict[str, Any]) -> tuple[Any, Any]:
    """``(ModelSpec, TrainingSpec)`` from ``generate llm`` options (config keys), checked as the
    generator checks them; raises :class:`InputError` naming the flag."""
    from .layout import Layout
    from .llm import TrainingSpec, check_shape
    from .models import resolve_model

    if "model" not in options:
        raise InputError("a model is required", where="--model")
    try:
        model = resolve_model(options["model"], **{k: options.get(k) for k in MODEL_KEYS})
        pp = int(options.get("pp", 1))
        layout = Layout(
            dp=int(options.get("dp", 1)),
            tp=int(options.get("tp", 1)),
            pp=pp,
            ep=int(options.get("ep", 1)),
            moe=model.moe,
        )
    except TypeError as exc:
        raise InputError(f"bad option value ({exc})") from None
    microbatches = int(options.get("microbatches") or pp)
    global_batch = int(options.get("global_batch") or layout.dp * microbatches)
    spec = TrainingSpec(
        layout,
        microbatches=microbatches,
        global_batch=global_batch,
        dtype=options.get("dtype", "bf16"),
        zero=int(options.get("zero", 0)),
        peak_tflops=float(options.get("peak_tflops", 989.0)),
        mem_bw_gbps=float(options.get("mem_bw", 3350.0)),
        bucket_mb=float(options.get("bucket_mb", 25.0)),
        metadata_node=not options.get("no_metadata_node", False),
        recompute=bool(options.get("recompute", False)),
    )
    check_shape(model, layout)
    return model, spec
