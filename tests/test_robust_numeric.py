"""Numeric extremes: unsigned 64-bit attribute values and huge numbers in every config reader.

uint64 sizes of 2^63 and more are read unsigned (as ASTRA-sim's feeder reads ``uint64_val``), so a
huge ``tensor_size`` is a huge positive roofline time, never a negative one.
"""

from __future__ import annotations

import json

import pytest
from test_robust_support import RING_NETWORK, RING_SYSTEM, assert_clean, call_cli, corpus_builder

from chakra_pipe.et import schema
from chakra_pipe.et.graph import graph_from_bytes

SYSTEM = {**RING_SYSTEM, "roofline-enabled": 1}


def _roofline_ns(num_ops: int, tensor_size: int) -> int:
    """astra-sim-semantics §2.4: operational intensity, then min(memory-bound, peak) performance."""
    perf = min(SYSTEM["local-mem-bw"] * 1e9 * (num_ops / tensor_size), SYSTEM["peak-perf"] * 1e12)
    return int(num_ops / perf * 1e9)


@pytest.mark.parametrize("length", [2, 60], ids=["record-by-record", "vectorised"])
@pytest.mark.parametrize("tensor_size", [2**63, 2**63 + 12345, 2**64 - 1])
def test_uint64_tensor_size_past_int64_is_a_huge_positive_roofline_time(tmp_path, length, tensor_size):
    corpus = corpus_builder()
    big = corpus.with_attr(corpus.comp(1, [], 0), "tensor_size", tensor_size, "uint64_val")
    nodes = [big] + [corpus.comp(i, [i - 1], 1) for i in range(2, length + 1)]
    data = corpus.encode(nodes)
    graph = graph_from_bytes(data)
    assert graph.exact_ints("tensor_size")[0] == tensor_size
    assert graph.int_attr("tensor_size")[0] == 2**63 - 1  # saturates, never wraps negative
    for rank in range(2):
        (tmp_path / f"t.{rank}.et").write_bytes(data)
    (tmp_path / "sys.json").write_text(json.dumps(SYSTEM))
    (tmp_path / "net.yml").write_text(RING_NETWORK)
    out = tmp_path / "sim.json"
    outcome = call_cli(
        [
            "simulate",
            f"--workload-configuration={tmp_path / 't'}",
            f"--system-configuration={tmp_path / 'sys.json'}",
            f"--network-configuration={tmp_path / 'net.yml'}",
            f"--output-json={out}",
        ]
    )
    assert_clean(outcome, allowed={0})
    finish = json.loads(out.read_text())["finish_ns"]
    first = _roofline_ns(1000, tensor_size)
    assert first > 10**15
    rest = sum(_roofline_ns(1000, 4096) for _ in range(length - 1))
    assert finish == [first + rest] * 2


def test_uint64_comm_size_past_int64_is_not_negative_in_validate(tmp_path):
    """validate sees a uint64 comm_size of 2^64-1 as huge, not as -1 ("negative size")."""
    corpus = corpus_builder()
    coll = corpus.with_attr(corpus.coll(1, []), "comm_size", 2**64 - 1, "uint64_val")
    graph = graph_from_bytes(corpus.encode([coll]))
    assert graph.int_attr("comm_size")[0] > 0 and graph.exact_ints("comm_size") == [2**64 - 1]
    assert graph.attr_kind["comm_size"][0] == schema.AttributeProto.DESCRIPTOR.fields_by_name["uint64_val"].number


# -- dejsonize: attribute values at and past the limits of their kinds ---------------------------


def _dejsonize(tmp_path, attr_text: str):
    from chakra_pipe.et.jsonio import dejsonize

    src = tmp_path / "t.json"
    src.write_text(
        '{"metadata": {"version": "0.0.4", "attr": []}, "nodes": [{"id": 1, "name": "n", "type": '
        '"COMP_NODE", "attr": [' + attr_text + "]}]}"
    )
    return dejsonize(src, tmp_path / "t.et")


@pytest.mark.parametrize(
    "attr,what,where",
    [
        (
            '{"name": "x", "kind": "double_val", "value": 1' + "0" * 400 + "}",
            "overflows a double",
            "nodes[0].attr[0].value",
        ),
        ('{"name": "x", "kind": "float_val", "value": 1e300}', "overflows a 32-bit float", "nodes[0].attr[0].value"),
        (
            '{"name": "x", "kind": "float_list", "value": [1, "1e39"]}',
            "overflows a 32-bit float",
            "nodes[0].attr[0].value[1]",
        ),
        ('{"name": "x", "kind": ["int64_val"], "value": 1}', "unknown attribute kind", "nodes[0].attr[0].kind"),
        ('{"name": "x", "kind": {"a": 1}, "value": 1}', "unknown attribute kind", "nodes[0].attr[0].kind"),
        ('{"name": "x", "kind": "int64_val", "value": 9223372036854775808}', "out of range", "nodes[0].attr[0].value"),
        ('{"name": "x", "kind": "uint64_val", "value": -1}', "out of range", "nodes[0].attr[0].value"),
        ('{"name": "x", "kind": "int64_val", "value": ' + "9" * 5000 + "}", "4,300 digits", "line 1 column"),
        (
            '{"name": "x", "doc_string": 5, "kind": "int64_val", "value": 1}',
            "must be a string",
            "nodes[0].attr[0].doc_string",
        ),
    ],
)
def test_dejsonize_refuses_values_its_kind_cannot_hold(tmp_path, attr, what, where):
    from chakra_pipe.errors import InputError

    with pytest.raises(InputError) as exc:
        _dejsonize(tmp_path, attr)
    assert what in exc.value.what and exc.value.where.startswith(where), exc.value.line()
    assert exc.value.file == str(tmp_path / "t.json") and not (tmp_path / "t.et").exists()


def test_dejsonize_keeps_the_non_finite_values_jsonize_writes(tmp_path):
    from chakra_pipe.et.framing import read_trace

    _dejsonize(tmp_path, '{"name": "x", "kind": "float_list", "value": ["Infinity", "NaN", 3.4e38]}')
    values = list(read_trace(tmp_path / "t.et")[1][0].attr[0].float_list.values)
    assert values[0] == float("inf") and values[1] != values[1] and values[2] == pytest.approx(3.4e38, rel=1e-6)
