"""The ``--launcher`` option capture and replay share."""

from __future__ import annotations

import argparse

from .rankenv import LAUNCHERS


def add_launcher_option(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--launcher",
        choices=LAUNCHERS,
        default="auto",
        help="local: start every rank here; env: this process is one rank started by torchrun or "
        "a SLURM step; srun: start one SLURM job step with a task per rank; auto (default): "
        "env under torchrun or inside a SLURM step, else local",
    )
