"""The workflow's calibrate stage: a tiny campaign whose measured platform is fitted on this machine
(gloo, 2 ranks, three sizes) and whose captured model is simulated on it and compared in summary.json."""

from __future__ import annotations

import csv
import importlib.util
import json

import pytest
from conftest import run_campaign

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(importlib.util.find_spec("snakemake") is None, reason="snakemake is not installed"),
    pytest.mark.skipif(
        importlib.util.find_spec("torch") is None,
        reason="calibrate and capture need the torch extra (pip install -e '.[torch]')",
    ),
]

CONFIG = {
    "campaign": "measured",
    "capture": "always",
    "replay": "always",
    "replay_iterations": 1,
    "workloads": {"mlp_2r": {"kind": "capture", "model": "mlp", "ranks": 2, "steps": 1}},
    "hardware": {
        "baseline": "hgx_2",
        "platforms": {
            "hgx": {
                "network": "config/hardware/hgx_h100/network.yml",
                "system": "config/hardware/hgx_h100/system.json",
                "points": [{"id": "hgx_2", "set": {"network.npus_count": 2}}],
            },
            "here": {
                "calibrate": {
                    "ranks": 2,
                    "backend": "gloo",
                    "min_size": "64KiB",
                    "max_size": "1MiB",
                    "fit_min_size": "256KiB",
                    "iterations": 3,
                    "warmup": 1,
                }
            },
        },
    },
}


def test_captured_model_is_simulated_on_the_platform_calibrated_here(tmp_path):
    run_campaign(tmp_path, CONFIG, "measured")
    data = tmp_path / "reports/measured/data"
    fit = json.loads((data / "calibrate/here/fit.json").read_text())
    assert fit["ranks"] == 2 and fit["backend"] == "gloo" and fit["sizes_bytes"] == [65536, 262144, 1048576]
    assert (data / "logs/calibrate/here.log").is_file()
    with open(tmp_path / "reports/measured/results.csv", newline="") as fh:
        rows = {(r["source"], r["point_id"]): r for r in csv.DictReader(fh)}
    here = rows[("simulated", "here")]
    assert here["status"] == "ok" and here["topology"] == fit["platform"]["topology"]
    assert float(here["bandwidth_gbps"]) == fit["platform"]["bandwidth_gbps"]
    assert int(here["step_time_ns"]) != int(rows[("simulated", "hgx_2")]["step_time_ns"])
    summary = json.loads((tmp_path / "reports/measured/summary.json").read_text())
    f = summary["fidelity"]["mlp_2r"]
    assert f["simulated_point"] == "here" and f["calibrated"] is True
    assert f["simulated_ns"] == int(here["step_time_ns"])
    assert f["captured_ns"] == int(rows[("captured", "")]["step_time_ns"])
    assert f["replayed_ns"] == int(rows[("replayed", "")]["step_time_ns"])
    assert f["rel_error_vs_captured"] == round(f["simulated_ns"] / f["captured_ns"] - 1, 4)
