"""Converting host ET / linked ET+ into Chakra: node kinds, comm attributes, deps, fixtures."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from nccl_traces import cpu_event

from chakra_pipe.convert.check import rank_problems, set_problems
from chakra_pipe.convert.pytorch import convert_trace
from chakra_pipe.convert.rankset import convert_file
from chakra_pipe.errors import InputError
from chakra_pipe.et import read_trace, schema
from chakra_pipe.et.attrs import get_attr
from chakra_pipe.link.hostet import parse_host_trace
from chakra_pipe.link.kineto import parse_kineto
from chakra_pipe.link.linker import link_traces

EMPTY = {"values": [], "shapes": [], "types": []}


def _n(nid, name, parent, values=None, types=None, **extra):
    node = {
        "id": nid,
        "name": name,
        "ctrl_deps": parent,
        "inputs": {"values": values or [], "shapes": [], "types": types or []},
        "outputs": dict(EMPTY),
        "attrs": [{"name": "tid", "type": "uint64", "value": 1}, {"name": "rf_id", "type": "uint64", "value": nid}],
    }
    node.update(extra)
    return node


def _t(tid, numel, itemsize=4):
    return [tid, tid + 1, 0, numel, itemsize, "cpu"]


PG_TABLE = [
    {
        "pg_name": "0",
        "pg_desc": "default_pg",
        "backend_config": "cpu:gloo",
        "ranks": [],
        "group_size": 4,
        "group_count": 2,
    },
    {
        "pg_name": "1",
        "pg_desc": "undefined",
        "backend_config": "cpu:gloo",
        "ranks": [0, 2],
        "group_size": 2,
        "group_count": 2,
    },
]


def gloo_trace():
    """A rank-0 gloo capture in miniature, with the shapes torch 2.13 records (pytorch-traces.md §7.2)."""
    nodes = [
        _n(1, "[pytorch|profiler|execution_trace|process]", 1),
        _n(2, "[pytorch|profiler|execution_trace|thread]", 1),
        _n(3, "## process_group:init ##", 2, [json.dumps(PG_TABLE)], ["String"]),
        _n(4, "ProfilerStep#1", 2, exclusive_dur=10, inclusive_dur=500, ts=1000),
        _n(5, "aten::mm", 4, exclusive_dur=20, inclusive_dur=20, ts=1001),
        # all_reduce on the sub-group (label from capture), 1000 floats, blocking.
        # The linker measured 50 us of the label's own time idle while gloo ran (``comm_wait``).
        _n(10, "chakra_pipe.pg:1", 4, exclusive_dur=60, inclusive_dur=70, ts=1030, comm_wait=50),
        _n(
            11,
            "c10d::allreduce_",
            10,
            [[_t(90, 1000)], "<Object>", "<Object>", "<None>", False, -1],
            ["GenericList[Tensor(float)]", "Object", "Object", "None", "Bool", "Int"],
            exclusive_dur=5,
            inclusive_dur=10,
            ts=1031,
        ),
        _n(12, "gloo:all_reduce", 4, [_t(90, 1000)], ["Tensor(float)"], inclusive_dur=50, ts=1040),
        # all_gather into a 4x tensor: comm_size is the per-rank *input* (ASTRA-sim §6.1).
        _n(
            20,
            "c10d::_allgather_base_",
            4,
            [_t(100, 1024), _t(102, 256), "<Object>", False, -1],
            ["Tensor(float)", "Tensor(float)", "Object", "Bool", "Int"],
            exclusive_dur=3,
            inclusive_dur=3,
            ts=1100,
        ),
        _n(21, "gloo:all_gather", 20, [_t(102, 256)], ["Tensor(float)"], inclusive_dur=40, ts=1101),
        # reduce_scatter: full input; two gloo ranges (list form) add up.
        _n(
            30,
            "c10d::_reduce_scatter_base_",
            4,
            [_t(110, 64), _t(112, 256), "<Object>", "<Object>", False, -1],
            ["Tensor(float)", "Tensor(float)", "Object", "Object", "Bool", "Int"],
            inclusive_dur=2,
            ts=1200,
        ),
        _n(31, "gloo:all_reduce", 4, [_t(112, 256)], ["Tensor(float)"], inclusive_dur=7, ts=1201),
        _n(32, "gloo:all_reduce", 4, [_t(112, 256)], ["Tensor(float)"], inclusive_dur=8, ts=1210),
        # send of 64 floats to group-local rank 1 of sub-group [0, 2] = global rank 2, tag 7.
        _n(40, "chakra_pipe.pg:1", 4, exclusive_dur=30, inclusive_dur=31, ts=1300),
        _n(
            41,
            "c10d::send",
            40,
            [[_t(120, 64)], "<Object>", 1, 7],
            ["GenericList[Tensor(float)]", "Object", "Int", "Int"],
            inclusive_dur=1,
            ts=1300,
        ),
        _n(42, "gloo:send", 41, [_t(120, 64)], ["Tensor(float)"], inclusive_dur=25, ts=1301),
        _n(
            50,
            "c10d::broadcast_",
            4,
            [[_t(130, 10, 8)], "<Object>", 0, 0, False, -1],
            ["GenericList[Tensor(long)]", "Object", "Int", "Int", "Bool", "Int"],
            inclusive_dur=4,
            ts=1400,
        ),
        _n(60, "aten::add_", 4, exclusive_dur=2, inclusive_dur=2, ts=1450),
    ]
    return {"schema": "1.1.1-chakra.0.0.4", "pid": 1, "time": "t", "start_ts": 0, "nodes": nodes, "finish_ts": 1}


def _convert(obj, rank=0):
    conv = convert_trace(parse_host_trace(obj, "trace.json"), rank)
    return conv, {n.id: n for n in conv.nodes}


def test_gloo_collectives_become_comm_nodes_with_astra_sim_sizes():
    conv, nodes = _convert(gloo_trace())
    comm = {
        nid: (n.type, get_attr(n, "comm_type", None), get_attr(n, "comm_size"), get_attr(n, "pg_name"))
        for nid, n in nodes.items()
        if n.type in (schema.COMM_COLL_NODE, schema.COMM_SEND_NODE)
    }
    assert comm == {
        11: (schema.COMM_COLL_NODE, schema.ALL_REDUCE, 4000, "1"),
        20: (schema.COMM_COLL_NODE, schema.ALL_GATHER, 1024, "0"),
        30: (schema.COMM_COLL_NODE, schema.REDUCE_SCATTER, 1024, "0"),
        41: (schema.COMM_SEND_NODE, None, 256, "1"),
        50: (schema.COMM_COLL_NODE, schema.BROADCAST, 80, "0"),
    }
    for nid in comm:
        assert get_attr(nodes[nid], "is_cpu_op") is False
    assert conv.used_pgs == {"1"}


def test_sizes_fall_back_to_recorded_shapes_and_dtypes():
    from chakra_pipe.convert.collectives import shape_bytes

    assert shape_bytes([[1000]], "GenericList[Tensor(float)]") == 4000
    assert shape_bytes([[2, 3], [4]], "GenericList[Tensor(double),Tensor(double)]") == 80
    assert shape_bytes([16, 8], "Tensor(c10::BFloat16)") == 256
    assert shape_bytes([16, 8], "Tensor(quint4x2)") == 0  # unknown dtype: no guess
    obj = gloo_trace()
    node = next(n for n in obj["nodes"] if n["id"] == 11)
    node["inputs"]["values"][0] = [[90, 91, 0, 0, 0, "cpu"]]  # tuple without numel/itemsize
    node["inputs"]["shapes"] = [[[10, 100]], [], [], [], [], []]
    _, nodes = _convert(obj)
    assert get_attr(nodes[11], "comm_size") == 4000


def test_p2p_peer_is_mapped_from_group_local_to_global():
    _, nodes = _convert(gloo_trace())
    send = nodes[41]
    assert (get_attr(send, "comm_src"), get_attr(send, "comm_dst"), get_attr(send, "comm_tag")) == (0, 2, 7)
    kinds = {a.name: a.WhichOneof("value") for a in send.attr}
    assert kinds["comm_src"] == kinds["comm_dst"] == kinds["comm_tag"] == "int32_val"
    assert kinds["comm_size"] == "int64_val" and kinds["pg_name"] == "string_val"


def test_gloo_duration_is_the_worker_range_and_the_measured_wait_leaves_the_caller():
    _, nodes = _convert(gloo_trace())
    assert nodes[11].duration_micros == 50  # gloo:all_reduce, not the 10 us enqueue
    assert nodes[30].duration_micros == 15  # two gloo ranges of the list form
    assert nodes[50].duration_micros == 4  # no gloo range: the op's own time
    assert nodes[10].duration_micros == 60 - 50  # the label's idle while the all_reduce ran
    assert nodes[5].duration_micros == 20 and nodes[5].start_time_micros == 1001


def test_implementation_nodes_and_roots_are_folded_and_deps_stay_inside():
    conv, nodes = _convert(gloo_trace())
    assert not {1, 2, 12, 21, 31, 32, 42} & set(nodes)
    assert nodes[3].type == schema.METADATA_NODE
    # The METADATA payload is ASTRA-sim's ['<json>'] form.
    assert json.loads(nodes[3].inputs.values[2:-2]) == PG_TABLE
    assert rank_problems(conv.nodes) == []
    # One chain per thread in call order; the send follows its label and precedes the broadcast.
    assert list(nodes[41].data_deps) == [40] and list(nodes[50].data_deps) == [41]
    assert list(nodes[41].ctrl_deps) == [40] and list(nodes[4].ctrl_deps) == []


def _nccl_allreduce(device_op: dict) -> tuple[dict, dict]:
    """A 1.1.0-style NCCL all-reduce on a 2-rank group, host ET + Kineto: ``c10d::allreduce_`` (own
    10 us) > ``record_param_comms`` (10 us) > ``nccl:all_reduce`` (8 us), whose launch at 107 us
    starts ``device_op`` (correlation 5), then ``aten::add_``."""

    def a(name, value):
        return {"name": name, "type": "string" if isinstance(value, str) else "uint64", "value": value}

    rpc = _n(
        6, "record_param_comms", 5, [[_t(200, 53120)], 1, ["0", "default_pg"], 0, "allreduce", [], [], 0, 1, 2], ts=105
    )
    rpc["attrs"] += [
        a("collective_name", "allreduce"),
        a("dtype", "Float"),
        a("in_msg_nelems", 53120),
        a("pg_name", "0"),
    ]
    nodes = [
        _n(1, "[pytorch|profiler|execution_trace|process]", 1),
        _n(2, "[pytorch|profiler|execution_trace|thread]", 1),
        _n(5, "c10d::allreduce_", 2, [[_t(200, 53120)], "<Object>", "<Object>", "<None>", False, -1]),
        rpc,
        _n(7, "nccl:all_reduce", 6),
        _n(8, "aten::add_", 2),
    ]
    host = {"schema": "1.1.0-chakra.0.0.4", "pid": 9, "nodes": nodes}

    def ev(name, rf, ts, dur):
        return cpu_event(name, rf, ts, dur, **{"External id": rf})

    launch = "cudaLaunchKernel" if device_op["cat"] == "kernel" else "cudaMemcpyAsync"
    kineto = {
        "traceEvents": [
            ev("c10d::allreduce_", 5, 100, 20),
            ev("record_param_comms", 6, 105, 10),
            ev("nccl:all_reduce", 7, 106, 8),
            ev("aten::add_", 8, 130, 5),
            {
                "ph": "X",
                "cat": "cuda_runtime",
                "name": launch,
                "pid": 9,
                "tid": 1,
                "ts": 107,
                "dur": 1,
                "args": {"correlation": 5, "External id": 7},
            },
            {"ph": "X", "pid": 0, "tid": 20, "ts": 150, "args": {"correlation": 5, "stream": 20, "device": 0}}
            | device_op,
        ]
    }
    return host, kineto


def test_nccl_record_param_comms_with_attrs_and_linked_kernel():
    """1.1.0-style NCCL record: the linked kernel carries the comm; host ops stay CPU COMP."""
    host, kineto = _nccl_allreduce({"cat": "kernel", "name": "ncclDevKernel_AllReduce_Sum_f32_RING_LL", "dur": 40})
    obj, stats = link_traces(parse_host_trace(host, "h"), parse_kineto(kineto, "k"))
    assert stats.attached == 1
    conv, out = _convert(obj)
    kernel = out[9]
    assert (kernel.type, get_attr(kernel, "comm_type"), get_attr(kernel, "comm_size"), get_attr(kernel, "pg_name")) == (
        schema.COMM_COLL_NODE,
        schema.ALL_REDUCE,
        53120 * 4,
        "0",
    )
    assert kernel.duration_micros == 40 and kernel.start_time_micros == 150
    assert list(kernel.data_deps) == [7]  # after its launching op (nccl:all_reduce)
    assert out[5].type == out[6].type == out[7].type == schema.COMP_NODE
    assert rank_problems(conv.nodes) == []


def test_nccl_record_without_kernel_keeps_its_host_time_on_the_host():
    """A linked NCCL record with no NCCL kernel below (a one-member group: NCCL copies or does nothing)
    is the COMM node and lasts its device work; its host time (the launch) stays host compute on its
    caller, as the host ops above a kernel do, so none of the traced host time is lost."""
    host, kineto = _nccl_allreduce({"cat": "gpu_memcpy", "name": "Memcpy DtoD (Device -> Device)", "dur": 3})
    obj, _ = link_traces(parse_host_trace(host, "h"), parse_kineto(kineto, "k"))
    conv, out = _convert(obj)
    assert sorted(out) == [5, 6, 8]  # the range and the copy are the collective's own work
    assert out[6].type == schema.COMM_COLL_NODE and get_attr(out[6], "comm_size") == 53120 * 4
    assert out[6].duration_micros == 3  # the copy, not the record's 10 us on the host
    assert out[5].duration_micros == 10 + 10  # c10d's own time and the record's launch
    # The record is device work hung off its launch; aten::add_ reads no collective tensor, so the
    # host goes on after the enqueue (tests/test_convert_nccl_async.py; before: add_ after the record).
    assert list(out[6].data_deps) == [5] and list(out[8].data_deps) == [5]
    assert rank_problems(conv.nodes) == []


def test_nccl_record_without_kernel_or_caller_keeps_its_host_time():
    """With no caller in the file to run the launch on, the record keeps its host time as its own."""
    host, kineto = _nccl_allreduce({"cat": "gpu_memcpy", "name": "Memcpy DtoD (Device -> Device)", "dur": 3})
    host["nodes"] = [n for n in host["nodes"] if n["id"] != 5]
    host["nodes"][2]["ctrl_deps"] = 2  # the record, called from the thread itself
    kineto["traceEvents"] = [e for e in kineto["traceEvents"] if e["name"] != "c10d::allreduce_"]
    obj, _ = link_traces(parse_host_trace(host, "h"), parse_kineto(kineto, "k"))
    _, out = _convert(obj)
    assert sorted(out) == [6, 8] and out[6].type == schema.COMM_COLL_NODE and out[6].duration_micros == 10
    assert list(out[8].data_deps) == [6]  # that host time is the thread's: it stays in the chain


def test_gpu_ops_follow_launcher_and_stream_and_sync_waits_become_deps():
    from test_link_traces import with_device_synchronize

    host, k = with_device_synchronize()
    obj, _ = link_traces(parse_host_trace(host, "h"), parse_kineto(k, "k"))
    conv, out = _convert(obj)
    ids = {n.name: n.id for n in conv.nodes}
    sgemm, memset, relu = ids["sgemm"], ids["Memset"], ids["relu_kernel"]
    # CPU chain in call order: Outer -> mm -> relu -> item (+ waits for the kernel before it).
    assert [list(out[i].data_deps) for i in (3, 4, 5)] == [[], [3], [4]]
    assert list(out[6].data_deps) == [5, relu]
    # Kernels after their launching op and the previous op of stream 7.
    assert list(out[sgemm].data_deps) == [4]
    assert list(out[memset].data_deps) == [3, sgemm]
    assert list(out[relu].data_deps) == [5, memset]
    assert get_attr(out[sgemm], "is_cpu_op") is False and get_attr(out[sgemm], "stream") == 7
    assert out[3].duration_micros == 6 and out[sgemm].duration_micros == 5
    assert rank_problems(conv.nodes) == [] and conv.sync_dropped == 0


def test_threads_chain_separately_and_a_resuming_thread_waits_for_the_other():
    def op(nid, name, tid, ts, dur):
        node = _n(nid, name, 2, ts=ts, inclusive_dur=dur, exclusive_dur=dur)
        node["attrs"][0]["value"] = tid
        return node

    nodes = [
        _n(1, "[pytorch|profiler|execution_trace|process]", 1),
        _n(2, "[pytorch|profiler|execution_trace|thread]", 1),
        op(3, "aten::sum", 1, 0, 10),  # main thread: the loss
        op(4, "MulBackward0", 2, 20, 100),  # autograd thread starts after it
        op(5, "AddmmBackward0", 2, 130, 10),  # 10 us later: same burst, no cross edge
        op(6, "Optimizer.step", 1, 500, 10),
    ]  # main thread resumes after a 490 us wait
    _, out = _convert({"schema": "1.1.1-chakra.0.0.4", "nodes": nodes})
    assert [list(out[i].data_deps) for i in (3, 4, 5, 6)] == [[], [3], [4], [3, 5]]


def test_gpu_wait_edges_that_would_close_a_cycle_are_dropped():
    # Inconsistent clocks: op 4 runs after op 3 in call order but carries an earlier timestamp,
    # so "3 waits for the kernel op 4 launched" would close the cycle 3 -> 9 -> 4 -> 3.
    nodes = [
        _n(1, "[pytorch|profiler|execution_trace|process]", 1),
        _n(2, "[pytorch|profiler|execution_trace|thread]", 1),
        _n(3, "aten::item", 2, ts=100, exclusive_dur=1, inclusive_dur=1, sync_dep=[9]),
        _n(4, "aten::mm", 2, ts=50, exclusive_dur=1, inclusive_dur=1),
        _n(9, "gemm", 4, ts=60, inclusive_dur=5, cat="kernel", stream=7, args={"device": 0}),
    ]
    conv, out = _convert({"schema": "1.1.1-chakra.0.0.4", "nodes": nodes})
    assert conv.sync_dropped == 1
    assert list(out[3].data_deps) == [] and list(out[4].data_deps) == [3] and list(out[9].data_deps) == [4]
    assert rank_problems(conv.nodes) == []


def test_send_recv_matching_across_ranks():
    def p2p(kind, peer):
        nodes = [
            _n(1, "[pytorch|profiler|execution_trace|process]", 1),
            _n(2, "[pytorch|profiler|execution_trace|thread]", 1),
            _n(3, f"c10d::{kind}", 2, [[_t(5, 16)], "<Object>", peer, 3], inclusive_dur=1),
        ]
        return {"schema": "1.1.1-chakra.0.0.4", "nodes": nodes}

    r0, _ = _convert(p2p("send", 1), rank=0)
    r1, _ = _convert(p2p("recv_", 0), rank=1)
    assert set_problems([r0.nodes, r1.nodes]) == []
    r1_wrong, _ = _convert(p2p("recv_", 0), rank=0)
    assert {f.rule for f in set_problems([r0.nodes, r1_wrong.nodes])} == {"comm-node", "p2p-unmatched"}


def _validate(prefix: str):
    from chakra_pipe import validate

    report = validate.validate_set(prefix, strict=True)
    return report


def test_chakra_fixture_102_converts_and_validates(fixtures_dir: Path, tmp_path: Path):
    out = tmp_path / "c102.0.et"
    summary = convert_file(fixtures_dir / "chakra" / "pytorch_et_1.0.2-chakra.0.0.4.json", out)
    _, nodes = read_trace(out)
    comm = [n for n in nodes if n.type == schema.COMM_COLL_NODE]
    # 10 record_param_comms all_gather records (the 10 waits stay COMP), 1-float tensor each.
    assert len(comm) == 10
    assert {(get_attr(n, "comm_type"), get_attr(n, "comm_size"), get_attr(n, "pg_name")) for n in comm} == {
        (schema.ALL_GATHER, 4, "0")
    }
    assert summary.counts[schema.METADATA_NODE] == 1
    assert rank_problems(nodes) == []
    assert _validate(str(tmp_path / "c102")).errors == 0


def test_flat_101_fixture_converts(fixtures_dir: Path, tmp_path: Path):
    out = tmp_path / "linear.0.et"
    convert_file(fixtures_dir / "pytorch" / "linear_et.json.gz", out)
    _, nodes = read_trace(out)
    assert len(nodes) == 931 - 3  # process root and two thread roots are not emitted
    assert rank_problems(nodes) == []
    assert _validate(str(tmp_path / "linear")).errors == 0


@pytest.mark.slow
def test_resnet_fixture_converts_with_nccl_collectives(fixtures_dir: Path, tmp_path: Path):
    out = tmp_path / "resnet.0.et"
    convert_file(fixtures_dir / "pytorch" / "resnet_et.json.gz", out)
    _, nodes = read_trace(out)
    kinds = sorted(get_attr(n, "comm_type") for n in nodes if n.type == schema.COMM_COLL_NODE)
    assert kinds == [schema.ALL_REDUCE] * 15 + [schema.BROADCAST] * 6  # the 6 waits are not collectives
    assert rank_problems(nodes) == []
    assert _validate(str(tmp_path / "resnet")).errors == 0


def test_convert_is_deterministic(tmp_path: Path):
    src = tmp_path / "t.json"
    src.write_text(json.dumps(gloo_trace()))
    convert_file(src, tmp_path / "a.0.et")
    convert_file(src, tmp_path / "b.0.et")
    assert (tmp_path / "a.0.et").read_bytes() == (tmp_path / "b.0.et").read_bytes()
    assert json.loads((tmp_path / "a.comm_groups.json").read_text()) == {"1": [0, 2]}


def test_bad_inputs_fail_with_one_line(tmp_path: Path):
    src = tmp_path / "t.json"
    src.write_text(json.dumps(gloo_trace()))
    with pytest.raises(InputError, match="PREFIX.RANK.et"):
        convert_file(src, tmp_path / "noprefix.et")
    obj = gloo_trace()
    obj["distributedInfo"] = {"rank": 1, "world_size": 4}
    src.write_text(json.dumps(obj))
    with pytest.raises(InputError, match="trace is rank 1"):
        convert_file(src, tmp_path / "x.0.et")
    src.write_text("[1, 2")
    r = subprocess.run(
        [sys.executable, "-m", "chakra_pipe.cli", "convert", "pytorch", str(src), "--out", str(tmp_path / "y.0.et")],
        capture_output=True,
        text=True,
    )
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1 and "invalid JSON" in r.stderr
    assert not (tmp_path / "y.0.et").exists()
