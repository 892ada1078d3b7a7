"""Who this process is when someone else started it: torchrun's or SLURM's environment.

torchrun (and mpirun wrappers, Kubernetes' PyTorchJob) export ``RANK``/``WORLD_SIZE``/``LOCAL_RANK``/
``MASTER_ADDR``/``MASTER_PORT``; a SLURM step exports ``SLURM_PROCID``/``SLURM_NTASKS``/
``SLURM_LOCALID``/``SLURM_STEP_NODELIST``, and the step's first node is the master.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

from ..errors import InputError
from .hostlist import expand

LAUNCHERS = ("auto", "local", "env", "srun")
_TORCHRUN = ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")
_SLURM_STEP = ("SLURM_STEP_ID", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_STEP_NODELIST")
# A port every task of one SLURM step derives alike without talking to the others: the job and
# step ids spread concurrent steps on one node over this range (MASTER_PORT overrides it).
_PORT_BASE, _PORT_SPAN = 20000, 20000


@dataclass(frozen=True)
class RankEnv:
    rank: int
    world_size: int
    local_rank: int
    master_addr: str
    master_port: int
    agent_store: bool  # torchrun's agent already hosts the store at master_addr:master_port
    source: str  # "torchrun" or "slurm", for messages


def resolve(launcher: str, environ: Mapping[str, str] | None = None) -> str:
    """``auto`` is ``env`` under torchrun or inside a SLURM step of several tasks, else ``local``.

    A one-task step (``srun -n1``, the step Snakemake's SLURM executor wraps each job in) is a
    workstation for this purpose: its one process starts every rank.
    """
    if launcher not in LAUNCHERS:
        raise InputError(f"unknown launcher {launcher!r}; choose {', '.join(LAUNCHERS)}", where="--launcher")
    if launcher != "auto":
        return launcher
    env = os.environ if environ is None else environ
    if _under_torchrun(env):
        return "env"
    return "env" if _in_slurm_step(env) and env.get("SLURM_NTASKS", "1") != "1" else "local"


def device_sharers(mode: str, world: int, environ: Mapping[str, str] | None = None) -> int:
    """How many ranks share the GPUs this process sees, which ``auto`` must cover to pick NCCL.

    Started here (``local``): every rank. Under torchrun: the node's local ranks — torchrun binds no
    GPU, so they all see every GPU of the node (4 ranks on a 1-GPU machine picked NCCL and failed
    in its initialisation). In a SLURM step: one — our ``srun`` binds a GPU to each task
    (``--gpu-bind=single:1``).
    """
    if mode == "local":
        return world
    env = os.environ if environ is None else environ
    return _int(env, "LOCAL_WORLD_SIZE", "1") if _under_torchrun(env) else 1


def from_environ(environ: Mapping[str, str] | None = None) -> RankEnv:
    """This rank's place, or an InputError naming the variables that are missing."""
    env = os.environ if environ is None else environ
    if _under_torchrun(env):
        rank, world = _int(env, "RANK"), _int(env, "WORLD_SIZE")
        return _checked(
            RankEnv(
                rank,
                world,
                _int(env, "LOCAL_RANK", str(rank)),
                env["MASTER_ADDR"],
                _int(env, "MASTER_PORT"),
                env.get("TORCHELASTIC_USE_AGENT_STORE", "").lower() == "true",
                "torchrun",
            )
        )
    if _in_slurm_step(env):
        hosts = expand(env["SLURM_STEP_NODELIST"])
        port = (
            _int(env, "MASTER_PORT")
            if "MASTER_PORT" in env
            else _PORT_BASE + (_int(env, "SLURM_JOB_ID", "0") * 131 + _int(env, "SLURM_STEP_ID")) % _PORT_SPAN
        )
        return _checked(
            RankEnv(
                _int(env, "SLURM_PROCID"),
                _int(env, "SLURM_NTASKS"),
                _int(env, "SLURM_LOCALID", "0"),
                hosts[0],
                port,
                False,
                "slurm",
            )
        )
    raise InputError(
        "--launcher env needs torchrun's RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT or a SLURM "
        "step's SLURM_PROCID, SLURM_NTASKS and SLURM_STEP_NODELIST in the environment",
        where="--launcher",
    )


def _under_torchrun(env: Mapping[str, str]) -> bool:
    return all(k in env for k in _TORCHRUN)


def _in_slurm_step(env: Mapping[str, str]) -> bool:
    return all(k in env for k in _SLURM_STEP)


def _int(env: Mapping[str, str], key: str, default: str | None = None) -> int:
    text = env.get(key, default)
    try:
        return int(text)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise InputError(f"{key}={text!r} is not an integer", where=key) from None


def _checked(r: RankEnv) -> RankEnv:
    if not 0 <= r.rank < r.world_size:
        raise InputError(f"rank {r.rank} is outside a world of {r.world_size}", where="--launcher env")
    if not 0 < r.master_port < 65536:
        raise InputError(f"port {r.master_port} is not a TCP port", where="MASTER_PORT")
    return r
