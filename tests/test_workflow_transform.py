"""The campaign workflow runs transform variants: one job per axis combination, results grouped by transform."""

from __future__ import annotations

import csv
import importlib.util
from pathlib import Path

import pytest
from conftest import run_campaign

REPO = Path(__file__).resolve().parent.parent

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(importlib.util.find_spec("snakemake") is None, reason="snakemake is not installed"),
]

CONFIG = {
    "campaign": "what-if",
    "shard_size": 4,
    "capture": "never",
    "replay": "never",
    "workloads": {
        "ar4": {
            "kind": "collective",
            "type": "all_reduce",
            "npus": 4,
            "size": "1MiB",
            "transforms": [{"dp": {"to": 8}}, {"straggler": {"ranks": [3], "delay": [0, 1000000]}}],
        }
    },
    "hardware": {
        "platforms": {
            "hgx": {
                "network": "config/hardware/hgx_h100/network.yml",
                "system": "config/hardware/hgx_h100/system.json",
                "backend": "congestion_unaware",
                "axes": {"network.npus_count": [4, 8], "network.bandwidth": [400]},
            }
        }
    },
}


def test_transform_variants_run_and_report_their_op_chain(tmp_path):
    run_campaign(tmp_path, CONFIG, "what-if")
    with open(tmp_path / "reports/what-if/results.csv", newline="") as fh:
        rows = {r["workload"]: r for r in csv.DictReader(fh)}
    assert {w: r["transform"] for w, r in rows.items()} == {
        "ar4": "",
        "ar4.straggler.delay-0": "dp --to 8 | straggler --ranks 3 --delay 0",
        "ar4.straggler.delay-1000000": "dp --to 8 | straggler --ranks 3 --delay 1000000",
    }
    assert rows["ar4"]["npus"] == "4" and rows["ar4.straggler.delay-0"]["npus"] == "8"
    # A 4-rank all-reduce widened to 8 costs what an 8-rank one does (spec §7.5: 55,222 ns on this
    # switch), and the straggler's delay lands on the step time exactly.
    assert rows["ar4.straggler.delay-0"]["step_time_ns"] == "55222"
    assert int(rows["ar4.straggler.delay-1000000"]["step_time_ns"]) == 55_222 + 1_000_000
    stats = tmp_path / "traces/what-if/ar4.straggler.delay-0/et/ar4.straggler.delay-0.transform_stats.json"
    assert stats.is_file()
