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

import itertools
from abc import ABC, abstractmethod
from typing import Any

from ..console import logger
from ..et.graph import graph_from_bytes
from ..et.traceset import COMM_GROUPS_SUFFIX, TraceSet, comm_groups_text, named_sha256
from ..generate.limits import check_full_engine
from ..generate.llm import TrainingSpec, build_templates, rank_bytes
from ..generate.models import ModelSpec
from ..results.metrics import metrics
from .grid import Point
from .shard import hardware_config

log = logger(__name__)


class InMemorySet(ABC):
    """A rank set held as the bytes its files would hold (``{name}.{r}.et`` for ``world`` ranks, plus
    the comm-group file when ``groups_json`` is set): decoded once for every point that needs all
    ranks, and hashed as :func:`chakra_pipe.et.traceset.files_sha256` hashes the files. Subclasses
    give ``rank_bytes``."""

    name: str
    world: int
    groups_json: dict[str, list[int]] | None = None
    _traces: TraceSet | None = None

    @abstractmethod
    def rank_bytes(self, rank: int) -> bytes:
        """Rank ``rank``'s trace as its ``.et`` file would hold it."""

    def graph(self, rank: int) -> Any:
        return graph_from_bytes(self.rank_bytes(rank), f"{self.name}.{rank}.et")

    def traces(self) -> TraceSet:
        if self._traces is None:
            groups = None if self.groups_json is None else {int(k): v for k, v in self.groups_json.items()}
            ranks = [self.graph(r) for r in range(self.world)]
            self._traces = TraceSet(prefix=self.name, files=[], ranks=ranks, comm_groups=groups)
        return self._traces

    def sha256(self) -> str:
        """The digest ``TraceSet.sha256`` gives this set's files, computed without writing them."""
        files = ((f"{self.name}.{r}.et", [self.rank_bytes(r)]) for r in range(self.world))
        if self.groups_json is None:
            return named_sha256(files)
        groups = (f"{self.name}{COMM_GROUPS_SUFFIX}", [comm_groups_text(self.groups_json).encode()])
        return named_sha256(itertools.chain(files, [groups]))


class GeneratedLayout(InMemorySet):
    """One layout's step, generated at most once however many hardware points simulate it.

    The representatives' graphs (symmetric runs) and the full rank set (fall-backs) are built on
    first use and kept, so a search over several platforms decodes each layout once.
    """

    def __init__(self, model: ModelSpec, spec: TrainingSpec, name: str):
        from ..sim.symmetric import RankSymmetry

        self.model, self.spec, self.name = model, spec, name
        layout = spec.layout
        self.symmetry = RankSymmetry(layout.tp, layout.dp, layout.pp, layout.ep)
        self.world = layout.world
        self.groups_json = layout.comm_groups()
        self.groups = {int(k): v for k, v in self.groups_json.items()}
        self._graphs: dict[int, Any] = {}  # rank -> graph, the representatives generated so far
        self._templates: tuple[bytes, list] | None = None

    def rank_bytes(self, rank: int) -> bytes:
        """Rank ``rank``'s ``.et`` content, as ``generate llm`` writes it (templates built once)."""
        if self._templates is None:
            header, templates, _ = build_templates(self.model, self.spec)
            self._templates = (header, templates)
        header, templates = self._templates
        return rank_bytes(header, templates, self.spec, rank)

    def representatives(self, symmetry: Any = None) -> dict[int, Any]:
        """The graphs of ``symmetry``'s representatives (default: the layout's own symmetry; a
        congestion-aware network may need more, ``sim.symmetric.fit``), each generated once."""
        reps = (symmetry or self.symmetry).reps()
        for r in reps:
            if r not in self._graphs:
                self._graphs[r] = self.graph(r)
        return {r: self._graphs[r] for r in reps}

    def simulate(self, hw: Any, symmetric: bool = True) -> tuple[Any, str]:
        """The simulation on ``hw`` and how it ran (``"symmetric: …"`` or ``"full engine: …"``).

        ``symmetric=False`` forces the full engine (tests compare the two).
        """
        from ..sim import simulate
        from ..sim.simulate import clocked
        from ..sim.symmetric import SymmetryDeclined, fit, simulate_symmetric, symmetry_problem

        why = "symmetry off"
        if symmetric:
            symmetry = fit(self.symmetry, hw)
            problem = symmetry_problem(symmetry, self.groups, hw)
            if problem is None:
                graphs = self.representatives(symmetry)
                how = f"symmetric: {len(graphs)} of {self.spec.layout.world} ranks simulated"
                try:
                    result = clocked(lambda: simulate_symmetric(graphs, symmetry, self.groups, hw), hw)
                    log.info("%s: %s", self.name, how)
                    return result, how
                except SymmetryDeclined as declined:
                    problem = f"declined: {declined}"
            why = f"not symmetric ({problem})"
            log.warning("%s: full engine: %s", self.name, why)
        check_full_engine(self.world, why, self.name)
        return simulate(self.traces(), hw, symmetric=False), f"full engine: {why}"

    def evaluate(self, point: Point) -> tuple[dict[str, int], str]:
        """A campaign shard's metrics for this layout on a grid point (symmetric where exact), and how it ran."""
        result, how = self.simulate(hardware_config(point, f"point {point.id}"))
        return metrics(result), how


def simulate_layout(
    model: ModelSpec, spec: TrainingSpec, hw: Any, name: str, symmetric: bool = True
) -> tuple[Any, str]:
    """:meth:`GeneratedLayout.simulate` of a layout simulated once."""
    return GeneratedLayout(model, spec, name).simulate(hw, symmetric)
