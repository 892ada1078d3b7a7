"""Simulate one layout with the campaign's own generator and simulator, without writing rank files.

Why in memory: a search simulates dozens of layouts of thousands of ranks; the generator's rank bytes
are decoded straight into trace graphs (the same bytes ``generate llm`` would write, so the same
simulation), and nothing touches the disk unless the caller keeps a layout's files.

Why symmetric: the generated step repeats one program per stage on every replica, so where
:func:`chakra_pipe.sim.symmetric.symmetry_problem` finds the run exact only the representatives are
generated and simulated (a 131,072-rank step costs ``pp·ep`` ranks); otherwise the full rank set runs
on the full engine and the reason is logged.
"""

from __future__ import annotations

import logging
from typing import Any

from ..et.graph import graph_from_bytes
from ..et.traceset import TraceSet
from ..generate.llm import TrainingSpec, build_templates, rank_bytes
from ..generate.models import ModelSpec
from ..sweep.grid import Point
from ..sweep.shard import hardware_config, metrics

log = logging.getLogger(__name__)


def layout_traces(model: ModelSpec, spec: TrainingSpec, name: str) -> TraceSet:
    """The rank set ``generate llm`` would write for this layout, decoded in memory (named ``name``)."""
    header, templates, _ = build_templates(model, spec)
    layout = spec.layout
    ranks = [graph_from_bytes(rank_bytes(header, templates, spec, r), f"{name}.{r}.et") for r in range(layout.world)]
    groups: dict[int, list[int]] = {int(k): v for k, v in layout.comm_groups().items()}
    return TraceSet(prefix=name, files=[], ranks=ranks, comm_groups=groups)


def simulate_layout(model: ModelSpec, spec: TrainingSpec, hw: Any, name: str, symmetric: bool = True) -> tuple[Any, str]:
    """The simulation of this layout on ``hw`` and how it ran (``"symmetric: …"`` or ``"full engine: …"``).

    ``symmetric=False`` forces the full engine (tests compare the two).
    """
    from ..sim import simulate
    from ..sim.symmetric import RankSymmetry, simulate_symmetric, symmetry_problem

    layout = spec.layout
    why = "symmetry off"
    if symmetric:
        sym = RankSymmetry(layout.tp, layout.dp, layout.pp, layout.ep)
        groups = {int(k): v for k, v in layout.comm_groups().items()}
        problem = symmetry_problem(sym, groups, hw)
        if problem is None:
            header, templates, _ = build_templates(model, spec)
            graphs = {r: graph_from_bytes(rank_bytes(header, templates, spec, r), f"{name}.{r}.et") for r in sym.reps()}
            how = f"symmetric: {len(graphs)} of {layout.world} ranks simulated"
            log.info("%s: %s", name, how)
            return simulate_symmetric(graphs, sym, groups, hw), how
        why = f"not symmetric ({problem})"
        log.warning("%s: full engine: %s", name, why)
    return simulate(layout_traces(model, spec, name), hw), f"full engine: {why}"


def simulate_point(traces: TraceSet, point: Point) -> dict[str, int]:
    """The campaign's per-point metrics (step time of the slowest rank and its breakdown)."""
    from ..sim import simulate

    result: Any = simulate(traces, hardware_config(point, f"point {point.id}"))
    return metrics(result)


def evaluate_layout(model: ModelSpec, spec: TrainingSpec, point: Point, name: str) -> tuple[dict[str, int], str]:
    """:func:`simulate_point`'s metrics for a generated layout, symmetric where exact, and how it ran."""
    result, how = simulate_layout(model, spec, hardware_config(point, f"point {point.id}"), name)
    return metrics(result), how
