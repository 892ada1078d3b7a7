"""Run one worker process per rank, watch them, gather their outputs on rank 0, name the first failure.

Two ways in, one watcher:

* ``local``: this process starts every rank on this machine and hosts the rendezvous store itself
  (port 0: no free-port race).
* ``env``: this process is one rank's task, started by torchrun or a SLURM step; rank 0's task hosts
  the store at ``MASTER_ADDR:MASTER_PORT`` (unless torchrun's agent already does). Every task
  reports its rank's outcome, and its output files, through that store, so the outputs land on
  rank 0's node without a shared folder; rank 0 names the failure exactly as ``local`` does.

Each worker leads its own process group, so a rank *and anything it started* dies with one ``killpg`` — on
success, failure, timeout, SIGTERM (scancel, Snakemake) or Ctrl-C alike; nothing outlives a run and
the private run folder is removed. When a rank fails, the others usually notice within
milliseconds and report where they were; the watcher gives them a moment, then stops the rest.
A failure a rank caused itself (an exception of its own, a signal) is named before knock-on errors
of ranks that merely lost their peer, whatever order they arrived in.
The workers stay in the launcher's session (a process group, not ``setsid``): with the kernel's
scheduler autogroups (``kernel.sched_autogroup_enabled``), a session per rank made the ranks compete
with every other session on a shared machine as separate groups, and each message between them waited
for the other group's turn — a 4 KiB gloo all-reduce took 2–7 ms instead of 0.6 ms on 2 loaded cores
(``benchmarks/calibrate_harness.py``), which calibrate then fitted as network latency.
"""

from __future__ import annotations

import contextlib
import datetime
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Protocol

from ..atomic import write_bytes
from ..console import Ticker
from ..errors import EXIT_FINDINGS, ChakraPipeError
from ..lifecycle import make_scratch, terminate_as_exit
from . import rankenv

# Run folders are <parent or tmp>/.chakra-ranks-<pid>-<random>: the next launch removes those a SIGKILLed run left.
SCRATCH_PREFIX = ".chakra-ranks-"
GRACE_S = 1.0  # how long surviving ranks get to report where they were after a failure
REPORT_WAIT_S = 10.0  # how long rank 0 waits for remote reports once the run was stopped
_POLL_S = 0.01
_STORE_KEY = "chakra-pipe/launch/"


class LaunchError(ChakraPipeError):
    """The ranks could not be started or lost each other (the store went away)."""

    exit_code = EXIT_FINDINGS


@dataclass
class Outcome:
    """How one rank ended, as its own task saw it."""

    rank: int
    code: int | None  # exit status; negative: killed by that signal; None: never reported
    stopped: bool = False  # stopped by the launcher (a peer failed first, or the deadline passed)
    error: dict | None = None  # the worker's error.<rank>.json
    snapshot: dict = field(default_factory=dict)  # the job's view of where the rank was
    last_line: str = "no output"
    order: tuple[int, int] = (0, 0)  # (knock-on?, sequence): failures sort by this

    @property
    def failed(self) -> bool:
        return not self.stopped and self.code != 0

    def why(self) -> str:
        """One line: the worker's own message, the signal that killed it, or its last output."""
        if self.error is not None:
            return str(self.error.get("message", ""))
        if self.code is None:
            return "no report from its task (the task or its node died)"
        if self.code < 0:
            return f"process killed by {signal.Signals(-self.code).name}"
        return f"process exited with code {self.code}: {self.last_line}"


class RankJob(Protocol):
    """What a stage tells the launcher. Workers run ``python -m MODULE RUN_DIR RANK LOCAL_RANK``,
    read ``RUN_DIR/job.json`` and write ``error.<rank>.json`` (with ``message`` and ``peer``) on failure."""

    worker_module: str

    @property
    def world_size(self) -> int:
        """Number of ranks."""

    @property
    def timeout_s(self) -> float:
        """The whole run's deadline, from the start."""

    def settings(self) -> dict:
        """Job-specific keys for job.json."""

    def prepare(self, run: Path, rank: int) -> None:
        """Write the inputs of ``rank`` into its run folder."""

    def outputs(self, rank: int) -> list[str]:
        """Names of the files ``rank`` leaves in its run folder for rank 0."""

    def snapshot(self, run: Path, rank: int) -> dict:
        """Where ``rank`` was (read after it stopped), small enough to send through the store."""

    def failure(self, outcomes: list[Outcome]) -> ChakraPipeError:
        """The error naming the first failure (or the timeout)."""


@contextlib.contextmanager
def launch(job: RankJob, launcher: str, run_parent: Path | None = None) -> Iterator[Path | None]:
    """Run every rank; yield rank 0's run folder holding every rank's outputs (None on other ranks).

    Raises ``job.failure(...)`` when a rank failed or the deadline passed. The run folder is removed
    on the way out, so callers move what they keep out of it inside the ``with``.
    """
    mode = rankenv.resolve(launcher)
    if mode == "srun":
        raise LaunchError("--launcher srun runs on the submit side; use launch.srun", where="--launcher")
    where = rankenv.from_environ() if mode == "env" else None
    if where is not None and where.world_size != job.world_size:
        raise LaunchError(
            f"{where.source} started {where.world_size} ranks; the job needs {job.world_size}", where="--launcher env"
        )
    host_rank0 = where is None or where.rank == 0
    if host_rank0 and run_parent is not None:
        run_parent.mkdir(parents=True, exist_ok=True)
    run = make_scratch(SCRATCH_PREFIX, run_parent if host_rank0 else None)
    procs: dict[int, subprocess.Popen] = {}
    try:
        with terminate_as_exit():
            outcomes = _run(job, where, run, procs)
        if outcomes is not None and any(o.code != 0 for o in outcomes):  # failed, stopped or lost
            raise job.failure(outcomes)
        if where is not None and where.rank != 0:
            yield None
        else:
            yield run
    finally:
        _kill(procs.values())
        shutil.rmtree(run, ignore_errors=True)


def _run(
    job: RankJob, where: rankenv.RankEnv | None, run: Path, procs: dict[int, subprocess.Popen]
) -> list[Outcome] | None:
    import torch.distributed as dist

    start = time.monotonic_ns()
    kill_at = start + int(job.timeout_s * 1e9)
    timeout = datetime.timedelta(seconds=job.timeout_s)
    if where is None:
        store = dist.TCPStore("127.0.0.1", 0, None, True, wait_for_workers=False, timeout=timeout)
        addr, port, ranks, local = "127.0.0.1", store.port, list(range(job.world_size)), None
    else:
        try:
            store = dist.TCPStore(
                where.master_addr,
                where.master_port,
                None,
                where.rank == 0 and not where.agent_store,
                wait_for_workers=False,
                timeout=timeout,
            )
        except Exception as exc:  # noqa: BLE001 - bind/connect failures: one line naming the address
            raise LaunchError(
                f"rank {where.rank}: no rendezvous store at {where.master_addr}:{where.master_port}: {_one_line(exc)}",
                where="--launcher env",
            ) from None
        addr, port, ranks, local = where.master_addr, where.master_port, [where.rank], where.local_rank
    # Workers stop themselves a little before the launcher would kill them, to say where they were.
    worker_deadline = kill_at - int(min(1.0, 0.1 * job.timeout_s) * 1e9)
    (run / "job.json").write_text(
        json.dumps(
            {
                "master_addr": addr,
                "port": port,
                "world_size": job.world_size,
                "launcher_pid": os.getpid(),
                "deadline_ns": worker_deadline,
                **job.settings(),
            }
        )
    )
    for r in ranks:
        job.prepare(run, r)
    procs.update(_spawn(job.worker_module, run, ranks, local))
    exchange = None if where is None else _Exchange(dist.PrefixStore(_STORE_KEY, store), where, job, run)
    return _watch(job, procs, run, kill_at, exchange)


def _spawn(module: str, run: Path, ranks: list[int], local_rank: int | None) -> dict[int, subprocess.Popen]:
    env = dict(os.environ)
    env.setdefault("OMP_NUM_THREADS", "1")
    package_root = str(Path(__file__).resolve().parents[2])
    env["PYTHONPATH"] = os.pathsep.join(p for p in (package_root, env.get("PYTHONPATH")) if p)
    procs = {}
    for r in ranks:
        log = open(run / f"log.{r}.txt", "wb")  # noqa: SIM115 - closed below once the child holds it
        with log:
            procs[r] = subprocess.Popen(
                [sys.executable, "-m", module, str(run), str(r), str(r if local_rank is None else local_rank)],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=env,
                process_group=0,  # killpg-able; same session, so the same scheduler autogroup
            )
    return procs


def _watch(
    job: RankJob, procs: dict[int, subprocess.Popen], run: Path, kill_at: int, exchange: _Exchange | None
) -> list[Outcome] | None:
    """Every rank's outcome (rank 0 / local), or None on a task that only reports its own."""
    outcomes: dict[int, Outcome] = {}
    ticker = Ticker(job.worker_module.split(".")[1])  # "replay" / "capture"
    try:
        return _watch_loop(job, procs, run, kill_at, exchange, outcomes, ticker)
    finally:
        ticker.close()


def _progress(job: RankJob, run: Path, procs: dict[int, subprocess.Popen], outcomes: dict[int, Outcome]) -> str:
    """``K/N ranks finished`` and, where the job reports it, the lowest iteration a running rank reached."""
    running = [job.snapshot(run, r) for r in procs if r not in outcomes]
    reached = [s["iteration"] for s in running if isinstance(s.get("iteration"), int)]
    return f"{len(outcomes)}/{job.world_size} ranks finished" + (f", iteration {min(reached)}" if reached else "")


def _watch_loop(
    job: RankJob,
    procs: dict[int, subprocess.Popen],
    run: Path,
    kill_at: int,
    exchange: _Exchange | None,
    outcomes: dict[int, Outcome],
    ticker: Ticker,
) -> list[Outcome] | None:
    """:func:`_watch`'s poll loop: collect outcomes, stop the ranks after a failure or the deadline."""
    seq = 0
    stop_at = kill_at
    stopping = False
    while True:
        now = time.monotonic_ns()
        ticker.update(lambda: _progress(job, run, procs, outcomes))
        ended = [(r, p.returncode) for r, p in procs.items() if r not in outcomes and p.poll() is not None]
        # Within one poll a rank killed by a signal is the cause; the others saw its connection drop.
        for r, code in sorted(ended, key=lambda rc: (rc[1] >= 0, rc[0])):
            o = _local_outcome(job, run, r, code, stopped=False)
            if o.failed:
                seq = exchange.next_seq() if exchange is not None else seq + 1
                o.order = (_knock_on(o), seq)
            outcomes[r] = o
            if exchange is not None:
                exchange.publish(o)
        if exchange is not None and not exchange.is_root:
            if not outcomes and (exchange.aborted() or now > kill_at):
                _stop(job, run, procs, outcomes, exchange)
            if outcomes:
                return None
            time.sleep(_POLL_S)
            continue
        if exchange is not None:
            outcomes.update(exchange.collect(set(outcomes)))
        if len(outcomes) == job.world_size:
            return [outcomes[r] for r in range(job.world_size)]
        if not stopping and any(o.failed for o in outcomes.values()):
            stop_at = min(stop_at, now + int(GRACE_S * 1e9))
        if not stopping and now > stop_at:
            stopping = True
            _stop(job, run, procs, outcomes, exchange)
            stop_at = now + int(REPORT_WAIT_S * 1e9)
        elif stopping and now > stop_at:  # remote ranks that never reported
            for r in range(job.world_size):
                outcomes.setdefault(r, Outcome(r, None, order=(0, 1 << 30)))
            continue
        time.sleep(_POLL_S)


def _knock_on(o: Outcome) -> int:
    """1 when the rank only reported losing a peer (its error says so), else 0."""
    return 1 if (o.error or {}).get("peer") else 0


def _stop(
    job: RankJob,
    run: Path,
    procs: dict[int, subprocess.Popen],
    outcomes: dict[int, Outcome],
    exchange: _Exchange | None,
) -> None:
    """Stop the ranks still running here (their position read first) and tell the other tasks."""
    live = [r for r, p in procs.items() if r not in outcomes]
    snaps = {r: job.snapshot(run, r) for r in live}
    _kill([procs[r] for r in live])
    for r in live:
        code = procs[r].returncode
        o = _local_outcome(job, run, r, code if code is not None else -signal.SIGKILL, stopped=code != 0)
        o.snapshot = snaps[r] if o.stopped else o.snapshot
        o.order = (_knock_on(o), 1 << 30)  # it failed as it was being stopped: after every failure seen
        outcomes[r] = o
        if exchange is not None:
            exchange.publish(o)
    if exchange is not None and exchange.is_root:
        exchange.abort()


def _local_outcome(job: RankJob, run: Path, rank: int, code: int, stopped: bool) -> Outcome:
    error = None
    with contextlib.suppress(OSError, json.JSONDecodeError):
        error = json.loads((run / f"error.{rank}.json").read_text())
    return Outcome(
        rank,
        code,
        stopped=stopped and error is None,
        error=error,
        snapshot=job.snapshot(run, rank),
        last_line=_last_line(run / f"log.{rank}.txt"),
    )


class _Exchange:
    """Outcomes and output files through the rendezvous store, between the tasks of an ``env`` run."""

    def __init__(self, store, where: rankenv.RankEnv, job: RankJob, run: Path):
        self.store, self.where, self.job, self.run = store, where, job, run
        self.is_root = where.rank == 0

    def _call(self, fn, *args):
        try:
            return fn(*args)
        except Exception as exc:  # noqa: BLE001 - the store's host (rank 0's task) is gone
            raise LaunchError(
                f"rank {self.where.rank} lost the rendezvous store at {self.where.master_addr}:"
                f"{self.where.master_port} (rank 0's task ended?): {_one_line(exc)}",
                where="--launcher env",
            ) from None

    def next_seq(self) -> int:
        return int(self._call(self.store.add, "failures", 1))

    def publish(self, o: Outcome) -> None:
        if o.code == 0:
            for name in self.job.outputs(o.rank):
                self._call(self.store.set, f"file/{o.rank}/{name}", (self.run / name).read_bytes())
        self._call(self.store.set, f"outcome/{o.rank}", json.dumps(asdict(o)))

    def collect(self, known: set[int]) -> dict[int, Outcome]:
        got = {}
        for r in range(self.job.world_size):
            if r in known or not self._call(self.store.check, [f"outcome/{r}"]):
                continue
            d = json.loads(self._call(self.store.get, f"outcome/{r}"))
            o = Outcome(**{**d, "order": tuple(d["order"])})
            if o.code == 0:
                for name in self.job.outputs(r):
                    write_bytes(self.run / name, self._call(self.store.get, f"file/{r}/{name}"))
            got[r] = o
        return got

    def abort(self) -> None:
        self._call(self.store.set, "abort", "1")

    def aborted(self) -> bool:
        return bool(self._call(self.store.check, ["abort"]))


def first_failure(outcomes: list[Outcome]) -> Outcome | None:
    """The failure to name: one a rank caused itself before knock-on errors, then in the order seen."""
    failed = sorted((o for o in outcomes if o.failed), key=lambda o: (o.order, o.rank))
    return failed[0] if failed else None


def _last_line(path: Path) -> str:
    with contextlib.suppress(OSError):
        lines = [x for x in path.read_text(errors="replace").splitlines() if x.strip()]
        if lines:
            return lines[-1].strip()
    return "no output"


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}".rstrip(": ")


def _kill(procs) -> None:
    """SIGKILL each rank's whole process group and reap it."""
    procs = list(procs)
    for p in procs:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(p.pid, signal.SIGKILL)  # also after the leader exited: its group may linger
    for p in procs:
        with contextlib.suppress(subprocess.TimeoutExpired):
            p.wait(timeout=10)
