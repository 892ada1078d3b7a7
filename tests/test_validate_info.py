"""``info`` statistics: the fixture figures of chakra-format.md §8.1 and hand-computed small cases."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from chakra_pipe import cli
from chakra_pipe.et import schema, set_attr, write_trace
from chakra_pipe.validate.info import trace_info


@pytest.fixture(scope="session")
def chakra0_info(fixtures_dir: Path) -> dict:
    path = fixtures_dir / "chakra" / "chakra.0.et"
    if not path.is_file():
        pytest.skip(f"fixture {path} not found")
    (info,) = trace_info(path)
    return info


def test_fixture_statistics_match_the_spec(chakra0_info):
    info = chakra0_info
    assert info["nodes"] == 3664
    assert info["nodes_by_type"] == {"COMP_NODE": 3643, "COMM_COLL_NODE": 21}
    assert info["deps"]["data"] == 181_878 and info["deps"]["dangling_data"] == 0
    assert info["roots"] == 5 and info["sinks"] == 1276
    assert info["max_in_degree"] == 270 and info["max_out_degree"] == 569
    assert info["forward_references"] == 53
    assert info["duration_micros_sum"] == 381_795
    assert info["critical_path"]["data"]["micros"] == 46_140
    assert info["critical_path"]["data_ctrl"] is None  # the legacy ctrl links form cycles with data deps
    # ctrl: one per node, 1,277 dangling, most frequent targets as §8.1 lists them
    assert info["deps"]["ctrl"] == 3664 and info["deps"]["dangling_ctrl"] == 1277
    assert info["deps"]["top_dangling_ctrl"][:5] == [[3, 851], [3198, 161], [6348, 12], [3210, 7], [2, 5]]


def test_fixture_comm_bytes(chakra0_info):
    """§8.1: five all-reduce kernels and two broadcasts (212,480 and 424 bytes)."""
    comm = chakra0_info["comm_bytes"]
    assert comm["ALL_REDUCE"] == 8_196_000 + 31_502_336 + 26_255_360 + 26_550_272 + 9_724_160
    assert comm["BROADCAST"] == 212_480 + 424


def _node(i, type_=schema.COMP_NODE, data=(), ctrl=(), dur=0, **attrs):
    n = schema.Node(id=i, name=f"n{i}", type=type_, data_deps=list(data), ctrl_deps=list(ctrl), duration_micros=dur)
    for k, v in attrs.items():
        set_attr(n, k, v)
    return n


def test_small_graph_by_hand(tmp_path):
    #   1(3) -> 2(4) -> 4(5)      data chain: 12 µs
    #   3(10)                      alone: 10 µs
    #   5(1) ctrl-after 3, data parent 9 (forward reference), 9(2) root
    path = tmp_path / "g.et"
    write_trace(
        path,
        schema.GlobalMetadata(version="1.0.0"),
        [
            _node(1, dur=3),
            _node(2, data=[1], dur=4),
            _node(3, dur=10),
            _node(4, data=[2], dur=5),
            _node(5, data=[9], ctrl=[3, 42], dur=1),
            _node(9, dur=2),
            _node(10, schema.COMM_COLL_NODE, comm_type=schema.ALL_GATHER, comm_size=100),
            _node(11, schema.COMM_COLL_NODE, comm_type=schema.ALL_GATHER, comm_size=50),
            _node(12, schema.COMM_SEND_NODE, comm_size=7),
        ],
    )
    (info,) = trace_info(path)
    assert info["nodes"] == 9 and info["nodes_by_type"] == {"COMP_NODE": 6, "COMM_SEND_NODE": 1, "COMM_COLL_NODE": 2}
    assert info["comm_bytes"] == {"ALL_GATHER": 150, "SEND": 7}
    assert info["roots"] == 6  # 1, 3, 9, 10, 11, 12 have no data deps
    assert info["sinks"] == 6  # 3, 4, 5, 10, 11, 12 have no data children
    assert info["deps"] == {
        "data": 3,
        "ctrl": 2,
        "dangling_data": 0,
        "dangling_ctrl": 1,
        "top_dangling_ctrl": [[42, 1]],
        "top_dangling_data": [],
    }
    assert info["forward_references"] == 1
    assert info["max_in_degree"] == 1 and info["max_out_degree"] == 1
    assert info["duration_micros_sum"] == 25
    assert info["critical_path"]["data"] == {"micros": 12, "nodes": 3, "from": 1, "to": 4}
    assert info["critical_path"]["data_ctrl"] == info["critical_path"]["data"]


def test_critical_path_over_ctrl_deps(tmp_path):
    path = tmp_path / "g.et"
    write_trace(
        path,
        schema.GlobalMetadata(version="1.0.0"),
        [_node(1, dur=10), _node(2, dur=4), _node(3, data=[2], ctrl=[1], dur=5)],
    )
    (info,) = trace_info(path)
    assert info["critical_path"]["data"] == {"micros": 10, "nodes": 1, "from": 1, "to": 1}
    assert info["critical_path"]["data_ctrl"] == {"micros": 15, "nodes": 2, "from": 1, "to": 3}


def test_cyclic_graph_has_no_critical_path(tmp_path):
    path = tmp_path / "g.et"
    write_trace(path, schema.GlobalMetadata(version="1.0.0"), [_node(1, data=[2], dur=1), _node(2, data=[1], dur=1)])
    (info,) = trace_info(path)
    assert info["critical_path"] == {"data": None, "data_ctrl": None}


def test_cli_text_and_json(tmp_path, capsys):
    path = tmp_path / "g.et"
    write_trace(path, schema.GlobalMetadata(version="1.0.0"), [_node(1, dur=3), _node(2, data=[1], dur=4)])
    assert cli.main(["info", str(path)]) == 0
    text = capsys.readouterr().out
    assert "nodes: 2 (COMP_NODE 2)" in text
    assert "critical path: 7 µs (2 nodes, 1 to 2) as simulate issues it" in text
    assert "longest dependency chain: 7 µs (2 nodes, 1 to 2) over data deps" in text
    assert cli.main(["info", str(path), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert [f["nodes"] for f in doc["files"]] == [2] and doc["files"][0]["critical_path"]["data"]["micros"] == 7


def test_cli_rank_set_lists_every_rank(tmp_path, capsys):
    for r in range(3):
        write_trace(tmp_path / f"w.{r}.et", schema.GlobalMetadata(version="1.0.0"), [_node(r + 1)])
    assert cli.main(["info", str(tmp_path / "w"), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert [Path(f["file"]).name for f in doc["files"]] == ["w.0.et", "w.1.et", "w.2.et"]


def test_critical_path_follows_the_simulators_slots_and_overlap(tmp_path):
    # Two independent GPU kernels share the one GPU slot (20 µs, not the 10 µs longest chain); the
    # collective runs beside them on the comm slot instead of adding its 8 µs.
    path = tmp_path / "g.et"
    write_trace(
        path,
        schema.GlobalMetadata(version="1.0.0"),
        [
            _node(1, dur=10),
            _node(2, dur=10),
            _node(3, schema.COMM_COLL_NODE, comm_type=schema.ALL_REDUCE, comm_size=64, dur=8),
        ],
    )
    (info,) = trace_info(path)
    assert info["critical_path"]["data"]["micros"] == 10
    assert info["schedule"] == {"micros": 20, "nodes": 2, "from": 1, "to": 2}


def test_info_says_plainly_when_durations_are_absent(tmp_path, capsys):
    path = tmp_path / "g.et"
    write_trace(path, schema.GlobalMetadata(version="1.0.0"), [_node(1), _node(2, data=[1])])
    assert cli.main(["info", str(path)]) == 0
    text = capsys.readouterr().out
    assert "critical path: none — every duration_micros is 0" in text and "0 µs" not in text
