"""A 2-rank DDP step as PyTorch 2.4+ records it, converted edge by edge against what CUDA orders.

The main thread runs the forward GEMM; the autograd thread runs the backward GEMMs and, as each
bucket fills, its all-reduce (``c10d::allreduce_`` > ``record_param_comms`` > ``nccl:all_reduce``,
the NCCL kernel on ProcessGroupNCCL's stream 20); the main thread runs finalize's ``work.wait()``s,
the optimizer and then an ``async_op=False`` loss all-reduce, whose kernel PyTorch puts on the
compute stream 7. CUDA orders: each bucket's NCCL kernel after the last GEMM launched on stream 7
before its enqueue (``syncStream``) and after the previous bucket's (stream 20); the optimizer's
first kernel after every bucket's NCCL kernel (the waits hold stream 7, whichever thread launches
on it); nothing else across streams. Both with the waits inferred and with Kineto's recorded
"Stream Wait Event"s.
"""

from __future__ import annotations

import json

import pytest
from nccl_traces import COMPUTE, NCCL, NUMEL, PG_INIT, cpu_event, inplace_op, kernel, launch, ring_hardware, stream_wait

from chakra_pipe.convert.pytorch import convert_trace
from chakra_pipe.convert.rankset import write_rank_set
from chakra_pipe.et import TraceSet, schema
from chakra_pipe.link.hostet import parse_host_trace
from chakra_pipe.link.kineto import parse_kineto
from chakra_pipe.link.linker import link_traces
from chakra_pipe.sim import simulate

MAIN, AUTOGRAD = 1, 2
ALL_REDUCE = "ncclDevKernel_AllReduce_Sum_f32_RING_LL"


def _on(node_or_event: dict, tid: int) -> dict:
    if "attrs" in node_or_event:
        node_or_event["attrs"][0]["value"] = tid
    else:
        node_or_event["tid"] = tid
    return node_or_event


def _tensor(b: int) -> list:
    return [300 + b, 400 + b, 0, NUMEL, 4, "cuda:0"]


def _all_reduce(nid: int, parent: int, seq: int, b: int) -> list[dict]:
    x = _tensor(b)
    return [
        inplace_op(nid, "c10d::allreduce_", parent, [[x], "<Object>", "<Object>", "<None>", False, -1]),
        inplace_op(
            nid + 1,
            "record_param_comms",
            nid,
            [[x], [seq, False], ["0", "default_pg"], 0, "allreduce", [], [], 0, 1, 2],
        ),
        inplace_op(nid + 2, "nccl:all_reduce", nid + 1, [x]),
    ]


def _all_reduce_events(nid: int, ts: float, corr: int) -> list[dict]:
    names = ("c10d::allreduce_", "record_param_comms", "nccl:all_reduce")
    return [cpu_event(name, nid + i, ts + i, 20 - 2 * i) for i, name in enumerate(names)] + [launch(ts + 10, corr)]


def ddp_step(recorded: bool = False) -> dict:
    """One rank, linked. Host ids (op entry order): 4 forward mm; 5 the autograd thread; 6, 7, 11,
    15 backward GEMMs; 8-10, 12-14, 16-18 the buckets' all-reduces (seq 1-3); 19-21 the waits;
    22 the optimizer, 23 ``mul``; 24-26 the loss all-reduce (seq 4). Runtime calls are numbered in
    issue order (``recorded``: each enqueue records an event on stream 7 that stream 20 waits for;
    each ``work.wait()`` makes stream 7 wait for an event recorded after the bucket's kernel)."""
    host = [
        inplace_op(1, "[pytorch|profiler|execution_trace|process]", 1),
        inplace_op(2, "[pytorch|profiler|execution_trace|thread]", 1),
        inplace_op(3, "## process_group:init ##", 2, [PG_INIT]),
        inplace_op(4, "aten::mm", 2),
        _on(inplace_op(5, "[pytorch|profiler|execution_trace|thread]", 1), AUTOGRAD),
        inplace_op(6, "MmBackward0", 5),
        inplace_op(7, "MmBackward0", 5),
        *_all_reduce(8, 5, 1, 0),
        inplace_op(11, "MmBackward0", 5),
        *_all_reduce(12, 5, 2, 1),
        inplace_op(15, "MmBackward0", 5),
        *_all_reduce(16, 5, 3, 2),
    ]
    for n in host[5:]:
        _on(n, AUTOGRAD)
    for nid, seq in ((19, 1), (20, 2), (21, 3)):
        host.append(
            inplace_op(nid, "record_param_comms", 2, [[seq, False], ["0", "default_pg"], 0, "wait", [], [], -1, -1, 1])
        )
    host += [
        inplace_op(22, "aten::_foreach_add_", 2, [_tensor(0)]),
        inplace_op(23, "aten::mul", 2),
        *_all_reduce(24, 2, 4, 3),
    ]
    c = 10  # correlations 10 apart leave room for the recorded event records and waits
    autograd = [
        cpu_event("MmBackward0", 6, 198, 5),
        launch(200, 2 * c),
        cpu_event("MmBackward0", 7, 208, 5),
        launch(210, 3 * c),
        *_all_reduce_events(8, 220, 4 * c),
        cpu_event("MmBackward0", 11, 248, 5),
        launch(250, 5 * c),
        *_all_reduce_events(12, 260, 6 * c),
        cpu_event("MmBackward0", 15, 288, 5),
        launch(290, 7 * c),
        *_all_reduce_events(16, 300, 8 * c),
    ]
    events = [cpu_event("aten::mm", 4, 100, 10), launch(105, c), *(_on(e, AUTOGRAD) for e in autograd)]
    events += [cpu_event("record_param_comms", nid, 330 + 2 * i, 1) for i, nid in enumerate((19, 20, 21))]
    events += [cpu_event("aten::_foreach_add_", 22, 340, 10), launch(345, 9 * c), cpu_event("aten::mul", 23, 360, 5)]
    events += [launch(365, 10 * c), *_all_reduce_events(24, 370, 11 * c)]
    events += [
        kernel("fwd_gemm", 110, 190, COMPUTE, c),
        kernel("bwd_gemm_a", 300, 200, COMPUTE, 2 * c),
        kernel("bwd_gemm_b", 500, 200, COMPUTE, 3 * c),
        kernel(ALL_REDUCE, 700, 400, NCCL, 4 * c),
        kernel("bwd_gemm_c", 700, 200, COMPUTE, 5 * c),
        kernel("bwd_gemm_d", 900, 200, COMPUTE, 7 * c),
        kernel(ALL_REDUCE, 1100, 400, NCCL, 6 * c),
        kernel(ALL_REDUCE, 1500, 400, NCCL, 8 * c),
        kernel("multi_tensor_apply_kernel", 1900, 1000, COMPUTE, 9 * c),
        kernel("vectorized_elementwise_kernel<mul>", 2900, 10, COMPUTE, 10 * c),
        kernel(ALL_REDUCE, 2910, 400, COMPUTE, 11 * c),
    ]
    if recorded:
        for bucket in (4, 6, 8):
            events.append(stream_wait(NCCL, bucket * c - 1, COMPUTE, bucket * c - 2))
        for i, bucket in enumerate((4, 6, 8)):
            events.append(stream_wait(COMPUTE, 85 + i, NCCL, bucket * c + 1))
    obj, stats = link_traces(
        parse_host_trace({"schema": "1.1.1-chakra.0.0.4", "pid": 9, "nodes": host}, "h"),
        parse_kineto({"traceEvents": events}, "k"),
    )
    assert stats.stream_wait_events == (6 if recorded else 0)
    return json.loads(json.dumps(obj))


@pytest.mark.parametrize("recorded", [False, True])
def test_every_gpu_edge_is_one_cuda_orders(recorded):
    out = {n.id: n for n in convert_trace(parse_host_trace(ddp_step(recorded), "r0"), 0).nodes}
    fwd, bwd_a, bwd_b, ar0, bwd_c, bwd_d, ar1, ar2, opt, mul, loss = sorted(nid for nid in out if nid > 26)
    assert [out[k].type for k in (ar0, ar1, ar2, loss)] == [schema.COMM_COLL_NODE] * 4
    expected = {
        fwd: [4],
        bwd_a: [6, fwd],
        bwd_b: [7, bwd_a],
        ar0: [10, bwd_b],  # the bucket's enqueue waits for the GEMMs launched before it
        bwd_c: [11, bwd_b],
        bwd_d: [15, bwd_c],
        ar1: [14, ar0, bwd_c],  # stream 20's order, then the enqueue
        ar2: [18, ar1, bwd_d],
        opt: [22, bwd_d, ar0, ar1, ar2],  # the three waits hold stream 7 for the main thread
        mul: [23, opt],
        loss: [26, mul],  # async_op=False: on stream 7, in its order
    }
    assert {k: list(out[k].data_deps) for k in expected} == expected
    assert all(d < nid for nid, n in out.items() for d in n.data_deps)


@pytest.mark.parametrize("recorded", [False, True])
def test_the_step_grows_by_every_all_reduces_extra_time(tmp_path, recorded):
    """The buckets run one after the other on stream 20, the optimizer after the last and the loss
    all-reduce after the optimizer: at a quarter of the bandwidth the step grows by exactly what
    the four all-reduces gain."""
    obj = ddp_step(recorded)
    prefix = str(tmp_path / "s")
    write_rank_set(prefix, [convert_trace(parse_host_trace(obj, f"r{r}"), r) for r in range(2)])
    fast, slow = (simulate(TraceSet.load(prefix), ring_hardware(gbps)) for gbps in (10.0, 2.5))
    for rank in (0, 1):
        spans = [[c.end_ns - c.start_ns for c in result.collectives if c.rank == rank] for result in (fast, slow)]
        assert len(spans[0]) == 4
        extra = sum(spans[1]) - sum(spans[0])
        assert extra > 4 * 1_000_000
        assert slow.finish_ns[rank] - fast.finish_ns[rank] == extra
