"""Graph export (``chakra-pipe visualize``) in the formats of Chakra's visualizer.

``.dot``: a Graphviz digraph, one record-shaped node per Chakra node (graph node name = id, label =
node name), edges parent→child, data deps with the normal arrowhead and ctrl deps with ``tee``.
``.graphml``: a directed graph with node attributes ``label``, ``type`` (Chakra node type),
``duration_micros`` and, where the node has one, ``comm_size`` (bytes), and edge attribute
``dependency`` = ``data`` or ``control`` (a control edge overrides a data edge between the same pair,
as upstream). ``.pdf``: the dot graph rendered by Graphviz's ``dot`` when it is on PATH (upstream's
visualizer does the same through the graphviz package); without it, a clear error.
Only edges between nodes of the file are drawn; dangling ids are the validator's business.
Dot is written by hand so there is no Graphviz dependency for .dot and .graphml.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path
from xml.sax.saxutils import escape

import numpy as np

from ..atomic import atomic_open
from ..errors import InputError
from ..et import schema
from ..et.attrs import INT_KINDS, KIND_NUMBER
from ..et.graph import TraceGraph, load_graph

FORMATS = (".dot", ".graphml", ".pdf")
DOT_TIMEOUT_S = 600
_RECORD_SPECIALS = set("{}()<>[]|&-")  # escaped in record labels, as Chakra's visualizer does


def output_format(path: str | os.PathLike) -> str:
    """The output format from the file extension; a clear error for anything else."""
    ext = Path(path).suffix.lower()
    if ext not in FORMATS:
        raise InputError(
            f"unsupported output extension {ext or '(none)'!r}; use .dot, .graphml or .pdf", file=str(path)
        )
    if ext == ".pdf" and shutil.which("dot") is None:
        raise InputError(
            "writing PDF needs Graphviz's `dot` on PATH (e.g. apt-get install graphviz); or write .dot / .graphml",
            file=str(path),
        )
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


_XML_INVALID = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]")


def _xml_text(text: str) -> str:
    """Text safe for XML 1.0 content and attributes (characters XML forbids become U+FFFD)."""
    return escape(_XML_INVALID.sub("\ufffd", text), {'"': "&quot;"})


def unique_edges(g: TraceGraph) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(parent, child, is_control)`` once per (parent, child) pair; control wins over data."""
    parts = []
    for which, control in (("data", False), ("ctrl", True)):
        ptr, parent = g.dep_indices(which)
        child = np.repeat(np.arange(len(g), dtype=np.int64), np.diff(ptr))
        keep = parent >= 0
        parts.append((parent[keep], child[keep], np.full(int(keep.sum()), control)))
    parent, child, control = (np.concatenate(x) for x in zip(*parts))  # type: ignore[assignment]
    key = parent * max(len(g), 1) + child
    # Last occurrence of each pair (ctrl edges come after data edges), then stable child order.
    _, last = np.unique(key[::-1], return_index=True)
    pick = np.sort(len(key) - 1 - last)
    return parent[pick], child[pick], control[pick]  # type: ignore[index]


def write_graphml(g: TraceGraph, path: str | os.PathLike) -> None:
    """Stream GraphML (networkx's writer builds the whole XML tree: 57 s / 2.7 GB at 500k nodes)."""
    ids = [str(i) for i in g.ids.tolist()]
    types = [schema.NODE_TYPE_NAMES.get(t, str(t)) for t in g.types.tolist()]
    durations = g.duration_micros.tolist()
    has_size = np.isin(g.attr_kind["comm_size"], [KIND_NUMBER[k] for k in INT_KINDS]).tolist()
    sizes = g.attr_value["comm_size"].tolist()
    with atomic_open(path, "w", gzip_output=False) as f:
        f.write(
            '<?xml version="1.0" encoding="utf-8"?>\n'
            '<graphml xmlns="http://graphml.graphdrawing.org/xmlns">\n'
            '  <key id="label" for="node" attr.name="label" attr.type="string"/>\n'
            '  <key id="type" for="node" attr.name="type" attr.type="string"/>\n'
            '  <key id="duration_micros" for="node" attr.name="duration_micros" attr.type="long"/>\n'
            '  <key id="comm_size" for="node" attr.name="comm_size" attr.type="long"/>\n'
            '  <key id="dependency" for="edge" attr.name="dependency" attr.type="string"/>\n'
            '  <graph edgedefault="directed">\n'
        )
        for i, node_id in enumerate(ids):
            size = f'<data key="comm_size">{sizes[i]}</data>' if has_size[i] else ""
            f.write(
                f'    <node id="{node_id}"><data key="label">{_xml_text(g.name(i))}</data>'
                f'<data key="type">{types[i]}</data><data key="duration_micros">{durations[i]}</data>'
                f"{size}</node>\n"
            )
        parent, child, control = unique_edges(g)
        for p, c, ctl in zip(parent.tolist(), child.tolist(), control.tolist()):
            kind = "control" if ctl else "data"
            f.write(f'    <edge source="{ids[p]}" target="{ids[c]}"><data key="dependency">{kind}</data></edge>\n')
        f.write("  </graph>\n</graphml>\n")


def write_pdf(g: TraceGraph, path: str | os.PathLike) -> None:
    """The dot graph rendered by Graphviz; its errors (or a timeout) are input errors naming the file."""
    with tempfile.TemporaryDirectory(prefix="chakra-pipe-dot-") as tmp:
        src = Path(tmp) / "graph.dot"
        write_dot(g, src)
        try:
            proc = subprocess.run(["dot", "-Tpdf", str(src)], capture_output=True, timeout=DOT_TIMEOUT_S, check=False)
        except subprocess.TimeoutExpired:
            raise InputError(
                f"Graphviz dot took over {DOT_TIMEOUT_S} s; write .dot or .graphml for a graph this large",
                file=str(path),
            ) from None
    if proc.returncode != 0 or not proc.stdout.startswith(b"%PDF"):
        err = proc.stderr.decode("utf-8", "replace").strip().splitlines()
        raise InputError(
            f"Graphviz dot failed (exit {proc.returncode}): {err[-1] if err else 'no output'}", file=str(path)
        )
    with atomic_open(path, "wb", gzip_output=False) as f:
        f.write(proc.stdout)


def visualize(trace: str | os.PathLike, out: str | os.PathLike) -> None:
    """Write ``trace`` as ``out`` (.dot, .graphml or .pdf, chosen by extension) atomically."""
    ext = output_format(out)
    g = load_graph(trace)
    {".dot": write_dot, ".graphml": write_graphml, ".pdf": write_pdf}[ext](g, out)
