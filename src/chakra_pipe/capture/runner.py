"""Run N ranks of a training workload and record host ET + Kineto traces per rank.

Layout of the output folder (see README.md):
``rank{r}.host_et.json.gz``, ``rank{r}.kineto.json.gz`` and ``capture.json`` (world size, backend,
torch version, plan of explicit calls, step times measured *without* tracing and with it).
torch is imported inside the worker only: ``chakra-pipe --help`` and link/convert never need it.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import statistics
import tempfile
import time
import traceback
from dataclasses import dataclass
from pathlib import Path

from ..atomic import atomic_open, write_json
from ..errors import ChakraPipeError, InputError
from ..torchdist import resolve_backend
from .plan import BUILTIN_MODELS, explicit_calls, sub_group_ranks

WARMUP_STEPS = 2
RENDEZVOUS_TIMEOUT_S = 120


@dataclass(frozen=True)
class CaptureConfig:
    """What to run: a built-in model name or a path to a user script defining ``train_step``."""

    model: str
    ranks: int
    steps: int
    backend: str
    out: Path
    timeout_s: float = 600.0  # the whole capture, so a train_step that never returns cannot hang a job

    @property
    def is_script(self) -> bool:
        return self.model.endswith(".py")


class CaptureError(ChakraPipeError):
    """A rank failed; the message carries the rank and the last line of its exception."""


def host_path(out: Path, rank: int) -> Path:
    return out / f"rank{rank}.host_et.json.gz"


def kineto_path(out: Path, rank: int) -> Path:
    return out / f"rank{rank}.kineto.json.gz"


def free_port() -> int:
    """A currently free TCP port on 127.0.0.1 for the rendezvous."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _load_user_step(path: str, rank: int, world_size: int):
    """The script's ``train_step`` bound to this rank (contract in README.md)."""
    import runpy

    namespace = runpy.run_path(path, run_name="chakra_pipe_capture")
    fn = namespace.get("train_step")
    if not callable(fn):
        raise InputError("script defines no function train_step(rank, world_size)", file=path)
    return lambda: fn(rank, world_size)


def _gzip_into(src: Path, dst: Path) -> None:
    with open(src, "rb") as f, atomic_open(dst, "wb") as out:
        shutil.copyfileobj(f, out, 1 << 20)


def _worker(rank: int, cfg: CaptureConfig, backend: str, port: int, scratch: str) -> None:
    """One rank: init the group, time untraced steps, then trace warm-up + ``steps`` active steps."""
    import datetime

    os.environ["OMP_NUM_THREADS"] = "1"
    import torch
    import torch.distributed as dist
    from torch.profiler import ExecutionTraceObserver, ProfilerActivity, profile, schedule

    torch.set_num_threads(1)
    scratch_dir = Path(scratch)
    try:
        device = torch.device("cpu")
        if backend == "nccl":
            torch.cuda.set_device(rank)
            device = torch.device("cuda", rank)
        dist.init_process_group(backend, init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                                world_size=cfg.ranks, timeout=datetime.timedelta(seconds=RENDEZVOUS_TIMEOUT_S))
        if cfg.is_script:
            step = _load_user_step(cfg.model, rank, cfg.ranks)
        else:
            from .models import make_builtin_step
            step = make_builtin_step(cfg.model, rank, cfg.ranks, device)

        def timed_step() -> float:
            t0 = time.perf_counter()
            step()
            if device.type == "cuda":
                torch.cuda.synchronize()
            return (time.perf_counter() - t0) * 1e3

        for _ in range(WARMUP_STEPS):
            step()
        dist.barrier()
        untraced = [timed_step() for _ in range(cfg.steps)]

        host_tmp = scratch_dir / f"host{rank}.json"
        kineto_tmp = scratch_dir / f"kineto{rank}.json"
        observer = ExecutionTraceObserver().register_callback(str(host_tmp))
        activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
        traced: list[float] = []
        dist.barrier()
        with profile(activities=activities, schedule=schedule(wait=0, warmup=1, active=cfg.steps, repeat=1),
                     record_shapes=True, execution_trace_observer=observer,
                     on_trace_ready=lambda p: p.export_chrome_trace(str(kineto_tmp))) as prof:
            for _ in range(1 + cfg.steps):
                traced.append(timed_step())
                prof.step()
        observer.unregister_callback()
        dist.barrier()
        dist.destroy_process_group()
        _gzip_into(host_tmp, host_path(scratch_dir, rank))
        _gzip_into(kineto_tmp, kineto_path(scratch_dir, rank))
        (scratch_dir / f"times{rank}.json").write_text(json.dumps({"untraced": untraced, "traced": traced[1:]}))
    except BaseException as exc:
        (scratch_dir / f"error{rank}.txt").write_text(
            f"{type(exc).__name__}: {exc}".splitlines()[0] + "\n" + traceback.format_exc())
        raise


def _spawn_with_deadline(mp, cfg: CaptureConfig, backend: str, scratch: str) -> None:
    """Run the ranks; past ``cfg.timeout_s`` kill them all and fail naming the timeout."""
    ctx = mp.spawn(_worker, args=(cfg, backend, free_port(), scratch), nprocs=cfg.ranks, join=False)
    deadline = time.monotonic() + cfg.timeout_s
    try:
        while not ctx.join(timeout=0.5):  # raises if a rank failed
            if time.monotonic() > deadline:
                raise CaptureError(f"the capture did not finish within --timeout {cfg.timeout_s:g} s "
                                   "(a train_step that never returns, or a rank waiting on a peer)",
                                   file=str(cfg.out))
    except BaseException:  # also SIGTERM (SystemExit) and Ctrl-C: no rank may outlive the capture
        for proc in ctx.processes:
            if proc.is_alive():
                proc.kill()
        for proc in ctx.processes:
            proc.join()
        raise


def run_capture(cfg: CaptureConfig) -> Path:
    """Spawn the ranks, collect their traces and write ``capture.json``; returns its path."""
    if cfg.ranks < 1:
        raise InputError("must be >= 1", where="--ranks")
    if cfg.steps < 1:
        raise InputError("must be >= 1", where="--steps")
    if not cfg.timeout_s > 0:
        raise InputError("must be > 0 seconds", where="--timeout")
    if cfg.is_script and not Path(cfg.model).is_file():
        raise InputError("no such script", file=cfg.model)
    if not cfg.is_script and cfg.model not in BUILTIN_MODELS:
        raise InputError(f"unknown model {cfg.model!r}; choose {', '.join(BUILTIN_MODELS)} or a .py script",
                         where="--model")
    try:
        import torch
        import torch.multiprocessing as mp
    except ImportError:
        raise InputError("capture needs PyTorch: pip install 'chakra-pipe[torch]'") from None

    backend, _ = resolve_backend(cfg.backend, cfg.ranks)
    cfg.out.mkdir(parents=True, exist_ok=True)
    wall0 = time.perf_counter()
    # Ranks write into a scratch folder inside DIR; traces move into DIR only once every rank has
    # succeeded, so a failed capture never leaves a partial rank set behind.
    with tempfile.TemporaryDirectory(prefix=".capture-", dir=cfg.out) as scratch:
        try:
            _spawn_with_deadline(mp, cfg, backend, scratch)
        except CaptureError:
            raise
        except Exception as exc:  # a rank failed: report its first line, not a traceback
            msgs = sorted(f"rank {p.stem[len('error'):]}: " + p.read_text().splitlines()[0]
                          for p in Path(scratch).glob("error*.txt"))
            raise CaptureError(msgs[0] if msgs else f"a rank failed: {str(exc).splitlines()[0]}",
                               file=str(cfg.out)) from None
        times = [json.loads((Path(scratch) / f"times{r}.json").read_text()) for r in range(cfg.ranks)]
        for r in range(cfg.ranks):
            for path in (host_path, kineto_path):
                os.replace(path(Path(scratch), r), path(cfg.out, r))
    wall_s = time.perf_counter() - wall0
    summary = {
        "world_size": cfg.ranks,
        "backend": backend,
        "torch_version": torch.__version__,
        "model": cfg.model if not cfg.is_script else os.path.basename(cfg.model),
        "steps": cfg.steps,
        "warmup_steps": WARMUP_STEPS,
        "sub_group_ranks": None if cfg.is_script else sub_group_ranks(cfg.ranks),
        "explicit_calls": None if cfg.is_script else {
            str(r): [c.to_json() for c in explicit_calls(r, cfg.ranks)] for r in range(cfg.ranks)},
        "step_time_ms_untraced": {str(r): t["untraced"] for r, t in enumerate(times)},
        "step_time_ms_traced": {str(r): t["traced"] for r, t in enumerate(times)},
        "median_step_time_ms_untraced": statistics.median(x for t in times for x in t["untraced"]),
        "median_step_time_ms_traced": statistics.median(x for t in times for x in t["traced"]),
        "wall_time_s": round(wall_s, 3),
        "files": {str(r): {"host": host_path(cfg.out, r).name, "kineto": kineto_path(cfg.out, r).name}
                  for r in range(cfg.ranks)},
    }
    summary_path = cfg.out / "capture.json"
    write_json(summary_path, summary)
    return summary_path
