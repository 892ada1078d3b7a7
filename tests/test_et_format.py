"""The Chakra format layer: schema numbers, canonical bytes, round trips, gzip, corrupt input."""

from __future__ import annotations

import gzip
import subprocess
import sys

import pytest

from chakra_pipe.errors import InputError, TraceFormatError
from chakra_pipe.et import attrs, read_trace, schema, write_trace
from chakra_pipe.et.framing import encode_varint, iter_nodes

# Field numbers and types from the published Chakra schema (chakra-format.md §1).
NODE_FIELDS = {
    "id": (1, "uint64"),
    "name": (2, "string"),
    "type": (3, "enum"),
    "ctrl_deps": (4, "uint64"),
    "data_deps": (5, "uint64"),
    "start_time_micros": (6, "uint64"),
    "duration_micros": (7, "uint64"),
    "inputs": (8, "message"),
    "outputs": (9, "message"),
    "attr": (10, "message"),
}
_TYPE_NAMES = {4: "uint64", 9: "string", 14: "enum", 11: "message"}


def run_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "chakra_pipe.cli", *args], capture_output=True, text=True, timeout=120)


def test_schema_matches_published_field_numbers():
    fields = {f.name: (f.number, _TYPE_NAMES[f.type]) for f in schema.Node.DESCRIPTOR.fields}
    assert fields == NODE_FIELDS
    assert [f.name for f in schema.Node.DESCRIPTOR.fields if f.is_repeated] == ["ctrl_deps", "data_deps", "attr"]
    assert {v.name: v.number for v in schema.NodeType.values} == {
        "INVALID_NODE": 0,
        "METADATA_NODE": 1,
        "MEM_LOAD_NODE": 2,
        "MEM_STORE_NODE": 3,
        "COMP_NODE": 4,
        "COMM_SEND_NODE": 5,
        "COMM_RECV_NODE": 6,
        "COMM_COLL_NODE": 7,
    }
    assert [v.number for v in schema.CollectiveCommType.values] == list(range(10))
    oneof = schema.AttributeProto.DESCRIPTOR.oneofs_by_name["value"].fields
    assert [f.number for f in oneof] == list(range(3, 33))
    assert oneof[0].name == "double_val" and oneof[-1].name == "bytes_list"
    assert {f.name: f.number for f in schema.GlobalMetadata.DESCRIPTOR.fields} == {"version": 1, "attr": 2}
    assert {f.name: f.number for f in schema.IOInfo.DESCRIPTOR.fields} == {"values": 1, "shapes": 2, "types": 3}


def test_worked_byte_example_from_spec():
    """chakra-format.md §3.1: rank 0 of the 8-NPU all-reduce microbenchmark, 81 bytes."""
    node = schema.Node(name="all_reduce_8npus_1MB", type=schema.COMM_COLL_NODE)
    attrs.set_attr(node, "is_cpu_op", False)
    attrs.set_attr(node, "comm_type", schema.ALL_REDUCE)
    attrs.set_attr(node, "comm_size", 1_048_576)
    md = schema.GlobalMetadata(version="0.0.4")
    expected = bytes.fromhex(
        "07"
        "0a05" + b"0.0.4".hex() + "48"
        "1214" + b"all_reduce_8npus_1MB".hex() + "1807"
        "520e"
        "0a09" + b"is_cpu_op".hex() + "d80100"
        "520d"
        "0a09" + b"comm_type".hex() + "4800"
        "520f"
        "0a09" + b"comm_size".hex() + "48808040"
    )
    data = encode_varint(len(md.SerializeToString())) + md.SerializeToString()
    data += encode_varint(len(node.SerializeToString())) + node.SerializeToString()
    assert data == expected and len(data) == 81


def test_canonical_kinds_written_and_lenient_read():
    node = schema.Node(id=1)
    for name, value in [
        ("is_cpu_op", True),
        ("num_ops", 10),
        ("tensor_size", 5),
        ("comm_type", 7),
        ("comm_size", 9),
        ("comm_src", 1),
        ("comm_dst", 2),
        ("comm_tag", 3),
        ("comm_priority", 4),
        ("pg_name", "g"),
        ("involved_dim", [True, False]),
    ]:
        attrs.set_attr(node, name, value)
    assert {a.name: a.WhichOneof("value") for a in node.attr} == {
        "is_cpu_op": "bool_val",
        "num_ops": "int64_val",
        "tensor_size": "uint64_val",
        "comm_type": "int64_val",
        "comm_size": "int64_val",
        "comm_src": "int32_val",
        "comm_dst": "int32_val",
        "comm_tag": "int32_val",
        "comm_priority": "int32_val",
        "pg_name": "string_val",
        "involved_dim": "bool_list",
    }
    skewed = schema.Node(id=2)
    attrs.set_attr(skewed, "comm_size", 4096, kind="uint64_val")  # astra-sim #224: written as uint64
    attrs.set_attr(skewed, "comm_src", -3, kind="sint32_val")
    assert attrs.get_int(skewed, "comm_size") == 4096
    assert attrs.get_int(skewed, "comm_src") == -3
    assert attrs.get_int(skewed, "missing", -1) == -1


def test_round_trip_fixture_byte_identical(fixtures_dir, tmp_path):
    src = fixtures_dir / "chakra" / "chakra.0.et"
    md, nodes = read_trace(src)
    assert len(nodes) == 3664
    out = tmp_path / "copy.et"
    assert write_trace(out, md, nodes) == 3664
    assert out.read_bytes() == src.read_bytes()


def test_round_trip_every_microbenchmark(fixtures_dir, tmp_path):
    files = sorted((fixtures_dir / "astra-sim" / "workload").rglob("*.et"))
    assert len(files) == 84
    for f in files:
        md, nodes = read_trace(f)
        write_trace(tmp_path / "x.et", md, nodes)
        assert (tmp_path / "x.et").read_bytes() == f.read_bytes(), f


def test_jsonize_dejsonize_cli_byte_identical(fixtures_dir, tmp_path):
    src = fixtures_dir / "chakra" / "chakra.0.et"
    r = run_cli("jsonize", str(src), str(tmp_path / "t.json"))
    assert r.returncode == 0, r.stderr
    import json

    doc = json.loads((tmp_path / "t.json").read_text())
    assert len(doc["nodes"]) == 3664 and doc["metadata"]["attr"][0] == {
        "name": "schema",
        "kind": "string_val",
        "value": "1.0.1",
    }
    node0 = doc["nodes"][0]
    assert node0["id"] == 216 and node0["type"] == "COMP_NODE" and node0["inputs"] is not None
    r = run_cli("dejsonize", str(tmp_path / "t.json"), str(tmp_path / "back.et"))
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "back.et").read_bytes() == src.read_bytes()


def test_json_round_trip_of_every_attribute_kind(tmp_path):
    from chakra_pipe.et.jsonio import dejsonize, jsonize

    node = schema.Node(id=7, name="all kinds", type=schema.METADATA_NODE)
    node.inputs.SetInParent()  # set but empty: must survive as "42 00"
    values = {
        "double": 1.5,
        "float": 0.25,
        "int32": -5,
        "int64": -(2**40),
        "uint32": 2**31,
        "uint64": 2**63,
        "sint32": -7,
        "sint64": -(2**50),
        "fixed32": 9,
        "fixed64": 2**60,
        "sfixed32": -9,
        "sfixed64": -(2**60),
        "bool": False,
        "string": "ünï",
        "bytes": b"\x00\xff",
    }
    for kind, v in values.items():
        attrs.set_attr(node, kind, v, kind=f"{kind}_val")
        attrs.set_attr(node, kind + "_list", [v, v] if kind != "bool" else [True, False], kind=f"{kind}_list")
    attrs.set_attr(node, "empty_list", [], kind="int64_list")
    node.attr.add(name="no value", doc_string="a doc string")
    md = schema.GlobalMetadata(version="1.0.0")
    write_trace(tmp_path / "a.et", md, [node])
    jsonize(tmp_path / "a.et", tmp_path / "a.json")
    dejsonize(tmp_path / "a.json", tmp_path / "b.et")
    assert (tmp_path / "b.et").read_bytes() == (tmp_path / "a.et").read_bytes()


def test_gzip_read_and_write(fixtures_dir, tmp_path):
    src = fixtures_dir / "chakra" / "chakra.0.et"
    md, nodes = read_trace(src)
    write_trace(tmp_path / "t.et.gz", md, nodes)
    raw = (tmp_path / "t.et.gz").read_bytes()
    assert raw[:2] == b"\x1f\x8b" and gzip.decompress(raw) == src.read_bytes()
    assert sum(1 for _ in iter_nodes(tmp_path / "t.et.gz")) == 3664
    write_trace(tmp_path / "t2.et.gz", md, nodes)
    assert (tmp_path / "t2.et.gz").read_bytes() == raw  # deterministic gzip header


def test_writer_refuses_all_default_node(tmp_path):
    with pytest.raises(InputError, match="zero-length"):
        write_trace(tmp_path / "x.et", schema.GlobalMetadata(), [schema.Node()])
    assert not (tmp_path / "x.et").exists()
    assert not list(tmp_path.iterdir())  # no temporary file left behind


def _node_bytes(**kw) -> bytes:
    data = schema.Node(**kw).SerializeToString()
    return encode_varint(len(data)) + data


GOOD = (
    encode_varint(7) + schema.GlobalMetadata(version="0.0.4").SerializeToString() + _node_bytes(id=1, name="a", type=4)
)

CORRUPT = {
    "truncated message": (GOOD[:-3], "exceeds"),
    "random bytes": (bytes([0xFF] * 6) + b"\x01\x02", "length prefix longer than 5 bytes"),
    "length prefix larger than the file": (GOOD + encode_varint(10_000) + b"\x08\x01", "record length 10000"),
    "message that does not parse": (GOOD + b"\x03\x0a\x05\x41", "does not parse"),
    "non-trace file": (b'{"schema": "1.0.1", "nodes": []}', "not a Chakra trace"),
    "non-trace file, long": (
        b'{"schema": "1.0.1", "pid": 1, "nodes": [' + b'{"id": 1}, ' * 20 + b"]}",
        "not a Chakra trace",
    ),
    "zero-length node message": (GOOD + b"\x00" + _node_bytes(id=2, type=4), "zero-length node record"),
    "truncated length prefix": (GOOD + b"\x80", "truncated length prefix"),
}


@pytest.mark.parametrize("case", sorted(CORRUPT))
def test_corrupt_input_one_line_error_with_offset(case, tmp_path):
    data, needle = CORRUPT[case]
    path = tmp_path / "bad.et"
    path.write_bytes(data)
    with pytest.raises(TraceFormatError) as exc:
        read_trace(path)
    assert needle in str(exc.value) and "byte " in str(exc.value)
    from chakra_pipe.et import load_graph

    with pytest.raises(TraceFormatError):
        load_graph(path)
    r = run_cli("jsonize", str(path), str(tmp_path / "out.json"))
    assert r.returncode == 2
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "bad.et" in lines[0] and "byte " in lines[0] and "Traceback" not in r.stderr
    assert not (tmp_path / "out.json").exists()


def test_zero_length_first_record_is_empty_metadata(tmp_path):
    path = tmp_path / "t.et"
    path.write_bytes(b"\x00" + _node_bytes(id=3, type=4))
    md, nodes = read_trace(path)
    assert md.version == "" and [n.id for n in nodes] == [3]


def test_missing_file_is_input_error(tmp_path):
    r = run_cli("jsonize", str(tmp_path / "nope.et"), str(tmp_path / "o.json"))
    assert r.returncode == 2 and "cannot read: No such file" in r.stderr


def test_dejsonize_bad_json_names_location(tmp_path):
    (tmp_path / "bad.json").write_text(
        '{"metadata": {}, "nodes": [{"id": 1, "attr": [{"name": "x", "kind": "int64_val", "value": "q"}]}]}'
    )
    r = run_cli("dejsonize", str(tmp_path / "bad.json"), str(tmp_path / "o.et"))
    assert r.returncode == 2 and "nodes[0].attr[0].value" in r.stderr
    (tmp_path / "bad2.json").write_text("{not json")
    r = run_cli("dejsonize", str(tmp_path / "bad2.json"), str(tmp_path / "o.et"))
    assert r.returncode == 2 and "line 1" in r.stderr
    assert not (tmp_path / "o.et").exists()
