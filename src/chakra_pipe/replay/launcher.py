"""Replay a rank set through the shared launcher and turn the ranks' measurements into RESULT.json.

Where the ranks run (this machine, torchrun, a SLURM step, srun) is ``chakra_pipe.launch``'s job;
this module says what a replay rank needs (its plan, the status board), what it leaves behind
(``result.<rank>.json``) and how a failure is named (rank, node, iteration).
"""

from __future__ import annotations

import json
import pickle
from dataclasses import dataclass, replace
from pathlib import Path

from ..atomic import write_json
from ..errors import EXIT_FINDINGS, ChakraPipeError, InputError, StuckError
from ..et.traceset import TraceSet
from ..launch import rankenv
from ..launch.ranks import Outcome, first_failure, launch
from ..torchdist import resolve_backend
from . import status as st
from .plan import WORLD, ReplayPlan, build_plan
from .result import assemble

BACKENDS = ("auto", "gloo", "nccl")
COMPUTE_MODES = ("duration", "skip", "ops")


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
    launcher: str = "local"


def load_plan(cfg: ReplayConfig) -> ReplayPlan:
    """The checked plan of ``cfg.prefix``: every static mismatch is refused before any rank starts."""
    _check_settings(cfg)
    plan = build_plan(TraceSet.load(cfg.prefix, cfg.comm_groups))
    if cfg.ranks is not None and cfg.ranks != plan.world_size:
        raise InputError(
            f"the trace has {plan.world_size} ranks; --ranks {cfg.ranks} cannot replay it",
            file=cfg.prefix,
            where="--ranks",
        )
    return plan


def replay_here(cfg: ReplayConfig) -> dict:
    """:func:`run_replay` with every rank started from this process (``--launcher local``), so the
    result document always comes back (calibrate and compare read it)."""
    result = run_replay(replace(cfg, launcher="local"))
    assert result is not None  # this process is rank 0's launcher under ``local``
    return result


def run_replay(cfg: ReplayConfig) -> dict | None:
    """Replay ``cfg.prefix`` and write ``cfg.out``; returns the result document (None on a task other
    than rank 0's under ``--launcher env``: rank 0 writes the result)."""
    plan = load_plan(cfg)
    try:
        import torch.distributed  # noqa: F401
    except ImportError:
        raise InputError("replay needs PyTorch: pip install 'chakra-pipe[torch]'") from None
    mode = rankenv.resolve(cfg.launcher)
    backend, device = resolve_backend(cfg.backend, rankenv.device_sharers(mode, plan.world_size))
    settings = {
        "backend": backend,
        "compute": cfg.compute,
        "iterations": cfg.iterations,
        "warmup": cfg.warmup,
        "timeout_s": cfg.timeout_s,
    }
    with launch(_ReplayJob(plan, cfg, backend, device), mode) as run:
        if run is None:
            return None
        per_rank = [json.loads((run / f"result.{r}.json").read_text()) for r in range(plan.world_size)]
    result = assemble(plan, settings, per_rank)
    write_json(cfg.out, result)
    return result


def _check_settings(cfg: ReplayConfig) -> None:
    if cfg.backend not in BACKENDS:
        raise InputError(f"unknown backend {cfg.backend!r}; choose {', '.join(BACKENDS)}", where="--backend")
    if cfg.compute not in COMPUTE_MODES:
        raise InputError(f"unknown compute mode {cfg.compute!r}; choose {', '.join(COMPUTE_MODES)}", where="--compute")
    if cfg.iterations < 1:
        raise InputError("must be >= 1", where="--iterations")
    if cfg.warmup < 0:
        raise InputError("must be >= 0", where="--warmup")
    if not cfg.timeout_s > 0:
        raise InputError("must be > 0 seconds", where="--timeout")
    if cfg.ranks is not None and cfg.ranks < 1:
        raise InputError("must be >= 1", where="--ranks")


@dataclass
class _ReplayJob:
    """The replay as the launcher sees it (``chakra_pipe.launch.ranks.RankJob``)."""

    plan: ReplayPlan
    cfg: ReplayConfig
    backend: str
    device: str
    worker_module: str = "chakra_pipe.replay.worker"

    @property
    def world_size(self) -> int:
        return self.plan.world_size

    @property
    def timeout_s(self) -> float:
        return self.cfg.timeout_s

    def settings(self) -> dict:
        return {
            "backend": self.backend,
            "device": self.device,
            "groups": {name: list(m) for name, m in self.plan.groups.items() if name != WORLD},
            "compute": self.cfg.compute,
            "iterations": self.cfg.iterations,
            "warmup": self.cfg.warmup,
        }

    def prepare(self, run: Path, rank: int) -> None:
        with open(run / f"plan.{rank}.pkl", "wb") as f:
            pickle.dump(self.plan.ranks[rank], f, protocol=pickle.HIGHEST_PROTOCOL)
        if not (run / "status.bin").exists():
            st.create(run / "status.bin", self.plan.world_size)

    def outputs(self, rank: int) -> list[str]:
        return [f"result.{rank}.json"]

    def snapshot(self, run: Path, rank: int) -> dict:
        s = st.StatusBoard(run / "status.bin", self.plan.world_size, mode="r").get(rank)
        return {"phase": s.phase, "iteration": s.iteration, "in_flight": s.in_flight}

    def failure(self, outcomes: list[Outcome]) -> ChakraPipeError:
        plan, cfg = self.plan, self.cfg
        first = first_failure(outcomes)
        # The deadline is the cause when the first failure (own failures before knock-on ones, then in the
        # order seen) is a timeout: what other ranks reported after it (a peer's connection dropping as
        # the timed-out rank was stopped) are consequences, and which of them arrive first is a race.
        if first is None or (first.error or {}).get("kind") == "timeout":
            late = [o for o in outcomes if o.snapshot.get("phase") != "done"]
            parts = [f"rank {o.rank} at {_where(plan, o)}" for o in late]
            return StuckError(
                f"replay did not finish within {cfg.timeout_s:g} s: " + "; ".join(parts),
                stuck={o.rank: o.snapshot.get("in_flight", []) for o in late},
                file=cfg.prefix,
            )
        others = len([o for o in outcomes if o.rank != first.rank and o.snapshot.get("phase") != "done"])
        return ReplayError(
            f"rank {first.rank} failed at {_where(plan, first)}: {first.why()}"
            + (f" ({others} other rank(s) stopped)" if others else ""),
            file=plan.ranks[first.rank].file,
        )


def _where(plan: ReplayPlan, o: Outcome) -> str:
    rp = plan.ranks[o.rank]
    err, snap = o.error or {}, o.snapshot
    ids = err.get("nodes") or snap.get("in_flight") or []
    index = {nid: i for i, nid in enumerate(rp.ids)}
    it = err.get("iteration", snap.get("iteration"))
    if ids:
        nodes = ", ".join(rp.describe(index[n]) for n in ids if n in index)
    elif err.get("where"):
        nodes = err["where"]
    else:
        nodes = f"no node ({snap.get('phase', 'unknown')})"
    return nodes + (f" in iteration {it}" if it is not None and it >= 0 else "")
