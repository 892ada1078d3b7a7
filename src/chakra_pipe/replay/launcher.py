"""Spawn one process per rank, watch them, and turn their measurements into RESULT.json.

Each rank is its own session (process group), so the launcher can kill a rank *and anything it
started* with one ``killpg`` — on success, failure, timeout or Ctrl-C alike; nothing outlives a
replay. The launcher hosts the rendezvous store itself (port 0, no free-port race). When a rank
fails, the others usually notice within milliseconds and report the node they were on; the
launcher waits briefly for those reports, then kills the rest and names the first failure.
"""

from __future__ import annotations

import contextlib
import json
import os
import pickle
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from ..atomic import write_json
from ..errors import EXIT_FINDINGS, ChakraPipeError, InputError, StuckError
from ..et.traceset import TraceSet
from ..lifecycle import make_scratch, terminate_as_exit
from ..torchdist import resolve_backend
from . import status as st
from .plan import WORLD, ReplayPlan, build_plan
from .result import assemble

BACKENDS = ("auto", "gloo", "nccl")
COMPUTE_MODES = ("duration", "skip", "ops")
_REPORT_GRACE_S = 1.0  # how long surviving ranks get to report where they were


class ReplayError(ChakraPipeError):
    """A rank crashed or its backend failed: the replay ran but could not finish."""

    exit_code = EXIT_FINDINGS


@dataclass
class ReplayConfig:
    prefix: str
    out: Path
    ranks: int | None = None
    backend: str = "auto"
    iterations: int = 3
    warmup: int = 1
    compute: str = "duration"
    timeout_s: float = 300.0
    comm_groups: str | None = None

# Scratch folders are <tmp>/chakra-replay-<pid>-<random>: a later replay removes those of dead (SIGKILLed) runs.
SCRATCH_PREFIX = "chakra-replay-"


def run_replay(cfg: ReplayConfig) -> dict:
    """Replay ``cfg.prefix`` and write ``cfg.out``; returns the result document."""
    _check_settings(cfg)
    plan = build_plan(TraceSet.load(cfg.prefix, cfg.comm_groups))
    if cfg.ranks is not None and cfg.ranks != plan.world_size:
        raise InputError(f"the trace has {plan.world_size} ranks; --ranks {cfg.ranks} cannot replay it",
                         file=cfg.prefix, where="--ranks")
    try:
        import torch.distributed as dist
    except ImportError:
        raise InputError("replay needs PyTorch: pip install 'chakra-pipe[torch]'") from None
    backend, device = resolve_backend(cfg.backend, plan.world_size)
    settings = {"backend": backend, "compute": cfg.compute, "iterations": cfg.iterations, "warmup": cfg.warmup,
                "timeout_s": cfg.timeout_s}
    procs: list[subprocess.Popen] = []
    with terminate_as_exit():  # from here on a SIGTERM still kills the ranks and removes the scratch folder
        run = make_scratch(SCRATCH_PREFIX)
        try:
            return _launch(run, procs, plan, dist, backend, device, settings, cfg)
        finally:
            _kill_all(procs)
            shutil.rmtree(run, ignore_errors=True)


def _launch(run: Path, procs: list[subprocess.Popen], plan: ReplayPlan, dist, backend: str, device: str,
            settings: dict, cfg: ReplayConfig) -> dict:
    """Start the ranks in ``run`` (appending them to ``procs`` for the caller to kill), wait, assemble."""
    store = dist.TCPStore("127.0.0.1", 0, None, True, wait_for_workers=False)
    start = time.monotonic_ns()
    kill_at = start + int(cfg.timeout_s * 1e9)
    _write_job(run, plan, backend, device, store.port, cfg, kill_at - int(min(1.0, 0.1 * cfg.timeout_s) * 1e9))
    _spawn(run, plan.world_size, procs)
    _watch(procs, run, plan, kill_at, cfg)
    per_rank = [json.loads((run / f"result.{r}.json").read_text()) for r in range(plan.world_size)]
    result = assemble(plan, settings, per_rank)
    write_json(cfg.out, result)
    return result


def _check_settings(cfg: ReplayConfig) -> None:
    if cfg.backend not in BACKENDS:
        raise InputError(f"unknown backend {cfg.backend!r}; choose {', '.join(BACKENDS)}", where="--backend")
    if cfg.compute not in COMPUTE_MODES:
        raise InputError(f"unknown compute mode {cfg.compute!r}; choose {', '.join(COMPUTE_MODES)}",
                         where="--compute")
    if cfg.iterations < 1:
        raise InputError("must be >= 1", where="--iterations")
    if cfg.warmup < 0:
        raise InputError("must be >= 0", where="--warmup")
    if not cfg.timeout_s > 0:
        raise InputError("must be > 0 seconds", where="--timeout")
    if cfg.ranks is not None and cfg.ranks < 1:
        raise InputError("must be >= 1", where="--ranks")


def _write_job(run: Path, plan: ReplayPlan, backend: str, device: str, port: int, cfg: ReplayConfig,
               deadline_ns: int) -> None:
    job = {"backend": backend, "device": device, "port": port, "world_size": plan.world_size,
           "launcher_pid": os.getpid(),
           "groups": {name: list(m) for name, m in plan.groups.items() if name != WORLD},
           "compute": cfg.compute, "iterations": cfg.iterations, "warmup": cfg.warmup, "deadline_ns": deadline_ns}
    (run / "job.json").write_text(json.dumps(job))
    for rp in plan.ranks:
        with open(run / f"plan.{rp.rank}.pkl", "wb") as f:
            pickle.dump(rp, f, protocol=pickle.HIGHEST_PROTOCOL)
    st.create(run / "status.bin", plan.world_size)


def _spawn(run: Path, world: int, procs: list[subprocess.Popen]) -> None:
    """Start one worker per rank, appending each to ``procs`` at once (a SIGTERM mid-way kills those started)."""
    env = dict(os.environ)
    env.setdefault("OMP_NUM_THREADS", "1")
    package_root = str(Path(__file__).resolve().parents[2])
    env["PYTHONPATH"] = os.pathsep.join(p for p in (package_root, env.get("PYTHONPATH")) if p)
    for r in range(world):
        log = open(run / f"log.{r}.txt", "wb")
        with log:
            procs.append(subprocess.Popen([sys.executable, "-m", "chakra_pipe.replay.worker", str(run), str(r)],
                                          stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                          env=env, start_new_session=True))


def _watch(procs: list[subprocess.Popen], run: Path, plan: ReplayPlan, kill_at: int, cfg: ReplayConfig) -> None:
    """Return when every rank exited 0; otherwise kill them all and raise naming rank and node."""
    failed: list[int] = []  # ranks in the order their failure was seen
    while True:
        codes = [p.poll() for p in procs]
        # Within one poll, a rank killed by a signal is the cause; the others saw its connection drop.
        failed += sorted((r for r, c in enumerate(codes) if c not in (None, 0) and r not in failed),
                         key=lambda r: (codes[r] >= 0, r))  # type: ignore[operator]
        if all(c == 0 for c in codes):
            return
        if failed or time.monotonic_ns() > kill_at:
            break
        time.sleep(0.01)
    grace_end = min(kill_at, time.monotonic_ns() + int(_REPORT_GRACE_S * 1e9)) if failed else kill_at
    while time.monotonic_ns() < grace_end and any(p.poll() is None for p in procs):
        time.sleep(0.01)
    board = st.StatusBoard(run / "status.bin", plan.world_size, mode="r")
    statuses = [board.get(r) for r in range(plan.world_size)]
    _kill_all(procs)
    failed += [r for r, p in enumerate(procs) if p.returncode not in (0, None) and r not in failed
               and p.returncode > 0]
    errors = {r: _read_error(run, r) for r in range(plan.world_size)}
    if not failed or all((errors[r] or {}).get("kind") == "timeout" for r in failed):
        stuck = {r: s.in_flight for r, s in enumerate(statuses) if s.phase != "done"}
        parts = [f"rank {r} at {_where(plan, r, s.in_flight, errors[r], s)}" for r, s in enumerate(statuses)
                 if s.phase != "done"]
        raise StuckError(f"replay did not finish within {cfg.timeout_s:g} s: " + "; ".join(parts),
                         stuck=stuck, file=cfg.prefix)
    first = failed[0]
    code = procs[first].returncode
    err = errors[first]
    s = statuses[first]
    if err is not None:
        why = err["message"]
    elif code is not None and code < 0:
        why = f"process killed by {signal.Signals(-code).name}"
    else:
        why = f"process exited with code {code}: {_last_line(run / f'log.{first}.txt')}"
    others = len([r for r in range(plan.world_size) if r != first and statuses[r].phase != "done"])
    raise ReplayError(f"rank {first} failed at {_where(plan, first, s.in_flight, err, s)}: {why}"
                      + (f" ({others} other rank(s) stopped)" if others else ""),
                      file=plan.ranks[first].file)


def _where(plan: ReplayPlan, rank: int, in_flight: list[int], err: dict | None, status: st.RankStatus) -> str:
    rp = plan.ranks[rank]
    ids = (err or {}).get("nodes") or in_flight
    index = {nid: i for i, nid in enumerate(rp.ids)}
    it = (err or {}).get("iteration", status.iteration)
    if ids:
        nodes = ", ".join(rp.describe(index[n]) for n in ids if n in index)
    elif err and err.get("where"):
        nodes = err["where"]
    else:
        nodes = f"no node ({status.phase})"
    return nodes + (f" in iteration {it}" if it is not None and it >= 0 else "")


def _read_error(run: Path, rank: int) -> dict | None:
    path = run / f"error.{rank}.json"
    try:
        return json.loads(path.read_text())
    except (OSError, json.JSONDecodeError):
        return None


def _last_line(path: Path) -> str:
    with contextlib.suppress(OSError):
        lines = [x for x in path.read_text(errors="replace").splitlines() if x.strip()]
        if lines:
            return lines[-1].strip()
    return "no output"


def _kill_all(procs: list[subprocess.Popen]) -> None:
    """SIGKILL each rank's whole process group and reap it."""
    for p in procs:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(p.pid, signal.SIGKILL)  # also after the leader exited: its group may linger
    for p in procs:
        with contextlib.suppress(subprocess.TimeoutExpired):
            p.wait(timeout=10)
