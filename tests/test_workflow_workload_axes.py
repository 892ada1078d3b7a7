"""Workload axes: generate options swept as a cartesian product, tied to each platform's NPU count."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
from conftest import run_campaign, validated
from snakemake.exceptions import WorkflowError

from chakra_pipe.sweep.campaign import Campaign

REPO = Path(__file__).resolve().parent.parent

PLATFORMS = {
    "node8": {
        "network": "config/hardware/hgx_h100/network.yml",
        "system": "config/hardware/hgx_h100/system.json",
        "backend": "congestion_unaware",
    },
    "node4": {
        "network": "config/hardware/hgx_h100/network.yml",
        "system": "config/hardware/hgx_h100/system.json",
        "backend": "congestion_unaware",
        "axes": {"network.npus_count": [4]},
    },
}
CONFIG = {
    "campaign": "layouts",
    "capture": "never",
    "replay": "never",
    "workloads": {
        "gpt": {
            "kind": "llm",
            "model": "gpt3-13b",
            "layers": 4,
            "hidden": 512,
            "heads": 8,
            "ffn": 2048,
            "vocab": 1024,
            "seq": 256,
            "dp": "auto",
            "global_batch": 8,
            "axes": {"tp": [2, 4, 8], "pp": [1, 2, 4], "microbatches": [4, 8]},
        }
    },
    "hardware": {"platforms": PLATFORMS},
}


def _plan(config):
    return Campaign.from_config(validated(config), root=REPO)


def test_axes_expand_per_npu_count_and_skip_with_reasons():
    plan = _plan(CONFIG)
    ran = {w.name: (w.npus, w.spec["platforms"]) for w in plan.workloads.values()}
    skipped = {(k["workload"], k["platform"]): k["reason"] for k in plan.skipped}
    # Every combination is either simulated on a platform or skipped there with a reason: 18 per NPU count.
    per_platform = {pl: sum(pl in p for _, p in ran.values()) + sum(s[1] == pl for s in skipped) for pl in PLATFORMS}
    assert per_platform == {"node8": 18, "node4": 18}
    # tp 2 · pp 2 on 8 NPUs leaves dp 2: 2 · 4 microbatches = 8 sequences, the global batch.
    assert ran["gpt.tp-2.pp-2.microbatches-4.dp-2"] == (8, ["node8"])
    assert ran["gpt.tp-2.pp-2.microbatches-4.dp-1"] == (4, ["node4"])
    assert skipped[("gpt.tp-8.pp-1.microbatches-4.npus-4", "node4")] == "tp·pp = 8 does not divide 4 NPUs"
    assert (
        "not a positive multiple of dp × microbatches = 16" in skipped[("gpt.tp-2.pp-1.microbatches-4.dp-4", "node8")]
    )
    # Skips are notes of the plan, so the report lists them.
    assert "skipped gpt.tp-8.pp-1.microbatches-4.npus-4 on node4: tp·pp = 8 does not divide 4 NPUs" in plan.notes
    w = plan.workloads["gpt.tp-2.pp-2.microbatches-4.dp-2"]
    assert (
        w.generate_args()
        == (
            "llm --model gpt3-13b --layers 4 --hidden 512 --heads 8 --ffn 2048 --vocab 1024 "
            "--seq 256 --dp 2 --tp 2 --pp 2 --microbatches 4 --global-batch 8"
        ).split()
    )


def test_fixed_world_that_matches_no_platform_is_skipped_not_failed():
    config = {
        **CONFIG,
        "workloads": {"g": {"kind": "llm", "model": "gpt3-13b", "layers": 2, "dp": 1, "axes": {"tp": [4, 8]}}},
    }
    plan = _plan(config)
    assert list(plan.workloads) == ["g.tp-4", "g.tp-8"]
    assert plan.workloads["g.tp-8"].spec["platforms"] == ["node8"]
    assert {(k["workload"], k["platform"]) for k in plan.skipped} == {("g.tp-4", "node8"), ("g.tp-8", "node4")}
    assert (
        next(k["reason"] for k in plan.skipped if k["workload"] == "g.tp-8")
        == "world size dp 1·tp 8·pp 1 = 8 matches no point of node4 (NPUs: 4)"
    )


def test_collective_axes_and_bad_axis_names():
    config = {
        **CONFIG,
        "workloads": {
            "c": {
                "kind": "collective",
                "type": "all_reduce",
                "npus": "auto",
                "axes": {"size": ["1MiB", "2MiB"], "iterations": [1, 2]},
            }
        },
    }
    plan = _plan(config)
    assert (
        plan.workloads["c.size-2MiB.iterations-2.npus-4"].generate_args()
        == "collective --type all_reduce --npus 4 --size 2MiB --iterations 2".split()
    )
    assert len(plan.workloads) == 8 and not plan.skipped
    bad = {
        **CONFIG,
        "workloads": {
            "c": {"kind": "collective", "type": "all_reduce", "npus": 8, "size": "1MiB", "axes": {"bandwidth": [1, 2]}}
        },
    }
    with pytest.raises(WorkflowError, match="'bandwidth' was unexpected"):  # the schema names it before any job
        _plan(bad)


@pytest.mark.slow
def test_workload_axes_run_through_snakemake(tmp_path):
    small = {
        **CONFIG,
        "workloads": {
            "gpt": {**CONFIG["workloads"]["gpt"], "axes": {"tp": [2, 4, 8], "pp": [1, 2], "microbatches": [4]}}
        },
    }
    run_campaign(tmp_path, small, "layouts")
    with open(tmp_path / "reports/layouts/results.csv", newline="") as fh:
        rows = {(r["workload"], r["platform"]): r for r in csv.DictReader(fh)}
    plan = json.loads((tmp_path / "reports/layouts/data/plan.json").read_text())
    assert set(rows) == {(w, s["platforms"][0]) for w, s in ((n, v["spec"]) for n, v in plan["workloads"].items())}
    assert all(r["status"] == "ok" and int(r["step_time_ns"]) > 0 for r in rows.values())
    summary = json.loads((tmp_path / "reports/layouts/summary.json").read_text())
    assert len(plan["skipped"]) == 12 - len(rows)
    assert all(
        f"skipped {k['workload']} on {k['platform']}: {k['reason']}" in summary["notes"] for k in plan["skipped"]
    )
