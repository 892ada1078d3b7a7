"""A NCCL collective is asynchronous to the host: a kernel-less COMM node blocks only what uses it.

``record_param_comms`` without a NCCL kernel below (a host-only multi-rank NCCL trace, or a
one-member group) is the COMM node. The thread goes on right after the enqueue (its ``c10d::``
caller); the ``wait`` record of the same sequence number and the first later op of each thread
reading the collective's tensor depend on the COMM node, and the next collective of the group
follows it (one NCCL stream per group). Above a linked NCCL kernel nothing changes.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from nccl_traces import NUMEL, PG_INIT, host_op, ring_hardware

from chakra_pipe.convert.collectives import RecordSeq, record_seq
from chakra_pipe.convert.pytorch import convert_trace
from chakra_pipe.convert.rankset import write_rank_set
from chakra_pipe.et import TraceSet, schema
from chakra_pipe.link.hostet import parse_host_trace
from chakra_pipe.link.kineto import parse_kineto
from chakra_pipe.link.linker import link_traces
from chakra_pipe.sim import simulate

EMPTY = {"values": [], "shapes": [], "types": []}


def _t(tid: int, numel: int) -> list:
    return [tid, tid + 1, 0, numel, 4, "cuda:0"]


def _record(nid, parent, tensors, seq, name, out=None) -> dict:
    """A 1.1.x ``record_param_comms``: ``[tensors, [seq, isP2P], [pg, desc], rank, name, …, group size]``."""
    values = [tensors, [seq, False], ["0", "default_pg"], 0, name, [], [], 0, 1, 2]
    return host_op(nid, "record_param_comms", parent, values, out if out is not None else tensors)


def host_only_rank(relu_us: float = 0.0) -> dict:
    """One rank of a host-only 2-rank NCCL step: an async all-reduce of ``x`` (storage 201), an
    independent ``relu`` (lasting ``relu_us`` when given), ``add_`` reading ``x``, then a blocking
    all-gather waited on with ``work.wait()`` and a last op."""
    x, gathered, part = _t(200, NUMEL), _t(300, 2), _t(310, 1)
    nodes = [
        host_op(1, "[pytorch|profiler|execution_trace|process]", 1),
        host_op(2, "[pytorch|profiler|execution_trace|thread]", 1),
        host_op(3, "## process_group:init ##", 2, [PG_INIT]),
        host_op(4, "aten::mm", 2, outputs=[x]),
        host_op(5, "c10d::allreduce_", 2, [[x], "<Object>", "<Object>", "<None>", True, -1]),
        _record(6, 5, [x], 28, "allreduce"),
        host_op(7, "nccl:all_reduce", 6, [x]),
        host_op(8, "aten::relu", 2, [_t(400, 8)], **({"exclusive_dur": relu_us} if relu_us else {})),
        host_op(9, "aten::add_", 2, [x, _t(410, 8)]),
        host_op(10, "c10d::_allgather_base_", 2, [gathered, part, "<Object>", False, -1]),
        _record(11, 10, [part], 29, "_allgather_base", out=[gathered]),
        host_op(12, "nccl:_all_gather_base", 11, [part]),
        host_op(13, "record_param_comms", 2, [[29, False], ["", ""], 0, "wait", [], [], -1, -1, 1]),
        host_op(14, "aten::mul", 2, [_t(420, 8)]),
    ]
    return {"schema": "1.1.1-chakra.0.0.4", "pid": 1, "time": "t", "start_ts": 0, "nodes": nodes, "finish_ts": 1}


def _convert(obj: dict, rank: int = 0):
    conv = convert_trace(parse_host_trace(obj, f"rank{rank}.json"), rank)
    return conv, {n.id: n for n in conv.nodes}


def test_host_only_nccl_collective_blocks_only_its_consumers():
    _, out = _convert(host_only_rank())
    assert out[6].type == out[11].type == schema.COMM_COLL_NODE
    deps = {nid: list(out[nid].data_deps) for nid in (5, 6, 8, 9, 10, 11, 13, 14)}
    assert deps == {
        5: [4],
        6: [5],  # after its launch
        8: [5],  # the host goes on right after the enqueue (before: [6])
        9: [8, 6],  # add_ reads the all-reduced tensor
        10: [9],
        11: [10, 6],  # after its launch and the group's previous collective (one NCCL stream)
        13: [10, 11],  # work.wait() of seq 29
        14: [13],
    }


def _finish_us(tmp_path: Path, relu_us: float) -> float:
    prefix = str(tmp_path / f"r{relu_us:g}")
    write_rank_set(prefix, [convert_trace(parse_host_trace(host_only_rank(relu_us), "h"), r) for r in range(2)])
    return max(simulate(TraceSet.load(prefix), ring_hardware(10.0)).finish_ns) / 1e3


def test_host_only_nccl_all_reduce_overlaps_independent_host_work(tmp_path):
    """A 2-rank simulation: the 4 MiB all-reduce (~395 us) runs under the independent 1 ms ``relu``
    and only the 8-byte all-gather's 0.09 us follow it. Before, the thread sat out the all-reduce
    first: 1394.754 us, the step without the relu (394.755 us) plus 1 ms."""
    without = _finish_us(tmp_path, 0.0)
    with_relu = _finish_us(tmp_path, 1000.0)
    assert without > 300  # the all-reduce takes network time
    assert 1000 <= with_relu < 1001


def _linked_allreduce(kernel: bool) -> tuple[dict, dict]:
    """One linked NCCL all-reduce, ``c10d`` > record > ``nccl:all_reduce`` launching a NCCL kernel
    (or, for a one-member group, a copy), then ``aten::add_`` reading the tensor."""
    x = _t(200, NUMEL)
    nodes = [
        host_op(1, "[pytorch|profiler|execution_trace|process]", 1),
        host_op(2, "[pytorch|profiler|execution_trace|thread]", 1),
        host_op(5, "c10d::allreduce_", 2, [[x], "<Object>", "<Object>", "<None>", False, -1]),
        _record(6, 5, [x], 3, "allreduce"),
        host_op(7, "nccl:all_reduce", 6, [x]),
        host_op(8, "aten::relu", 2),
        host_op(9, "aten::add_", 2, [x]),
    ]
    host = {"schema": "1.1.1-chakra.0.0.4", "pid": 9, "nodes": nodes}

    def ev(name, rf, ts, dur, cat="cpu_op", **args):
        return {"ph": "X", "cat": cat, "name": name, "pid": 9, "tid": 1, "ts": ts, "dur": dur, "args": args}

    device = (
        {"cat": "kernel", "name": "ncclDevKernel_AllReduce_Sum_f32_RING_LL", "dur": 40}
        if kernel
        else {"cat": "gpu_memcpy", "name": "Memcpy DtoD (Device -> Device)", "dur": 3}
    )
    kineto = {
        "traceEvents": [
            ev("c10d::allreduce_", 5, 100, 20, **{"Record function id": 5}),
            ev("record_param_comms", 6, 105, 10, **{"Record function id": 6}),
            ev("nccl:all_reduce", 7, 106, 8, **{"Record function id": 7}),
            ev("aten::relu", 8, 125, 5, **{"Record function id": 8}),
            ev("aten::add_", 9, 135, 5, **{"Record function id": 9}),
            ev("cudaLaunchKernel", 0, 107, 1, "cuda_runtime", correlation=5),
            {"ph": "X", "pid": 0, "tid": 20, "ts": 150, "args": {"correlation": 5, "stream": 20, "device": 0}} | device,
        ]
    }
    return host, kineto


def test_linked_nccl_kernel_graph_is_unchanged():
    """Above a linked NCCL kernel the kernel is the COMM node, hung off its launch, as before."""
    host, kineto = _linked_allreduce(kernel=True)
    obj, _ = link_traces(parse_host_trace(host, "h"), parse_kineto(kineto, "k"))
    _, out = _convert(obj)
    assert out[10].type == schema.COMM_COLL_NODE and out[6].type == schema.COMP_NODE
    assert {nid: list(n.data_deps) for nid, n in out.items()} == {
        5: [],
        6: [5],
        7: [6],
        8: [7],
        9: [8],
        10: [7],
    }


def test_linked_kernel_less_record_blocks_only_its_consumer():
    """A one-member group's record (no NCCL kernel) with Kineto times: same rule as host-only."""
    host, kineto = _linked_allreduce(kernel=False)
    obj, _ = link_traces(parse_host_trace(host, "h"), parse_kineto(kineto, "k"))
    _, out = _convert(obj)
    assert out[6].type == schema.COMM_COLL_NODE
    assert {nid: list(n.data_deps) for nid, n in out.items()} == {5: [], 6: [5], 8: [5], 9: [8, 6]}


def _two_groups_rank(nodes: list[dict]) -> dict:
    """A rank with the default group "0" and a sub-group "1" around ``nodes``."""
    table = json.loads(PG_INIT) + [
        {"pg_name": "1", "pg_desc": "sub", "backend_config": "cuda:nccl", "ranks": [0, 1], "group_size": 2}
    ]
    head = [
        host_op(1, "[pytorch|profiler|execution_trace|process]", 1),
        host_op(2, "[pytorch|profiler|execution_trace|thread]", 1),
        host_op(3, "## process_group:init ##", 2, [json.dumps(table)]),
    ]
    return {"schema": "1.1.1-chakra.0.0.4", "pid": 1, "time": "t", "start_ts": 0, "nodes": head + nodes, "finish_ts": 1}


def _grouped(nid, parent, tensors, seq, pg) -> dict:
    values = [tensors, [seq, False], [pg, "sub"], 0, "allreduce", [], [], 0, 1, 2]
    return host_op(nid, "record_param_comms", parent, values, tensors)


def _wait(nid, seq, pg) -> dict:
    """``WorkNCCL::wait`` as torch >= 2.4 records it: its work's sequence number and group."""
    return host_op(nid, "record_param_comms", 2, [[seq, False], [pg, "sub"], 0, "wait", [], [], -1, -1, 1])


def test_a_wait_depends_on_its_own_groups_collective():
    """Each process group counts its own sequence numbers, so two groups' collectives can share
    one: a wait naming its group waits for that group's (before: the latest of either, so the
    wait of group "0" waited for group "1"'s all-reduce and group "1"'s wait for none)."""
    x, y = _t(200, NUMEL), _t(300, NUMEL)
    _, out = _convert(
        _two_groups_rank(
            [
                host_op(10, "c10d::allreduce_", 2, [[x]]),
                _grouped(11, 10, [x], 5, "0"),
                host_op(12, "c10d::allreduce_", 2, [[y]]),
                _grouped(13, 12, [y], 5, "1"),
                _wait(14, 5, "0"),
                host_op(15, "aten::relu", 2),
                _wait(16, 5, "1"),
            ]
        )
    )
    assert list(out[14].data_deps) == [12, 11]
    assert list(out[16].data_deps) == [15, 13]


def test_record_seq_reads_every_layout():
    """pytorch-traces.md §2.4: a collective leads with its tensor list, a ``wait`` or ``barrier``
    record (no data) with its number; the number is ``seq`` or ``[seq, isP2P]``; the group's name
    is a tuple from 1.1.0 (empty in waits before torch 2.4), a backend id in 1.0.2."""
    t = [_t(14, 1)]

    def rec(values, **attrs):
        node = host_op(9, "record_param_comms", 2, values)
        node["attrs"] += [{"name": k, "type": "string", "value": v} for k, v in attrs.items()]
        return record_seq(node)

    assert rec([t, 12, 82149104, 0, "all_gather", [], [], 2]) == RecordSeq(12, False, False, "")  # 1.0.2
    assert rec([12, 0, 0, "wait", [], [], 1]) == RecordSeq(12, False, True, "")  # 1.0.2 wait
    assert rec([t, 49, ["0", "default_pg"], 0, "allreduce", [], [], 0, 1, 1]) == RecordSeq(49, False, False, "0")
    assert rec([47, ["", ""], 0, "wait", [], [], -1, -1, 1], collective_name="wait") == RecordSeq(47, False, True, "")
    assert rec([t, [3, True], ["2", "pp"], 1, "send", [], [], 0, 1, 2]) == RecordSeq(3, True, False, "2")
    assert rec([[3, True], ["2", "pp"], 0, "wait", [], [], -1, -1, 1]) == RecordSeq(3, True, True, "2")
    # ProcessGroupNCCL::barrier records no tensors (its all-reduce, same number, follows)
    barrier = [[8, False], ["0", "default_pg"], 0, "barrier", [], [], 0, 1, 2]
    assert rec(barrier, collective_name="barrier", pg_name="0") == RecordSeq(8, False, False, "0")
    assert rec([[t], "x"]) is None and record_seq(host_op(9, "aten::mm", 2, [t])) is None


@pytest.mark.parametrize(
    ("second", "expected"),
    [
        # one group: the second collective follows the first on the group's NCCL stream
        ((2, "0"), {12: [10], 13: [12, 11], 14: [12], 15: [14, 13]}),
        # two groups (two NCCL streams): the second, reading the tensor, waits for the first on the
        # device, as its readers do
        ((1, "1"), {12: [10], 13: [12, 11], 14: [12], 15: [14, 11, 13]}),
    ],
)
def test_enqueueing_another_collective_on_the_tensor_does_not_block_the_host(second, expected):
    """Two in-place all-reduces of one bucket: the second ``c10d::`` call only enqueues, so the
    thread goes on without waiting for the first (before: the second call, reading the bucket,
    waited for the first); the second collective follows the first on the device."""
    x = _t(200, NUMEL)
    seq, pg = second
    _, out = _convert(
        _two_groups_rank(
            [
                host_op(10, "c10d::allreduce_", 2, [[x]]),
                _grouped(11, 10, [x], 1, "0"),
                host_op(12, "c10d::allreduce_", 2, [[x]]),
                _grouped(13, 12, [x], seq, pg),
                host_op(14, "aten::relu", 2),
                host_op(15, "aten::add_", 2, [x]),
            ]
        )
    )
    assert list(out[10].data_deps) == [3] and list(out[11].data_deps) == [10]
    assert {nid: list(out[nid].data_deps) for nid in expected} == expected


def test_ops_inside_the_enqueueing_call_do_not_wait_for_its_collective():
    """Work ``ProcessGroupNCCL`` issues inside the ``c10d::`` call after the collective (the
    copy-out of a list all-gather) runs on the NCCL stream: the host does not wait there (before:
    the copy, reading the gathered tensor, waited for the all-gather); the result's reader does."""
    flat, out_t = _t(200, 2), _t(300, 1)
    nodes = [
        host_op(10, "c10d::allgather_", 2, [[[out_t]], [_t(400, 1)]]),
        _grouped(11, 10, [_t(400, 1)], 1, "0") | {"outputs": {"values": [[[out_t]]], "shapes": [], "types": []}},
        host_op(12, "aten::copy_", 10, [out_t, flat]),
        host_op(13, "aten::relu", 2),
        host_op(14, "aten::mul", 2, [out_t]),
    ]
    _, out = _convert(_two_groups_rank(nodes))
    deps = {nid: list(out[nid].data_deps) for nid in (11, 12, 13, 14)}
    assert deps == {11: [10], 12: [10], 13: [12], 14: [13, 11]}


def test_an_int_list_is_no_tensor_read():
    """Only tensor-typed inputs are read by storage: a five-int list (a permutation, a 5-D shape)
    has a tensor tuple's form, and its second int named the all-reduced storage (before: the
    ``permute`` waited for the all-reduce)."""
    x, y = _t(200, NUMEL), _t(500, 8)
    permute = host_op(12, "aten::permute", 2, [y, [0, 201, 2, 3, 4]])
    permute["inputs"]["types"] = ["Tensor(float)", "GenericList[Int,Int,Int,Int,Int]"]
    _, out = _convert(
        _two_groups_rank([host_op(10, "c10d::allreduce_", 2, [[x]]), _grouped(11, 10, [x], 1, "0"), permute])
    )
    assert list(out[12].data_deps) == [10]


def test_a_sync_blocked_on_a_nccl_kernel_is_no_compute():
    """``.item()`` blocks in ``cudaStreamSynchronize`` 210..560 while the NCCL kernel runs alone
    150..550: those 340 us are communication wait (the link reports them), so conversion takes them
    out of the op's time, and the next op waits for the kernel's COMM node instead (before: the op
    kept its 400 us, freezing the measured network time into compute for every what-if)."""
    host, kineto = _linked_allreduce(kernel=True)
    host["nodes"] = host["nodes"][:-1] + [host_op(9, "aten::item", 2), host_op(11, "aten::mul", 2)]

    def ev(name, ts, dur, cat="cpu_op", **args):
        return {"ph": "X", "cat": cat, "name": name, "pid": 9, "tid": 1, "ts": ts, "dur": dur, "args": args}

    events = [e for e in kineto["traceEvents"] if e["name"] != "aten::add_"]
    events[-1] |= {"ts": 150, "dur": 400}  # the NCCL kernel
    events += [
        ev("aten::item", 200, 400, **{"Record function id": 9}),
        ev("cudaStreamSynchronize", 210, 350, "cuda_runtime"),
        ev("aten::mul", 610, 5, **{"Record function id": 11}),
    ]
    obj, stats = link_traces(parse_host_trace(host, "h"), parse_kineto({"traceEvents": events}, "k"))
    assert stats.comm_sync_us == 340.0
    _, out = _convert(obj)
    kernel = next(nid for nid, n in out.items() if n.type == schema.COMM_COLL_NODE)
    assert out[9].duration_micros == 400 - 340
    assert kernel in out[11].data_deps
