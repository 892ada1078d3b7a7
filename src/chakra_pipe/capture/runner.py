"""Run N ranks of a training workload and record host ET + Kineto traces per rank.

Layout of the output folder (see README.md):
``rank{r}.host_et.json.gz``, ``rank{r}.kineto.json.gz`` and ``capture.json`` (world size, backend,
torch version, plan of explicit calls, step times measured *without* tracing and with it).
The ranks run through the shared launcher (``chakra_pipe.launch``: this machine, torchrun, a SLURM
step); each is ``chakra_pipe.capture.worker``. torch is imported by the workers and here only once a
capture starts: ``chakra-pipe --help`` and link/convert never need it.
"""

from __future__ import annotations

import json
import os
import statistics
import time
from dataclasses import dataclass
from pathlib import Path

from ..atomic import write_json
from ..errors import ChakraPipeError, InputError
from ..launch import rankenv
from ..launch.ranks import Outcome, first_failure, launch
from ..torchdist import resolve_backend
from .paths import host_path, kineto_path, times_path
from .plan import BUILTIN_MODELS, explicit_calls, sub_group_ranks
from .worker import WARMUP_STEPS


@dataclass(frozen=True)
class CaptureConfig:
    """What to run: a built-in model name or a path to a user script defining ``train_step``."""

    model: str
    ranks: int
    steps: int
    backend: str
    out: Path
    timeout_s: float = 600.0  # the whole capture, so a train_step that never returns cannot hang a job
    launcher: str = "local"
    bucket_mb: float | None = None  # DDP bucket_cap_mb of a built-in model; None: DDP's default

    @property
    def is_script(self) -> bool:
        return self.model.endswith(".py")


class CaptureError(ChakraPipeError):
    """A rank failed; the message carries the rank and the last line of its exception."""


@dataclass
class _CaptureJob:
    """The capture as the launcher sees it (``chakra_pipe.launch.ranks.RankJob``)."""

    cfg: CaptureConfig
    backend: str
    worker_module: str = "chakra_pipe.capture.worker"

    @property
    def world_size(self) -> int:
        return self.cfg.ranks

    @property
    def timeout_s(self) -> float:
        return self.cfg.timeout_s

    def settings(self) -> dict:
        model = os.path.abspath(self.cfg.model) if self.cfg.is_script else self.cfg.model
        return {"model": model, "steps": self.cfg.steps, "backend": self.backend, "bucket_mb": self.cfg.bucket_mb}

    def prepare(self, run: Path, rank: int) -> None:
        """Nothing per rank: job.json says it all."""

    def outputs(self, rank: int) -> list[str]:
        return [host_path(Path(), rank).name, kineto_path(Path(), rank).name, times_path(Path(), rank).name]

    def snapshot(self, run: Path, rank: int) -> dict:
        return {}

    def failure(self, outcomes: list[Outcome]) -> ChakraPipeError:
        first = first_failure(outcomes)
        if first is None:
            return CaptureError(
                f"the capture did not finish within --timeout {self.cfg.timeout_s:g} s "
                "(a train_step that never returns, or a rank waiting on a peer)",
                file=str(self.cfg.out),
            )
        return CaptureError(f"rank {first.rank}: {first.why()}", file=str(self.cfg.out))


def check_config(cfg: CaptureConfig) -> None:
    """Refuse bad arguments before any rank (or SLURM step) starts."""
    if cfg.ranks < 1:
        raise InputError("must be >= 1", where="--ranks")
    if cfg.steps < 1:
        raise InputError("must be >= 1", where="--steps")
    if not cfg.timeout_s > 0:
        raise InputError("must be > 0 seconds", where="--timeout")
    if cfg.bucket_mb is not None and not 0 < cfg.bucket_mb < float("inf"):  # DDP takes int(MB * 2^20)
        raise InputError("must be a finite number > 0 MB", where="--bucket-mb")
    if cfg.bucket_mb is not None and cfg.is_script:
        raise InputError("applies to the built-in models only (a script builds its own DDP)", where="--bucket-mb")
    if cfg.is_script and not Path(cfg.model).is_file():
        raise InputError("no such script", file=cfg.model)
    if not cfg.is_script and cfg.model not in BUILTIN_MODELS:
        raise InputError(
            f"unknown model {cfg.model!r}; choose {', '.join(BUILTIN_MODELS)} or a .py script", where="--model"
        )


def run_capture(cfg: CaptureConfig) -> Path | None:
    """Run the ranks, collect their traces and write ``capture.json``; returns its path (None on a
    task other than rank 0's under ``--launcher env``: rank 0 writes the folder)."""
    check_config(cfg)
    try:
        import torch
    except ImportError:
        raise InputError("capture needs PyTorch: pip install 'chakra-pipe[torch]'") from None

    mode = rankenv.resolve(cfg.launcher)
    backend, _ = resolve_backend(cfg.backend, rankenv.device_sharers(mode, cfg.ranks))
    wall0 = time.perf_counter()
    # The run folder of rank 0 lies inside DIR; traces move into DIR only once every rank has
    # succeeded, so a failed capture never leaves a partial rank set behind.
    with launch(_CaptureJob(cfg, backend), mode, run_parent=cfg.out) as run:
        if run is None:
            return None
        times = [json.loads(times_path(run, r).read_text()) for r in range(cfg.ranks)]
        for r in range(cfg.ranks):
            for place in (host_path, kineto_path):
                os.replace(place(run, r), place(cfg.out, r))
    wall_s = time.perf_counter() - wall0
    summary = {
        "world_size": cfg.ranks,
        "backend": backend,
        "torch_version": torch.__version__,
        "model": cfg.model if not cfg.is_script else os.path.basename(cfg.model),
        "steps": cfg.steps,
        "bucket_mb": cfg.bucket_mb,
        "warmup_steps": WARMUP_STEPS,
        "sub_group_ranks": None if cfg.is_script else sub_group_ranks(cfg.ranks),
        "explicit_calls": None
        if cfg.is_script
        else {str(r): [c.to_json() for c in explicit_calls(r, cfg.ranks)] for r in range(cfg.ranks)},
        "step_time_ms_untraced": {str(r): t["untraced"] for r, t in enumerate(times)},
        "step_time_ms_traced": {str(r): t["traced"] for r, t in enumerate(times)},
        "median_step_time_ms_untraced": statistics.median(x for t in times for x in t["untraced"]),
        "median_step_time_ms_traced": statistics.median(x for t in times for x in t["traced"]),
        "wall_time_s": round(wall_s, 3),
        "files": {
            str(r): {"host": host_path(cfg.out, r).name, "kineto": kineto_path(cfg.out, r).name}
            for r in range(cfg.ranks)
        },
    }
    summary_path = cfg.out / "capture.json"
    write_json(summary_path, summary)
    return summary_path
