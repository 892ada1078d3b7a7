"""The shared rank launcher: SLURM host lists, who a process is under torchrun or SLURM, which
failure is named, and the ``env`` launcher driven by a real ``torchrun``."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest
from conftest import TORCH_EXTRA
from processes import call_bytes, capture_args, cli, dp_tp_set, run_bounded

from chakra_pipe.errors import InputError
from chakra_pipe.launch.hostlist import expand
from chakra_pipe.launch.rankenv import device_sharers, from_environ, resolve
from chakra_pipe.launch.ranks import Outcome, first_failure


@pytest.mark.parametrize(
    "expr, hosts",
    [
        ("node1", ["node1"]),
        ("node[1-3,5]", ["node1", "node2", "node3", "node5"]),
        ("gpu[08-10]", ["gpu08", "gpu09", "gpu10"]),
        ("gpu[01-02]-ib,login", ["gpu01-ib", "gpu02-ib", "login"]),
        ("a[1-2]b[7,9]", ["a1b7", "a1b9", "a2b7", "a2b9"]),
        ("x,y[3]", ["x", "y3"]),
    ],
)
def test_slurm_host_lists_expand_in_order(expr, hosts):
    assert expand(expr) == hosts


@pytest.mark.parametrize("expr", ["node[1-", "node]1", "node[a-b]", "node[5-2]", ""])
def test_bad_host_lists_are_input_errors_naming_the_variable(expr):
    with pytest.raises(InputError, match="SLURM_STEP_NODELIST"):
        expand(expr)


SLURM_STEP = {
    "SLURM_JOB_ID": "77",
    "SLURM_STEP_ID": "3",
    "SLURM_PROCID": "5",
    "SLURM_NTASKS": "8",
    "SLURM_LOCALID": "1",
    "SLURM_STEP_NODELIST": "gpu[12-15]",
}
TORCHRUN = {
    "RANK": "2",
    "WORLD_SIZE": "4",
    "LOCAL_RANK": "2",
    "MASTER_ADDR": "10.0.0.1",
    "MASTER_PORT": "29400",
    "TORCHELASTIC_USE_AGENT_STORE": "True",
}


def test_a_slurm_step_names_rank_world_local_rank_and_its_first_node_as_master():
    r = from_environ(SLURM_STEP)
    assert (r.rank, r.world_size, r.local_rank, r.master_addr, r.agent_store) == (5, 8, 1, "gpu12", False)
    assert 1024 < r.master_port < 65536
    assert from_environ(SLURM_STEP).master_port == r.master_port  # every task derives the same port
    assert from_environ({**SLURM_STEP, "SLURM_STEP_ID": "4"}).master_port != r.master_port
    assert from_environ({**SLURM_STEP, "MASTER_PORT": "31000"}).master_port == 31000


def test_torchrun_wins_over_slurm_and_uses_its_agent_store():
    r = from_environ({**SLURM_STEP, **TORCHRUN})
    assert (r.rank, r.world_size, r.local_rank, r.master_addr, r.master_port, r.agent_store) == (
        2,
        4,
        2,
        "10.0.0.1",
        29400,
        True,
    )


def test_auto_is_env_under_torchrun_or_a_multi_task_step_else_local():
    assert resolve("auto", TORCHRUN) == "env"
    assert resolve("auto", SLURM_STEP) == "env"
    assert resolve("auto", {**SLURM_STEP, "SLURM_NTASKS": "1"}) == "local"  # srun -n1, Snakemake's job step
    assert resolve("auto", {"SLURM_JOB_ID": "77", "SLURM_PROCID": "0"}) == "local"  # a batch script
    assert resolve("auto", {}) == "local"
    assert resolve("srun", {}) == "srun"


def test_ranks_sharing_the_visible_gpus_decide_auto_nccl(monkeypatch):
    """torchrun binds no GPU: 4 local ranks on a 1-GPU machine share it, so auto must stay on gloo
    (on an H200 machine it picked NCCL per rank and failed with NCCL 'invalid usage')."""
    assert device_sharers("local", 8, {}) == 8
    assert device_sharers("env", 4, {**TORCHRUN, "LOCAL_WORLD_SIZE": "4"}) == 4
    assert device_sharers("env", 8, SLURM_STEP) == 1  # our srun binds one GPU to each task
    torch = pytest.importorskip("torch", reason=TORCH_EXTRA)
    from chakra_pipe.torchdist import resolve_backend

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    monkeypatch.setattr(torch.distributed, "is_nccl_available", lambda: True)
    assert resolve_backend("auto", 4) == ("gloo", "cpu")
    assert resolve_backend("auto", 1) == ("nccl", "cuda")
    with pytest.raises(InputError, match=r"nccl needs one GPU per rank: 4 ranks, 1 GPU\(s\) visible"):
        resolve_backend("nccl", 4)


@pytest.mark.parametrize(
    "env, needle",
    [
        ({}, "RANK, WORLD_SIZE"),
        ({**TORCHRUN, "RANK": "x"}, "RANK='x'"),
        ({**TORCHRUN, "RANK": "4"}, "outside a world of 4"),
        ({**TORCHRUN, "MASTER_PORT": "70000"}, "not a TCP port"),
    ],
)
def test_an_incomplete_environment_is_an_input_error(env, needle):
    with pytest.raises(InputError, match=needle.replace("[", r"\[")):
        from_environ(env)


def _o(rank, code, order=(0, 0), peer=None, stopped=False):
    err = None if peer is None else {"message": f"m{rank}", "peer": peer}
    return Outcome(rank, code, stopped=stopped, error=err, order=order)


def test_the_rank_that_caused_a_failure_is_named_before_ranks_that_lost_it():
    # rank 0 saw its peer vanish and was seen first; rank 2 raised on its own
    outcomes = [_o(0, 1, (1, 1), peer=True), _o(1, 0), _o(2, 1, (0, 2), peer=False), _o(3, -9, stopped=True)]
    assert first_failure(outcomes).rank == 2
    # a rank killed by a signal (no error of its own) is a cause too
    outcomes = [_o(0, 1, (1, 1), peer=True), _o(1, -9, (0, 2))]
    assert first_failure(outcomes).rank == 1
    assert first_failure([_o(0, 0), _o(1, -9, stopped=True)]) is None  # stopped ranks are no failure


def test_srun_starts_one_step_with_a_task_per_rank_and_a_gpu_per_task_on_nccl():
    from chakra_pipe.launch.srun import gpus_per_task, srun_command

    cmd = srun_command(["replay", "p", "--out", "r.json"], 4, gpus_per_task("nccl", {}))
    assert cmd[:2] == ["srun", "--ntasks=4"] and "--gpus-per-task=1" in cmd
    assert cmd[-7:] == ["chakra_pipe.cli", "replay", "p", "--out", "r.json", "--launcher", "env"]
    assert gpus_per_task("gloo", {"SLURM_GPUS_ON_NODE": "4"}) == 0
    assert gpus_per_task("auto", {"SLURM_GPUS_ON_NODE": "4"}) == 1  # inside a GPU allocation
    assert gpus_per_task("auto", {}) == 0
    assert not any(a.startswith("--gpus") for a in srun_command(["capture"], 2, 0))


def test_srun_launcher_without_slurm_is_one_clear_line(tmp_path, capsys, monkeypatch):
    from chakra_pipe.cli import main

    monkeypatch.setenv("PATH", str(tmp_path))  # no srun anywhere
    assert main(["capture", "--model", "mlp", "--ranks", "2", "--launcher", "srun", "--out", str(tmp_path / "c")]) == 2
    assert (
        capsys.readouterr().err.strip()
        == "chakra-pipe capture: error: --launcher: --launcher srun needs SLURM's srun on PATH"
    )


torch = pytest.importorskip("torch", reason="the launcher's process tests need torch: pip install 'chakra-pipe[torch]'")


@pytest.mark.slow
@pytest.mark.skipif(
    shutil.which("torchrun") is None and not (Path(sys.executable).parent / "torchrun").exists(),
    reason="torchrun (from torch) is not on PATH",
)
def test_replay_env_launcher_under_torchrun_matches_the_local_replay(tmp_path):
    prefix = dp_tp_set(tmp_path)
    args = ["replay", prefix, "--iterations", "2", "--compute", "skip", "--timeout", "120"]
    local = run_bounded(cli(*args, "--launcher", "local", "--out", tmp_path / "local.json"), timeout=240)
    assert local.returncode == 0, local.stderr
    torchrun = shutil.which("torchrun") or str(Path(sys.executable).parent / "torchrun")
    env_launch = [*args, "--launcher", "env", "--out", str(tmp_path / "env.json")]
    res = run_bounded(
        [torchrun, "--standalone", "--nproc-per-node", "4", "-m", "chakra_pipe.cli", *env_launch], timeout=240
    )
    assert res.returncode == 0, res.stderr[-3000:]
    assert res.stdout.count("replay: 4 ranks on gloo/cpu") == 1  # rank 0 reports, the others stay quiet
    a, b = (json.loads((tmp_path / f"{n}.json").read_text()) for n in ("local", "env"))
    assert call_bytes(a) == call_bytes(b) and a["trace"] == b["trace"] and a["groups"] == b["groups"]
    assert not list(tmp_path.glob(".chakra-ranks-*"))


@pytest.mark.slow
@pytest.mark.parametrize("bad_rank", [1, 0])
def test_a_capture_names_the_rank_that_raised_not_the_peer_that_lost_it(tmp_path, bad_rank):
    """The other rank waits in an all-reduce and fails with gloo's knock-on error; it is not named."""
    script = tmp_path / "bad.py"
    script.write_text(
        "import torch\nimport torch.distributed as dist\n\n"
        "def train_step(rank, world_size):\n"
        f"    if rank == {bad_rank}:\n"
        "        raise ValueError(f'bad batch on rank {rank}')\n"
        "    dist.all_reduce(torch.ones(4))\n"
    )
    res = run_bounded(cli(*capture_args(script, tmp_path / "cap", "--launcher", "local")), timeout=240)
    assert res.returncode == 2
    assert res.stderr.strip().splitlines()[-1] == (
        f"chakra-pipe capture: error: {tmp_path / 'cap'}: rank {bad_rank}: ValueError: bad batch on rank {bad_rank}"
    )
    assert not list((tmp_path / "cap").iterdir())  # no traces, no run folder


def test_ranks_lead_their_own_process_group_in_the_launchers_session(tmp_path, monkeypatch):
    """killpg must stop a rank and its children, and the ranks must share the launcher's session: a
    session per rank is a scheduler autogroup per rank, which made small gloo collectives 3-10x slower."""
    import os

    from chakra_pipe.launch.ranks import _spawn

    (tmp_path / "probe_session.py").write_text(
        "import os, sys\n"
        "from pathlib import Path\n"
        "Path(sys.argv[1], f'ids.{sys.argv[2]}').write_text(f'{os.getsid(0)} {os.getpgid(0)}')\n"
    )
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    procs = _spawn("probe_session", tmp_path, [0, 1], None)
    for p in procs.values():
        assert p.wait(timeout=60) == 0
    for r, p in procs.items():
        sid, pgid = map(int, (tmp_path / f"ids.{r}").read_text().split())
        assert sid == os.getsid(0)
        assert pgid == p.pid
