"""Converted traces answer network what-ifs: communication wait is not compute, one-rank and
host-only multi-thread traces simulate faithfully (issue 14, points 1-3)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from chakra_pipe.convert.pytorch import convert_trace
from chakra_pipe.convert.rankset import write_rank_set
from chakra_pipe.et import TraceSet, read_trace, schema
from chakra_pipe.et.attrs import get_attr
from chakra_pipe.link.hostet import parse_host_trace
from chakra_pipe.link.kineto import load_kineto, parse_kineto
from chakra_pipe.link.linker import link_traces
from chakra_pipe.sim import simulate
from chakra_pipe.sim.config import HardwareConfig, NetworkConfig, SystemConfig

DATA = Path(__file__).parent / "data" / "capture"
PID = 77
INFINITE_GBPS = 1e9


def _hw(npus: int, bandwidth: float, latency: float = 0.0) -> HardwareConfig:
    system = SystemConfig.from_file(DATA / "system_ring.json")
    network = NetworkConfig.from_dict(
        {"topology": ["Ring"], "npus_count": [npus], "bandwidth": [bandwidth], "latency": [latency]}
    )
    return HardwareConfig(system=system, network=network)


def _node(nid, name, parent, rf=None, tid=1, values=None, types=None):
    attrs = [{"name": "tid", "type": "uint64", "value": tid}]
    if rf is not None:
        attrs.append({"name": "rf_id", "type": "uint64", "value": rf})
    return {
        "id": nid,
        "name": name,
        "ctrl_deps": parent,
        "inputs": {"values": values or [], "shapes": [], "types": types or []},
        "outputs": {"values": [], "shapes": [], "types": []},
        "attrs": attrs,
    }


def _tensor(tid, numel):
    return [tid, tid + 1, 0, numel, 4, "cpu"]


ALLREDUCE_IN = (
    [[_tensor(90, 1000)], "<Object>", "<Object>", "<None>", True, -1],
    ["GenericList[Tensor(float)]", "Object", "Object", "None", "Bool", "Int"],
)
ALLTOALL_IN = (
    [_tensor(100, 256), _tensor(102, 256), "<Object>", [], [], False, -1],
    ["Tensor(float)", "Tensor(float)", "Object", "GenericList[Int]", "GenericList[Int]", "Bool", "Int"],
)


def _step_trace(nodes: list[dict]) -> dict:
    """A host ET of one profiled step: the process and thread roots, ``ProfilerStep#1`` (rf 2), then ``nodes``."""
    return {
        "schema": "1.1.1-chakra.0.0.4",
        "pid": PID,
        "time": "2024-01-01 00:00:00",
        "start_ts": 1,
        "finish_ts": 2,
        "nodes": [
            _node(1, "[pytorch|profiler|execution_trace|process]", 1),
            _node(2, "[pytorch|profiler|execution_trace|thread]", 1),
            _node(3, "ProfilerStep#1", 2, rf=2),
            *nodes,
        ],
    }


def _event(name: str, ts: int, dur: int, rf: int, tid: int = 1, cat: str = "cpu_op") -> dict:
    """A Kineto CPU event whose ``Record function id`` and ``External id`` are ``rf``."""
    args = {"Record function id": rf, "External id": rf}
    return {"ph": "X", "cat": cat, "name": name, "pid": PID, "tid": tid, "ts": ts, "dur": dur, "args": args}


def ddp_pair():
    """One DDP step in miniature: the main thread issues an async all-reduce, then sits idle in
    ``ProfilerStep`` (DDP's finalize) while ``gloo:all_reduce`` runs on a worker thread."""
    host = _step_trace(
        [
            _node(4, "aten::mm", 3, rf=3),
            _node(5, "c10d::allreduce_", 3, rf=4, values=ALLREDUCE_IN[0], types=ALLREDUCE_IN[1]),
            _node(6, "gloo:all_reduce", 3, rf=5),
            _node(7, "aten::add_", 3, rf=6),
        ]
    )

    kineto = {
        "traceEvents": [
            _event("ProfilerStep#1", 1000, 1000, 2, cat="user_annotation"),
            _event("aten::mm", 1000, 300, 3),
            _event("c10d::allreduce_", 1300, 20, 4),
            _event("gloo:all_reduce", 1320, 480, 5, tid=2, cat="user_annotation"),
            _event("aten::add_", 1900, 100, 6),
        ]
    }
    return host, kineto


def _linked_set(prefix: str, ranks: int = 2):
    host, kineto = ddp_pair()
    obj, stats = link_traces(parse_host_trace(host, "h.json"), parse_kineto(kineto, "k.json"))
    trace = parse_host_trace(obj, "linked.json")
    write_rank_set(prefix, [convert_trace(trace, r) for r in range(ranks)])
    return stats


def test_async_wait_is_measured_and_taken_out_of_the_enclosing_op(tmp_path):
    stats = _linked_set(str(tmp_path / "ddp"))
    # ProfilerStep's own time is 1000 - 300 - 20 - 100 = 580 us, of which 480 overlap the worker's
    # gloo range; the 20 us inside c10d::allreduce_ are in the call.
    assert (stats.comm_idle_us, stats.comm_call_us, stats.comm_wait_us) == (480.0, 20.0, 500.0)
    assert (
        "communication wait 0.500 ms (0.480 ms idle while a collective ran, 0.020 ms in collective calls)"
        in stats.line()
    )
    _, nodes = read_trace(tmp_path / "ddp.0.et")
    by_name = {n.name: n for n in nodes}
    assert by_name["ProfilerStep#1"].duration_micros == 580 - 480
    assert by_name["aten::mm"].duration_micros == 300  # leaf compute is never counted as wait
    comp = sum(n.duration_micros for n in nodes if n.type == schema.COMP_NODE)
    assert comp == 1000 - 500


def test_infinite_network_gives_measured_minus_wait_and_bandwidth_now_matters(tmp_path):
    _linked_set(str(tmp_path / "ddp"))
    ts = TraceSet.load(str(tmp_path / "ddp"))
    step_inf = max(simulate(ts, _hw(2, INFINITE_GBPS)).finish_ns)
    assert abs(step_inf - (1000 - 500) * 1e3) <= 0.10 * (1000 - 500) * 1e3
    slow = max(simulate(ts, _hw(2, 0.001)).finish_ns)
    slower = max(simulate(ts, _hw(2, 0.0005)).finish_ns)
    assert slower - slow > 0.5 * (slow - step_inf) > 0


def back_to_back_buckets():
    """Three DDP buckets as a real capture records them when the gloo workers are busy (issue #14):
    the hooks enqueue all three all-reduces (rf_id 10, 20, 30) before a worker starts the first
    range, so the ranges' ids (taken at their start) follow every enqueue, while their rf_ids
    (taken at enqueue, inside the op) follow their own op's."""
    ops = [(5 + k, 10 * (k + 1)) for k in range(3)]  # (id, rf_id)
    ranges = [(9 + k, 10 * (k + 1) + 1, 1500 + 400 * k, 100 * (k + 1)) for k in range(3)]  # id, rf, ts, dur
    host = _step_trace(
        [
            *(_node(i, "c10d::allreduce_", 3, rf=rf, values=ALLREDUCE_IN[0], types=ALLREDUCE_IN[1]) for i, rf in ops),
            *(_node(i, "gloo:all_reduce", 3, rf=rf) for i, rf, _, _ in ranges),
        ]
    )
    events = [_event("ProfilerStep#1", 1000, 3000, 2, cat="user_annotation")]
    events += [_event("c10d::allreduce_", 1100 + 50 * k, 20, rf) for k, (_, rf) in enumerate(ops)]
    events += [
        _event("gloo:all_reduce", ts, d, rf, tid=2 + k % 2, cat="user_annotation")
        for k, (_, rf, ts, d) in enumerate(ranges)
    ]
    return host, {"traceEvents": events}


def _allreduce_durations(obj) -> list[int]:
    conv = convert_trace(parse_host_trace(obj, "linked.json"), 0)
    return [n.duration_micros for n in conv.nodes if n.name == "c10d::allreduce_"]


def _linked(host, kineto):
    return link_traces(parse_host_trace(host, "h.json"), parse_kineto(kineto, "k.json"))[0]


def test_back_to_back_buckets_each_get_their_own_gloo_range():
    # Pairing by id (the rule before issue #14) gave [20, 20, 600]: the last bucket got all three.
    assert _allreduce_durations(_linked(*back_to_back_buckets())) == [100, 200, 300]


@pytest.mark.parametrize(("first_op_us", "expect"), [(20, [100, 200, 300]), (100, [100, 300])])
def test_a_collective_the_et_nested_in_the_previous_one(first_op_us, expect):
    """The ET observer's stack slips when a worker starts a range during its op's enqueue: the
    ops after that op are then recorded as its children. A child that began after the op ended
    (Kineto) is put back beside it and keeps its range; one that really ran inside is folded
    away, and its range does not lengthen the collective it was folded into."""
    host, kineto = back_to_back_buckets()
    host["nodes"][4]["ctrl_deps"] = 5  # the second all-reduce (ts 1150) recorded inside the first
    kineto["traceEvents"][1]["dur"] = first_op_us  # the first runs from ts 1100
    assert _allreduce_durations(_linked(host, kineto)) == expect


def test_without_rf_id_ranges_go_to_the_latest_op_issued_before_them():
    """A linked trace whose nodes lack rf_id (nothing then ties a range to its op) keeps the rule
    before issue #14, pairing by id; a host trace without Kineto keeps the enqueue times."""
    host, kineto = back_to_back_buckets()
    obj = _linked(host, kineto)
    for n in obj["nodes"]:
        n["attrs"] = [a for a in n["attrs"] if a["name"] != "rf_id"]
    assert _allreduce_durations(obj) == [20, 20, 600]
    assert _allreduce_durations(back_to_back_buckets()[0]) == [0, 0, 0]


@pytest.mark.parametrize("strip", ["ranges", "one op"])
def test_a_trace_mixing_nodes_with_and_without_rf_id_pairs_by_id(strip: str):
    """Only where both a range and every op of its name carry rf_id does rf_id decide: ranges
    without one, or a name with one op without one, pair by id (the rule before issue #14)."""
    obj = _linked(*back_to_back_buckets())
    ranges = [n for n in obj["nodes"] if n["name"] == "gloo:all_reduce"]
    ops = [n for n in obj["nodes"] if n["name"] == "c10d::allreduce_"]
    for n in ranges if strip == "ranges" else ops[1:2]:
        n["attrs"] = [a for a in n["attrs"] if a["name"] != "rf_id"]
    assert _allreduce_durations(obj) == [20, 20, 600]


def test_without_rf_id_a_folded_collective_keeps_its_range():
    """Pairing by id, a c10d op folded into the previous collective (it ran inside it) still owns
    the range that started after it: ids interleave op, range, op, range (each range starts before
    the next op is issued), and the folded op's range must not lengthen the first collective."""
    host, kineto = back_to_back_buckets()
    for node, nid in zip(host["nodes"][3:], (5, 7, 9, 6, 8, 10)):  # ops 5, 7, 9; their ranges 6, 8, 10
        node["id"] = nid
    host["nodes"][4]["ctrl_deps"] = 5  # the second all-reduce recorded inside the first ...
    kineto["traceEvents"][1]["dur"] = 100  # ... which it really ran inside (ts 1150 < 1100 + 100)
    obj = _linked(host, kineto)
    for n in obj["nodes"]:
        n["attrs"] = [a for a in n["attrs"] if a["name"] != "rf_id"]
    assert _allreduce_durations(obj) == [100, 300]


# --- real captures (torch) -------------------------------------------------------------------


@pytest.fixture(scope="module")
def torch_env():
    pytest.importorskip("torch", reason="capture needs the optional torch extra (pip install -e '.[torch]')")
    os.environ.setdefault("OMP_NUM_THREADS", "1")


def _capture(model: str, ranks: int, out: Path, bucket_mb: float | None = None) -> Path:
    from chakra_pipe.capture.runner import CaptureConfig, run_capture

    run_capture(CaptureConfig(model=model, ranks=ranks, steps=1, backend="gloo", out=out, bucket_mb=bucket_mb))
    return out


def _measured_step_us(kineto_path: Path) -> float:
    return next(e.dur for e in load_kineto(kineto_path).cpu if e.name.startswith("ProfilerStep#"))


# A real 2-rank capture on a shared 2-core machine is sometimes disturbed (a rank descheduled outside any
# op: time no trace attributes; at CI load average ~4 three resnet-tiny captures in a row were); the
# timing comparisons then judge the machine, not the conversion. Up to this many captures are taken and
# the comparisons must hold on one of them; a conversion that keeps the wait as compute fails every one
# (its error is the wait itself, 25-45% of the step).
CAPTURE_ATTEMPTS = 5


@pytest.mark.slow
@pytest.mark.parametrize("model", ["resnet-tiny", "gpt-tiny"])
def test_ddp_capture_wait_is_reported_and_network_sweeps_see_it(model, tmp_path, torch_env):
    misses = []
    for attempt in range(CAPTURE_ATTEMPTS):
        miss = _whatif_miss(model, tmp_path / f"attempt{attempt}")
        if miss is None:
            return
        misses.append(miss)
    pytest.fail(f"{model}: every capture missed: {misses}")


def _whatif_miss(model: str, tmp_path) -> str | None:
    """One capture, converted and simulated: None when the timing comparisons hold, else what missed.
    What does not depend on the machine's timing is asserted outright."""
    cap = _capture(model, 2, tmp_path / "cap")
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "chakra_pipe.cli",
            "convert",
            "pytorch",
            "--ranks-dir",
            str(cap),
            "--out",
            str(tmp_path / "set" / model),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert r.returncode == 0, r.stderr
    from chakra_pipe.convert.rankset import convert_capture

    summary = convert_capture(cap, str(tmp_path / "set" / model))
    waits = [s.comm_wait_us for s in summary.links]
    assert len(waits) == 2 and all(w > 0 for w in waits)
    assert r.stdout.count("communication wait") == 2
    expect_us = max(_measured_step_us(cap / f"rank{k}.kineto.json.gz") - waits[k] for k in range(2))
    ts = TraceSet.load(str(tmp_path / "set" / model))
    inf = simulate(ts, _hw(2, INFINITE_GBPS))
    one = max(simulate(ts, _hw(2, 0.05)).finish_ns)
    half = max(simulate(ts, _hw(2, 0.025)).finish_ns)
    assert half - one > 1000  # > 1 us: the DDP all-reduces are on the critical path
    # Per rank, the work conversion kept (CPU ops + compute) is that rank's measured step minus its wait,
    # within the issue's 10%: the wait is no longer compute.
    for k in range(2):
        own_us = _measured_step_us(cap / f"rank{k}.kineto.json.gz") - waits[k]
        busy_us = (inf.cpu_ns[k] + inf.compute_ns[k]) / 1e3
        if abs(busy_us - own_us) > 0.10 * own_us:
            return f"rank {k} busy {busy_us:.0f} us vs measured step - wait {own_us:.0f} us (waits {waits})"
    step_inf = max(inf.finish_ns) / 1e3
    # The step also holds each rank's waits for its slower peer at every collective (rank imbalance: link
    # counts them in the wait, the simulator reproduces them), which on a shared 2-core CI machine can be
    # large, so against link's whole wait the step is held to 20% (3-9% on an idle machine) ...
    if abs(step_inf - expect_us) > 0.20 * expect_us:
        return f"step {step_inf:.0f} us vs measured step - wait {expect_us:.0f} us (waits {waits})"
    # ... and to the issue's 10% against the measured step minus only the network's part of the wait.
    from chakra_pipe.link.commwait import network_wait_us

    net = network_wait_us([load_kineto(cap / f"rank{k}.kineto.json.gz").cpu for k in range(2)])
    expect_net_us = max(_measured_step_us(cap / f"rank{k}.kineto.json.gz") - net[k] for k in range(2))
    if abs(step_inf - expect_net_us) > 0.10 * expect_net_us:
        return f"step {step_inf:.0f} us vs measured step - network wait {expect_net_us:.0f} us (network {net})"
    return None


# One bucket per parameter: gpt-tiny's backward then enqueues runs of all-reduces while both gloo
# workers are still busy with earlier ones, the order that pairing ranges by id got wrong.
TINY_BUCKET_MB = 0.0001


@pytest.mark.slow
def test_several_bucket_ddp_capture_credits_each_bucket_and_simulates_the_step(tmp_path, torch_env):
    """A real several-bucket capture: every bucket's COMM node has its own range's duration (not one
    bucket the sum), both ranks convert to the same collectives, and the step simulates and sees
    the network. What depends on the machine's timing (the step against the measured one) is the
    one-bucket test's above: at CI load a several-bucket capture's rank waits vary too much."""
    cap = _capture("gpt-tiny", 2, tmp_path / "cap", TINY_BUCKET_MB)
    _assert_each_bucket_has_its_own_range(cap)
    ts = TraceSet.load(str(tmp_path / "buckets" / "g"))
    one = max(simulate(ts, _hw(2, 0.05)).finish_ns)
    half = max(simulate(ts, _hw(2, 0.025)).finish_ns)
    assert half - one > 1000  # > 1 us: the buckets' all-reduces are on the critical path


def _assert_each_bucket_has_its_own_range(cap: Path) -> None:
    """Every DDP bucket's COMM node lasts as long as the ``gloo:all_reduce`` range its enqueue
    created: in torch's ProcessGroupGloo that range's RecordFunction is the next one after the
    op's (rf_id + 1, seen in every real capture), which this check reads from Kineto directly."""
    from chakra_pipe.convert.rankset import convert_capture

    prefix = str(cap.parent / "buckets" / "g")
    convert_capture(cap, prefix)
    for rank in range(2):
        ranges = {
            e.args.get("Record function id"): e.dur
            for e in load_kineto(cap / f"rank{rank}.kineto.json.gz").cpu
            if e.name == "gloo:all_reduce"
        }
        _, nodes = read_trace(f"{prefix}.{rank}.et")
        buckets = [n for n in nodes if n.name == "c10d::allreduce_" and n.type == schema.COMM_COLL_NODE]
        assert len(buckets) > 3, f"rank {rank}: {len(buckets)} all-reduces, DDP did not split the gradients"
        got = [n.duration_micros for n in buckets]
        want = [round(ranges[get_attr(n, "rf_id") + 1]) for n in buckets]
        assert got == want, f"rank {rank}"


@pytest.mark.slow
def test_one_rank_capture_converts_validates_and_simulates(tmp_path, torch_env):
    from chakra_pipe.convert.rankset import convert_capture
    from chakra_pipe.validate import validate_set

    cap = _capture("mlp", 1, tmp_path / "cap")
    prefix = str(tmp_path / "set" / "mlp")
    summary = convert_capture(cap, prefix)
    assert [f.name for f in summary.files] == ["mlp.0.et"]
    assert validate_set(prefix, strict=True).errors == 0
    result = simulate(TraceSet.load(prefix), _hw(1, 50.0, 500.0))
    comp = sum(n.duration_micros for n in read_trace(prefix + ".0.et")[1] if n.type == schema.COMP_NODE)
    assert len(result.finish_ns) == 1 and result.finish_ns[0] >= comp * 1000 > 0


def test_single_npu_network_is_accepted_but_not_a_degenerate_dimension():
    assert (
        NetworkConfig.from_dict({"topology": ["Ring"], "npus_count": [1], "bandwidth": [1.0], "latency": [0]}).npus == 1
    )
    assert (
        NetworkConfig.from_dict(
            {"topology": ["Ring", "Switch"], "npus_count": [1, 1], "bandwidth": [1.0, 1.0], "latency": [0, 0]}
        ).npus
        == 1
    )
    from chakra_pipe.errors import ConfigError

    with pytest.raises(ConfigError, match="npus_count"):
        NetworkConfig.from_dict(
            {"topology": ["Ring", "Switch"], "npus_count": [1, 4], "bandwidth": [1.0, 1.0], "latency": [0, 0]}
        )


def test_one_rank_simulation_via_cli(tmp_path):
    host, kineto = ddp_pair()
    obj, _ = link_traces(parse_host_trace(host, "h.json"), parse_kineto(kineto, "k.json"))
    write_rank_set(str(tmp_path / "one"), [convert_trace(parse_host_trace(obj, "l.json"), 0)])
    net = tmp_path / "net.yml"
    net.write_text("topology: [ Switch ]\nnpus_count: [ 1 ]\nbandwidth: [ 50.0 ]\nlatency: [ 500.0 ]\n")
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "chakra_pipe.cli",
            "simulate",
            f"--workload-configuration={tmp_path / 'one'}",
            f"--system-configuration={DATA / 'system_ring.json'}",
            f"--network-configuration={net}",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("sys[0] finished, ")


# --- a thread blocked on another thread's ops (backward() on a GPU) ------------------------------


def gpu_backward_pair():
    """A GPU step in miniature: the main thread runs the forward ``aten::mm``, then blocks in the
    unrecorded ``loss.backward()`` while the autograd device thread (tid 2) runs the backward op,
    then steps the optimizer. Only ``ProfilerStep`` encloses the wait."""
    host = _step_trace(
        [
            _node(4, "aten::mm", 3, rf=3),
            _node(5, "[pytorch|profiler|execution_trace|thread]", 1, tid=2),
            _node(6, "autograd::engine::evaluate_function: MmBackward0", 5, rf=4, tid=2),
            _node(7, "aten::add_", 3, rf=5),
        ]
    )
    kineto = {
        "traceEvents": [
            _event("ProfilerStep#1", 1000, 1000, 2, cat="user_annotation"),
            _event("aten::mm", 1000, 200, 3),
            _event("autograd::engine::evaluate_function: MmBackward0", 1300, 500, 4, tid=2),
            _event("aten::add_", 1850, 100, 5),
        ]
    }
    return host, kineto


def test_a_thread_blocked_on_another_threads_ops_is_a_dependency_not_compute(tmp_path):
    host, kineto = gpu_backward_pair()
    obj, stats = link_traces(parse_host_trace(host, "h.json"), parse_kineto(kineto, "k.json"))
    # ProfilerStep's own time [1200, 1850) + [1950, 2000) meets the backward op [1300, 1800): 500 us.
    assert (stats.thread_wait_us, stats.comm_wait_us) == (500.0, 0.0)
    assert stats.result_lines() == ["thread wait 0.500 ms (blocked while another thread's ops ran)"]
    write_rank_set(str(tmp_path / "gpu"), [convert_trace(parse_host_trace(obj, "l.json"), 0)])
    _, nodes = read_trace(tmp_path / "gpu.0.et")
    by_name = {n.name: n for n in nodes}
    assert by_name["ProfilerStep#1"].duration_micros == 700 - 500
    # the optimizer waits for the backward op it waited for on the traced run
    assert by_name["autograd::engine::evaluate_function: MmBackward0"].id in by_name["aten::add_"].data_deps
    # the simulated step is the measured one; kept as compute, the wait ran the backward twice (1,500 us)
    assert simulate(TraceSet.load(str(tmp_path / "gpu")), _hw(1, 50.0)).finish_ns == [1_000_000]


def test_a_label_on_the_thread_waited_for_is_its_work_not_a_wait(tmp_path):
    """The DDP comm hook's ``record_function`` label runs on the autograd thread while the main thread
    is blocked: its own time (the hook's Python) is work the main thread waits for, and no wait of
    its own because it overlaps the main thread's blocked ``ProfilerStep``. Counted as a wait on both
    threads, that time was simulated by neither (200 us short here; 150-330 us a step in the H200
    captures)."""
    host = _step_trace(
        [
            _node(4, "aten::mm", 3, rf=3),
            _node(5, "[pytorch|profiler|execution_trace|thread]", 1, tid=2),
            _node(6, "autograd::engine::evaluate_function: MmBackward0", 5, rf=4, tid=2),
            _node(7, "chakra_pipe.pg:0", 5, rf=6, tid=2),
            _node(8, "aten::add_", 3, rf=5),
        ]
    )
    kineto = {
        "traceEvents": [
            _event("ProfilerStep#1", 1000, 1000, 2, cat="user_annotation"),
            _event("aten::mm", 1000, 200, 3),
            _event("autograd::engine::evaluate_function: MmBackward0", 1300, 300, 4, tid=2),
            _event("chakra_pipe.pg:0", 1600, 200, 6, tid=2, cat="user_annotation"),
            _event("aten::add_", 1850, 100, 5),
        ]
    }
    obj, stats = link_traces(parse_host_trace(host, "h.json"), parse_kineto(kineto, "k.json"))
    assert stats.thread_wait_us == 500.0  # ProfilerStep's [1300, 1800), the label none
    write_rank_set(str(tmp_path / "hook"), [convert_trace(parse_host_trace(obj, "l.json"), 0)])
    by_name = {n.name: n for n in read_trace(tmp_path / "hook.0.et")[1]}
    assert (by_name["ProfilerStep#1"].duration_micros, by_name["chakra_pipe.pg:0"].duration_micros) == (200, 200)
    assert simulate(TraceSet.load(str(tmp_path / "hook")), _hw(1, 50.0)).finish_ns == [1_000_000]


def test_a_wait_inside_a_nested_label_still_orders_the_thread_after_the_other(tmp_path):
    """``with record_function("train"): loss.backward(); opt.step()`` inside ``ProfilerStep``: the
    wait is the label's own time, and neither the label nor ``ProfilerStep`` around it may cover
    the gap, or the optimizer no longer waits for the backward ops."""
    host = _step_trace(
        [
            _node(4, "aten::mm", 3, rf=3),
            _node(5, "train", 3, rf=6),
            _node(6, "[pytorch|profiler|execution_trace|thread]", 1, tid=2),
            _node(7, "autograd::engine::evaluate_function: MmBackward0", 6, rf=4, tid=2),
            _node(8, "aten::add_", 5, rf=5),
        ]
    )
    kineto = {
        "traceEvents": [
            _event("ProfilerStep#1", 1000, 1000, 2, cat="user_annotation"),
            _event("aten::mm", 1000, 200, 3),
            _event("train", 1200, 750, 6, cat="user_annotation"),
            _event("autograd::engine::evaluate_function: MmBackward0", 1300, 500, 4, tid=2),
            _event("aten::add_", 1850, 100, 5),
        ]
    }
    obj, stats = link_traces(parse_host_trace(host, "h.json"), parse_kineto(kineto, "k.json"))
    assert stats.thread_wait_us == 500.0
    write_rank_set(str(tmp_path / "nested"), [convert_trace(parse_host_trace(obj, "l.json"), 0)])
    by_name = {n.name: n for n in read_trace(tmp_path / "nested.0.et")[1]}
    assert by_name["train"].duration_micros == 650 - 500
    assert by_name["autograd::engine::evaluate_function: MmBackward0"].id in by_name["aten::add_"].data_deps


def test_a_thread_wait_leaves_the_wait_for_a_collective_to_the_communication_figure():
    """Idle overlapping both a worker's gloo range and another thread's op counts once, as communication."""
    from chakra_pipe.link.commwait import measure

    def ev(name, ts, dur, tid, cat="user_annotation"):
        return {"ph": "X", "cat": cat, "name": name, "pid": PID, "tid": tid, "ts": ts, "dur": dur, "args": {}}

    k = parse_kineto(
        {
            "traceEvents": [
                ev("ProfilerStep#1", 0, 1000, 1),
                ev("aten::mm", 0, 100, 1, "cpu_op"),
                ev("MmBackward0", 200, 500, 2, "cpu_op"),  # [200, 700) on the autograd thread
                ev("gloo:all_reduce", 600, 300, 3),  # [600, 900) on a worker
            ]
        },
        "k.json",
    )
    wait = measure(k.cpu)
    # own time [100, 1000): the worker covers [600, 900) (300 us), the other op the rest of [200, 700)
    assert (wait.idle_us, wait.thread_us) == ({1: 300.0}, {1: 400.0})


# --- host-only traces with several threads -----------------------------------------------------


def two_thread_host_trace():
    """No Kineto: ids (assigned at op entry) are the only record of order. The main thread runs two
    forward all-to-alls, then the autograd thread a backward all-reduce; nothing but the ids says
    the autograd thread started after the second all-to-all (PARAM's DLRM: 727, 1068, …, 1246)."""
    nodes = [
        _node(1, "[pytorch|profiler|execution_trace|process]", 1),
        _node(2, "[pytorch|profiler|execution_trace|thread]", 1),
        _node(3, "[pytorch|profiler|execution_trace|thread]", 1, tid=2),
        _node(10, "aten::mm", 2),
        _node(11, "c10d::alltoall_base_", 2, values=ALLTOALL_IN[0], types=ALLTOALL_IN[1]),
        _node(12, "aten::add_", 2),
        _node(13, "c10d::alltoall_base_", 2, values=ALLTOALL_IN[0], types=ALLTOALL_IN[1]),
        _node(20, "autograd::engine::evaluate_function: MmBackward0", 3, tid=2),
        _node(21, "c10d::allreduce_", 20, tid=2, values=ALLREDUCE_IN[0], types=ALLREDUCE_IN[1]),
    ]
    return {
        "schema": "1.1.1-chakra.0.0.4",
        "pid": PID,
        "time": "2024-01-01 00:00:00",
        "start_ts": 1,
        "finish_ts": 2,
        "nodes": nodes,
    }


def test_host_only_threads_issue_collectives_in_entry_order(tmp_path):
    trace = parse_host_trace(two_thread_host_trace(), "host.json")
    write_rank_set(str(tmp_path / "mt"), [convert_trace(trace, r) for r in range(2)])
    result = simulate(TraceSet.load(str(tmp_path / "mt")), _hw(2, 1.0, 500.0))
    for rank in range(2):
        colls = sorted((c for c in result.collectives if c.rank == rank), key=lambda c: c.start_ns)
        assert [c.node_id for c in colls] == [11, 13, 21]
        assert colls[0].end_ns <= colls[1].start_ns and colls[1].end_ns <= colls[2].start_ns


def test_results_add_up_with_cpu_time_and_the_simulator_line_keeps_astra_sims_definition(tmp_path):
    from chakra_pipe.results.metrics import metrics

    _linked_set(str(tmp_path / "ddp"))
    result = simulate(TraceSet.load(str(tmp_path / "ddp")), _hw(2, 1.0, 500.0))
    row = metrics(result)
    assert row["compute_ns"] == 0 and row["cpu_ns"] == 500_000  # every COMP node of a CPU capture is a CPU op
    assert row["compute_ns"] + row["cpu_ns"] + row["exposed_comm_ns"] + row["idle_ns"] == row["step_time_ns"]
    assert 0 < row["exposed_comm_ns"] < row["step_time_ns"] - row["cpu_ns"] + 1
    # "sys[i] finished, T cycles, exposed communication X cycles": X = T - GPU compute, as ASTRA-sim.
    assert result.exposed_comm_ns == [f - c for f, c in zip(result.finish_ns, result.compute_ns)]


def test_a_one_file_set_whose_metadata_lists_two_members_is_incomplete(tmp_path):
    from chakra_pipe.validate import validate_set

    host, _ = ddp_pair()
    table = '[{"pg_name": "0", "ranks": [], "group_size": 2}, {"pg_name": "1", "ranks": [0, 1], "group_size": 2}]'
    host["nodes"].insert(3, _node(8, "## process_group:init ##", 2, values=[table], types=["String"]))
    write_rank_set(str(tmp_path / "one"), [convert_trace(parse_host_trace(host, "h.json"), 0)])
    report = validate_set(str(tmp_path / "one"))
    found = [f for f in report.findings if f.rule == "incomplete-set"]
    assert len(found) == 1 and report.errors >= 1
    assert "METADATA group '1' lists rank(s) 1 but the set has 1 rank file(s)" in found[0].message
    # The same table in a complete two-rank set is fine.
    write_rank_set(str(tmp_path / "two"), [convert_trace(parse_host_trace(host, "h.json"), r) for r in range(2)])
    assert not [f for f in validate_set(str(tmp_path / "two")).findings if f.rule == "incomplete-set"]


@pytest.mark.parametrize("kind", ["int64_val", "uint64_val"])
def test_uint64_comm_size_is_read_at_face_value_and_validate_warns(tmp_path, kind):
    """ASTRA-sim's feeder reads a uint64_val comm_size as 0; we keep the face value (a deliberate
    difference), and validate says the file is not canonical."""
    from chakra_pipe.et import write_trace
    from chakra_pipe.et.attrs import set_attr
    from chakra_pipe.validate import validate_set

    prefix = str(tmp_path / "ar")
    for rank in range(2):
        node = schema.Node(id=1, name="all_reduce", type=schema.COMM_COLL_NODE)
        set_attr(node, "is_cpu_op", False)
        set_attr(node, "comm_type", schema.ALL_REDUCE)
        set_attr(node, "comm_size", 1 << 20, kind)
        write_trace(f"{prefix}.{rank}.et", schema.GlobalMetadata(version="0.0.4"), [node])
    result = simulate(TraceSet.load(prefix), _hw(2, 1.0, 500.0))
    assert [c.bytes for c in result.collectives] == [1 << 20] * 2
    assert max(result.finish_ns) > (1 << 20) / 2**30 * 1e9 / 2  # ring all-reduce sends ~size bytes at 1 GiB/s
    warnings = [f for f in validate_set(prefix).findings if f.rule == "attr-kind"]
    assert bool(warnings) == (kind == "uint64_val")
    if warnings:
        assert "comm_size stored as uint64_val on 1 nodes" in warnings[0].message
        assert "reads others as 0" in warnings[0].message


def test_comm_wait_counts_annotation_gaps_under_the_union_of_worker_ranges():
    from chakra_pipe.link.commwait import measure

    def ev(i, name, ts, dur, tid, cat="user_annotation"):
        return {"ph": "X", "cat": cat, "name": name, "pid": PID, "tid": tid, "ts": ts, "dur": dur, "args": {}}

    k = parse_kineto(
        {
            "traceEvents": [
                ev(0, "ProfilerStep#1", 0, 1000, 1),
                ev(1, "label", 100, 300, 1),
                ev(2, "aten::mm", 150, 50, 1, "cpu_op"),
                ev(3, "c10d::allreduce_", 700, 50, 1, "cpu_op"),
                ev(4, "gloo:all_reduce", 120, 180, 2),
                ev(5, "gloo:all_reduce", 250, 350, 3),
            ]
        },
        "k.json",
    )
    wait = measure(k.cpu)
    # Worker ranges [120, 300] and [250, 600] overlap: their union [120, 600] counts once.
    # ProfilerStep's own time [0, 100] + [400, 700] + [750, 1000] meets it on [400, 600]: 200 us.
    # The label's own time [100, 150] + [200, 400] meets it on [120, 150] + [200, 400]: 230 us.
    assert {k.cpu[i].name: v for i, v in wait.idle_by_event.items()} == {"ProfilerStep#1": 200.0, "label": 230.0}
    assert wait.idle_us == {1: 430.0} and wait.in_calls_us == {1: 50.0}  # the leaf aten::mm is compute


def test_network_wait_leaves_out_the_wait_for_a_slower_peer():
    from chakra_pipe.link.commwait import measure, network_wait_us

    def ev(name, ts, dur, tid, cat="user_annotation"):
        return {"ph": "X", "cat": cat, "name": name, "pid": PID, "tid": tid, "ts": ts, "dur": dur, "args": {}}

    # Both ranks' all-reduce ends at 900. Rank 0 computes until 200 and issues it at 200; rank 1
    # computes until 600. Then a blocking all-gather call: rank 0 enters at 950, rank 1 at 910.
    ranks = [
        parse_kineto(
            {
                "traceEvents": [
                    ev("ProfilerStep#1", 0, 1000, 1),
                    ev("aten::mm", 0, issue, 1, "cpu_op"),
                    ev("gloo:all_reduce", issue, 900 - issue, 2),
                    ev("c10d::allgather_", call, 990 - call, 1, "cpu_op"),
                    ev("gloo:all_gather", call, 990 - call, 2),
                ]
            },
            f"rank{r}.json",
        ).cpu
        for r, (issue, call) in enumerate([(200, 950), (600, 910)])
    ]
    link_waits = [measure(k).idle_us[1] + measure(k).in_calls_us[1] for k in ranks]
    # link: rank 0 idle 200..900 (700) + in call 40; rank 1 idle 600..900 (300) + in call 80
    assert link_waits == [740.0, 380.0]
    # network: only after rank 1 reached the all-reduce (600) and rank 0 the all-gather (950):
    # rank 0 idle 600..900 (300) + 40, rank 1 idle 600..900 (300) + 40 (its 910..950 is waiting for rank 0)
    assert network_wait_us(ranks) == [340.0, 340.0]


def labelled_step(allreduce_ts: int, et_parent: int = 4):
    """A ``chakra_pipe.pg:1`` label (id 4, [1100, 1200]) around an ``aten::mm``, and an all-reduce
    (id 6) the ET records below ``et_parent`` that starts at ``allreduce_ts``."""
    host = _step_trace(
        [
            _node(4, "chakra_pipe.pg:1", 3, rf=3),
            _node(5, "aten::mm", 4, rf=4),
            _node(6, "c10d::allreduce_", et_parent, rf=5, values=ALLREDUCE_IN[0], types=ALLREDUCE_IN[1]),
            _node(7, "gloo:all_reduce", 3, rf=6),
        ]
    )
    events = [
        _event("ProfilerStep#1", 1000, 1000, 2, cat="user_annotation"),
        _event("chakra_pipe.pg:1", 1100, 100, 3, cat="user_annotation"),
        _event("aten::mm", 1110, 50, 4),
        _event("c10d::allreduce_", allreduce_ts, 20, 5),
        _event("gloo:all_reduce", allreduce_ts + 20, 100, 6, tid=2, cat="user_annotation"),
    ]
    return host, {"traceEvents": events}


def _converted(obj) -> dict[str, schema.Node]:
    return {n.name: n for n in convert_trace(parse_host_trace(obj, "linked.json"), 0).nodes}


@pytest.mark.parametrize(
    ("allreduce_ts", "et_parent", "parent", "pg", "label_us"),
    [
        (1300, 4, 3, "0", 50),  # the ET says inside the label, which Kineto shows had ended: re-parented
        (1300, 3, 3, "0", 50),  # the same op recorded where it ran
        (1170, 4, 4, "1", 20),  # really inside the label: kept, on the label's group (10 us idle in it)
    ],
)
def test_an_op_is_parented_by_the_et_ancestor_still_open_when_it_began(allreduce_ts, et_parent, parent, pg, label_us):
    """Mis-nested host ops (issue #14): an ET parent that had ended before its child began (Kineto)
    cannot be its caller. The op moves up to the nearest ET ancestor still open, for its ctrl_deps
    and for what the call tree passes down (here the label's process group); durations stay the
    Kineto ones either way."""
    by_name = _converted(_linked(*labelled_step(allreduce_ts, et_parent)))
    ar = by_name["c10d::allreduce_"]
    assert list(ar.ctrl_deps) == [parent]
    assert get_attr(ar, "pg_name") == pg
    assert ar.duration_micros == 100  # its gloo range, wherever the ET put it
    assert (by_name["aten::mm"].duration_micros, by_name["chakra_pipe.pg:1"].duration_micros) == (50, label_us)


def test_a_host_only_trace_keeps_its_et_tree():
    """Without Kineto times nothing shows a slip: the ET's parent (and so the label's group) stands."""
    ar = _converted(labelled_step(1300, 4)[0])["c10d::allreduce_"]
    assert (list(ar.ctrl_deps), get_attr(ar, "pg_name")) == ([4], "1")


def test_an_op_starting_at_its_parents_last_ns_stays_below_it_whatever_the_float_sums_give():
    """Kineto's epoch-sized µs times with ns decimals: the label's ``ts + dur`` rounds one ulp below
    the all-reduce's start at that very ns; it had not ended before the op began, so the op keeps its
    ET parent (and the label's group)."""
    label_ts, label_dur, at = 1780074612430.827, 108.307, 1780074612539.134
    assert label_ts + label_dur < at  # the float sum says "ended"; the ns say "at its last ns"
    host, _ = labelled_step(1300)
    events = [
        _event("ProfilerStep#1", label_ts - 100, 1000, 2, cat="user_annotation"),
        _event("chakra_pipe.pg:1", label_ts, label_dur, 3, cat="user_annotation"),
        _event("aten::mm", label_ts + 10, 50, 4),
        _event("c10d::allreduce_", at, 20, 5),
        _event("gloo:all_reduce", at + 20, 100, 6, tid=2, cat="user_annotation"),
    ]
    ar = _converted(_linked(host, {"traceEvents": events}))["c10d::allreduce_"]
    assert (list(ar.ctrl_deps), get_attr(ar, "pg_name")) == ([4], "1")
