"""Simulate one layout with the campaign's own generator and simulator, without writing rank files.

Why in memory: a search simulates dozens of layouts of thousands of ranks; the generator's rank bytes
are decoded straight into trace graphs (the same bytes ``generate llm`` would write, so the same
simulation), and nothing touches the disk unless the caller keeps a layout's files.
"""

from __future__ import annotations

from typing import Any

from ..et.graph import graph_from_bytes
from ..et.traceset import TraceSet
from ..generate.llm import TrainingSpec, build_templates, rank_bytes
from ..generate.models import ModelSpec
from ..results.metrics import metrics
from ..sweep.grid import Point
from ..sweep.shard import hardware_config


def layout_traces(model: ModelSpec, spec: TrainingSpec, name: str) -> TraceSet:
    """The rank set ``generate llm`` would write for this layout, decoded in memory (named ``name``)."""
    header, templates, _ = build_templates(model, spec)
    layout = spec.layout
    ranks = [graph_from_bytes(rank_bytes(header, templates, spec, r), f"{name}.{r}.et") for r in range(layout.world)]
    groups: dict[int, list[int]] = {int(k): v for k, v in layout.comm_groups().items()}
    return TraceSet(prefix=name, files=[], ranks=ranks, comm_groups=groups)


def simulate_point(traces: TraceSet, point: Point) -> dict[str, int]:
    """The campaign's per-point metrics (step time of the slowest rank and its breakdown)."""
    from ..sim import simulate

    result: Any = simulate(traces, hardware_config(point, f"point {point.id}"))
    return metrics(result)
