"""Every cluster path against a real SLURM (``.ci/slurm.sh start``; marker ``slurm``).

Skips, with the reason printed, when no SLURM controller answers: these tests never pass silently.
The commands are the README's "SLURM" section, verbatim in spirit: the smoke campaign through
``snakemake --profile workflow/profiles/slurm``, a 4-rank replay and a 2-rank capture as one job
step through ``--launcher srun``, and ``scancel`` in the middle of a replay.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from processes import (
    call_bytes,
    capture_args,
    cli,
    dp_tp_set,
    parent_of,
    proc_pids,
    run_bounded,
    snakemake_cmd,
    stall_trace,
    workflow_env,
)

REPO = Path(__file__).resolve().parent.parent
DEFAULT_CONF = Path(os.environ.get("CHAKRA_PIPE_SLURM_DIR", "/tmp/chakra-pipe-slurm")) / "slurm.conf"

pytestmark = [pytest.mark.slurm, pytest.mark.slow]


def _slurm_env() -> dict[str, str]:
    env = dict(os.environ, OMP_NUM_THREADS="1")
    if "SLURM_CONF" not in env and DEFAULT_CONF.is_file():
        env["SLURM_CONF"] = str(DEFAULT_CONF)
    env["PATH"] = str(Path(sys.executable).parent) + os.pathsep + env.get("PATH", "")
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO / "src"), env.get("PYTHONPATH")) if p)
    # Small CI nodes have fewer CPUs than ranks: let SLURM place more tasks than CPUs.
    if (os.cpu_count() or 1) < 4:
        env["SLURM_OVERCOMMIT"] = "1"
        env["SBATCH_OVERCOMMIT"] = "1"
    for key in [k for k in env if k.startswith("SLURM_") and k not in ("SLURM_CONF", "SLURM_OVERCOMMIT")]:
        del env[key]  # a test run inside a SLURM job must not look like one of our own ranks
    return env


@pytest.fixture(scope="module")
def slurm() -> dict[str, str]:
    """The environment for SLURM clients, or a skip saying why there is no SLURM to test against."""
    if shutil.which("sinfo") is None or shutil.which("srun") is None:
        pytest.skip("SLURM is not installed (sinfo/srun not on PATH): run .ci/slurm.sh start")
    env = _slurm_env()
    res = subprocess.run(["sinfo", "-h", "-o", "%T"], check=False, capture_output=True, text=True, env=env, timeout=30)
    states = res.stdout.split()
    if res.returncode != 0 or not any(s.rstrip("*") in ("idle", "mixed", "allocated") for s in states):
        pytest.skip(
            f"no SLURM node is up (sinfo: {(res.stdout + res.stderr).strip() or 'no nodes'}): run .ci/slurm.sh start"
        )
    return env


def run(
    cmd: list[str], env: dict[str, str], timeout: float = 300, cwd: Path | None = None
) -> subprocess.CompletedProcess:
    """A SLURM client or CLI run; SIGTERM on overrun, which ``srun`` forwards to the step's tasks."""
    return run_bounded(cmd, timeout=timeout, env=env, cwd=cwd, stop=signal.SIGTERM)


def srun_spy(tmp_path: Path, env: dict[str, str]) -> tuple[dict[str, str], Path]:
    """Put an ``srun`` first on PATH that logs its arguments and runs the real one."""
    real = shutil.which("srun", path=env["PATH"])
    spy_dir = tmp_path / "spy"
    spy_dir.mkdir()
    log = tmp_path / "srun.log"
    (spy_dir / "srun").write_text(f'#!/bin/sh\necho "$*" >> "{log}"\nexec "{real}" "$@"\n')
    (spy_dir / "srun").chmod(0o755)
    return dict(env, PATH=f"{spy_dir}{os.pathsep}{env['PATH']}"), log


def test_four_rank_replay_as_one_srun_step_matches_the_local_replay(slurm, tmp_path):
    pytest.importorskip("torch", reason="replay needs torch: pip install 'chakra-pipe[torch]'")
    prefix = dp_tp_set(tmp_path, slurm)
    args = ("replay", prefix, "--iterations", "2", "--compute", "skip", "--timeout", "120")
    local = run(cli(*args, "--launcher", "local", "--out", str(tmp_path / "local.json")), slurm)
    assert local.returncode == 0, local.stderr
    env, log = srun_spy(tmp_path, slurm)
    res = run(cli(*args, "--launcher", "srun", "--out", str(tmp_path / "srun.json")), env)
    assert res.returncode == 0, res.stderr[-3000:]
    steps = log.read_text().splitlines()
    assert len(steps) == 1 and "--ntasks=4" in steps[0] and steps[0].endswith("--launcher env"), steps
    a, b = (json.loads((tmp_path / f"{n}.json").read_text()) for n in ("local", "srun"))
    assert call_bytes(a) == call_bytes(b) and a["trace"] == b["trace"] and a["groups"] == b["groups"]
    assert b["environment"]["world_size"] == 4


def test_two_rank_capture_as_one_srun_step(slurm, tmp_path):
    pytest.importorskip("torch", reason="capture needs torch: pip install 'chakra-pipe[torch]'")
    env, log = srun_spy(tmp_path, slurm)
    out = tmp_path / "cap"
    res = run(cli(*capture_args("mlp", out, "--steps", "1", "--launcher", "srun")), env)
    assert res.returncode == 0, res.stderr[-3000:]
    assert "--ntasks=2" in log.read_text()
    summary = json.loads((out / "capture.json").read_text())
    assert summary["world_size"] == 2 and summary["backend"] == "gloo"
    assert sorted(p.name for p in out.iterdir()) == [
        "capture.json",
        "rank0.host_et.json.gz",
        "rank0.kineto.json.gz",
        "rank1.host_et.json.gz",
        "rank1.kineto.json.gz",
    ]
    # the traces gathered on rank 0 are whole and convert into a 2-rank set
    conv = run(cli("convert", "pytorch", "--ranks-dir", str(out), "--out", str(tmp_path / "et" / "cap")), slurm)
    if conv.returncode != 0 and "invalid choice" not in conv.stderr:
        assert conv.returncode == 0, conv.stderr


def _worker_pids(marker: Path) -> list[int]:
    """Replay workers whose parent (a task of our step) names ``marker`` on its command line."""
    pids = []
    for pid in proc_pids():
        try:
            argv = Path(f"/proc/{pid}/cmdline").read_bytes()
            parent = Path(f"/proc/{parent_of(pid)}/cmdline").read_bytes()
        except (OSError, IndexError):
            continue
        if b"chakra_pipe.replay.worker" in argv and str(marker).encode() in parent:
            pids.append(pid)
    return pids


def test_scancel_mid_replay_ends_every_task_and_the_rerun_completes(slurm, tmp_path):
    pytest.importorskip("torch", reason="replay needs torch: pip install 'chakra-pipe[torch]'")
    slow, quick = stall_trace(tmp_path, 300, "long"), stall_trace(tmp_path, 0.01, "short")
    out = tmp_path / "r.json"
    script = tmp_path / "job.sh"
    script.write_text(
        "#!/bin/sh\nexec "
        + " ".join(cli("replay", '"$1"', "--launcher", "srun", "--timeout", "600", "--out", str(out)))
        + "\n"
    )
    scratch = tmp_path / "tmp"  # the tasks' run folders go here (TMPDIR): none may survive scancel
    scratch.mkdir()
    env = dict(slurm, TMPDIR=str(scratch))
    sub = run(["sbatch", "--parsable", "--ntasks=2", f"--output={tmp_path / 'job.log'}", str(script), slow], env)
    assert sub.returncode == 0, sub.stderr
    job = sub.stdout.strip().split(";")[0]
    deadline = time.monotonic() + 120
    workers: list[int] = []
    while time.monotonic() < deadline and len(workers) < 2:
        workers = _worker_pids(tmp_path)
        time.sleep(0.2)
    assert len(workers) == 2, f"the replay's ranks never started: {(tmp_path / 'job.log').read_text()}"
    time.sleep(2)  # inside the long compute node
    assert run(["scancel", job], slurm).returncode == 0
    end = time.monotonic() + 60
    while time.monotonic() < end and (
        any(Path(f"/proc/{p}").exists() for p in workers) or run(["squeue", "-h", "-j", job], slurm).stdout.strip()
    ):
        time.sleep(0.2)
    assert not any(Path(f"/proc/{p}").exists() for p in workers), "a rank outlived scancel"
    assert not run(["squeue", "-h", "-j", job], slurm).stdout.strip(), "the job is still queued or running"
    assert not out.exists()
    assert not list(scratch.iterdir()), "a run folder outlived scancel"
    res = run(cli("replay", quick, "--launcher", "srun", "--timeout", "120", "--out", str(out)), slurm)
    assert res.returncode == 0, res.stderr[-3000:]
    assert json.loads(out.read_text())["trace"]["ranks"] == 2


def _error_line(res: subprocess.CompletedProcess) -> str:
    return [x for x in res.stderr.splitlines() if x.startswith("chakra-pipe ")][-1]


def test_failures_are_named_the_same_through_srun_as_locally(slurm, tmp_path):
    """A replay timeout (exit 3, where every rank was) and a capture rank that raised (exit 2, that
    rank and its exception, not its peer's knock-on error): same line, same status, nothing left."""
    pytest.importorskip("torch", reason="replay and capture need torch: pip install 'chakra-pipe[torch]'")
    stall = stall_trace(tmp_path, 600)
    script = tmp_path / "bad.py"
    script.write_text(
        "import torch\nimport torch.distributed as dist\n\ndef train_step(rank, world_size):\n"
        "    if rank == 1:\n        raise ValueError('bad batch')\n    dist.all_reduce(torch.ones(4))\n"
    )
    lines = {}
    for how in ("local", "srun"):
        out = tmp_path / f"{how}.json"
        rep = run(cli("replay", stall, "--timeout", "10", "--launcher", how, "--out", str(out)), slurm)
        cap = run(cli(*capture_args(script, tmp_path / "cap", "--launcher", how)), slurm)
        assert (rep.returncode, cap.returncode) == (3, 2), rep.stderr + cap.stderr
        assert not out.exists() and not list((tmp_path / "cap").iterdir())
        lines[how] = (_error_line(rep), _error_line(cap))
    assert lines["srun"] == lines["local"]
    assert "rank 0 at node 1 'coll1' (COMM_COLL_NODE ALL_REDUCE) in iteration 0" in lines["local"][0]
    assert lines["local"][1].endswith("rank 1: ValueError: bad batch")


SMOKE_OUTPUTS = ("results.csv", "leaderboard.csv", "leaderboard.md", "summary.json")


def test_smoke_campaign_through_the_slurm_profile_matches_a_local_run(slurm, tmp_path):
    partition = run(["sinfo", "-h", "-o", "%R"], slurm).stdout.split()[0]
    results = {}
    for how in ("local", "slurm"):
        work = tmp_path / how
        shutil.copytree(REPO / "config", work / "config")
        env = workflow_env(slurm)
        extra = (
            ["--cores", "2"]
            if how == "local"
            else [
                "--profile",
                str(REPO / "workflow/profiles/slurm"),
                "--default-resources",
                f"slurm_partition={partition}",
                "--slurm-init-seconds-before-status-checks",
                "5",
            ]
        )
        res = run(snakemake_cmd(work, "config/smoke.yaml", *extra), env, timeout=900, cwd=work)
        assert res.returncode == 0, (res.stdout + res.stderr)[-4000:]
        results[how] = {name: (work / "reports/smoke" / name).read_bytes() for name in SMOKE_OUTPUTS}
        if how == "slurm":  # real sbatch submissions; the campaign's tiny jobs as one group
            submitted = [
                x for x in (res.stdout + res.stderr).splitlines() if "has been submitted with SLURM jobid" in x
            ]
            assert submitted, (res.stdout + res.stderr)[-3000:]
            assert len([x for x in submitted if "/group_campaign_" in x]) == 1, submitted
            assert not any("rule_generate" in x or "rule_simulate_shard" in x for x in submitted), submitted
    assert results["slurm"] == results["local"]
