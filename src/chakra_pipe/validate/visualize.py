"""Graph export (``chakra-pipe visualize``) in the formats of Chakra's visualizer.

``.dot``: a Graphviz digraph, one record-shaped node per Chakra node (graph node name = id, label =
node name), edges parent→child, data deps with the normal arrowhead and ctrl deps with ``tee``.
``.graphml``: a directed graph with node attribute ``label`` and edge attribute ``dependency`` =
``data`` or ``control`` (a control edge overrides a data edge between the same pair, as upstream).
Only edges between nodes of the file are drawn; dangling ids are the validator's business.
Dot is written by hand so there is no Graphviz dependency; render with ``dot -Tpdf``.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from ..atomic import atomic_open
from ..errors import InputError
from ..et.graph import TraceGraph, load_graph

FORMATS = (".dot", ".graphml")
_RECORD_SPECIALS = set("{}()<>[]|&-")  # escaped in record labels, as Chakra's visualizer does


def output_format(path: str | os.PathLike) -> str:
    """The output format from the file extension; a clear error for anything else."""
    ext = Path(path).suffix.lower()
    if ext not in FORMATS:
        hint = " (render a .dot file with Graphviz: dot -Tpdf)" if ext == ".pdf" else ""
        raise InputError(f"unsupported output extension {ext or '(none)'!r}; use .dot or .graphml{hint}",
                         file=str(path))
    return ext


def edges(g: TraceGraph) -> Iterator[tuple[int, int, str]]:
    """``(parent index, child index, "data"|"control")`` for every resolvable dependency, by child."""
    for which, kind in (("data", "data"), ("ctrl", "control")):
        ptr, parent = g.dep_indices(which)
        child = np.repeat(np.arange(len(g), dtype=np.int64), np.diff(ptr))
        keep = parent >= 0
        for p, c in zip(parent[keep].tolist(), child[keep].tolist()):
            yield p, c, kind


def dot_label(name: str) -> str:
    """A node name as a quoted-string record label: quote/backslash/newline escaped, record specials too."""
    out = []
    for ch in name:
        if ch in '\\"':
            out.append("\\" + ch)
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\r":
            continue
        elif ch in _RECORD_SPECIALS:
            out.append("\\" + ch)
        else:
            out.append(ch)
    return "".join(out)


def write_dot(g: TraceGraph, path: str | os.PathLike) -> None:
    with atomic_open(path, "w", gzip_output=False) as f:
        f.write("digraph chakra {\n  node [shape=record];\n")
        ids = g.ids.tolist()
        for i, node_id in enumerate(ids):
            f.write(f'  "{node_id}" [label="{dot_label(g.name(i))}"];\n')
        for p, c, kind in edges(g):
            style = "" if kind == "data" else " [arrowhead=tee]"
            f.write(f'  "{ids[p]}" -> "{ids[c]}"{style};\n')
        f.write("}\n")


def write_graphml(g: TraceGraph, path: str | os.PathLike) -> None:
    import networkx as nx

    graph = nx.DiGraph()
    ids = g.ids.tolist()
    for i, node_id in enumerate(ids):
        graph.add_node(str(node_id), label=g.name(i))
    for p, c, kind in edges(g):  # data edges first, so a control edge on the same pair wins
        graph.add_edge(str(ids[p]), str(ids[c]), dependency=kind)
    with atomic_open(path, "wb", gzip_output=False) as f:
        nx.write_graphml(graph, f, encoding="utf-8")


def visualize(trace: str | os.PathLike, out: str | os.PathLike) -> None:
    """Write ``trace`` as ``out`` (.dot or .graphml, chosen by extension) atomically."""
    ext = output_format(out)
    g = load_graph(trace)
    (write_dot if ext == ".dot" else write_graphml)(g, out)
