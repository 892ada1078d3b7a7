"""The communication wait of NCCL collectives: where the host blocks on a NCCL kernel, not its enqueue.

A NCCL call (``c10d::`` op -> ``record_param_comms`` -> ``nccl:*`` range) only enqueues the
collective on the NCCL stream; the host waits for it only inside a device sync while the kernel
runs. Gloo's calls block (or a worker runs the transfer while the caller idles): measured as before.
"""

from __future__ import annotations

from chakra_pipe.link.commwait import measure, network_wait_us
from chakra_pipe.link.kineto import KEvent, parse_kineto

PID = 7


def _ev(name: str, ts: float, dur: float, tid: int = 1, cat: str = "cpu_op") -> dict:
    return {"ph": "X", "cat": cat, "name": name, "pid": PID, "tid": tid, "ts": ts, "dur": dur, "args": {}}


def _dev(name: str, ts: float, dur: float, stream: int) -> dict:
    return {"ph": "X", "cat": "kernel", "name": name, "pid": 0, "tid": stream, "ts": ts, "dur": dur, "args": {}}


def _nccl_allreduce(ts: float) -> list[dict]:
    """A 30 us NCCL enqueue on the main thread, as ProcessGroupNCCL records it."""
    return [
        _ev("c10d::allreduce_", ts, 30),
        _ev("record_param_comms", ts + 5, 20),
        _ev("nccl:all_reduce", ts + 10, 10, cat="user_annotation"),
        _ev("cudaLaunchKernel", ts + 12, 5, cat="cuda_runtime"),
    ]


def _events(raw: list[dict]) -> list[KEvent]:
    return parse_kineto({"traceEvents": raw}, "k.json").events()


def test_a_nccl_call_is_no_wait_and_a_sync_on_its_kernel_is():
    events = _events(
        [
            _ev("ProfilerStep#1", 0, 1000, cat="user_annotation"),
            *_nccl_allreduce(100),
            _dev("ncclDevKernel_AllReduce_Sum_f32_RING_LL", 130, 470, 20),
            _dev("sgemm_kernel", 600, 100, 7),  # compute the sync waits for as well
            _ev("cudaStreamSynchronize", 200, 500, cat="cuda_runtime"),
        ]
    )
    wait = measure(events)
    # Before: the 30 us enqueue was the whole wait and the 400 us blocked on the kernel were none.
    assert wait.in_calls_us == {} and wait.idle_us == {}
    # Blocked 200..700; the NCCL kernel runs alone 130..600 (the GEMM's 600..700 is compute).
    assert wait.in_syncs_us == {1: 400.0}
    assert wait.total_us(1) == 400.0


def test_a_nccl_collective_without_a_kernel_waits_for_nothing():
    """A one-member group (or a sync on compute only) measures no communication wait."""
    events = _events(
        [
            _ev("ProfilerStep#1", 0, 1000, cat="user_annotation"),
            *_nccl_allreduce(100),
            _dev("sgemm_kernel", 130, 500, 7),
            _ev("cudaDeviceSynchronize", 200, 450, cat="cuda_runtime"),
        ]
    )
    wait = measure(events)
    assert (wait.in_calls_us, wait.idle_us, wait.in_syncs_us) == ({}, {}, {})


def test_gloo_calls_still_count_beside_nccl_ones():
    """Told apart per call: gloo's blocking call is communication, NCCL's enqueue on the same thread is not."""
    events = _events(
        [
            _ev("ProfilerStep#1", 0, 1000, cat="user_annotation"),
            *_nccl_allreduce(100),
            _ev("c10d::allreduce_", 300, 50),
            _ev("gloo:all_reduce", 310, 200, tid=2, cat="user_annotation"),
        ]
    )
    wait = measure(events)
    assert wait.in_calls_us == {1: 50.0}
    assert wait.idle_us == {1: 160.0}  # ProfilerStep's own time 350..510 under the gloo worker's range


def test_a_nccl_range_on_another_thread_is_an_enqueue_not_collective_work():
    """DDP's comm hook enqueues on the autograd thread: the main thread blocked meanwhile waited for
    that thread's ops (thread wait), not for a collective (its transfer runs on the GPU)."""
    raw = [
        _ev("ProfilerStep#1", 0, 1000, cat="user_annotation"),
        _ev("aten::mm", 0, 100),
        _ev("aten::mm_backward", 120, 60, tid=2),
        *[dict(e, tid=2) for e in _nccl_allreduce(200)],
    ]
    wait = measure(_events(raw))
    assert wait.idle_us == {} and wait.in_calls_us == {}
    assert wait.thread_us == {1: 90.0}  # the autograd thread's ops 120..180 and 200..230


def test_network_wait_of_nccl_leaves_out_the_wait_for_a_slower_peer():
    """Both ranks block in a sync from 100 on; rank 1 enqueues at 400, so both kernels end at 600 and
    the network part is 400..600 on each rank, rank 0's 100..400 being skew."""
    ranks = [
        _events(
            [
                _ev("ProfilerStep#1", 0, 1000, cat="user_annotation"),
                *_nccl_allreduce(issue - 30),
                _dev("ncclDevKernel_AllReduce_Sum_f32_RING_LL", issue, 600 - issue, 20),
                _ev("cudaStreamSynchronize", 100, 600, cat="cuda_runtime"),
            ]
        )
        for issue in (100, 400)
    ]
    assert [measure(r).total_us(1) for r in ranks] == [500.0, 200.0]
    assert network_wait_us(ranks) == [200.0, 200.0]


def test_network_wait_never_turns_a_nccl_call_into_a_wait():
    """Clipping to the last rank's start must not cut a NCCL ``c10d::`` call off its record: rank 0's
    call runs 100..200 with its record at 105..125, rank 1 calls at 150. Before, rank 0's call was
    clipped to 150..200, held no record any more and counted 50 us as a blocking (gloo) call."""
    ranks = []
    for issue in (100, 150):
        ranks.append(
            _events(
                [
                    _ev("ProfilerStep#1", 0, 1000, cat="user_annotation"),
                    _ev("c10d::allreduce_", issue, 100 if issue == 100 else 30),
                    _ev("record_param_comms", issue + 5, 20),
                    _ev("nccl:all_reduce", issue + 10, 10, cat="user_annotation"),
                ]
            )
        )
    assert [measure(r).total_us(1) for r in ranks] == [0.0, 0.0]
    assert network_wait_us(ranks) == [0.0, 0.0]


def test_each_sync_call_holds_its_own_part_of_the_wait():
    """Per sync call, for the op around it to give up: two overlapping calls count their common
    time once, for the earlier (200..500 and 500..600 of the kernel's 130..600 alone)."""
    events = _events(
        [
            *_nccl_allreduce(100),
            _dev("ncclDevKernel_AllReduce_Sum_f32_RING_LL", 130, 470, 20),
            _ev("cudaStreamSynchronize", 200, 300, cat="cuda_runtime"),
            _ev("cudaDeviceSynchronize", 300, 400, cat="cuda_runtime"),
        ]
    )
    wait = measure(events)
    syncs = [e.index for e in events if "Synchronize" in e.name]
    assert wait.sync_by_event == {syncs[0]: 300.0, syncs[1]: 100.0}
    assert wait.in_syncs_us == {1: 400.0}
