"""Campaign configs and outputs written by hand for tests: a config, shard rows, a capture and a replay result.

Why: the report, fidelity and aggregate tests need a campaign whose jobs "ran" without running them;
one writer keeps their files in the form the workflow writes (``SHARD_COLUMNS``, ``capture.json``,
the replay result), so a change of that form is made once.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from chakra_pipe.results.csvtext import rows_csv
from chakra_pipe.results.schema import NS_METRICS, SHARD_COLUMNS


def campaign_config(tmp_path: Path, name: str, workloads: dict, platforms: dict, **extra: Any) -> dict:
    """A campaign config over generated or existing traces (no capture, no replay) whose traces and
    reports go under ``tmp_path``; ``extra`` adds or replaces top-level keys."""
    return {
        "campaign": name,
        "tracedir": str(tmp_path / "traces"),
        "outdir": str(tmp_path / "reports"),
        "capture": "never",
        "replay": "never",
        "workloads": workloads,
        "hardware": {"platforms": platforms},
        **extra,
    }


def simulated_row(campaign: str, workload: str, point_id: str, platform: str, npus: int, step_ns: int) -> dict:
    """A successful simulated shard row: the step time given, every other ns metric 0."""
    return {
        "campaign": campaign,
        "workload": workload,
        "source": "simulated",
        "point_id": point_id,
        "platform": platform,
        "backend": "congestion_unaware",
        "npus": npus,
        "status": "ok",
        "step_time_ns": step_ns,
        "trace_sha256": "cd" * 32,
        **dict.fromkeys(NS_METRICS[1:], 0),
    }


def write_shard(camp, workload: str, index: int, rows: list[dict]) -> Path:
    """Shard ``index`` of ``workload`` with ``rows`` (parents created)."""
    path = Path(camp.shard_path(workload, index))
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(rows_csv(rows, SHARD_COLUMNS))
    return path


def write_measured(camp, workload: str, capture: dict[str, Any], replay: dict[str, Any]) -> Path:
    """``workload``'s capture summary and replay result; returns the replay path (tests rewrite it)."""
    directory = Path(camp.capture_dir(workload))
    directory.mkdir(parents=True)
    (directory / "capture.json").write_text(json.dumps(capture))
    path = Path(camp.replay_path(workload))
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps(replay))
    return path
