"""Keep the rank files of a search's best layouts, so they can be inspected, validated or replayed."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..generate.llm import generate_llm
from ..generate.options import resolve_llm


def keep_top(rows: list[dict[str, Any]], spec: Any, folder: Path, k: int) -> list[Path]:
    """Write ``folder/<layout>/<layout>.<rank>.et`` for the ``k`` best layouts of each point (once each)."""
    layouts = dict.fromkeys(r["layout"] for r in rows if r.get("rank") is not None and r["rank"] <= k)
    base = {"model": spec.model, **spec.options}
    prefixes = []
    for label in layouts:
        r = next(r for r in rows if r["layout"] == label)
        opts = {
            **base,
            **{key: r[key] for key in ("dp", "tp", "pp", "ep", "microbatches", "zero", "recompute")},
            "global_batch": spec.global_batch,
        }
        prefix = folder / label / label
        prefix.parent.mkdir(parents=True, exist_ok=True)
        generate_llm(*resolve_llm(opts), prefix)
        prefixes.append(prefix)
    return prefixes
