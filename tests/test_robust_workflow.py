"""Interruption: SIGKILL the Snakemake workflow mid-sweep, rerun it, and compare with an uninterrupted run.

The kill goes to Snakemake's whole process group (Snakemake and the jobs it is running), right after
Snakemake reports its first finished ``simulate_shard`` job — the harshest interruption a user can
cause short of losing the disk. Afterwards: no result file is truncated (every shard CSV has exactly
its plan's points, every trace decodes), the rerun (``--unlock``, which Snakemake's lock message
prescribes, then the same command) does not recompute the shards
Snakemake had finished, and the final results are byte-identical to an uninterrupted run's.
"""

from __future__ import annotations

import csv
import json
import os
import re
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest
from processes import snakemake_cmd, workflow_env

from chakra_pipe.et.framing import read_trace

REPO = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.slow
FINISHED = re.compile(r"Finished jobid: (\d+) \(Rule: (\w+)\)")
JOBID = re.compile(r"^\s+jobid: (\d+)$")
OUTPUT = re.compile(r"^\s+output: (.+)$")
FINAL = ["leaderboard.csv", "smoke/results.csv", "smoke/leaderboard.md", "smoke/summary.json", "smoke/report.html"]


def _workdir(path: Path) -> Path:
    path.mkdir(parents=True)
    shutil.copytree(REPO / "config", path / "config")
    return path


def _command(workdir: Path, *extra: str) -> tuple[list[str], dict[str, str]]:
    # Snakemake applies workflow/profiles/default (rerun-incomplete) beside workflow/Snakefile by itself.
    return snakemake_cmd(workdir, "config/smoke.yaml", "--cores", "2", *extra), workflow_env()


def _run(workdir: Path, *extra: str) -> subprocess.CompletedProcess:
    cmd, env = _command(workdir, *extra)
    return subprocess.run(cmd, cwd=workdir, env=env, capture_output=True, text=True, timeout=600)


def _run_and_kill_after_first_shard(workdir: Path) -> set[str]:
    """Start the workflow, SIGKILL its process group once a shard job is reported finished.

    Returns the outputs of the shard jobs Snakemake reported finished before the kill.
    """
    cmd, env = _command(workdir)
    proc = subprocess.Popen(
        cmd, cwd=workdir, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True
    )
    outputs: dict[str, str] = {}
    finished: set[str] = set()
    last_output = None
    deadline = time.monotonic() + 300
    try:
        for line in proc.stdout:
            if time.monotonic() > deadline:
                pytest.fail("the workflow did not reach its first shard within 300 s")
            if m := OUTPUT.match(line):
                last_output = m.group(1).strip()
            elif (m := JOBID.match(line)) and last_output:
                outputs[m.group(1)] = last_output
            elif (m := FINISHED.search(line)) and m.group(2) == "simulate_shard":
                finished.add(outputs[m.group(1)])
                os.killpg(proc.pid, signal.SIGKILL)
                break
        else:
            pytest.fail("the workflow ended before any shard finished: nothing to interrupt")
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=60)
    return finished


def _assert_nothing_truncated(workdir: Path) -> None:
    """Every visible result file is whole: a shard CSV holds exactly its plan's points in order, traces
    decode, JSON parses."""
    plans = {p.parent.parent.name: json.loads(p.read_text()) for p in workdir.glob("reports/*/data/plan.json")}
    for shard in workdir.glob("reports/*/data/shards/*/*.csv"):
        plan = plans[shard.parents[3].name]
        points = plan["workloads"][shard.parent.name]["shards"][int(shard.stem)]
        with open(shard, newline="") as fh:
            rows = list(csv.DictReader(fh))
        assert [r["point_id"] for r in rows] == points, f"truncated shard {shard}"
        assert all(r["status"] for r in rows) and shard.read_bytes().endswith(b"\n"), f"truncated shard {shard}"
    for trace in workdir.glob("traces/**/*.et"):
        read_trace(trace)  # raises TraceFormatError on a partial file
    for doc in list(workdir.glob("reports/**/*.json")) + list(workdir.glob("traces/**/*.json")):
        json.loads(doc.read_text())


def _report_files(workdir: Path) -> dict[str, bytes]:
    """Every report output (results, leaderboards, plots, summary, HTML, plan, shards) but the logs."""
    root = workdir / "reports"
    return {
        p.relative_to(root).as_posix(): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file() and "logs" not in p.parts and not p.name.startswith(".")
    }


def _stamp(path: Path) -> tuple[int, int]:
    st = path.stat()
    return st.st_ino, st.st_mtime_ns


def test_sigkill_mid_sweep_then_rerun_equals_an_uninterrupted_run(tmp_path):
    clean = _workdir(tmp_path / "clean")
    run = _run(clean)
    assert run.returncode == 0, run.stderr[-3000:]

    work = _workdir(tmp_path / "killed")
    finished = _run_and_kill_after_first_shard(work)
    assert finished, "no shard had finished at the kill"
    _assert_nothing_truncated(work)
    assert not (work / "reports/smoke/results.csv").exists(), "the kill came too late to interrupt the sweep"
    before = {name: _stamp(work / name) for name in finished}

    # A killed Snakemake leaves its directory lock; its own message prescribes --unlock, then the same
    # command again (the default profile has rerun-incomplete, so half-run jobs start over).
    unlock = _run(work, "--unlock")
    assert unlock.returncode == 0, unlock.stderr[-2000:]
    rerun = _run(work)
    assert rerun.returncode == 0, (rerun.stdout + rerun.stderr)[-3000:]
    _assert_nothing_truncated(work)
    for name, stamp in before.items():
        assert _stamp(work / name) == stamp, f"finished shard {name} was recomputed"
    clean_files, work_files = _report_files(clean), _report_files(work)
    assert set(FINAL) <= set(clean_files) and sorted(work_files) == sorted(clean_files)
    differing = [name for name in clean_files if work_files[name] != clean_files[name]]
    assert not differing, f"interrupted-and-resumed outputs differ from an uninterrupted run's: {differing}"
