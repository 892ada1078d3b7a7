"""A decode group's files that repeat their predecessor's attribute entries share its columns
(``et.graph._Reuse``): every file must still read as its own load, and a shared column must be
read-only. The files here are edits of one another, as the ranks of a pipeline stage are: a record
whose bytes change elsewhere (a name, a duration) keeps its attributes' values, an edited value or
kind changes one name's columns, an added node changes the file's layout."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_et_graph import _KIND_VALUES, _NAMES, batch_and_alone, frame_all

from chakra_pipe.et import attrs, schema
from chakra_pipe.et import graph as graph_module
from chakra_pipe.et.graph import INT_ATTRS

_SMALL_INT_KINDS = {"uint32_val", "int64_val", "fixed64_val", "int32_val", "uint64_val", "sint64_val"}


@st.composite
def small_nodes(draw) -> list[schema.Node]:
    """1 to 12 nodes with ids and dependencies below 2^32 (uint64 ones make the load decode every
    record: nothing would be shared) and up to 5 well-known attributes of any kind."""
    nodes = []
    for i in range(draw(st.integers(1, 12))):
        node = schema.Node(id=i + 1, name=draw(st.sampled_from(["a", "b"])), type=draw(st.integers(0, 7)))
        node.data_deps.extend(draw(st.lists(st.integers(1, i + 1), max_size=2)))
        for _ in range(draw(st.integers(0, 5))):
            kind = draw(st.sampled_from(sorted(_KIND_VALUES)))
            attrs.set_attr(node, draw(st.sampled_from(_NAMES)), draw(_KIND_VALUES[kind]), kind=kind)
        nodes.append(node)
    return nodes


@st.composite
def edited_files(draw) -> list[list[schema.Node]]:
    """2 to 6 files, each its predecessor with up to 3 edits (none: an equal file)."""
    files = [draw(small_nodes())]
    for _ in range(draw(st.integers(1, 5))):
        nodes = [schema.Node.FromString(n.SerializeToString()) for n in files[-1]]
        for _ in range(draw(st.integers(0, 3))):
            node = nodes[draw(st.integers(0, len(nodes) - 1))]
            edit = draw(st.sampled_from(["duration", "value", "kind", "same-value", "add-attr", "add-node"]))
            if edit == "duration":  # the record's bytes differ, its attributes do not
                node.duration_micros ^= 1
            elif edit in ("value", "kind") and len(node.attr):
                at = node.attr[draw(st.integers(0, len(node.attr) - 1))]
                kind = at.WhichOneof("value") if edit == "value" and at.WhichOneof("value") else None
                kind = kind or draw(st.sampled_from(sorted(_KIND_VALUES)))
                replaced = attrs.make_attr(at.name, draw(_KIND_VALUES[kind]), kind=kind)
                at.CopyFrom(replaced)
            elif edit == "same-value" and len(node.attr):  # another kind, same integer (or none): kinds alone differ
                at = node.attr[draw(st.integers(0, len(node.attr) - 1))]
                kind = draw(st.sampled_from(["uint32_val", "int64_val", "fixed64_val", "double_val", "string_val"]))
                value = getattr(at, at.WhichOneof("value")) if at.WhichOneof("value") in _SMALL_INT_KINDS else 0
                value = value if 0 <= value < 2**31 else 1
                at.CopyFrom(attrs.make_attr(at.name, "" if kind == "string_val" else value, kind=kind))
            elif edit == "add-attr":
                kind = draw(st.sampled_from(sorted(_KIND_VALUES)))
                attrs.set_attr(node, draw(st.sampled_from(_NAMES)), draw(_KIND_VALUES[kind]), kind=kind)
            elif edit == "add-node":
                nodes.append(schema.Node(id=len(nodes) + 7, name="x", type=schema.COMM_COLL_NODE))
        files.append(nodes)
    return files


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(edited_files(), st.integers(1, 64), st.integers(2, 4))
def test_files_repeating_their_predecessors_entries_read_as_their_own(tmp_path_factory, files, group, copies):
    """Each file (repeated ``copies`` times, so most files are an equal file's successor) reads as
    decoded alone; columns shared between files are read-only."""
    batch, alone = batch_and_alone(tmp_path_factory.mktemp("reuse"), files, group, copies)
    owners: dict[int, int] = {}
    for r, (g, own) in enumerate(zip(batch, alone)):
        for name in own.attr_kind:
            assert g.attr_kind[name].tolist() == own.attr_kind[name].tolist(), (r, name)
            assert g.stored_kinds(name) == own.stored_kinds(name), (r, name)
        for name in INT_ATTRS:
            assert g.attr_value[name].tolist() == own.attr_value[name].tolist(), (r, name)
        assert list(g.pg_name.items()) == list(own.pg_name.items())
        assert list(g.involved_dim.items()) == list(own.involved_dim.items())
        for column in [*g.attr_kind.values(), *g.attr_value.values()]:
            if owners.setdefault(id(column), r) != r:
                assert not column.flags.writeable


def test_a_column_equal_to_the_predecessors_is_its_very_array(tmp_path):
    """Ranks that differ in a send's peer and a duration: their other columns are one read-only
    array, the peer's are each file's own; a name whose entries differ in kind alone is not shared."""
    md = schema.GlobalMetadata(version="1.0.0")

    def nodes(peer: int, kind: str) -> list[bytes]:
        out = [schema.Node(id=i, name="n", type=schema.COMM_SEND_NODE) for i in range(40)]
        for n in out:
            attrs.set_attr(n, "comm_size", 4096 + n.id, kind="int64_val")
        out[0].duration_micros = peer
        attrs.set_attr(out[0], "comm_dst", peer, kind="int64_val")
        attrs.set_attr(out[1], "comm_tag", 7, kind=kind)
        return [n.SerializeToString() for n in out]

    for r, (peer, kind) in enumerate([(1, "int64_val"), (2, "int64_val"), (3, "uint64_val")]):
        (tmp_path / f"w.{r}.et").write_bytes(frame_all(md, nodes(peer, kind)))
    a, b, c = graph_module.load_graphs([tmp_path / f"w.{r}.et" for r in range(3)])
    assert a.attr_value["comm_size"] is b.attr_value["comm_size"] is c.attr_value["comm_size"]
    assert not a.attr_value["comm_size"].flags.writeable
    assert a.attr_value["comm_dst"] is not b.attr_value["comm_dst"] and b.attr_value["comm_dst"].tolist()[:2] == [2, 0]
    assert a.attr_value["comm_tag"] is b.attr_value["comm_tag"] is not c.attr_value["comm_tag"]
    assert c.attr_kind["comm_tag"].tolist()[:2] == [0, attrs.KIND_NUMBER["uint64_val"]]
    assert c.stored_kinds("comm_tag") == {attrs.KIND_NUMBER["uint64_val"]} and b.stored_kinds("comm_tag") == {
        attrs.KIND_NUMBER["int64_val"]
    }
