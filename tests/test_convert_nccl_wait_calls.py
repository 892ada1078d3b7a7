"""A future's wait on a NCCL collective, seen only as a ``cudaStreamWaitEvent`` runtime call.

DDP's Reducer waits for its bucket all-reduces through futures (``finalize_backward``), which write
no ``wait`` record in the host trace. In a capture without Kineto's "Stream Wait Event"s (every
older capture, other tools' captures) the runtime call is all there is: the linker keeps the calls
made outside a collective's enqueue and outside a future callback (``stream_wait_calls``), and
convert makes the first op launched after one on its thread's current stream follow the NCCL
kernels that stream has not waited for yet. Before, the optimizer ran beside the all-reduces.
"""

from __future__ import annotations

import copy
import json

import pytest
from nccl_traces import AUTOGRAD, POOL, ddp_step, future_wait, linked_step

from chakra_pipe.convert.pytorch import convert_trace
from chakra_pipe.convert.rankset import write_rank_set
from chakra_pipe.errors import InputError
from chakra_pipe.link.hostet import parse_host_trace


def _edges(obj: dict) -> dict[int, list[int]]:
    """Node id -> data deps of the converted rank; asserts every edge points to a smaller id."""
    conv = convert_trace(parse_host_trace(json.loads(json.dumps(obj)), "linked.json"), 0)
    edges = {n.id: list(n.data_deps) for n in conv.nodes}
    assert all(d < nid for nid, deps in edges.items() for d in deps)
    return edges


def _gpu(obj: dict) -> dict[str, int]:
    """GPU node ids by kernel name."""
    return {n["name"]: n["id"] for n in obj["nodes"] if "cat" in n}


def test_the_kernel_launched_after_a_futures_wait_follows_the_nccl_kernel():
    obj = linked_step(edit=future_wait())
    assert obj["stream_wait_calls"] == [[1, 150]] and obj["link"]["stream_wait_calls"] == 1
    edges, gpu = _edges(obj), _gpu(obj)
    gemm, nccl = gpu["ampere_sgemm_128x64_nn"], gpu["ncclDevKernel_AllReduce_Sum_f32_RING_LL"]
    add, mul = gpu["vectorized_elementwise_kernel<add>"], gpu["vectorized_elementwise_kernel<mul>"]
    assert edges[add] == [9, gemm, nccl]  # before: [9, gemm]
    assert edges[mul] == [11, add]
    assert edges[nccl] == [7, gemm]


def test_the_linker_keeps_only_the_reducers_waits():
    """``syncStream``'s wait in each enqueue and each hook's no-op callback wait (followed by its
    result's event record, inside the hook that called the all-reduce) are left out; the three
    ``finalize_backward`` waits on the autograd thread, outside any op, are kept."""
    obj = ddp_step(wait_calls=True)
    assert obj["stream_wait_calls"] == [[AUTOGRAD, 330.5], [AUTOGRAD, 332.5], [AUTOGRAD, 334.5]]


def test_a_no_op_callbacks_wait_holds_no_later_kernel():
    """Taken as a wait on the current stream, the callback's wait would hold the add kernel too
    (harmless here) -- in DDP the next backward GEMM, behind its bucket's all-reduce
    (``test_convert_nccl_ddp_step``); it is left out, the later future wait kept."""
    obj = linked_step(edit=future_wait("noop"))
    assert obj["stream_wait_calls"] == [[1, 150]]


def test_a_callback_that_launches_holds_its_pool_stream():
    """A callback that launches (a compression hook's decompressing copy) runs on a pool stream
    that waited for the all-reduce: its copy follows the NCCL kernel; the add kernel, after the
    later future wait, too; the GEMM launched before stays as it was."""
    obj = linked_step(edit=future_wait("copy"))
    assert obj["stream_wait_calls"] == [[1, 142], [1, 150]]
    edges, gpu = _edges(obj), _gpu(obj)
    nccl, gemm = gpu["ncclDevKernel_AllReduce_Sum_f32_RING_LL"], gpu["ampere_sgemm_128x64_nn"]
    assert next(n for n in obj["nodes"] if n["name"] == "copy_kernel")["stream"] == POOL
    assert edges[gpu["copy_kernel"]] == [8, nccl]
    assert edges[gpu["vectorized_elementwise_kernel<add>"]] == [9, gemm, nccl]
    assert edges[gemm] == [4]


def test_recorded_stream_wait_events_take_precedence():
    """Where Kineto recorded the streams' waits, those are all of them: the runtime call adds none."""
    obj = linked_step(sync_events=("enqueue",), edit=future_wait())
    edges, gpu = _edges(obj), _gpu(obj)
    assert edges[gpu["vectorized_elementwise_kernel<add>"]] == [9, gpu["ampere_sgemm_128x64_nn"]]


@pytest.mark.parametrize("args", [None, {}, {"correlation": "6"}, "odd"])
def test_a_call_without_usable_args_still_counts(args):
    """A wait call needs only its thread and time (no handle, no correlation)."""

    def edit(host: list[dict], events: list[dict]) -> None:
        future_wait()(host, events)
        if args is None:
            del events[-1]["args"]
        else:
            events[-1]["args"] = args

    assert linked_step(edit=edit)["stream_wait_calls"] == [[1, 150]]


def test_a_call_on_a_thread_without_a_linked_op_is_left_out():
    def edit(host: list[dict], events: list[dict]) -> None:
        future_wait()(host, events)
        events[-1]["tid"] = 99

    obj = linked_step(edit=edit)
    assert "stream_wait_calls" not in obj and obj["link"]["stream_wait_calls"] == 0


def test_ops_without_a_tid_take_their_threads_from_the_call_tree():
    """Only the thread root names its thread: the call takes the ET thread its ops inherit."""

    def edit(host: list[dict], events: list[dict]) -> None:
        future_wait()(host, events)
        for n in host:
            if n["id"] != 2:
                n["attrs"] = [a for a in n["attrs"] if a["name"] != "tid"]

    obj = linked_step(edit=edit)
    assert obj["stream_wait_calls"] == [[1, 150]]
    gpu = _gpu(obj)
    assert gpu["ncclDevKernel_AllReduce_Sum_f32_RING_LL"] in _edges(obj)[gpu["vectorized_elementwise_kernel<add>"]]


def test_a_wait_on_two_devices_holds_each_devices_stream_for_its_own_kernels():
    """The thread launched its GEMM on device 1: the wait holds device 0's stream (the add kernel)
    for device 0's NCCL kernel; device 1 launched nothing after it."""

    def edit(host: list[dict], events: list[dict]) -> None:
        future_wait()(host, events)
        next(e for e in events if e.get("cat") == "kernel" and "sgemm" in e["name"])["args"]["device"] = 1

    obj = linked_step(edit=edit)
    edges, gpu = _edges(obj), _gpu(obj)
    assert edges[gpu["vectorized_elementwise_kernel<add>"]] == [9, gpu["ncclDevKernel_AllReduce_Sum_f32_RING_LL"]]
    assert edges[gpu["ampere_sgemm_128x64_nn"]] == [4]


@pytest.mark.parametrize(
    ("value", "where", "message"),
    [
        ({"1": 150}, "stream_wait_calls", "'stream_wait_calls' must be a list"),
        ([[1]], "stream_wait_calls[0]", "a stream wait call must be [ET thread id, ts]"),
        ([[1, 150], ["1", 150]], "stream_wait_calls[1]", "a stream wait call must be [ET thread id, ts]"),
        ([[1, "150"]], "stream_wait_calls[0]", "a stream wait call must be [ET thread id, ts]"),
        ([[True, 150]], "stream_wait_calls[0]", "a stream wait call must be [ET thread id, ts]"),
        ([[1.0, 150]], "stream_wait_calls[0]", "a stream wait call must be [ET thread id, ts]"),
        ([[1, float("inf")]], "stream_wait_calls[0]", "a stream wait call must be [ET thread id, ts]"),
    ],
)
def test_malformed_wait_calls_are_refused_naming_the_file_and_entry(value, where, message):
    obj = linked_step(edit=future_wait())
    obj["stream_wait_calls"] = value
    with pytest.raises(InputError) as err:
        convert_trace(parse_host_trace(obj, "linked.json"), 0)
    assert str(err.value) == f"linked.json: {where}: {message}"


def test_wait_calls_without_nccl_kernels_or_launches_after_them_change_nothing():
    """A call past every launch, or in a trace whose NCCL kernels are gone, adds no edge."""
    base = _edges(linked_step(edit=future_wait()))
    late = linked_step(edit=future_wait())
    late["stream_wait_calls"] = [[1, 150], [1, 10_000], [7, 150]]
    assert _edges(late) == base


def test_the_same_input_converts_to_the_same_bytes(tmp_path):
    obj = ddp_step(wait_calls=True)
    files = []
    for run in ("a", "b"):
        prefix = tmp_path / run / "s"
        prefix.parent.mkdir()
        write_rank_set(str(prefix), [convert_trace(parse_host_trace(copy.deepcopy(obj), f"r{r}"), r) for r in range(2)])
        files.append([(prefix.parent / f"s.{r}.et").read_bytes() for r in range(2)])
    assert files[0] == files[1]
