"""Differential fuzzing of both ``.et`` decoder paths against the protobuf runtime itself.

``graph.load_graph`` decodes small files record by record and larger ones with vectorised numpy
steps; ``framing.read_trace`` streams records. Whatever path a file takes, it must be accepted or
refused exactly as the protobuf runtime (plus our framing rules and unknown-field check) does, and
a refusal is a ``TraceFormatError`` naming the file and a byte offset inside it — never a Python
exception, never a silent read of a file protobuf rejects (bad UTF-8 in a string, a broken nested
message, a truncated varint). ``benchmarks/fuzz.py --surface decoders`` runs the same check for hours.
"""

from __future__ import annotations

import random
import sys
from pathlib import Path

import pytest
from google.protobuf.message import DecodeError
from test_robust_support import RING_NETWORK, assert_clean, call_cli, corpus_builder

from chakra_pipe.errors import TraceFormatError
from chakra_pipe.et import graph as graph_module
from chakra_pipe.et import schema
from chakra_pipe.et.framing import read_trace
from chakra_pipe.et.graph import graph_from_bytes

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
from fuzz import decoder_bases, mutate_bytes, protobuf_accepts

MUTANTS = 12_000


def _refusal_ok(exc: TraceFormatError, name: str, size: int) -> bool:
    return (
        exc.file == name
        and exc.where is not None
        and exc.where.startswith("byte ")
        and 0 <= int(exc.where.split()[1]) <= size
    )


def test_bases_take_both_decoder_paths():
    """The fuzz bases must hit the record-by-record path *and* the vectorised one, with strings,
    IOInfo, string and list attributes present, or the fuzzing below proves little."""
    bases = decoder_bases()
    sizes = [len(read_trace_bytes(b)) for b in bases.values()]
    assert min(sizes) <= graph_module._SMALL < max(sizes)
    rich = graph_from_bytes(bases["rich"], "rich")
    assert not rich.slow.any(), "the rich base must decode on the vectorised path"
    assert rich.pg_name and rich.involved_dim


def read_trace_bytes(data: bytes) -> list:
    import tempfile

    with tempfile.NamedTemporaryFile(suffix=".et") as f:
        f.write(data)
        f.flush()
        return read_trace(f.name)[1]


def test_both_decoders_accept_exactly_what_protobuf_accepts(tmp_path):
    """12,000 seeded 1-4-edit mutants of small and 70-node traces: ``graph_from_bytes`` (both paths)
    accepts a mutant iff the protobuf runtime does; refusals name the file and a byte offset; an
    accepted mutant reads the same ids, types and dependencies as protobuf. Every 8th mutant also goes
    through the streaming reader (``read_trace``), which must give the same answer."""
    rng = random.Random(12)
    bases = list(decoder_bases().values())
    disagree, unclean = [], []
    refused = 0
    path = tmp_path / "m.et"
    for k in range(MUTANTS):
        data = mutate_bytes(rng, rng.choice(bases))
        expected = protobuf_accepts(data)
        if k % 8 == 0:
            path.write_bytes(data)
            try:
                read_trace(path)
                if expected is None:
                    disagree.append((k, "read_trace accepted", data.hex()[:80]))
            except TraceFormatError as exc:
                if expected is not None:
                    disagree.append((k, "read_trace refused", exc.line()))
        try:
            graph = graph_from_bytes(data, "m.et")
            graph.attr_kind  # noqa: B018 - attributes are decoded on first use
        except TraceFormatError as exc:
            refused += 1
            if expected is not None:
                disagree.append((k, "refused", exc.line()))
            elif not _refusal_ok(exc, "m.et", len(data)):
                unclean.append(exc.line())
            continue
        if expected is None:
            disagree.append((k, "accepted", data.hex()[:80]))
        elif k % 20 == 0:
            assert graph.ids.tolist() == [n.id for n in expected]
            assert graph.types.tolist() == [max(-1, min(127, n.type)) for n in expected]
            assert [graph.data_deps(i).tolist() for i in range(len(graph))] == [list(n.data_deps) for n in expected]
    assert not disagree, disagree[:5]
    assert not unclean, unclean[:5]
    assert MUTANTS // 10 < refused < MUTANTS  # the mutants really exercise both outcomes


def _rich_with(mutator) -> bytes:
    corpus = corpus_builder()
    nodes = corpus.base_nodes() + [corpus.comp(i, [i - 1], 1) for i in range(4, 70)]
    mutator(nodes)
    return corpus.encode(nodes)


@pytest.mark.parametrize("where", ["name", "pg_name", "io"])
@pytest.mark.parametrize("length", ["small", "large"])
def test_invalid_utf8_strings_are_one_answer_everywhere(tmp_path, fixtures_dir, where, length):
    """A node name, ``pg_name`` or IOInfo string holding invalid UTF-8 is refused by protobuf (proto3
    strings must be UTF-8): both loaders, ``info``, ``validate`` and ``simulate`` refuse it alike,
    exit 2, naming the file and the byte offset of the record."""
    marker = "Z\u00e9Z"

    def plant(nodes):
        node = nodes[-1] if length == "large" else nodes[0]
        if where == "name":
            node.name = marker
        elif where == "pg_name":
            node.attr.add(name="pg_name", string_val=marker)
        else:
            node.inputs.values = marker

    data = _rich_with(plant)
    if length == "small":
        data = _truncate_to_records(data, 3)
    data = data.replace(marker.encode(), b"Z\xc3\x28Z")  # a lead byte with no continuation byte
    assert protobuf_accepts(data) is None
    prefix = tmp_path / "u"
    for rank in range(2):
        (tmp_path / f"u.{rank}.et").write_bytes(data)
    with pytest.raises(TraceFormatError) as exc:
        graph_from_bytes(data, "u.et")
    assert "UTF-8" in exc.value.what and exc.value.where.startswith("byte ")
    system = fixtures_dir / "astra-sim" / "system" / "native_collectives" / "Ring_4chunks.json"
    net = tmp_path / "ring2.yml"
    net.write_text(RING_NETWORK)
    for argv in (
        ["info", prefix],
        ["validate", prefix],
        [
            "simulate",
            f"--workload-configuration={prefix}",
            f"--system-configuration={system}",
            f"--network-configuration={net}",
        ],
    ):
        outcome = call_cli(argv)
        assert_clean(outcome, allowed={2}, what=argv[0])
        assert "u.0.et: byte " in outcome.stderr and "UTF-8" in outcome.stderr, outcome.stderr


def _truncate_to_records(data: bytes, count: int) -> bytes:
    """The metadata record and the first ``count`` node records of ``data``."""
    from chakra_pipe.et.framing import scan_records

    starts, lengths = scan_records(data)
    end = starts[count] + lengths[count]
    return data[:end]


def test_protobuf_reference_refuses_what_the_runtime_refuses():
    """The reference the fuzz test compares with is not vacuous: a valid trace reads, and one more
    record whose name is the lone byte 0xFF (which ``Node.FromString`` refuses) does not."""
    good = _rich_with(lambda nodes: None)
    assert len(protobuf_accepts(good)) == 69
    with pytest.raises(DecodeError):
        schema.Node.FromString(bytes([0x12, 1, 0xFF]))
    assert protobuf_accepts(good + bytes([3, 0x12, 1, 0xFF])) is None
