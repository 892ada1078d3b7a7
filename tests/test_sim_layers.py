"""The simulator's layer contract (src/chakra_pipe/sim/README.md), checked on the imports of its modules.

Calls go workload -> system -> network -> engine; a module that reaches upwards or past its neighbour
breaks the contract even when every number stays right, so the imports are parsed and checked here.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SIM = Path(__file__).resolve().parents[1] / "src" / "chakra_pipe" / "sim"
WORKLOAD = {"workload", "ready", "hardware", "roofline", "memory", "comm", "groups", "custom"}


def _sim_imports(path: Path) -> set[str]:
    """Absolute names (``chakra_pipe.…``) of the chakra_pipe modules ``path`` imports."""
    package = ["chakra_pipe", "sim", *path.relative_to(SIM).parent.parts]
    out = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom):
            base = package[: len(package) - node.level + 1] if node.level else []
            mod = ".".join([*base, *(node.module.split(".") if node.module else [])])
            names = [f"{mod}.{a.name}" for a in node.names] if node.module is None else [mod]
            out.update(n for n in names if n.startswith("chakra_pipe"))
        elif isinstance(node, ast.Import):
            out.update(a.name for a in node.names if a.name.startswith("chakra_pipe"))
    return out


def _modules(sub: str) -> list[Path]:
    return sorted((SIM / sub).glob("*.py"))


@pytest.mark.parametrize("path", _modules("network"), ids=lambda p: p.name)
def test_network_calls_only_the_engine(path: Path) -> None:
    allowed = ("chakra_pipe.sim.network", "chakra_pipe.sim.engine", "chakra_pipe.errors")
    bad = sorted(m for m in _sim_imports(path) if not m.startswith(allowed))
    assert not bad, f"network/{path.name} imports {bad}"


@pytest.mark.parametrize("path", _modules("system"), ids=lambda p: p.name)
def test_system_never_reads_traces_or_workload(path: Path) -> None:
    allowed = ("chakra_pipe.sim.system", "chakra_pipe.sim.config", "chakra_pipe.errors")
    bad = sorted(m for m in _sim_imports(path) if not m.startswith(allowed))
    assert not bad, f"system/{path.name} imports {bad}"


@pytest.mark.parametrize("name", sorted(WORKLOAD))
def test_workload_never_reaches_past_the_system_layer(name: str) -> None:
    banned = ("chakra_pipe.sim.network", "chakra_pipe.sim.engine", "chakra_pipe.sim.simulate")
    bad = sorted(m for m in _sim_imports(SIM / f"{name}.py") if m.startswith(banned))
    assert not bad, f"{name}.py imports {bad}"


def test_the_checker_sees_relative_imports() -> None:
    """Guard against a parser that finds nothing (every test above would pass vacuously)."""
    assert "chakra_pipe.sim.system.sys" in _sim_imports(SIM / "workload.py")
    assert "chakra_pipe.sim.engine" in _sim_imports(SIM / "network" / "common.py")
    assert "chakra_pipe.sim.system.ring_fast" in _sim_imports(SIM / "simulate.py")
