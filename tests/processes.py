"""Shared helpers for tests that start real processes: the CLI, launchers, ranks and SLURM steps.

Every such run goes through :func:`run_bounded`: its own session, one thread per BLAS pool, and a
hard timeout after which the whole process group is killed and the test fails, so a hung rank can
neither stall the suite nor outlive its test. The command builders keep the argument lists the
launcher, replay, capture and SLURM tests share in one place. Test modules import this module by
name (pytest puts ``tests/`` on ``sys.path``).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
SNAKEFILE = REPO / "workflow" / "Snakefile"
STANDING_EPOCH = "1767225600"  # 2026-01-01: SOURCE_DATE_EPOCH of every workflow run (the board's date)


def snakemake_cmd(workdir: Path, configfile: str, *extra: str) -> list[str]:
    """``snakemake`` on the checkout's Snakefile in ``workdir`` with ``configfile`` (relative to it)."""
    return [
        sys.executable,
        "-m",
        "snakemake",
        "-s",
        str(SNAKEFILE),
        "-d",
        str(workdir),
        "--configfile",
        configfile,
        *extra,
    ]


def workflow_env(base: dict[str, str] | None = None) -> dict[str, str]:
    """``base`` (default: this environment) as a workflow run needs it: this interpreter's scripts
    first on PATH (the rules call ``chakra-pipe``) and the fixed SOURCE_DATE_EPOCH (byte-identical reports)."""
    env = dict(os.environ if base is None else base, SOURCE_DATE_EPOCH=STANDING_EPOCH)
    env["PATH"] = str(Path(sys.executable).parent) + os.pathsep + env.get("PATH", "")
    return env


def cli(*args: str | os.PathLike) -> list[str]:
    """``chakra-pipe ARGS`` as this interpreter runs it (the checkout's code, whatever is on PATH)."""
    return [sys.executable, "-m", "chakra_pipe.cli", *map(str, args)]


def run_bounded(
    cmd: list[str],
    *,
    timeout: float,
    env: dict[str, str] | None = None,
    cwd: Path | None = None,
    stop: signal.Signals = signal.SIGKILL,
) -> subprocess.CompletedProcess:
    """Run ``cmd`` to completion in a new session; past ``timeout`` send ``stop`` to its group and fail.

    ``stop`` is SIGTERM for ``srun``, which forwards it to the job step's tasks (SIGKILL would leave
    them running on the nodes). ``env`` defaults to this process's environment.
    """
    env = dict(os.environ if env is None else env, OMP_NUM_THREADS="1")
    proc = subprocess.Popen(
        cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=cwd, start_new_session=True
    )
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, stop)
        proc.communicate()
        pytest.fail(f"{' '.join(map(str, cmd))} did not finish within {timeout} s")
    return subprocess.CompletedProcess(cmd, proc.returncode, out, err)


# The DP x TP llama3-8b-shaped set the launcher and SLURM replays share: small enough for CPU ranks.
SMALL_LLM = {"layers": 1, "dp": 2, "tp": 2, "pp": 1, "hidden": 128, "heads": 4, "ffn": 256, "vocab": 512, "seq": 32}


def generate_llm_args(prefix: str, **sizes: int) -> list[str]:
    """``generate llm`` of llama3-8b shrunk to :data:`SMALL_LLM`, with ``sizes`` (flag names without
    ``--``, e.g. ``layers=2`` or ``microbatches=4``) replacing or adding to it."""
    flags = [a for k, v in {**SMALL_LLM, **sizes}.items() for a in (f"--{k}", str(v))]
    return ["generate", "llm", "--model", "llama3-8b", *flags, "--out", prefix]


def dp_tp_set(folder: Path, env: dict[str, str] | None = None) -> str:
    """Write the :data:`SMALL_LLM` rank set (4 ranks: DP 2 x TP 2) as ``folder/llm``; its prefix."""
    prefix = str(folder / "llm")
    gen = run_bounded(cli(*generate_llm_args(prefix)), timeout=300, env=env)
    assert gen.returncode == 0, gen.stderr
    return prefix


def generate_collective_args(out: str | os.PathLike, npus: int, size: str, *extra: str) -> list[str]:
    """``generate collective`` of one all-reduce of ``size`` on ``npus`` ranks into ``out``."""
    return [
        "generate",
        "collective",
        "--type",
        "all_reduce",
        "--npus",
        str(npus),
        "--size",
        size,
        *extra,
        "--out",
        str(out),
    ]


def start_huge_generate(prefix: Path, stderr: int = subprocess.DEVNULL) -> subprocess.Popen:
    """A ``generate`` of 200,000 rank files, long enough to be interrupted part-way through;
    :func:`wait_for_rank_files` says when it is."""
    return subprocess.Popen(cli(*generate_collective_args(prefix, 200_000, "1MiB", "--allow-large")), stderr=stderr)


def wait_for_rank_files(proc: subprocess.Popen, prefix: Path, count: int, seconds: float = 60) -> None:
    """Return once ``count`` rank files ``PREFIX.*.et`` exist, ``proc`` has ended or ``seconds`` passed."""
    deadline = time.monotonic() + seconds
    while (
        len(list(prefix.parent.glob(f"{prefix.name}.*.et"))) < count
        and proc.poll() is None
        and time.monotonic() < deadline
    ):
        time.sleep(0.05)


def capture_args(model: str | os.PathLike, out: str | os.PathLike, *extra: str, ranks: int = 2) -> list[str]:
    """``capture`` of ``model`` (built-in name or script) on ``ranks`` gloo CPU ranks into ``out``."""
    return ["capture", "--model", str(model), "--ranks", str(ranks), "--backend", "gloo", *extra, "--out", str(out)]


def call_bytes(result: dict) -> list:
    """What every comm node handed to torch.distributed, per rank and iteration: the replay's bytes."""
    return [[(n["id"], n.get("call_bytes")) for n in r["nodes"]] for r in result["ranks"]]


def stall_trace(folder: Path, seconds: float, name: str = "stall") -> str:
    """A 2-rank set where rank 1 computes for ``seconds`` before the all-reduce rank 0 already waits in."""
    from test_replay_plan import coll, comp, write_set

    from chakra_pipe.et import schema

    r0 = [comp(0, 1), coll(1, schema.ALL_REDUCE, 4096)]
    r1 = [comp(0, int(seconds * 1_000_000)), coll(1, schema.ALL_REDUCE, 4096, data=[0])]
    return write_set(folder, [r0, r1], name=name)


def proc_pids() -> list[int]:
    """Every process id ``/proc`` lists now (the worker-finding tests filter these)."""
    return [int(entry) for entry in os.listdir("/proc") if entry.isdigit()]


def parent_of(pid: int) -> int:
    """``pid``'s parent from ``/proc/PID/stat`` (the field after the parenthesised command name);
    raises OSError when the process is gone."""
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
