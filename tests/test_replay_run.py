"""End-to-end replays through the CLI: real rank processes on gloo (NCCL when a GPU is present).

Every run goes through ``chakra-pipe`` in its own session with a hard timeout, and the test kills
the whole process group if that ever fires, so nothing can hang the suite or outlive a test.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import threading
import time
from pathlib import Path

import pytest
from conftest import TORCH_EXTRA
from processes import cli, generate_llm_args, parent_of, proc_pids, run_bounded, stall_trace
from test_replay_plan import coll, comp, p2p, write_set

from chakra_pipe.cli import main as cli_main
from chakra_pipe.et import get_int, read_trace, schema
from chakra_pipe.results.busbw import bus_factor, nccl_size

torch = pytest.importorskip("torch", reason=TORCH_EXTRA)

HARD_TIMEOUT_S = 150
COMM_TYPES = (schema.COMM_COLL_NODE, schema.COMM_SEND_NODE, schema.COMM_RECV_NODE)


def run_cli(*args: str, timeout: float = HARD_TIMEOUT_S) -> subprocess.CompletedProcess:
    """``chakra-pipe ARGS`` in a new session; the whole group is killed if it overruns."""
    return run_bounded(cli(*args), timeout=timeout)


def replay(prefix: str, out: Path, *extra: str) -> dict:
    res = run_cli("replay", prefix, "--out", str(out), "--timeout", "120", *extra)
    assert res.returncode == 0, res.stderr
    return json.loads(out.read_text())


def recorded_comm(prefix: str, ranks: int) -> dict[tuple[int, int], int]:
    """(rank, node id) -> recorded bytes, read straight from the trace files."""
    out = {}
    for r in range(ranks):
        _, nodes = read_trace(f"{prefix}.{r}.et")
        for n in nodes:
            if n.type in COMM_TYPES:
                size = get_int(n, "comm_size")
                out[(r, n.id)] = size if size is not None else get_int(n, "tensor_size", 0)
    return out


def assert_every_comm_node_ran_once_per_iteration(result: dict, prefix: str, iterations: int) -> None:
    expected = recorded_comm(prefix, result["trace"]["ranks"])
    seen = {}
    for rank in result["ranks"]:
        for node in rank["nodes"]:
            if "call_bytes" in node:
                seen[(rank["rank"], node["id"])] = node["call_bytes"]
    assert set(seen) == set(expected)
    for key, calls in seen.items():
        assert calls == [[expected[key]]] * iterations, key  # a barrier hands over 0 bytes


def assert_p2p_pairs_matched(result: dict, iterations: int) -> None:
    sends = sorted((e["rank"], e["peer"], e["tag"], e["comm_size"]) for e in result["p2p"] if e["kind"] == "send")
    recvs = sorted((e["peer"], e["rank"], e["tag"], e["comm_size"]) for e in result["p2p"] if e["kind"] == "recv")
    assert sends == recvs
    for rank in result["ranks"]:
        for node in rank["nodes"]:
            if node["action"] in ("send", "recv"):
                assert all(len(c) == 1 for c in node["call_bytes"]) and len(node["call_bytes"]) == iterations


# -- a trace with every collective torch.distributed offers, p2p and compute ------------------------


def all_kinds_trace(tmp_path: Path) -> str:
    kinds = [
        schema.ALL_REDUCE,
        schema.REDUCE,
        schema.ALL_GATHER,
        schema.GATHER,
        schema.SCATTER,
        schema.BROADCAST,
        schema.ALL_TO_ALL,
        schema.REDUCE_SCATTER,
        schema.REDUCE_SCATTER_BLOCK,
        schema.BARRIER,
    ]
    per_rank = []
    for r in range(2):
        nodes = [comp(0, 200), comp(1, 100, cpu=True)]
        prev = 0
        for k, ct in enumerate(kinds):
            size = 0 if ct == schema.BARRIER else (4096 if k % 2 else 4098)  # float32 and uint8 paths
            nodes.append(coll(10 + k, ct, size, data=[prev]))
            prev = 10 + k
        nodes.append(p2p(30, r == 0, 0, 1, 1000, tag=3, data=[prev]))
        nodes.append(p2p(31, r == 1, 1, 0, 512, tag=4))
        nodes.append(comp(40, 50, data=[30, 31]))
        per_rank.append(nodes)
    return write_set(tmp_path, per_rank, name="kinds")


@pytest.mark.slow
def test_every_collective_kind_and_p2p_replay_with_recorded_bytes(tmp_path):
    prefix = all_kinds_trace(tmp_path)
    result = replay(prefix, tmp_path / "r.json", "--iterations", "2", "--warmup", "0", "--backend", "gloo")
    assert result["environment"]["backend"] == "gloo"
    assert result["environment"]["torch_version"] == torch.__version__
    assert result["environment"]["world_size"] == 2 and result["environment"]["cpu_count"] == os.cpu_count()
    assert result["settings"]["iterations"] == 2
    assert len(result["step_time_ns"]["per_iteration"]) == 2
    assert all(len(r["iteration_wall_ns"]) == 2 for r in result["ranks"])
    assert_every_comm_node_ran_once_per_iteration(result, prefix, 2)
    assert_p2p_pairs_matched(result, 2)
    kinds = {c["comm_type"] for c in result["collectives"]}
    assert kinds == {schema.COMM_TYPE_NAMES[k] for k in range(10)}
    for c in result["collectives"]:
        if c["comm_type"] == "BARRIER":
            assert c["busbw_GBps"] is None
            continue
        ct = [k for k, v in schema.COMM_TYPE_NAMES.items() if v == c["comm_type"]][0]
        assert c["size_bytes"] == nccl_size(ct, c["comm_size"], 2)
        assert c["algbw_GBps"] == pytest.approx(c["size_bytes"] / c["median_time_ns"], rel=1e-5)
        assert c["busbw_GBps"] == pytest.approx(c["algbw_GBps"] * bus_factor(ct, 2), rel=1e-5)
    # compute busy-waits at least its recorded duration; a child never starts before its parent ends
    nodes = {n["id"]: n for n in result["ranks"][0]["nodes"]}
    assert all(d >= 200_000 for d in nodes[0]["duration_ns"])
    for k in range(2):
        assert nodes[10]["start_ns"][k] >= nodes[0]["start_ns"][k] + nodes[0]["duration_ns"][k]


@pytest.mark.slow
def test_generated_llm_dp_tp_trace_replays(tmp_path):
    prefix = str(tmp_path / "llm")
    gen = run_cli(*generate_llm_args(prefix, layers=2, hidden=256, ffn=512, vocab=1024, seq=64))
    assert gen.returncode == 0, gen.stderr
    result = replay(prefix, tmp_path / "r.json", "--iterations", "3", "--compute", "ops")
    assert result["trace"]["ranks"] == 4
    assert_every_comm_node_ran_once_per_iteration(result, prefix, 3)
    groups = json.loads(Path(prefix + ".comm_groups.json").read_text())
    for c in result["collectives"]:
        assert c["group_size"] == (4 if c["group"] == "0" else len(groups[c["group"]]))
    # --compute ops ran a GEMM of about num_ops FLOPs for every compute node (2n³ per n×n GEMM)
    gemms = [n for r in result["ranks"] for n in r["nodes"] if n["action"] == "compute"]
    assert gemms and all(n["replayed_ops"] == pytest.approx(n["num_ops"], rel=0.1) for n in gemms)
    # the TP and DP groups were both exercised
    assert {c["group_size"] for c in result["collectives"]} >= {2}
    assert len({c["group"] for c in result["collectives"]}) >= 2


@pytest.mark.slow
def test_pipeline_sends_facing_each_other_do_not_deadlock(tmp_path):
    # With 1F1B-style microbatches both stages send at once (activations forward, gradients back);
    # ASTRA-sim lets a send complete on arrival, so replay must not wait for the RECV to be issued.
    prefix = str(tmp_path / "pp")
    gen = run_cli(*generate_llm_args(prefix, layers=2, dp=1, tp=1, pp=2, microbatches=4, heads=2))
    assert gen.returncode == 0, gen.stderr
    result = replay(prefix, tmp_path / "r.json", "--iterations", "2", "--compute", "skip")
    assert result["p2p"], "a 2-stage pipeline has sends and receives"
    assert_every_comm_node_ran_once_per_iteration(result, prefix, 2)
    assert_p2p_pairs_matched(result, 2)


@pytest.fixture(scope="module")
def capture(tmp_path_factory) -> tuple[Path, str]:
    """A 2-rank CPU capture of the MLP and its converted rank set: (capture folder, prefix)."""
    tmp = tmp_path_factory.mktemp("capture")
    cap = run_cli("capture", "--model", "mlp", "--ranks", "2", "--steps", "2", "--out", str(tmp / "cap"))
    assert cap.returncode == 0, cap.stderr
    prefix = str(tmp / "conv" / "mlp")
    conv = run_cli("convert", "pytorch", "--ranks-dir", str(tmp / "cap"), "--out", prefix)
    assert conv.returncode == 0, conv.stderr
    return tmp / "cap", prefix


@pytest.mark.slow
def test_captured_two_rank_trace_replays(capture, tmp_path):
    _, prefix = capture
    result = replay(prefix, tmp_path / "r.json", "--iterations", "3")
    assert result["trace"]["ranks"] == 2
    assert result["collectives"], "the converted capture has no collectives to replay"
    assert result["p2p"], "the capture's explicit send/recv pair was not replayed"
    assert_every_comm_node_ran_once_per_iteration(result, prefix, 3)
    assert_p2p_pairs_matched(result, 3)


@pytest.mark.slow
def test_compare_puts_captured_and_replayed_step_side_by_side(capture, tmp_path):
    folder, _ = capture
    out = tmp_path / "cmp.json"
    res = run_cli("compare", str(folder), "--iterations", "2", "--out", str(out))
    assert res.returncode == 0, res.stderr
    doc = json.loads(out.read_text())
    summary = json.loads((folder / "capture.json").read_text())
    assert doc["trace_steps"] == summary["steps"]
    assert doc["captured_step_ns"] == pytest.approx(summary["median_step_time_ms_untraced"] * 1e6, abs=0.1)
    assert doc["replayed_step_ns"] > 0
    assert doc["ratios"]["replayed/captured"] == pytest.approx(
        doc["replayed_step_ns"] / doc["captured_step_ns"], rel=1e-5
    )
    assert "captured (untraced)" in res.stdout and "replayed" in res.stdout


# -- failures --------------------------------------------------------------------------------------


def _worker_pids(parent: int) -> dict[int, tuple[int, str]]:
    """rank -> (pid, run dir) of the replay workers whose parent is ``parent``."""
    found = {}
    for pid in proc_pids():
        try:
            ppid = parent_of(pid)
            argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if ppid == parent and b"chakra_pipe.replay.worker" in argv:
            found[int(argv[-3])] = (pid, argv[-4].decode())  # ... RUN_DIR RANK LOCAL_RANK
    return found


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def _start_stalled_replay(tmp_path: Path, out: Path) -> tuple[subprocess.Popen, dict[int, tuple[int, str]]]:
    """Launch a replay of the stall trace; return once rank 1 is inside its long compute node."""
    from chakra_pipe.replay.status import StatusBoard

    prefix = stall_trace(tmp_path, 100)
    env = dict(os.environ, OMP_NUM_THREADS="1")
    proc = subprocess.Popen(
        cli("replay", prefix, "--out", out, "--timeout", "100"),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        start_new_session=True,
    )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        workers = _worker_pids(proc.pid)
        if len(workers) == 2:
            board = StatusBoard(Path(workers[1][1]) / "status.bin", 2, mode="r")
            if board.get(1).phase == "running" and board.get(1).in_flight == [0]:
                return proc, workers
        time.sleep(0.1)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.communicate()
    pytest.fail("rank 1 never started its long compute node")


def _gone_within(pids: list[int], seconds: float) -> bool:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if not any(_alive(pid) for pid in pids):
            return True
        time.sleep(0.1)
    return False


@pytest.mark.slow
def test_killing_a_rank_mid_replay_fails_cleanly(tmp_path):
    out = tmp_path / "r.json"
    proc, workers = _start_stalled_replay(tmp_path, out)
    try:
        killed_at = time.monotonic()
        os.kill(workers[1][0], signal.SIGKILL)
        _, err = proc.communicate(timeout=30)
        elapsed = time.monotonic() - killed_at
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
    assert proc.returncode == 1
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert "stall.1.et: rank 1 failed at node 0 'c0' (COMP_NODE) in iteration 0: process killed by SIGKILL" in lines[0]
    assert elapsed < 15
    assert not out.exists()
    assert not any(_alive(pid) for pid, _ in workers.values())
    assert not Path(workers[0][1]).exists()  # the run folder is gone too


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL], ids=["SIGTERM", "SIGKILL"])
def test_stopping_the_launcher_takes_every_rank_down(tmp_path, sig):
    out = tmp_path / "r.json"
    proc, workers = _start_stalled_replay(tmp_path, out)
    try:
        os.kill(proc.pid, sig)  # the launcher only, as a batch system or a user would
        proc.communicate(timeout=30)
        assert _gone_within([pid for pid, _ in workers.values()], 10)
    finally:
        for pid, _ in workers.values():
            if _alive(pid):
                os.kill(pid, signal.SIGKILL)
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
    run_dir = Path(workers[0][1])
    left_behind = run_dir.exists()
    shutil.rmtree(run_dir, ignore_errors=True)  # a SIGKILLed launcher cannot remove it itself
    assert proc.returncode == -sig or proc.returncode == 128 + sig
    assert not out.exists()
    if sig == signal.SIGTERM:  # a clean exit also removes the run folder
        assert not left_behind


@pytest.mark.slow
def test_a_collective_that_never_completes_times_out_naming_each_rank(tmp_path):
    prefix = stall_trace(tmp_path, 1000)
    out = tmp_path / "r.json"
    t0 = time.monotonic()
    # 30 s: the timeout counts the workers' start-up, and two torch imports plus gloo's rendezvous
    # took over 12 s on a loaded CI machine (then both ranks are named "at no node (connecting)")
    res = run_cli("replay", prefix, "--out", str(out), "--timeout", "30")
    elapsed = time.monotonic() - t0
    assert res.returncode == 3, res.stderr
    line = res.stderr.strip()
    assert "\n" not in line
    assert "replay did not finish within 30 s" in line
    assert "rank 0 at node 1 'coll1' (COMM_COLL_NODE ALL_REDUCE) in iteration 0" in line
    assert "rank 1 at node 0 'c0' (COMP_NODE) in iteration 0" in line
    assert elapsed < 30 + 15  # the timeout plus interpreter start-up, never a hang
    assert not out.exists()


def test_rank_count_must_match_the_trace(tmp_path, capsys):
    prefix = stall_trace(tmp_path, 1)
    assert cli_main(["replay", prefix, "--ranks", "3", "--out", str(tmp_path / "r.json")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.endswith("stall: --ranks: the trace has 2 ranks; --ranks 3 cannot replay it")


def test_unmatched_collectives_are_refused_without_spawning(tmp_path, capsys):
    r0 = [coll(1, schema.ALL_REDUCE, 64)]
    r1 = [coll(1, schema.ALL_GATHER, 64)]
    prefix = write_set(tmp_path, [r0, r1], name="bad")
    # both ranks reach their one collective (no deadlock), so it is refused as input, as validate reports it
    assert cli_main(["replay", prefix, "--out", str(tmp_path / "r.json")]) == 2
    assert "bad.1.et: node 1: error: collective-mismatch: the world group: collective #1" in capsys.readouterr().err
    assert not (tmp_path / "r.json").exists()


def test_nccl_without_gpus_is_an_input_error(tmp_path, capsys):
    if torch.cuda.is_available():
        pytest.skip("a GPU is present; the NCCL path is exercised by test_nccl_replay_on_gpu")
    prefix = stall_trace(tmp_path, 1)
    assert cli_main(["replay", prefix, "--backend", "nccl", "--out", str(tmp_path / "r.json")]) == 2
    assert "--backend: nccl needs one GPU per rank: 2 ranks, 0 GPU(s) visible" in capsys.readouterr().err


@pytest.mark.slow
def test_nccl_replay_on_gpu(tmp_path):
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device: the NCCL replay path needs a GPU")
    ranks = min(torch.cuda.device_count(), 2)
    per_rank = []
    for _ in range(ranks):
        nodes = [
            comp(0, 100, num_ops=2 * 512**3),
            coll(1, schema.ALL_REDUCE, 1 << 20, data=[0]),
            coll(2, schema.ALL_GATHER, 1 << 16, data=[1]),
            coll(3, schema.REDUCE_SCATTER, ranks << 16),
        ]
        per_rank.append(nodes)
    prefix = write_set(tmp_path, per_rank, name="gpu")
    for mode in ("duration", "ops"):
        result = replay(prefix, tmp_path / f"{mode}.json", "--backend", "auto", "--compute", mode)
        assert result["environment"]["backend"] == "nccl"
        assert result["environment"]["device"] == "cuda"
        assert_every_comm_node_ran_once_per_iteration(result, prefix, 3)
        if mode == "ops":
            node0 = result["ranks"][0]["nodes"][0]
            assert node0["replayed_ops"] == 2 * 512**3


def test_gemm_sizing_for_num_ops():
    from chakra_pipe.replay.engine import GEMM_MAX_N, Gemm

    assert Gemm.for_ops(2 * 512**3) == Gemm(512, 1)
    big = Gemm.for_ops(8 * 2 * GEMM_MAX_N**3)  # too big for one GEMM: repeated at the cap
    assert big == Gemm(GEMM_MAX_N, 8) and big.ops == 8 * 2 * GEMM_MAX_N**3


class _Work:
    """A work whose ``wait`` returns (or raises ``error``) once released, as gloo's send/recv."""

    def __init__(self, released=False, error=None):
        self.go, self.error = threading.Event(), error
        if released:
            self.go.set()

    def wait(self):
        self.go.wait(60)
        if self.error is not None:
            raise self.error


def test_wait_pool_reuses_its_threads_and_never_queues_behind_a_blocked_wait():
    from chakra_pipe.replay.engine import _Waiter, _WaitPool

    def pool_threads():
        return sum(t.name == "replay-wait" for t in threading.enumerate())

    before = pool_threads()
    wake = threading.Event()
    pool = _WaitPool(wake)
    blocked = pool.submit(_Waiter(_Work()))  # a pre-posted receive whose message is yet to come
    for k in range(5):  # sends, one after the other: each finishes while the receive still waits
        error = RuntimeError("peer gone") if k == 3 else None
        waiter = pool.submit(_Waiter(_Work(released=True, error=error)))
        assert wake.wait(60)
        wake.clear()
        assert waiter.finished and waiter.error is error and waiter.finished_ns is not None
    assert not blocked.finished
    assert pool_threads() - before == 2  # the receive's thread and one reused by every send
    blocked.work.go.set()
    assert wake.wait(60) and blocked.finished


def test_a_works_future_stamp_is_its_end_on_cpu_only(monkeypatch):
    """NCCL marks a work's future completed once the work is enqueued (a CUDA-aware future), so on
    a GPU the done-callback stamps the issue, not the end: there the end must be the poll's."""
    import types

    import torch

    from chakra_pipe.replay.engine import TorchEngine, _Stamped

    monkeypatch.setattr(torch.cuda, "Stream", lambda device: None)  # no GPU needed to build one
    plan = types.SimpleNamespace(order=[], actions=[])
    for device, stamped in (("cpu", True), ("cuda", False)):
        engine = TorchEngine(plan, {}, torch.device(device), "skip")  # type: ignore[arg-type]
        future = torch.futures.Future()
        future.set_result(None)  # completed at enqueue, as NCCL's
        assert (engine.finished_at(("work", _Stamped(None, future, engine._wake))) is not None) is stamped, device
        engine.close()


def test_wait_pool_frees_a_large_finished_work_before_going_idle_and_a_small_one_at_its_next_job():
    """gloo's reduce-scatter work owns a temporary the size of its input, freed when the work dies
    (64 MiB: 4-18 ms of munmap). Kept by its pool thread until the next hand-off, that free fell on
    the next wait's path (calibrate's first send after a 64 MiB collective: ~5 ms late), so a large
    work is dropped once the loop is woken, before the thread is idle again. A small one is dropped
    at the next hand-off: freeing it at once cost a 256 B ping-pong ~45 us."""
    import weakref

    from chakra_pipe.replay.engine import EARLY_FREE_BYTES, _Waiter, _WaitPool

    wake = threading.Event()
    pool = _WaitPool(wake)

    def finish(nbytes: int) -> tuple[_Waiter, weakref.ref]:
        work = _Work(released=True)
        waiter = pool.submit(_Waiter(work, nbytes))
        deadline = time.monotonic() + 20  # the thread rejoins the idle ones once done with the work
        while not pool._idle and time.monotonic() < deadline:
            time.sleep(0.001)
        assert pool._idle and wake.is_set() and waiter.finished and waiter.error is None
        wake.clear()
        return waiter, weakref.ref(work)

    large, large_work = finish(EARLY_FREE_BYTES)
    assert large_work() is None  # freed although the loop still holds its finished waiter
    small, small_work = finish(EARLY_FREE_BYTES - 1)
    del small  # as the loop drops a finished handle
    assert small_work() is not None  # deferred: the idle thread still holds it
    finish(0)  # the same thread's next job
    assert small_work() is None


def test_wait_pool_hands_each_waiter_of_a_burst_its_own_thread():
    """Receives are posted in a burst at each iteration's start: every one must be waited on at
    once (a shared ``SimpleQueue`` woke one idle thread per burst and stranded the rest)."""
    from chakra_pipe.replay.engine import _Waiter, _WaitPool

    class Meet(_Work):
        def wait(self):  # returns only once all three waits are being waited on together
            meet.wait()

    pool = _WaitPool(threading.Event())
    for burst in range(2):  # the first spawns three threads, the second reuses the three idle ones
        meet = threading.Barrier(3, timeout=10)
        waiters = [pool.submit(_Waiter(Meet())) for _ in range(3)]
        deadline = time.monotonic() + 20
        while not (all(w.finished for w in waiters) and len(pool._idle) == 3) and time.monotonic() < deadline:
            time.sleep(0.01)
        assert [w.error for w in waiters] == [None] * 3, burst
        assert len(pool._idle) == 3
