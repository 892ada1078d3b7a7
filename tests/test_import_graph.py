"""The package's layering: no import cycle between its first-level subpackages.

Why: a cycle (``report`` importing ``sweep`` importing ``report``) means neither can be read, tested or
changed alone, and lazy in-function imports only hide it. The graph is read from the source with
``ast`` (every ``import``/``from ... import`` anywhere in a module, lazy ones included), so the test
needs no import side effects. A node is a first-level subpackage (``chakra_pipe/sim``); top-level
modules (``errors``, ``atomic``, ``cli`` ...) are leaves of this graph: they may import anything and
anything may import them, since they are shared helpers or entry points, not layers.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import networkx as nx

PACKAGE = Path(__file__).resolve().parent.parent / "src" / "chakra_pipe"
ROOT = PACKAGE.name


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _is_module(name: str) -> bool:
    path = PACKAGE.parent.joinpath(*name.split("."))
    return path.is_dir() or path.with_suffix(".py").is_file()


def _imported_modules(path: Path) -> set[str]:
    """Absolute dotted names of the ``chakra_pipe`` modules (or packages) ``path`` imports."""
    module = _module_name(path)
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            out.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            out.add(target)
            # ``from . import sweep`` imports a subpackage by name: count the names too.
            out.update(name for alias in node.names if _is_module(name := f"{target}.{alias.name}"))
    return {name for name in out if name == ROOT or name.startswith(ROOT + ".")}


def _layer(module: str) -> str | None:
    """The first-level subpackage ``module`` belongs to; None for a top-level module or the root."""
    parts = module.split(".")
    if len(parts) < 2:
        return None
    if (PACKAGE / parts[1]).is_dir():
        return parts[1]
    return None


def subpackage_graph() -> nx.DiGraph:
    """Edge ``a -> b`` with the modules that make it, when a module of ``a`` imports one of ``b``."""
    graph = nx.DiGraph()
    for path in sorted(PACKAGE.rglob("*.py")):
        source = _layer(_module_name(path))
        if source is None:
            continue
        graph.add_node(source)
        for target_module in sorted(_imported_modules(path)):
            target = _layer(target_module)
            if target is None or target == source:
                continue
            if graph.has_edge(source, target):
                graph.edges[source, target]["why"].append(f"{_module_name(path)} -> {target_module}")
            else:
                graph.add_edge(source, target, why=[f"{_module_name(path)} -> {target_module}"])
    return graph


def describe_cycles(graph: nx.DiGraph) -> list[str]:
    """One line per elementary cycle (up to 20), each edge with the first import that makes it."""
    lines = []
    for cycle in nx.simple_cycles(graph):
        hops = []
        for a, b in zip(cycle, cycle[1:] + cycle[:1]):
            why = graph.edges[a, b]["why"]
            more = f" (+{len(why) - 1} more)" if len(why) > 1 else ""
            hops.append(f"{a} -> {b} [{why[0]}{more}]")
        lines.append("; ".join(hops))
        if len(lines) == 20:
            lines.append("...")
            break
    return lines


def test_the_reader_sees_relative_absolute_and_lazy_imports(tmp_path, monkeypatch):
    """The graph builder itself: a cycle hidden in a function body through a relative import is found."""
    pkg = tmp_path / "chakra_pipe"
    for sub in ("a", "b", "c"):
        (pkg / sub).mkdir(parents=True)
        (pkg / sub / "__init__.py").write_text("")
    (pkg / "__init__.py").write_text("")
    (pkg / "errors.py").write_text("from .a import x\n")  # a leaf: never part of a cycle
    (pkg / "a" / "mod.py").write_text("from ..b.mod import y\nfrom .. import errors\n")
    (pkg / "b" / "mod.py").write_text("def f():\n    from chakra_pipe.c import z\n")
    (pkg / "c" / "__init__.py").write_text("from ..a import mod\n")
    monkeypatch.setattr(sys.modules[__name__], "PACKAGE", pkg)
    cycles = describe_cycles(subpackage_graph())
    assert len(cycles) == 1, cycles
    assert "a -> b [chakra_pipe.a.mod -> chakra_pipe.b.mod]" in cycles[0]
    assert "b -> c [chakra_pipe.b.mod -> chakra_pipe.c" in cycles[0]
    assert "c -> a [chakra_pipe.c -> chakra_pipe.a" in cycles[0]
    (pkg / "c" / "__init__.py").write_text("")
    assert describe_cycles(subpackage_graph()) == []


def test_subpackages_import_each_other_without_cycles():
    graph = subpackage_graph()
    assert {"et", "sim", "validate", "replay"} <= set(graph.nodes), sorted(graph.nodes)
    cycles = describe_cycles(graph)
    assert not cycles, "import cycles between subpackages:\n" + "\n".join(cycles)


def test_et_is_the_bottom_layer():
    """The trace format is read by every stage and must depend on none of them (issue #13)."""
    graph = subpackage_graph()
    uses = {b: graph.edges["et", b]["why"] for b in graph.successors("et")}
    assert not uses, f"chakra_pipe.et imports other subpackages: {uses}"
