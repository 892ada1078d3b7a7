"""``work.wait()`` on a linked NCCL collective makes the compute stream, not the host, wait.

``WorkNCCL::wait`` records a ``wait`` record and calls ``cudaStreamWaitEvent``: the thread goes on,
and the first kernel it launches afterwards (on the waiting stream) starts only when the NCCL kernel
has ended. DDP's finalize waits for every bucket's all-reduce so, and the optimizer's kernels follow.
Before, nothing ordered them after the NCCL kernel (its COMM node), so a slower network did not
lengthen the simulated step.
"""

from __future__ import annotations

import pytest
from nccl_traces import (
    NCCL,
    launch,
    linked_step,
    ring_hardware,
)

from chakra_pipe.convert.pytorch import convert_trace
from chakra_pipe.convert.rankset import write_rank_set
from chakra_pipe.et import TraceSet, schema
from chakra_pipe.link.hostet import parse_host_trace
from chakra_pipe.sim import simulate


def _convert(obj: dict, rank: int = 0):
    conv = convert_trace(parse_host_trace(obj, f"rank{rank}.json"), rank)
    return conv, {n.id: n for n in conv.nodes}


@pytest.mark.parametrize("wait_inside_launcher", [False, True])
def test_the_first_kernel_launched_after_a_wait_follows_the_nccl_kernel(wait_inside_launcher):
    _, out = _convert(linked_step(wait_inside_launcher))
    gemm, nccl, add, mul = sorted(nid for nid in out if nid > 11)  # GPU ids follow device start times
    assert out[nccl].type == schema.COMM_COLL_NODE and out[6].type == schema.COMP_NODE
    assert list(out[add].data_deps) == [9, gemm, nccl]  # before: [9, gemm]
    assert list(out[mul].data_deps) == [11, add]  # later ops follow through the stream chain
    assert list(out[gemm].data_deps) == [4]  # launched before the wait: unchanged
    assert list(out[nccl].data_deps) == [7, gemm]  # the enqueue's syncStream
    # the host does not block: the thread's chain runs through the wait as before
    assert list(out[9].data_deps) == ([7] if wait_inside_launcher else [8])
    assert list(out[11].data_deps) == ([10] if wait_inside_launcher else [9])
    assert all(d < nid for nid, n in out.items() for d in n.data_deps)


def test_an_et_plus_without_launch_times_orders_by_the_launching_op():
    """Upstream's ET+ records no launch time: the launching op's start stands for it."""
    obj = linked_step()
    for n in obj["nodes"]:
        n.pop("launch_ts", None)
    _, out = _convert(obj)
    _, nccl, add, _ = sorted(nid for nid in out if nid > 11)
    assert nccl in out[add].data_deps


def test_a_wait_on_a_thread_that_never_used_the_device_holds_nothing():
    """Its current stream is unknown (it launched nothing there): no op is taken for it."""
    obj = linked_step()
    wait = next(n for n in obj["nodes"] if n["id"] == 8)
    wait["attrs"][0]["value"] = 2  # the wait ran on thread 2, which launches nothing after it
    _, out = _convert(obj)
    _, nccl, add, _ = sorted(nid for nid in out if nid > 11)
    assert nccl not in out[add].data_deps


def test_a_stream_wait_holds_the_ops_other_threads_launch_on_that_stream():
    """A stream's wait holds every later op of the stream, whoever launches it, and the default
    stream is every thread's current stream: DDP's backward and its finalize ``work.wait()`` run on
    the autograd thread (here thread 2, which launches nothing after the wait), the optimizer's
    ``add_`` on the main thread. The NCCL stream likewise waits for the GEMM another thread put on
    the stream the enqueueing thread uses. Before, neither edge was found."""
    obj = linked_step()
    for n in obj["nodes"]:
        if n["id"] in (4, 8):  # aten::mm and the wait
            n["attrs"][0]["value"] = 2
    _, out = _convert(obj)
    gemm, nccl, add, mul = sorted(nid for nid in out if nid > 11)
    assert list(out[nccl].data_deps) == [7, gemm]
    assert list(out[add].data_deps) == [9, gemm, nccl]
    assert list(out[mul].data_deps) == [11, add]


def _on_device(obj: dict, kernel: str, device: int) -> dict:
    """``obj`` with the GPU op named ``kernel`` moved to ``device`` (one process driving two GPUs)."""
    next(n for n in obj["nodes"] if n["name"] == kernel)["args"]["device"] = device
    return obj


def test_a_wait_holds_the_collectives_device_only():
    """``WorkNCCL::wait`` holds the current stream of the collective's device: a kernel the thread
    launches on another device first is not held, the next one on the collective's device is.
    Before, the first launch on any device took the wait (and ``mul`` ran beside the all-reduce)."""
    _, out = _convert(_on_device(linked_step(), "vectorized_elementwise_kernel<add>", 1))
    gemm, nccl, add, mul = sorted(nid for nid in out if nid > 11)
    assert list(out[add].data_deps) == [9]
    assert list(out[mul].data_deps) == [11, gemm, nccl]


def test_a_wait_holds_no_op_launched_on_a_nccl_stream():
    """The waiting (current) stream is never a NCCL stream: an op the thread puts on one right
    after the wait (a next collective's copy-in) is not the one held; the next compute op is.
    Before, any op not named ``nccl`` took the wait, and ``mul`` ran beside the all-reduce."""
    obj = linked_step()
    next(n for n in obj["nodes"] if n["name"] == "vectorized_elementwise_kernel<add>")["stream"] = NCCL
    _, out = _convert(obj)
    gemm, nccl, add, mul = sorted(nid for nid in out if nid > 11)
    assert list(out[add].data_deps) == [9, nccl]  # the NCCL stream's order, not the wait
    assert list(out[mul].data_deps) == [11, gemm, nccl]


def test_a_synchronous_collective_on_the_compute_stream_leaves_it_a_compute_stream():
    """Since PyTorch 2.x an ``async_op=False`` collective (the default: a loss or flag all-reduce)
    runs its NCCL kernel on the current stream, not on ProcessGroupNCCL's own. That stream stays
    the threads' compute stream: the async all-reduce's enqueue and ``work.wait()`` still find
    their ops on it. Before, one NCCL kernel on it made every op on it count as NCCL work, and both
    edges were lost (the optimizer ran beside the bucket all-reduce)."""
    _, out = _convert(linked_step(sync_all_reduce=True))
    gemm, nccl, add, mul, sync_nccl = sorted(nid for nid in out if nid > 14)
    assert out[sync_nccl].type == schema.COMM_COLL_NODE
    assert list(out[nccl].data_deps) == [7, gemm]  # before: [7]
    assert list(out[add].data_deps) == [9, gemm, nccl]  # before: [9, gemm]
    assert list(out[mul].data_deps) == [11, add]
    assert list(out[sync_nccl].data_deps) == [14, mul]  # the compute stream's order
    assert all(d < nid for nid, n in out.items() for d in n.data_deps)


def test_the_enqueue_waits_for_the_collectives_device_only():
    """``syncStream`` makes the NCCL stream wait for the current stream of its own device: a GEMM
    launched on another device before the all-reduce does not hold its NCCL kernel."""
    _, out = _convert(_on_device(linked_step(), "ampere_sgemm_128x64_nn", 1))
    _, nccl, _, _ = sorted(nid for nid in out if nid > 11)
    assert list(out[nccl].data_deps) == [7]


def test_kineto_stream_waits_are_taken_as_recorded():
    """With Kineto's "Stream Wait Event"s the streams' waits are read, not inferred: the NCCL
    kernel also waits for the GEMM its stream waited for at the enqueue, and where Kineto saw no
    wait after ``work.wait()`` (here: left out) no kernel is held."""
    obj = linked_step(sync_events=("enqueue", "wait"))
    assert obj["link"]["stream_wait_events"] == 2
    _, out = _convert(obj)
    gemm, nccl, add, mul = sorted(nid for nid in out if nid > 11)
    assert list(out[nccl].data_deps) == [7, gemm]  # before: [7]
    assert list(out[add].data_deps) == [9, gemm, nccl]
    assert list(out[mul].data_deps) == [11, add]
    _, out = _convert(linked_step(sync_events=("enqueue",)))
    assert list(out[add].data_deps) == [9, gemm]


def test_stream_waits_on_unseen_event_records_leave_the_waits_inferred():
    """Kineto writes -1 for the stream and record of an event it did not see recorded (the record
    before the profiler started, or CUDA event activities not collected): such waits name no op,
    so they do not count as recorded waits. Before, their mere presence switched the inference
    off and the graph lost both ends of the all-reduce."""
    obj = linked_step(sync_events=("unknown",))
    assert obj["link"]["stream_wait_events"] == 0
    _, out = _convert(obj)
    gemm, nccl, add, _ = sorted(nid for nid in out if nid > 11)
    assert list(out[nccl].data_deps) == [7, gemm]
    assert list(out[add].data_deps) == [9, gemm, nccl]


def test_a_nccl_kernel_follows_the_compute_its_stream_waited_for_at_the_enqueue():
    """Without Kineto's sync events the enqueue's ``syncStream`` is inferred: the NCCL kernel
    depends on the last GPU op its thread launched (on that device, off NCCL streams) before it."""
    _, out = _convert(linked_step())
    gemm, nccl, _, _ = sorted(nid for nid in out if nid > 11)
    assert list(out[nccl].data_deps) == [7, gemm]  # before: [7]


def _simulate(tmp_path, obj: dict, gbps: float = 10.0):
    prefix = str(tmp_path / "s")
    write_rank_set(prefix, [convert_trace(parse_host_trace(obj, f"r{r}"), r) for r in range(2)])
    return simulate(TraceSet.load(prefix), ring_hardware(gbps))


@pytest.mark.parametrize("sync_events", [(), ("enqueue", "wait")])
def test_the_simulated_all_reduce_starts_when_the_backward_gemm_ends(tmp_path, sync_events):
    """DDP's bucket all-reduce reduces what the backward GEMM wrote: a 5 ms GEMM still runs when
    the all-reduce is called, and the all-reduce starts exactly at its end. Before, it started
    right after its launching host op, beside the GEMM."""
    result = _simulate(tmp_path, linked_step(sync_events=sync_events, gemm_us=5000.0))
    for rank, w in enumerate(result.workloads):
        gemm = min(nid for nid in w.t.ids if nid > 11)
        gemm_end = w.end[list(w.t.ids).index(gemm)]
        assert gemm_end > 5_000_000
        assert [c.start_ns for c in result.collectives if c.rank == rank] == [gemm_end]


@pytest.mark.parametrize("sync_events", [(), ("enqueue", "wait")])
def test_half_the_bandwidth_lengthens_the_step_by_the_all_reduces_extra_time(tmp_path, sync_events):
    """The optimizer kernel (1 ms) waits for the all-reduce, so the step grows by exactly what the
    all-reduce gains at half the bandwidth (~395 -> ~790 us). Before, the kernel ran beside the
    all-reduce and both bandwidths gave the same step."""
    prefix = str(tmp_path / "s")
    obj = linked_step(sync_events=sync_events)
    write_rank_set(prefix, [convert_trace(parse_host_trace(obj, f"r{r}"), r) for r in range(2)])
    fast, slow = (simulate(TraceSet.load(prefix), ring_hardware(gbps)) for gbps in (10.0, 5.0))
    extra = [
        s.end_ns - s.start_ns - (f.end_ns - f.start_ns) for f, s in zip(fast.collectives, slow.collectives, strict=True)
    ]
    assert len(extra) == 2 and extra[0] == extra[1] > 300_000
    assert [s - f for f, s in zip(fast.finish_ns, slow.finish_ns, strict=True)] == [extra[0]] * 2


def _copy_in_before_the_nccl_kernel(_host: list[dict], events: list[dict]) -> None:
    """``nccl:all_reduce`` copies its input in on the NCCL stream before the kernel, as
    ProcessGroupNCCL's pre-processing does for a list of tensors (a device-to-device memcpy)."""
    args = {"correlation": 10, "stream": NCCL, "device": 0}
    events.append(dict(launch(124, 10), name="cudaMemcpyAsync"))
    events.append(
        {
            "ph": "X",
            "cat": "gpu_memcpy",
            "name": "Memcpy DtoD",
            "pid": 0,
            "tid": NCCL,
            "ts": 205,
            "dur": 2,
            "args": args,
        }
    )


def test_a_copy_in_on_the_nccl_stream_before_its_kernel_leaves_it_a_nccl_stream():
    """The NCCL stream's first op is a collective's copy-in, not a NCCL kernel: it is still
    ProcessGroupNCCL's stream (its first kernel is a NCCL one), never the thread's current stream,
    and the enqueue still waits for the GEMM on the compute stream."""
    _, out = _convert(linked_step(edit=_copy_in_before_the_nccl_kernel))
    gemm, copy_in, nccl, add, mul = sorted(nid for nid in out if nid > 11)
    assert list(out[copy_in].data_deps) == [7]
    assert list(out[nccl].data_deps) == [7, copy_in, gemm]
    assert list(out[add].data_deps) == [9, gemm, nccl]
    assert list(out[mul].data_deps) == [11, add]
