"""Property-based fuzzing of the reader, ``validate`` and ``simulate`` with mutated ``.et`` bytes.

Mutations (bit flips, byte overwrites, truncations, insertions, deletions) are applied to a small valid
two-rank workload. Properties: the strict reader and the vectorised graph loader either both accept a
file — and then agree on every node — or both refuse it with a ``TraceFormatError`` naming the file and a
byte offset inside it; ``validate`` and ``simulate`` end with a result or a documented error
(exit 1/2/3) within a time bound. Structural extremes (deep chains, long cycles, wide fan-in, a 10^6-node
file) are generated at test time. ``benchmarks/fuzz.py`` runs the same properties for hours.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from conftest import skip_reason
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_robust_support import (
    CORPUS,
    RING_NETWORK,
    assert_clean,
    call_cli,
    chain_bytes,
    corpus_builder,
    run_cli,
    time_bound,
)

from chakra_pipe.errors import ChakraPipeError, TraceFormatError
from chakra_pipe.et import graph as graph_module
from chakra_pipe.et import schema
from chakra_pipe.et.framing import read_trace
from chakra_pipe.et.graph import load_graph
from chakra_pipe.et.traceset import TraceSet
from chakra_pipe.validate.validator import validate_set

BASE = (CORPUS / "traces" / "valid.0.et").read_bytes()
P2P = (CORPUS / "traces" / "mismatched_tag.0.et").read_bytes()  # also exercises send/recv attributes


def _long_base() -> bytes:
    """The base workload followed by a 60-node compute chain: files of more than ``graph._SMALL`` nodes
    take the vectorised bulk decoder, smaller ones the record-by-record path; fuzz both."""
    corpus = corpus_builder()
    nodes = corpus.base_nodes() + [corpus.comp(i, [i - 1], 1) for i in range(4, 64)]
    assert len(nodes) > graph_module._SMALL
    return corpus.encode(nodes)


LONG = _long_base()
FUZZ = settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


@st.composite
def mutated(draw, base: bytes = BASE) -> bytes:
    """``base`` with 1-4 random edits; positions are drawn relative to the current length."""
    data = bytearray(draw(st.sampled_from([BASE, P2P, LONG])) if base is None else base)
    for _ in range(draw(st.integers(1, 4))):
        if not data:
            break
        op = draw(st.sampled_from(["flip", "set", "truncate", "insert", "delete"]))
        i = draw(st.integers(0, len(data) - 1))
        if op == "flip":
            data[i] ^= 1 << draw(st.integers(0, 7))
        elif op == "set":
            data[i] = draw(st.integers(0, 255))
        elif op == "truncate":
            del data[i:]
        elif op == "insert":
            data[i:i] = draw(st.binary(min_size=1, max_size=8))
        else:
            del data[i : i + draw(st.integers(1, 8))]
    return bytes(data)


def _columns_equal(graph, nodes) -> None:
    """The compact graph reads exactly what the protobuf runtime reads."""
    assert graph.ids.tolist() == [n.id for n in nodes]
    assert graph.types.tolist() == [max(-1, min(127, n.type)) for n in nodes]
    assert graph.duration_micros.tolist() == [n.duration_micros for n in nodes]
    for which, ptr, ids in (("data", graph.data_ptr, graph.data_ids), ("ctrl", graph.ctrl_ptr, graph.ctrl_ids)):
        got = [ids[ptr[i] : ptr[i + 1]].tolist() for i in range(len(nodes))]
        assert got == [list(getattr(n, f"{which}_deps")) for n in nodes], which
    for name, kinds in graph.attr_kind.items():
        expected = []
        for n in nodes:
            last = [a for a in n.attr if a.name == name]
            kind = last[-1].WhichOneof("value") if last else None
            expected.append(schema.AttributeProto.DESCRIPTOR.fields_by_name[kind].number if kind else 0)
        assert kinds.tolist() == expected, name


def _refusal(exc: TraceFormatError, path: Path, size: int) -> None:
    assert exc.file == str(path)
    if exc.where is not None and exc.where.startswith("byte "):
        assert 0 <= int(exc.where.split()[1]) <= size, exc.where
    else:
        assert "gzip" in exc.what, exc.line()


@FUZZ
@given(data=mutated(base=None))
def test_reader_and_graph_loader_agree_on_any_bytes(tmp_path, data):
    path = tmp_path / "m.0.et"
    path.write_bytes(data)
    with time_bound(20):
        try:
            _, nodes = read_trace(path)
        except TraceFormatError as exc:
            _refusal(exc, path, len(data))
            with pytest.raises(TraceFormatError) as graph_exc:
                graph = load_graph(path)
                graph.attr_kind  # noqa: B018 -- attributes decode lazily: touch them so a bad one surfaces
                for i in range(len(graph)):
                    graph.node(i)
            _refusal(graph_exc.value, path, len(data))
            return
        _columns_equal(load_graph(path), nodes)


@pytest.fixture(scope="module")
def two_rank_hw(fixtures_dir, tmp_path_factory):
    from chakra_pipe.sim import load_hardware

    system = fixtures_dir / "astra-sim" / "system" / "native_collectives" / "Ring_4chunks.json"
    if not system.is_file():
        pytest.skip(skip_reason(system))
    net = tmp_path_factory.mktemp("net") / "ring2.yml"
    net.write_text(RING_NETWORK)
    return load_hardware(system, net)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(rank0=mutated(base=None), rank1_mutated=st.booleans(), rank1=mutated(base=None))
def test_validate_and_simulate_end_cleanly_on_mutated_rank_sets(tmp_path, two_rank_hw, rank0, rank1_mutated, rank1):
    from chakra_pipe.sim import simulate

    (tmp_path / "m.0.et").write_bytes(rank0)
    (tmp_path / "m.1.et").write_bytes(rank1 if rank1_mutated else BASE)
    prefix = str(tmp_path / "m")
    with time_bound(30):
        try:  # a report (any counts) or a documented input error; anything else escaping fails
            validate_set(prefix)
        except ChakraPipeError as exc:
            assert exc.exit_code == 2 and exc.file, exc.line()
        try:
            simulate(TraceSet.load(prefix), two_rank_hw)
        except ChakraPipeError as exc:
            assert exc.exit_code in (2, 3) and exc.file, exc.line()


_KIND_VALUES = {  # one value per oneof member: in range for the kind, hostile for the attribute
    "int32_val": st.integers(-(2**31), 2**31 - 1),
    "int64_val": st.integers(-(2**63), 2**63 - 1),
    "uint32_val": st.integers(0, 2**32 - 1),
    "uint64_val": st.integers(0, 2**64 - 1),
    "sint64_val": st.integers(-(2**63), 2**63 - 1),
    "fixed64_val": st.integers(0, 2**64 - 1),
    "bool_val": st.booleans(),
    "double_val": st.floats(allow_nan=True, allow_infinity=True),
    "string_val": st.text(max_size=8),
    "bytes_val": st.binary(max_size=8),
    "bool_list": st.lists(st.booleans(), max_size=4),
    "int64_list": st.lists(st.integers(-5, 5), max_size=4),
}
_WELL_KNOWN = [
    "is_cpu_op",
    "num_ops",
    "tensor_size",
    "comm_type",
    "comm_size",
    "comm_src",
    "comm_dst",
    "comm_tag",
    "comm_priority",
    "pg_name",
    "involved_dim",
]


@st.composite
def hostile_attribute_sets(draw):
    """The p2p corpus set with 1-3 well-known attributes of some node rewritten in any kind and value."""
    corpus = corpus_builder()
    ranks = [
        list(corpus.base_nodes()) + [corpus.p2p(4, [3], schema.COMM_SEND_NODE, peer=1)],
        list(corpus.base_nodes()) + [corpus.p2p(4, [3], schema.COMM_RECV_NODE, peer=0)],
    ]
    for _ in range(draw(st.integers(1, 3))):
        node = draw(st.sampled_from(ranks[draw(st.integers(0, 1))]))
        name, kind = draw(st.sampled_from(_WELL_KNOWN)), draw(st.sampled_from(sorted(_KIND_VALUES)))
        corpus.with_attr(node, name, draw(_KIND_VALUES[kind]), kind)
    return [corpus.encode(nodes) for nodes in ranks]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ranks=hostile_attribute_sets())
def test_wrong_attribute_kinds_and_values_end_cleanly(tmp_path, two_rank_hw, ranks):
    """Any kind for any well-known attribute (chakra-format §4): validate reports, simulate runs, refuses
    (2) or reports the ranks stuck (3) — never a traceback, an overflow or a hang."""
    from chakra_pipe.sim import simulate

    for rank, data in enumerate(ranks):
        (tmp_path / f"a.{rank}.et").write_bytes(data)
    prefix = str(tmp_path / "a")
    with time_bound(30):
        validate_set(prefix)
        try:
            simulate(TraceSet.load(prefix), two_rank_hw)
        except ChakraPipeError as exc:
            assert exc.exit_code in (2, 3) and exc.file, exc.line()


def test_corrupt_attribute_name_length_at_end_of_file_is_a_format_error(tmp_path):
    """Regression: in the vectorised decoder a name length pointing past the buffer padding crashed with
    IndexError (found by this fuzzer); it must be the protobuf reader's TraceFormatError instead."""
    data = bytearray(LONG)
    at = bytes(data).rindex(b"\x0a\x0btensor_size")
    data[at + 1] = 0x7F  # 127 name bytes claimed, 11 present, file ends a few bytes later
    path = tmp_path / "t.0.et"
    path.write_bytes(bytes(data))
    with pytest.raises(TraceFormatError, match=r"node record does not parse") as exc:
        load_graph(path).attr_kind  # noqa: B018 -- attributes may decode lazily
    assert exc.value.file == str(path) and exc.value.where.startswith("byte ")
    outcome = call_cli(["validate", path])
    assert_clean(outcome, allowed={2})


@pytest.mark.parametrize("length", [3, 60], ids=["record-by-record", "vectorised"])
def test_uint64_attribute_values_above_int64_read_alike_on_both_decoder_paths(tmp_path, length):
    """Regression: a uint64 comm_size of 2^64-1 raised OverflowError on the record-by-record path (small
    files) while the bulk path wrapped it; both must give the same int64 column value."""
    corpus = corpus_builder()
    nodes = [corpus.with_attr(corpus.coll(1, []), "comm_size", 2**64 - 1, "uint64_val")]
    nodes += [corpus.comp(i, [i - 1], 1) for i in range(2, length + 1)]
    path = tmp_path / "t.0.et"
    path.write_bytes(corpus.encode(nodes))
    graph = load_graph(path)
    assert graph.attr_value["comm_size"][0] == -1 and graph.attr_kind["comm_size"][0] == 13


# -- structural extremes, generated at test time --------------------------------------------------


def _write_set(directory: Path, name: str, data: bytes) -> Path:
    for rank in range(2):
        (directory / f"{name}.{rank}.et").write_bytes(data)
    return directory / name


@pytest.mark.parametrize(
    "shape,expect",
    [
        ("chain", {"info": 0, "validate": 0, "simulate": 0}),
        ("cycle", {"info": 0, "validate": 1, "simulate": None}),
        ("fan_in", {"info": 0, "validate": 0, "simulate": 0}),
    ],
)
def test_deep_and_wide_graphs_end_cleanly_without_recursion_limits(tmp_path, fixtures_dir, shape, expect):
    """20,000-deep dependency chains and cycles are far past Python's recursion limit; a 200-way
    fan-in on 2,000 nodes is 400k edges. All must finish in seconds with a clean outcome."""
    data = {
        "chain": lambda: chain_bytes(20_000),
        "cycle": lambda: chain_bytes(20_000, cycle=True),
        "fan_in": lambda: chain_bytes(2_000, fan_in=200),
    }[shape]()
    prefix = _write_set(tmp_path, shape, data)
    net = tmp_path / "ring2.yml"
    net.write_text(RING_NETWORK)
    system = fixtures_dir / "astra-sim" / "system" / "native_collectives" / "Ring_4chunks.json"
    for verb, code in expect.items():
        argv = (
            [verb, prefix]
            if verb != "simulate"
            else [
                verb,
                f"--workload-configuration={prefix}",
                f"--system-configuration={system}",
                f"--network-configuration={net}",
            ]
        )
        outcome = call_cli(argv, timeout=60)
        assert_clean(outcome, what=f"{verb} {shape}")
        if code is not None:
            assert outcome.code == code, f"{verb} {shape}: {outcome.stderr}"


@pytest.mark.slow
def test_million_node_trace_reads_validates_and_simulates_within_bounds(tmp_path, fixtures_dir):
    """10^6 nodes (17 MB per rank) through the real entry point, each verb under a 3 GiB address-space
    limit and a 10-minute bound; the chain's simulated time is 10^6 × 1 µs (replay mode, §2.4)."""
    prefix = _write_set(tmp_path, "big", chain_bytes(1_000_000))
    graph = load_graph(f"{prefix}.0.et")
    assert len(graph) == 1_000_000 and int(np.count_nonzero(np.diff(graph.data_ptr))) == 999_999
    net = tmp_path / "ring2.yml"
    net.write_text(RING_NETWORK)
    system = fixtures_dir / "astra-sim" / "system" / "native_collectives" / "Ring_4chunks.json"
    for argv in (
        ["info", prefix],
        ["validate", prefix],
        [
            "simulate",
            f"--workload-configuration={prefix}",
            f"--system-configuration={system}",
            f"--network-configuration={net}",
            f"--output-json={tmp_path / 'sim.json'}",
        ],
    ):
        outcome = run_cli(argv, timeout=600)
        assert_clean(outcome, allowed={0}, what=argv[0])
    import json

    result = json.loads((tmp_path / "sim.json").read_text())
    assert result["finish_ns"] == [1_000_000 * 1000] * 2


# -- extreme field values -------------------------------------------------------------------------


def _simulate_json(tmp_path: Path, fixtures_dir: Path, nodes) -> tuple:
    corpus = corpus_builder()
    prefix = _write_set(tmp_path, "x", corpus.encode(nodes))
    net = tmp_path / "ring2.yml"
    net.write_text(RING_NETWORK)
    system = fixtures_dir / "astra-sim" / "system" / "native_collectives" / "Ring_4chunks.json"
    out = tmp_path / "sim.json"
    outcome = call_cli(
        [
            "simulate",
            f"--workload-configuration={prefix}",
            f"--system-configuration={system}",
            f"--network-configuration={net}",
            f"--output-json={out}",
        ]
    )
    assert_clean(outcome, allowed={0, 2})
    import json

    return outcome, (json.loads(out.read_text()) if outcome.code == 0 else None)


@pytest.mark.parametrize("micros", [2**40, 2**63, 2**64 - 1])
def test_huge_durations_never_make_simulated_time_run_backwards(tmp_path, fixtures_dir, micros):
    """Replay mode takes ``duration_micros × 1000`` ns (astra-sim-semantics §2.4): a rank whose first
    node lasts that long cannot finish earlier — the result is at least that, or a clean refusal.
    (Durations of 2^63 µs and more once became negative and time ran backwards.)"""
    corpus = corpus_builder()
    outcome, result = _simulate_json(
        tmp_path, fixtures_dir, [corpus.comp(1, [], micros), corpus.coll(2, [1]), corpus.comp(3, [2], 3)]
    )
    if result is not None:
        assert min(result["finish_ns"]) >= micros * 1000, result["finish_ns"]
    else:  # the duration itself, or the run's times past the int64 ns clock (2^63 ns)
        assert "duration_micros" in outcome.stderr or "64-bit ns clock" in outcome.stderr, outcome.stderr
        assert micros * 1000 >= 2**63


def test_errors_name_node_ids_above_two_to_the_63_as_written(tmp_path, fixtures_dir):
    """Ids are uint64; an error about node 2^63 once named node -9223372036854775808."""
    corpus = corpus_builder()
    big = 2**63
    node = corpus.comp(big, [12345], 5)  # a data dep on a missing id: ASTRA-sim aborts loading (exit 2)
    outcome, _ = _simulate_json(tmp_path, fixtures_dir, [corpus.comp(1, [], 5), node])
    assert outcome.code == 2 and f"node {big}:" in outcome.stderr, outcome.stderr


def test_gzip_bomb_is_refused_before_it_is_expanded(tmp_path):
    """300 MiB of zeros in 300 KB of gzip: validate refuses it from the compression ratio, under a 3 GiB
    address-space limit and within seconds, naming the file."""
    import zlib

    from chakra_pipe.decompress import MAX_RATIO as MAX_GZIP_RATIO

    packer = zlib.compressobj(9, zlib.DEFLATED, 31)  # wbits 31: gzip container
    zeros = bytes(1 << 20)
    data = b"".join(packer.compress(zeros) for _ in range(300)) + packer.flush()
    assert len(data) * MAX_GZIP_RATIO < 300 << 20
    bomb = tmp_path / "bomb.0.et.gz"
    bomb.write_bytes(data)
    outcome = run_cli(["validate", bomb], timeout=60)
    assert_clean(outcome, allowed={2})
    assert f"{bomb}: " in outcome.stderr and "gzip bomb" in outcome.stderr, outcome.stderr
