"""``visualize``: dot and GraphML parsed back, edge kinds as Chakra's visualizer draws them."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import networkx as nx
import pytest

from chakra_pipe import cli
from chakra_pipe.et import schema, write_trace
from chakra_pipe.validate.visualize import dot_label

EDGE = re.compile(r'^  "(\d+)" -> "(\d+)"( \[arrowhead=tee\])?;$')
NODE = re.compile(r'^  "(\d+)" \[label="(.*)"\];$')

NAME = 'aten::add_(0) <x> "q" {a|b} & c-d \\ [e]'


@pytest.fixture
def trace(tmp_path: Path) -> Path:
    # data: 1->2, 1->3, 2->3 ; ctrl: 2->3 (same pair as a data edge), 1->4 ; dangling ctrl 99 -> 4
    nodes = [
        schema.Node(id=1, name=NAME, type=schema.COMP_NODE),
        schema.Node(id=2, name="b", type=schema.COMP_NODE, data_deps=[1]),
        schema.Node(id=3, name="c", type=schema.COMP_NODE, data_deps=[1, 2], ctrl_deps=[2]),
        schema.Node(
            id=4,
            name="d",
            type=schema.COMM_COLL_NODE,
            ctrl_deps=[1, 99],
            duration_micros=7,
            attr=[schema.AttributeProto(name="comm_size", int64_val=4096)],
        ),
    ]
    path = tmp_path / "t.et"
    write_trace(path, schema.GlobalMetadata(version="1.0.0"), nodes)
    return path


def parse_dot(text: str) -> tuple[dict[str, str], list[tuple[str, str, str]]]:
    lines = text.splitlines()
    assert lines[0] == "digraph chakra {" and lines[-1] == "}"
    nodes, edges = {}, []
    for line in lines[2:-1]:
        if m := NODE.match(line):
            nodes[m.group(1)] = m.group(2)
        else:
            m = EDGE.match(line)
            assert m, line
            edges.append((m.group(1), m.group(2), "control" if m.group(3) else "data"))
    return nodes, edges


def test_dot_edges_and_arrowheads(trace, tmp_path):
    out = tmp_path / "g.dot"
    assert cli.main(["visualize", str(trace), str(out)]) == 0
    nodes, edges = parse_dot(out.read_text())
    assert set(nodes) == {"1", "2", "3", "4"}
    assert sorted(edges) == [
        ("1", "2", "data"),
        ("1", "3", "data"),
        ("1", "4", "control"),
        ("2", "3", "control"),
        ("2", "3", "data"),
    ]


def test_dot_label_escaping():
    # Chakra's record labels escape {}()<>[]|&- ; a quoted dot string also needs \ and " escaped.
    assert dot_label(NAME) == r"aten::add_\(0\) \<x\> \"q\" \{a\|b\} \& c\-d \\ \[e\]"
    assert dot_label("two\nlines") == r"two\nlines"


def test_graphml_round_trip(trace, tmp_path):
    out = tmp_path / "g.graphml"
    assert cli.main(["visualize", str(trace), str(out)]) == 0
    g = nx.read_graphml(out)
    assert g.is_directed() and set(g.nodes) == {"1", "2", "3", "4"}
    assert g.nodes["1"]["label"] == NAME
    assert (g.nodes["4"]["type"], g.nodes["4"]["duration_micros"], g.nodes["4"]["comm_size"]) == (
        "COMM_COLL_NODE",
        7,
        4096,
    )
    assert g.nodes["1"]["type"] == "COMP_NODE" and "comm_size" not in g.nodes["1"]
    # a control edge overrides the data edge between the same pair, as upstream
    assert {(u, v): d["dependency"] for u, v, d in g.edges(data=True)} == {
        ("1", "2"): "data",
        ("1", "3"): "data",
        ("2", "3"): "control",
        ("1", "4"): "control",
    }


def test_outputs_are_deterministic(trace, tmp_path):
    for ext in ("dot", "graphml"):
        a, b = tmp_path / f"a.{ext}", tmp_path / f"b.{ext}"
        cli.main(["visualize", str(trace), str(a)])
        cli.main(["visualize", str(trace), str(b)])
        assert a.read_bytes() == b.read_bytes()


@pytest.mark.parametrize("name", ["g.png", "g"])
def test_unsupported_extension_is_a_clear_error(trace, tmp_path, capsys, name):
    out = tmp_path / name
    assert cli.main(["visualize", str(trace), str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert str(out) in err and ".dot, .graphml or .pdf" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["t.et"]  # nothing written, no temp files


def test_pdf_without_graphviz_is_a_clear_error(trace, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path / "empty-bin"))
    assert cli.main(["visualize", str(trace), str(tmp_path / "g.pdf")]) == 2
    assert "needs Graphviz's `dot` on PATH" in capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["t.et"]


@pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz dot not installed (apt-get install graphviz)")
def test_pdf_with_graphviz(trace, tmp_path):
    out = tmp_path / "g.pdf"
    assert cli.main(["visualize", "--input_filename", str(trace), "--output_filename", str(out)]) == 0
    assert out.read_bytes().startswith(b"%PDF")


def test_unreadable_trace_leaves_no_output(tmp_path, capsys):
    bad = tmp_path / "bad.et"
    bad.write_bytes(b"\x05\x0a\x01")  # length 5 but 2 bytes left
    assert cli.main(["visualize", str(bad), str(tmp_path / "g.dot")]) == 2
    assert "bad.et: byte 0" in capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.et"]


def test_fixture_edge_counts(fixtures_dir, tmp_path):
    """chakra.0.et: 181,878 data deps; 3,664 ctrl deps of which 1,277 dangle (§8.1) -> 2,387 tee edges."""
    path = fixtures_dir / "chakra" / "chakra.0.et"
    if not path.is_file():
        pytest.skip(f"fixture {path} not found")
    out = tmp_path / "c.dot"
    assert cli.main(["visualize", str(path), str(out)]) == 0
    nodes, edges = parse_dot(out.read_text())
    assert len(nodes) == 3664
    assert sum(1 for e in edges if e[2] == "data") == 181_878
    assert sum(1 for e in edges if e[2] == "control") == 3664 - 1277
