"""``et.metadata``: the column loader's GlobalMetadata, walked without protobuf when plain.

What a user relies on: a loaded graph's metadata reads exactly as protobuf's decoding of the record
(version, attributes, bytes), and a record the walk does not prove plain is decoded strictly at load
time, so a broken metadata record fails with the same error as before, naming file and byte.
"""

from __future__ import annotations

import random

import pytest
from byte_mutations import mutate

from chakra_pipe.errors import TraceFormatError
from chakra_pipe.et import load_graph, metadata, schema, write_trace
from chakra_pipe.et.attrs import make_attr
from chakra_pipe.et.framing import encode_varint, parse_metadata, parse_node


def _rich() -> bytes:
    """A GlobalMetadata holding every scalar kind the walk accepts, a doc string and two list kinds."""
    md = schema.GlobalMetadata(version="1.0.0-é")
    for name, value in (("generator", "chakra-pipe"), ("n", -5), ("x", 2.5), ("raw", b"\x00\xff"), ("flag", True)):
        md.attr.append(make_attr(name, value))
    for kind, value in (
        ("float_val", 1.5),
        ("fixed32_val", 7),
        ("fixed64_val", 1 << 40),
        ("sfixed32_val", -3),
        ("sfixed64_val", -4),
        ("uint32_val", 5),
        ("uint64_val", 1 << 62),
        ("sint32_val", -7),
        ("sint64_val", -9),
        ("int32_val", -1),
    ):
        md.attr.append(make_attr(kind, value, kind))
    md.attr.append(schema.AttributeProto(name="doc", doc_string="what it is"))
    return md.SerializeToString()


def _listed() -> bytes:
    md = schema.GlobalMetadata(version="v")
    md.attr.append(make_attr("dims", [True, False], "bool_list"))
    return md.SerializeToString()


def _strict(payload: bytes):
    try:
        return parse_metadata(payload, "f.et", 0), None
    except TraceFormatError as exc:
        return None, str(exc)


def test_plain_records_read_as_protobuf_reads_them():
    for payload in (b"", schema.GlobalMetadata(version="0.0.4").SerializeToString(), _rich()):
        got = metadata.read_metadata(payload, "f.et", 0)
        assert isinstance(got, metadata.LazyMetadata)
        want = parse_metadata(payload)
        assert got.version == want.version
        assert [a.name for a in got.attr] == [a.name for a in want.attr]
        # everything else is the message's own: values, kinds, bytes, equality both ways
        assert [a.WhichOneof("value") for a in got.attr] == [a.WhichOneof("value") for a in want.attr]
        assert got.SerializeToString() == payload and got == want and want == got
        assert got.message.attr[0:1] == want.attr[0:1]


def test_records_beyond_the_walk_are_decoded_strictly_at_once():
    got = metadata.read_metadata(_listed(), "f.et", 0)
    assert not isinstance(got, metadata.LazyMetadata) and list(got.attr[0].bool_list.values) == [True, False]
    unknown = schema.GlobalMetadata(version="v").SerializeToString() + b"\x18\x01"  # field 3: not Chakra's
    with pytest.raises(TraceFormatError) as exc:
        metadata.read_metadata(unknown, "f.et", 0)
    assert str(exc.value) == _strict(unknown)[1]
    assert "GlobalMetadata has unknown field 3" in str(exc.value)


def test_the_walk_never_accepts_what_protobuf_refuses():
    """Mutated records (bytes changed, cut, inserted): whenever the walk calls one plain, protobuf
    decodes it without error and reads the same version and names; otherwise the strict reader's
    result or error stands."""
    rng = random.Random(15)
    seeds = [_rich(), _listed(), schema.GlobalMetadata(version="0.0.4").SerializeToString()]
    plain = 0
    for _ in range(4000):
        payload = mutate(rng.choice(seeds), rng, max_cut=4)
        want, error = _strict(payload)
        try:
            got = metadata.read_metadata(payload, "f.et", 0)
        except TraceFormatError as exc:
            assert str(exc) == error
            continue
        assert error is None and got == want
        if isinstance(got, metadata.LazyMetadata):
            plain += 1
            assert (got.version, [a.name for a in got.attr]) == (want.version, [a.name for a in want.attr])
    assert plain > 200  # the walk is exercised, not skipped


def test_a_loaded_graph_keeps_the_metadata_and_a_bad_record_fails_as_before(tmp_path):
    path = tmp_path / "t.0.et"
    md = schema.GlobalMetadata()
    md.ParseFromString(_rich())
    write_trace(path, md, [schema.Node(id=1, name="n", type=schema.COMP_NODE)])
    g = load_graph(path)
    assert g.metadata == md and g.metadata.attr[1].int64_val == -5
    bad = b"\x0a\x02\xff\xfe"  # version holding invalid UTF-8
    path.write_bytes(encode_varint(len(bad)) + bad)
    with pytest.raises(TraceFormatError) as exc:
        load_graph(path)
    assert str(exc.value) == _strict(bad)[1].replace("f.et", str(path))


def _metadata_nodes() -> list[bytes]:
    """METADATA node records as the generator and PyTorch converters write them, plus the shapes
    the walk leaves to protobuf (dependency lists) and an attribute-carrying one."""
    table = '[\'[{"pg_name":"0","ranks":[]},{"pg_name":"1","ranks":[0,1]}]\']'
    plain = schema.Node(id=3, name="## process_group:init ##", type=schema.METADATA_NODE, start_time_micros=9)
    plain.inputs.values, plain.inputs.shapes, plain.inputs.types = table, "[[]]", "['String']"
    plain.outputs.values = "é"
    rich = schema.Node()
    rich.CopyFrom(plain)
    rich.attr.append(make_attr("rf_id", 7))
    rich.attr.append(make_attr("note", "x"))
    deps = schema.Node(id=4, type=schema.METADATA_NODE, data_deps=[1, 2])
    deps.inputs.values = table
    empty = schema.Node(id=5, type=schema.METADATA_NODE)
    return [plain.SerializeToString(), rich.SerializeToString(), deps.SerializeToString(), empty.SerializeToString()]


def _strict_node(record: bytes):
    try:
        node = parse_node(record, "f.et", 0)
    except TraceFormatError as exc:
        return None, str(exc)
    return (node.inputs.values if node.HasField("inputs") else ""), None


def test_plain_node_records_give_protobufs_inputs_values():
    plain, rich, deps, empty = _metadata_nodes()
    for record in (plain, rich, empty, b""):
        assert metadata.plain_node_inputs(record) == _strict_node(record)[0]
    assert metadata.plain_node_inputs(plain).startswith("['[{")
    assert metadata.plain_node_inputs(deps) is None  # dependency lists: protobuf decides
    twice = plain + b"\x42\x02\x0a\x00"  # a second inputs (values ""): protobuf merges them, so it decides
    assert metadata.plain_node_inputs(twice) is None and _strict_node(twice) == ("", None)


def test_the_node_walk_never_accepts_what_protobuf_refuses():
    """Mutated METADATA records: whenever the walk reads one, protobuf decodes it strictly (no error,
    no unknown field) and holds the same ``inputs.values``."""
    rng = random.Random(20)
    seeds = _metadata_nodes()
    plain = 0
    for _ in range(4000):
        record = mutate(rng.choice(seeds), rng, max_cut=4)
        got = metadata.plain_node_inputs(record)
        if got is not None:
            plain += 1
            assert _strict_node(record) == (got, None)
    assert plain > 200  # the walk is exercised, not skipped


def test_a_record_shared_by_many_files_is_walked_once_and_read_as_each_alone(monkeypatch):
    """A rank set's files carry one GlobalMetadata record byte for byte: its walk is remembered by
    its bytes, and every file still gets its own metadata object reading as the record does."""
    md = schema.GlobalMetadata(version="1.0.0", attr=[make_attr("generator", "chakra-pipe"), make_attr("n", -5)])
    payload = md.SerializeToString()
    walks: list[bytes] = []
    real = metadata._plain

    def counted(record: bytes):
        walks.append(record)
        return real(record)

    metadata._plain_shared.cache_clear()
    monkeypatch.setattr(metadata, "_plain", counted)
    first, second = metadata.read_metadata(payload), metadata.read_metadata(memoryview(payload))
    assert walks == [payload]
    assert isinstance(first, metadata.LazyMetadata) and isinstance(second, metadata.LazyMetadata)
    assert first is not second and first.attr is not second.attr
    expected = parse_metadata(payload, "f", 0)
    for md in (first, second):
        assert md.version == expected.version
        assert [a.name for a in md.attr] == [a.name for a in expected.attr]
        assert md.message == expected
    big = schema.GlobalMetadata(version="v" * (metadata._SHARED_MAX + 1)).SerializeToString()
    metadata.read_metadata(big)
    metadata.read_metadata(big)
    assert walks[1:] == [big, big]  # too large to keep: walked each time
