"""Names of a capture's per-rank files (the launcher gathers them, the runner moves them into DIR)."""

from __future__ import annotations

from pathlib import Path


def host_path(out: Path, rank: int) -> Path:
    return out / f"rank{rank}.host_et.json.gz"


def kineto_path(out: Path, rank: int) -> Path:
    return out / f"rank{rank}.kineto.json.gz"


def times_path(out: Path, rank: int) -> Path:
    return out / f"times{rank}.json"
