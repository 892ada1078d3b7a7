"""Linking a host ET with its Kineto trace: rf_id matching, durations, GPU attachment, refusals."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from chakra_pipe.errors import InputError
from chakra_pipe.link.hostet import load_host_trace, parse_host_trace
from chakra_pipe.link.kineto import KEvent, enclosing_ops, exclusive_durations, load_kineto, parse_kineto
from chakra_pipe.link.linker import link_files, link_traces

PID = 4242


def _node(nid, name, parent, rf=None, tid=1, inputs=None):
    attrs = [{"name": "rf_id", "type": "uint64", "value": rf}] if rf is not None else []
    attrs.append({"name": "tid", "type": "uint64", "value": tid})
    return {
        "id": nid,
        "name": name,
        "ctrl_deps": parent,
        "inputs": inputs or {"values": [], "shapes": [], "types": []},
        "outputs": {"values": [], "shapes": [], "types": []},
        "attrs": attrs,
    }


def host_obj(pid=PID):
    """Post-order file (children before parents, root last), as PyTorch writes it."""
    nodes = [
        _node(4, "aten::mm", 3, rf=11),
        _node(5, "aten::relu", 3, rf=12),
        _node(3, "Outer", 2, rf=10),
        _node(2, "[pytorch|profiler|execution_trace|thread]", 1),
        _node(1, "[pytorch|profiler|execution_trace|process]", 1),
    ]
    return {
        "schema": "1.1.1-chakra.0.0.4",
        "pid": pid,
        "time": "2024-01-01 00:00:00",
        "start_ts": 1,
        "nodes": nodes,
        "finish_ts": 2,
    }


def _cpu(name, ts, dur, rf, ext, tid=7, cat="cpu_op"):
    return {
        "ph": "X",
        "cat": cat,
        "name": name,
        "pid": PID,
        "tid": tid,
        "ts": ts,
        "dur": dur,
        "args": {"External id": ext, "Record function id": rf},
    }


def kineto_obj(rf=True):
    evs = [
        _cpu("Outer", 100, 10, 10, 1, cat="user_annotation"),
        _cpu("aten::mm", 105, 3, 11, 2),
        _cpu("aten::relu", 108, 1, 12, 3),
        {
            "ph": "X",
            "cat": "cuda_runtime",
            "name": "cudaLaunchKernel",
            "pid": PID,
            "tid": 7,
            "ts": 106,
            "dur": 1,
            "args": {"External id": 2, "correlation": 77},
        },
        {
            "ph": "X",
            "cat": "cuda_runtime",
            "name": "cudaLaunchKernel",
            "pid": PID,
            "tid": 7,
            "ts": 108.5,
            "dur": 0.2,
            "args": {"External id": 3, "correlation": 78},
        },
        {
            "ph": "X",
            "cat": "cuda_runtime",
            "name": "cudaMemsetAsync",
            "pid": PID,
            "tid": 7,
            "ts": 109.5,
            "dur": 0.2,
            "args": {"External id": 1, "correlation": 79},
        },
        {
            "ph": "X",
            "cat": "kernel",
            "name": "sgemm",
            "pid": 0,
            "tid": 7,
            "ts": 120,
            "dur": 5,
            "args": {"correlation": 77, "stream": 7, "device": 0},
        },
        {
            "ph": "X",
            "cat": "gpu_memset",
            "name": "Memset",
            "pid": 0,
            "tid": 7,
            "ts": 125,
            "dur": 1,
            "args": {"correlation": 79, "stream": 7, "device": 0},
        },
        {
            "ph": "X",
            "cat": "kernel",
            "name": "relu_kernel",
            "pid": 0,
            "tid": 7,
            "ts": 130,
            "dur": 2,
            "args": {"correlation": 78, "stream": 7, "device": 0},
        },
        {"ph": "M", "name": "process_name", "pid": PID, "args": {"name": "python"}},
    ]
    if not rf:
        for e in evs:
            e.get("args", {}).pop("Record function id", None)
    return {"schemaVersion": 1, "deviceProperties": [], "traceEvents": evs}


def linked(host=None, kineto=None):
    return link_traces(
        parse_host_trace(host or host_obj(), "host.json"), parse_kineto(kineto or kineto_obj(), "kineto.json")
    )


def test_host_ops_get_inclusive_exclusive_and_start_times():
    # Spec §5.2 example: ops [ts, dur] = [100,10], [105,3], [108,1] give exclusive 6, 3, 1.
    obj, stats = linked()
    by_id = {n["id"]: n for n in obj["nodes"]}
    assert [(by_id[i]["ts"], by_id[i]["inclusive_dur"], by_id[i]["exclusive_dur"]) for i in (3, 4, 5)] == [
        (100, 10, 6),
        (105, 3, 3),
        (108, 1, 1),
    ]
    assert (stats.host_ops, stats.matched) == (3, 3)
    assert "ts" not in by_id[1] and "ts" not in by_id[2]  # roots have no Kineto event


def test_gpu_ops_attach_to_launching_op_via_correlation_in_time_order():
    obj, stats = linked()
    gpu = [n for n in obj["nodes"] if "cat" in n]
    # Fresh ids above the host ids, in device time order; memsets are kept (upstream drops them).
    assert [(n["id"], n["name"], n["ctrl_deps"], n["stream"], n["inclusive_dur"]) for n in gpu] == [
        (6, "sgemm", 4, 7, 5),
        (7, "Memset", 3, 7, 1),
        (8, "relu_kernel", 5, 7, 2),
    ]
    assert (stats.gpu_ops, stats.attached) == (3, 3)


def test_launch_inside_an_op_the_host_lacks_climbs_to_its_matched_caller():
    k = kineto_obj()
    k["traceEvents"].append(_cpu("aten::empty", 105.5, 0.8, 99, 50))  # no host node has rf_id 99
    k["traceEvents"][3]["args"]["External id"] = 999  # and no External id to prefer
    obj, _ = linked(kineto=k)
    assert next(n for n in obj["nodes"] if n.get("name") == "sgemm")["ctrl_deps"] == 4


def with_device_synchronize():
    """The linked pair plus a ``cudaDeviceSynchronize`` and the host op (``aten::item``) that waits on it."""
    host, k = host_obj(), kineto_obj()
    host["nodes"].insert(3, _node(6, "aten::item", 2, rf=13))
    k["traceEvents"] += [
        {
            "ph": "X",
            "cat": "cuda_runtime",
            "name": "cudaDeviceSynchronize",
            "pid": PID,
            "tid": 7,
            "ts": 111,
            "dur": 22,
            "args": {"correlation": 80},
        },
        _cpu("aten::item", 134, 1, 13, 4),
    ]
    return host, k


def test_host_op_after_a_device_synchronize_waits_for_the_last_kernel_of_each_stream():
    host, k = with_device_synchronize()
    obj, stats = linked(host=host, kineto=k)
    by_id = {n["id"]: n for n in obj["nodes"]}
    relu_kernel = next(n["id"] for n in obj["nodes"] if n["name"] == "relu_kernel")
    assert by_id[6]["sync_dep"] == [relu_kernel]  # stream 7's last op launched before the sync
    assert stats.sync_deps == 1 and "1 host ops wait for the GPU" in stats.line()
    assert all("sync_dep" not in by_id[i] for i in (3, 4, 5))


def test_link_files_reads_gzip_and_writes_gzip(tmp_path: Path):
    host = tmp_path / "h.json.gz"
    dev = tmp_path / "k.json.gz"
    host.write_bytes(gzip.compress(json.dumps(host_obj()).encode()))
    dev.write_bytes(gzip.compress(json.dumps(kineto_obj()).encode()))
    out = tmp_path / "linked.json.gz"
    stats = link_files(host, dev, out)
    assert stats.matched == 3
    again = load_host_trace(out)
    assert sorted(again.by_id) == [1, 2, 3, 4, 5, 6, 7, 8]
    first = out.read_bytes()
    link_files(host, dev, out)
    assert out.read_bytes() == first  # deterministic output


def test_mismatched_pid_is_refused():
    with pytest.raises(InputError, match="different runs"):
        linked(host=host_obj(pid=1))


def test_capture_clocks_days_apart_are_refused():
    k = kineto_obj()
    # host "time" is 2024-01-01 00:00:00; Kineto wall = baseTimeNanoseconds + ts.
    k["baseTimeNanoseconds"] = 1_704_067_200 * 10**9 + 3 * 86400 * 10**9
    with pytest.raises(InputError, match="3.0 days apart"):
        linked(kineto=k)
    k["baseTimeNanoseconds"] = 1_704_067_200 * 10**9 + 5 * 3600 * 10**9  # a time-zone offset is fine
    assert linked(kineto=k)[1].matched == 3


def test_kineto_without_record_function_ids_is_refused_with_a_clear_message():
    # External ids 1, 2, 3 are not the host rf_ids 10, 11, 12: the fallback finds no agreeing name.
    with pytest.raises(InputError, match=r"no 'Record function id'.* 0/3 agreeing op names \(0\.0%, at least 90%"):
        linked(kineto=kineto_obj(rf=False))


def test_old_kineto_links_by_external_id_when_names_agree():
    k = kineto_obj(rf=False)
    for e in k["traceEvents"]:
        if e.get("cat") in ("cpu_op", "user_annotation"):
            e["args"]["External id"] += 9  # 1, 2, 3 -> the host rf_ids 10, 11, 12 (HTA's correlation)
    obj, stats = linked(kineto=k)
    assert (stats.matched, stats.correlation) == (3, "External id")
    assert "host ops matched 3/3 (100.0%) by 'External id' == rf_id" in stats.line()
    assert {n["id"]: n.get("inclusive_dur") for n in obj["nodes"] if n["id"] in (3, 4, 5)} == {3: 10, 4: 3, 5: 1}


def test_fewer_than_half_matched_is_refused():
    k = kineto_obj()
    for e in k["traceEvents"][:3]:
        e["name"] = "something_else"
    with pytest.raises(InputError, match="not from the same run"):
        linked(kineto=k)


def test_malformed_inputs_are_one_line_errors(tmp_path: Path):
    bad = tmp_path / "bad.json"
    bad.write_text('{"nodes": [')
    with pytest.raises(InputError, match="invalid JSON"):
        load_host_trace(bad)
    with pytest.raises(InputError, match="no 'nodes' list"):
        parse_host_trace({"schema": "1.1.1"}, "x.json")
    with pytest.raises(InputError, match="duplicate node id"):
        parse_host_trace({"nodes": [{"id": 1, "name": "a"}, {"id": 1, "name": "b"}]}, "x.json")
    with pytest.raises(InputError, match="traceEvents"):
        parse_kineto({"events": []}, "k.json")


def test_cli_reports_coverage_and_exit_codes(tmp_path: Path):
    host, dev = tmp_path / "h.json", tmp_path / "k.json"
    host.write_text(json.dumps(host_obj()))
    dev.write_text(json.dumps(kineto_obj()))
    cmd = [sys.executable, "-m", "chakra_pipe", "link", "--host", str(host), "--device", str(dev)]
    quiet = subprocess.run(cmd + ["--out", str(tmp_path / "q.json.gz")], capture_output=True, text=True)
    assert quiet.returncode == 0 and quiet.stderr == "" and quiet.stdout.startswith("link: wrote ")
    verbose = [sys.executable, "-m", "chakra_pipe", "-v", *cmd[3:]]
    ok = subprocess.run(verbose + ["--out", str(tmp_path / "o.json.gz")], capture_output=True, text=True)
    assert ok.returncode == 0, ok.stderr
    assert "host ops matched 3/3 (100.0%), GPU ops attached 3/3" in ok.stderr  # a diagnostic, with -v
    dev.write_text(json.dumps(kineto_obj(rf=False)))
    bad = subprocess.run(cmd + ["--out", str(tmp_path / "p.json.gz")], capture_output=True, text=True)
    assert bad.returncode == 2 and len(bad.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "p.json.gz").exists()


def test_fixture_pairs_without_link_ids_fail_clearly(fixtures_dir: Path):
    pt = fixtures_dir / "pytorch"
    # linear: same pid (a matched pair) but 2023 Kineto has no rf ids, and External id == rf_id
    # agrees on too few names for the fallback.
    with pytest.raises(InputError, match=r"no 'Record function id'.* 218/928 agreeing op names \(23\.5%"):
        link_files(pt / "linear_et.json.gz", pt / "linear_kineto.json.gz", Path("/nonexistent/never.json"))


@pytest.mark.slow
def test_resnet_fixture_pair_is_not_a_matched_pair(fixtures_dir: Path):
    pt = fixtures_dir / "pytorch"
    with pytest.raises(InputError, match="pid 1734239 but the Kineto trace from pid 23442"):
        link_files(pt / "resnet_et.json.gz", pt / "resnet_kineto.json.gz", Path("/nonexistent/never.json"))


def test_flat_101_host_trace_is_normalised(fixtures_dir: Path):
    trace = load_host_trace(fixtures_dir / "pytorch" / "linear_et.json.gz")
    assert trace.schema == "1.0.1" and len(trace.nodes) == 931
    node = next(n for n in trace.nodes if n["name"] == "aten::mm")
    assert isinstance(node["ctrl_deps"], int) and node["inputs"]["types"]
    assert {a["name"] for a in node["attrs"]} >= {"rf_id", "tid", "op_schema"}


def test_linear_kineto_fixture_launches_and_gpu_ops_correlate(fixtures_dir: Path):
    """Spec §4.2 / §9 on the real 2023 trace: GPU op ``correlation`` == launch ``correlation``.

    All 10,356 device ops (8,716 kernels, 1,640 memsets; upstream drops the memsets) find their
    launch, and every launch lies inside a CPU op of its thread. The launches' ``External id`` is
    their correlation here, never an enclosing op's, so timestamps must decide, not External id.
    """
    k = load_kineto(fixtures_dir / "pytorch" / "linear_kineto.json.gz")
    assert (len(k.cpu), len(k.launches)) == (37_078, 14_515)
    assert Counter(g.cat for g in k.gpu) == {"kernel": 8_716, "gpu_memset": 1_640}
    by_corr = {e.arg_int("correlation"): e for e in k.launches}
    launches = [by_corr[g.arg_int("correlation")] for g in k.gpu]
    owner = enclosing_ops(k.cpu, launches, lambda op: True)
    assert len(owner) == len(launches) == 10_356
    assert all(
        op.tid == launch.tid and op.ts <= launch.ts <= op.end for launch in launches for op in [owner[launch.index]]
    )
    assert not any(owner[launch.index].arg_int("External id") == launch.arg_int("External id") for launch in launches)


def wrapper_pair(wrapper_first: bool, rf: bool = True):
    """A ``record_function`` label wrapping exactly one op (equal ``[ts, dur]``), a launch inside
    them, and a gloo transfer on a worker thread during them; ``wrapper_first``: the label comes
    first in ``traceEvents`` (Kineto's order for equal spans says nothing about nesting)."""
    host = host_obj()
    host["nodes"][:0] = [_node(7, "aten::add", 6, rf=14), _node(6, "Wrap", 2, rf=13)]
    k = kineto_obj(rf=rf)
    wrap, op = _cpu("Wrap", 111, 4, 13, 4, cat="user_annotation"), _cpu("aten::add", 111, 4, 14, 5)
    launch = dict(k["traceEvents"][3], ts=112, args={"External id": 999, "correlation": 80})
    kernel = dict(k["traceEvents"][6], name="add_kernel", ts=140, args={"correlation": 80, "stream": 7, "device": 0})
    worker = _cpu("gloo:all_reduce", 110, 6, 15, 6, tid=9, cat="user_annotation")
    k["traceEvents"][:0] = [wrap, op] if wrapper_first else [op, wrap]
    k["traceEvents"] += [launch, kernel, worker]
    if not rf:
        for e in k["traceEvents"]:
            e.get("args", {}).pop("Record function id", None)
    return host, k


@pytest.mark.parametrize("wrapper_first", [True, False])
def test_equal_spans_nest_by_entry_order_not_event_position(wrapper_first):
    # Upstream breaks the tie by Record function id: the label (rf 13, entered first) is the outer
    # one, so the op keeps its time, the launch belongs to the op, and the label has no own time to
    # count as idle while the worker thread's gloo transfer runs.
    obj, _ = linked(*wrapper_pair(wrapper_first))
    by_name = {n["name"]: n for n in obj["nodes"]}
    assert (by_name["Wrap"]["exclusive_dur"], by_name["aten::add"]["exclusive_dur"]) == (0, 4)
    assert by_name["sgemm"]["ctrl_deps"] == 4 and by_name["relu_kernel"]["ctrl_deps"] == 5
    assert by_name["add_kernel"]["ctrl_deps"] == 7  # launched inside the pair: by the op
    assert "comm_wait" not in by_name["Wrap"] and "comm_wait" not in by_name["aten::add"]


@pytest.mark.parametrize("wrapper_first", [True, False])
def test_equal_spans_without_rf_ids_nest_by_host_et_id(wrapper_first):
    # Old Kineto (no Record function id) linked by External id == host rf_id: the ET id (taken at
    # op entry, like rf_id) breaks the tie instead.
    host, k = wrapper_pair(wrapper_first, rf=False)
    for e in k["traceEvents"]:  # External id carries the host rf_id in these traces
        if e.get("cat") in ("cpu_op", "user_annotation"):
            e["args"]["External id"] = {"Outer": 10, "aten::mm": 11, "aten::relu": 12, "Wrap": 13, "aten::add": 14}.get(
                e["name"], 15
            )
    obj, stats = linked(host, k)
    assert stats.correlation == "External id"
    by_name = {n["name"]: n for n in obj["nodes"]}
    assert (by_name["Wrap"]["exclusive_dur"], by_name["aten::add"]["exclusive_dur"]) == (0, 4)


def test_a_child_ending_at_its_parents_ns_nests_whatever_the_float_sums_give():
    """Kineto times are µs with ns decimals, often epoch-sized: ``ts + dur`` of a child that ends at
    the very ns its parent ends can round one ulp past the parent's sum (about 1 pair in 6 at these
    magnitudes), and such a child was left out of its parent, whose own time then held it."""
    p_ts, p_dur, c_ts, c_dur = 1780106012127.733, 9.271, 1780106012131.913, 5.091
    assert c_ts + c_dur > p_ts + p_dur  # the float sums disagree; the ns do not
    parent = KEvent(0, "cpu_op", "aten::linear", 1, 7, p_ts, p_dur, {})
    child = KEvent(1, "cpu_op", "aten::addmm", 1, 7, c_ts, c_dur, {})
    own = exclusive_durations([parent, child])
    assert own[1] == c_dur and own[0] == pytest.approx(p_dur - c_dur, abs=1e-6)
    launch = KEvent(2, "cuda_runtime", "cudaLaunchKernel", 1, 7, 1780106012137.004, 0.0, {})  # at that ns
    assert enclosing_ops([parent, child], [launch], lambda op: True)[2] is child
