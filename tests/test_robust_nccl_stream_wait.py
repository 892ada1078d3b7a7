"""Odd or broken inputs to the NCCL stream-order work (linker ``launch_ts``/``stream_wait``, convert's
enqueue and ``work.wait()`` edges) convert, or are refused with one clear error naming the file and
the event or node; never a traceback. Every output edge points to a smaller id, and the same input
converts to the same bytes.
"""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from nccl_traces import COMPUTE, NCCL, linked_step

from chakra_pipe.convert.pytorch import convert_trace
from chakra_pipe.convert.rankset import write_rank_set
from chakra_pipe.errors import InputError
from chakra_pipe.link.hostet import parse_host_trace
from chakra_pipe.link.kineto import parse_kineto


def _edges(obj: dict) -> dict[int, list[int]]:
    """Node id -> data deps of the converted rank; asserts every edge points to a smaller id."""
    conv = convert_trace(parse_host_trace(json.loads(json.dumps(obj)), "linked.json"), 0)
    edges = {n.id: list(n.data_deps) for n in conv.nodes}
    assert all(d < nid for nid, deps in edges.items() for d in deps)
    return edges


def _syncs(events: list[dict]) -> list[dict]:
    return [e for e in events if e["cat"] == "cuda_sync"]


def _set_sync_arg(key: str, value: Any):
    def edit(_host: list[dict], events: list[dict]) -> None:
        for e in _syncs(events):
            if value is KeyError:
                del e["args"][key]
            else:
                e["args"][key] = value

    return edit


ENDS = ("stream", "correlation", "wait_on_stream", "wait_on_cuda_event_record_corr_id")


@pytest.mark.parametrize("value", [KeyError, None, "7", -1, 1.5, True, 1 << 70, [1]])
@pytest.mark.parametrize("key", ENDS)
def test_a_stream_wait_event_with_an_odd_end_counts_as_unrecorded(key, value):
    """A "Stream Wait Event" whose stream or correlation is missing, null, a string, -1 or out of
    range names no op: it is not counted, and the streams' waits are inferred as without it."""
    obj = linked_step(sync_events=("enqueue", "wait"), edit=_set_sync_arg(key, value))
    assert obj["link"]["stream_wait_events"] == 0
    assert not any("stream_wait" in n for n in obj["nodes"])
    assert _edges(obj) == _edges(linked_step())


@pytest.mark.parametrize("args", [None, "x", [1], "missing"])
def test_stream_wait_events_without_an_args_object_count_as_unrecorded(args):
    def edit(_host: list[dict], events: list[dict]) -> None:
        for e in _syncs(events):
            if args == "missing":
                del e["args"]
            else:
                e["args"] = args

    obj = linked_step(sync_events=("enqueue", "wait"), edit=edit)
    assert obj["link"]["stream_wait_events"] == 0
    assert _edges(obj) == _edges(linked_step())


def test_a_stream_wait_event_without_a_time_is_refused_naming_the_file_and_event():
    def edit(_host: list[dict], events: list[dict]) -> None:
        del _syncs(events)[0]["ts"]

    with pytest.raises(InputError, match=r"^k: traceEvents\[\d+\]: complete event without a numeric 'ts'$"):
        linked_step(sync_events=("enqueue",), edit=edit)


def _drop_launches(_host: list[dict], events: list[dict]) -> None:
    events[:] = [e for e in events if e["cat"] != "cuda_runtime"]


def _kernels_without_correlation(_host: list[dict], events: list[dict]) -> None:
    for e in events:
        if e["cat"] == "kernel":
            del e["args"]["correlation"]


def _duplicate_launch(_host: list[dict], events: list[dict]) -> None:
    events.append(dict(copy.deepcopy([e for e in events if e["cat"] == "cuda_runtime"][1]), ts=168))


def _duplicate_kernel(_host: list[dict], events: list[dict]) -> None:
    events.append(dict(copy.deepcopy([e for e in events if e["cat"] == "kernel"][1]), ts=1700))


def _one_correlation(_host: list[dict], events: list[dict]) -> None:
    for e in events:
        if e["cat"] in ("kernel", "cuda_runtime"):
            e["args"]["correlation"] = 1


def _wait_for_no_collective(host: list[dict], _events: list[dict]) -> None:
    next(n for n in host if n["id"] == 8)["inputs"]["values"][0] = [99, False]


def _nccl_on_stream(stream: Any):
    def edit(_host: list[dict], events: list[dict]) -> None:
        for e in events:
            if e["cat"] == "kernel" and "nccl" in e["name"]:
                e["args"]["stream"] = stream

    return edit


def _gemm_on_device_1(_host: list[dict], events: list[dict]) -> None:
    next(e for e in events if e["cat"] == "kernel" and "sgemm" in e["name"])["args"]["device"] = 1


def _no_devices(_host: list[dict], events: list[dict]) -> None:
    for e in events:
        (e.get("args") or {}).pop("device", None)


ODD = {
    "no launch runtime events": _drop_launches,
    "kernels without correlation": _kernels_without_correlation,
    "a duplicated launch correlation": _duplicate_launch,
    "a duplicated kernel correlation": _duplicate_kernel,
    "every op one correlation": _one_correlation,
    "a wait with no matching collective": _wait_for_no_collective,
    "NCCL on the default stream 0": _nccl_on_stream(0),
    "NCCL on the compute stream": _nccl_on_stream(COMPUTE),
    "NCCL on stream -1": _nccl_on_stream(-1),
    "NCCL on a string stream": _nccl_on_stream(str(NCCL)),
    "two devices in the process": _gemm_on_device_1,
    "no device recorded": _no_devices,
}


@pytest.mark.parametrize("sync_events", [(), ("enqueue", "wait")])
@pytest.mark.parametrize("case", sorted(ODD))
def test_odd_kineto_inputs_convert(case, sync_events):
    """Each converts (every edge to a smaller id, checked in ``_edges``), with or without Kineto's
    recorded waits."""
    _edges(linked_step(sync_events=sync_events, edit=ODD[case]))


def test_launches_and_kernels_that_do_not_pair_leave_no_gpu_op():
    for edit in (_drop_launches, _kernels_without_correlation):
        assert max(_edges(linked_step(edit=edit))) <= 11


def test_a_wait_without_its_collective_holds_nothing():
    edges = _edges(linked_step(edit=_wait_for_no_collective))
    gemm, nccl, add, _ = sorted(nid for nid in edges if nid > 11)
    assert edges[add] == [9, gemm]
    assert edges[nccl] == [7, gemm]  # the enqueue still waits


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        ("launch_ts", None, "'launch_ts' has the wrong type (NoneType)"),
        ("launch_ts", "1", "'launch_ts' has the wrong type (str)"),
        ("launch_ts", -5, "'launch_ts' = -5 is out of range"),
        ("stream_wait", 12, "'stream_wait' has the wrong type (int)"),
        ("stream_wait", ["12"], "'stream_wait' must list node ids"),
        ("stream_wait", [True], "'stream_wait' must list node ids"),
    ],
)
def test_a_malformed_linked_key_is_refused_naming_the_file_and_node(key, value, message):
    obj = linked_step()
    node = next(n for n in obj["nodes"] if n["id"] == 13)
    node[key] = value
    with pytest.raises(InputError) as err:
        parse_host_trace(obj, "linked.json")
    assert str(err.value) == f"linked.json: node 13: {message}"


@pytest.mark.parametrize("waited", [[13], [14], [999], [-1], [1], [1 << 70]])
def test_stream_waits_on_itself_later_missing_or_host_ops_are_dropped(waited):
    """A hand-edited ``stream_wait`` naming the op itself, a later op, no node or a host op adds no
    edge (the graph stays acyclic)."""
    obj = linked_step(sync_events=("enqueue", "wait"))
    next(n for n in obj["nodes"] if n["id"] == 13)["stream_wait"] = waited
    assert _edges(obj)[13] == [7]


@pytest.mark.parametrize("sync_events", [(), ("enqueue", "wait")])
def test_the_same_input_converts_to_the_same_bytes(tmp_path, sync_events):
    obj = linked_step(sync_events=sync_events, sync_all_reduce=True)
    files = []
    for run in ("a", "b"):
        prefix = tmp_path / run / "s"
        prefix.parent.mkdir()
        ranks = [convert_trace(parse_host_trace(copy.deepcopy(obj), f"r{r}"), r) for r in range(2)]
        write_rank_set(str(prefix), ranks)
        files.append([(prefix.parent / f"s.{r}.et").read_bytes() for r in range(2)])
    assert files[0] == files[1]


def test_parse_kineto_keeps_only_stream_wait_sync_events():
    """Other ``cuda_sync`` events (Event Sync, Context Sync) are not read as streams' waits."""
    sync = {"ph": "X", "cat": "cuda_sync", "pid": 0, "tid": 7, "ts": 1, "args": {"stream": 7}}
    trace = parse_kineto({"traceEvents": [dict(sync, name="Event Sync"), dict(sync, name="Stream Wait Event")]}, "k")
    assert [e.name for e in trace.stream_waits] == ["Stream Wait Event"]
