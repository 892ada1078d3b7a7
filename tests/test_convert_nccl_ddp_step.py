"""A 2-rank DDP step as PyTorch 2.4+ records it, converted edge by edge against what CUDA orders.

The main thread runs the forward GEMM; the autograd thread runs the backward GEMMs and, as each
bucket fills, its all-reduce (``c10d::allreduce_`` > ``record_param_comms`` > ``nccl:all_reduce``,
the NCCL kernel on ProcessGroupNCCL's stream 20); the main thread runs finalize's ``work.wait()``s,
the optimizer and then an ``async_op=False`` loss all-reduce, whose kernel PyTorch puts on the
compute stream 7. CUDA orders: each bucket's NCCL kernel after the last GEMM launched on stream 7
before its enqueue (``syncStream``) and after the previous bucket's (stream 20); the optimizer's
first kernel after every bucket's NCCL kernel (the waits hold stream 7, whichever thread launches
on it); nothing else across streams. With the waits inferred from ``wait`` records, with Kineto's
recorded "Stream Wait Event"s, and as DDP really waits (through futures: no ``wait`` record, only
the ``cudaStreamWaitEvent`` runtime calls of a capture without sync events).
"""

from __future__ import annotations

import pytest
from nccl_traces import ddp_step, ring_hardware

from chakra_pipe.convert.pytorch import convert_trace
from chakra_pipe.convert.rankset import write_rank_set
from chakra_pipe.et import TraceSet, schema
from chakra_pipe.link.hostet import parse_host_trace
from chakra_pipe.sim import simulate

WAITS = {"inferred": {}, "recorded": {"recorded": True}, "calls": {"wait_calls": True}}


@pytest.mark.parametrize("waits", WAITS)
def test_every_gpu_edge_is_one_cuda_orders(waits):
    out = {n.id: n for n in convert_trace(parse_host_trace(ddp_step(**WAITS[waits]), "r0"), 0).nodes}
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
        # the three waits hold stream 7 for the main thread (with calls: the first finalize wait
        # takes every bucket; the enqueues' and the hook callbacks' waits hold no backward GEMM)
        opt: [22, bwd_d, ar0, ar1, ar2],
        mul: [23, opt],
        loss: [26, mul],  # async_op=False: on stream 7, in its order
    }
    assert {k: list(out[k].data_deps) for k in expected} == expected
    assert all(d < nid for nid, n in out.items() for d in n.data_deps)


@pytest.mark.parametrize("waits", WAITS)
def test_the_step_grows_by_every_all_reduces_extra_time(tmp_path, waits):
    """The buckets run one after the other on stream 20, the optimizer after the last and the loss
    all-reduce after the optimizer: at a quarter of the bandwidth the step grows by exactly what
    the four all-reduces gain."""
    obj = ddp_step(**WAITS[waits])
    prefix = str(tmp_path / "s")
    write_rank_set(prefix, [convert_trace(parse_host_trace(obj, f"r{r}"), r) for r in range(2)])
    fast, slow = (simulate(TraceSet.load(prefix), ring_hardware(gbps)) for gbps in (10.0, 2.5))
    for rank in (0, 1):
        spans = [[c.end_ns - c.start_ns for c in result.collectives if c.rank == rank] for result in (fast, slow)]
        assert len(spans[0]) == 4
        extra = sum(spans[1]) - sum(spans[0])
        assert extra > 4 * 1_000_000
        assert slow.finish_ns[rank] - fast.finish_ns[rank] == extra


def test_half_the_bandwidth_lengthens_a_futures_only_step_by_the_all_reduces_extra_time(tmp_path):
    """A capture without sync events or ``wait`` records, DDP waiting through futures: the 2-ring
    all-reduce of 4 MiB sends 4 MiB per rank (2 MiB reduce-scatter + 2 MiB all-gather), 390,625 ns
    at 10 GiB/s and twice that at 5, so each of the four all-reduces gains 390,625 ns (less the ns
    the chunked transfers round off), and all four lie on the step's path (the optimizer after the
    three buckets, the loss all-reduce after it): the step grows by 4 x that. Before, the
    optimizer ran beside the buckets and only the loss all-reduce lengthened the step."""
    prefix = str(tmp_path / "s")
    obj = ddp_step(wait_calls=True)
    write_rank_set(prefix, [convert_trace(parse_host_trace(obj, f"r{r}"), r) for r in range(2)])
    fast, slow = (simulate(TraceSet.load(prefix), ring_hardware(gbps)) for gbps in (10.0, 5.0))
    for rank in (0, 1):
        gained = [
            (s.end_ns - s.start_ns) - (f.end_ns - f.start_ns)
            for f, s in zip(fast.collectives, slow.collectives, strict=True)
            if f.rank == rank
        ]
        assert len(gained) == 4 and all(abs(g - 390_625) <= 1 for g in gained)
        assert slow.finish_ns[rank] - fast.finish_ns[rank] == sum(gained)
