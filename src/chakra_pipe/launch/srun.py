"""``--launcher srun``: the submit side. Starts one SLURM job step whose tasks are the ranks.

Each task runs the same ``chakra-pipe`` command with ``--launcher env``, so everything after the
start (rendezvous, failure naming, gathering outputs on rank 0) is the ``env`` launcher's. Rank 0
writes the outputs and prints the one error line; the other tasks stay quiet, so srun's exit
status is rank 0's.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

from ..errors import InputError, StuckError
from .ranks import terminate_as_exit

# srun gets this long past the job's own timeout before the submit side stops the step itself.
_STEP_GRACE_S = 120.0


def srun_command(task_argv: list[str], ntasks: int, gpus_per_task: int) -> list[str]:
    """``srun`` with one task per rank and, on GPUs, one GPU bound to each task."""
    cmd = ["srun", f"--ntasks={ntasks}", "--kill-on-bad-exit=0", f"--job-name=chakra-pipe-{task_argv[0]}"]
    if gpus_per_task:
        cmd += [f"--gpus-per-task={gpus_per_task}", "--gpu-bind=single:1"]
    return cmd + [sys.executable, "-m", "chakra_pipe.cli", *task_argv, "--launcher", "env"]


def gpus_per_task(backend: str, environ: Mapping[str, str] | None = None) -> int:
    """nccl asks for a GPU per task; auto does inside an allocation that holds GPUs; gloo never."""
    env = os.environ if environ is None else environ
    if backend == "nccl":
        return 1
    if backend == "auto" and any(env.get(k) for k in ("SLURM_GPUS_ON_NODE", "SLURM_JOB_GPUS", "SLURM_GPUS")):
        return 1
    return 0


def run_srun(task_argv: list[str], ntasks: int, backend: str, timeout_s: float) -> int:
    """Run the step; returns srun's exit status (rank 0's, see the module docstring)."""
    if shutil.which("srun") is None:
        raise InputError("--launcher srun needs SLURM's srun on PATH", where="--launcher")
    env = dict(os.environ)
    package_root = str(Path(__file__).resolve().parents[2])
    env["PYTHONPATH"] = os.pathsep.join(p for p in (package_root, env.get("PYTHONPATH")) if p)
    proc = subprocess.Popen(srun_command(task_argv, ntasks, gpus_per_task(backend)), env=env, stdin=subprocess.DEVNULL)
    try:
        with terminate_as_exit():
            return proc.wait(timeout=timeout_s + _STEP_GRACE_S)
    except subprocess.TimeoutExpired:
        pass
    finally:
        if proc.poll() is None:  # SIGTERM/Ctrl-C/our own timeout: srun forwards it and ends every task
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
    raise StuckError(f"the srun step did not end within {timeout_s + _STEP_GRACE_S:g} s")
