"""A measured platform (``calibrate:``): planned before its files exist, simulated on what the calibrate
stage wrote, refused where it cannot work, and compared with the captured step in summary.json."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from campaign_files import simulated_row, write_measured, write_shard
from conftest import validated
from test_sweep_grid import SYSTEM

from chakra_pipe.calibrate.fit import Platform
from chakra_pipe.calibrate.report import _yaml
from chakra_pipe.errors import ConfigError, InputError
from chakra_pipe.et import TraceSet
from chakra_pipe.generate.collective import CollectiveSpec, generate_collective
from chakra_pipe.report.aggregate import aggregate
from chakra_pipe.report.build import build
from chakra_pipe.sim import load_hardware, simulate
from chakra_pipe.sweep.campaign import Campaign
from chakra_pipe.sweep.shard import run_shard

CALIBRATED = Platform("Ring", 2, 0.75, 12_000.0, 30_000, 3.5, {"all_reduce": "direct"})


def _config(tmp_path: Path, **measured) -> dict:
    (tmp_path / "net.yml").write_text("topology: [Switch]\nnpus_count: [2]\nbandwidth: [50]\nlatency: [500]\n")
    (tmp_path / "sys.json").write_text(json.dumps(SYSTEM))
    generate_collective(CollectiveSpec("all_reduce", 2, 1 << 20), tmp_path / "ar")
    return {
        "campaign": "m1",
        "outdir": str(tmp_path / "reports"),
        "tracedir": str(tmp_path / "traces"),
        "workloads": {
            "ar": {"kind": "trace", "prefix": str(tmp_path / "ar"), "npus": 2},
            "cap": {"kind": "capture", "model": "mlp", "ranks": 2, "steps": 1},
        },
        "hardware": {
            "baseline": "p",
            "platforms": {
                "p": {"network": "net.yml", "system": "sys.json"},
                "here": {
                    "calibrate": {"ranks": 2, "backend": "gloo", "max_size": "1MiB", "iterations": 3, "load": "gemm"},
                    **measured,
                },
            },
        },
    }


def _write_calibration(camp: Campaign) -> Path:
    folder = Path(camp.calibrate_dir("here"))
    folder.mkdir(parents=True)
    (folder / "network.yml").write_text(_yaml(CALIBRATED.network()))
    (folder / "system.json").write_text(json.dumps(CALIBRATED.system()))
    return folder


def test_plan_names_the_calibrate_outputs_and_the_shards_take_them(tmp_path):
    camp = Campaign.from_config(validated(_config(tmp_path)), root=tmp_path, torch_available=True)
    point = camp.points["here"]
    folder = f"{tmp_path}/reports/m1/data/calibrate/here"
    assert (point.npus, point.calibrated, point.network, point.system) == (2, folder, None, None)
    assert camp.calibrate_args("here") == [
        "--ranks",
        "2",
        "--backend",
        "gloo",
        "--max-size",
        "1MiB",
        "--iterations",
        "3",
        "--load",
        "gemm",
    ]
    assert camp.workloads["ar"].shards == [["p", "here"]]
    assert camp.shard_calibrations("ar", 0) == [f"{folder}/network.yml", f"{folder}/system.json"]
    camp.write()
    assert Campaign.load(camp.plan_path).points["here"].network is None  # not calibrated yet: still plannable
    # the shard job: without the files, an error naming the missing one; with them, simulated on them
    out = tmp_path / "shard.csv"
    with pytest.raises(InputError, match="network.yml is missing"):
        run_shard(Campaign.load(camp.plan_path), "ar", 0, out)
    _write_calibration(camp)
    loaded = Campaign.load(camp.plan_path)
    assert loaded.points["here"].network == CALIBRATED.network()
    assert run_shard(loaded, "ar", 0, out) == 0
    rows = {r.split(",")[3]: r for r in out.read_text().splitlines()[1:]}
    hw = load_hardware(Path(folder) / "system.json", Path(folder) / "network.yml")
    expected = max(simulate(TraceSet.load(str(tmp_path / "ar")), hw).finish_ns)
    header = out.read_text().splitlines()[0].split(",")
    here = dict(zip(header, rows["here"].split(",")))
    assert (here["topology"], here["bandwidth_gbps"], here["status"]) == ("Ring", "0.75", "ok")
    assert int(here["step_time_ns"]) == expected
    p = dict(zip(header, rows["p"].split(",")))
    assert int(p["step_time_ns"]) != expected  # the file platform is a different machine


def test_calibrated_files_for_another_rank_count_are_refused(tmp_path):
    camp = Campaign.from_config(validated(_config(tmp_path)), root=tmp_path, torch_available=True)
    folder = _write_calibration(camp)
    (folder / "network.yml").write_text(_yaml({**CALIBRATED.network(), "npus_count": [4]}))
    camp.write()
    with pytest.raises(InputError, match="calibrated for 4 NPUs, the plan expects 2"):
        Campaign.load(camp.plan_path)


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ({"network": "net.yml"}, "is valid under each of|is not valid under any"),
        ({"axes": {"network.bandwidth": [1, 2]}}, "can vary only backend and cost"),
    ],
)
def test_a_measured_platform_takes_no_files_and_no_key_overrides(tmp_path, extra, message):
    from snakemake.exceptions import WorkflowError

    with pytest.raises((ConfigError, WorkflowError), match=message):
        Campaign.from_config(validated(_config(tmp_path, **extra)), root=tmp_path, torch_available=True)


def test_measured_platform_grid_varies_backend_and_cost(tmp_path):
    cfg = _config(tmp_path, axes={"backend": ["congestion_unaware", "congestion_aware"]}, cost=2.0)
    camp = Campaign.from_config(validated(cfg), root=tmp_path, torch_available=True)
    ids = [p for p in camp.points if camp.points[p].platform == "here"]
    assert ids == ["here[backend=congestion_unaware]", "here[backend=congestion_aware]"]
    assert {camp.points[p].cost for p in ids} == {2.0}


def test_a_search_cannot_plan_on_a_measured_platform(tmp_path):
    cfg = _config(tmp_path)
    cfg["search"] = {"s": {"model": "llama3-8b", "gpus": 2, "platforms": ["here"], "hbm_gib": 80}}
    with pytest.raises(ConfigError, match="measured"):
        Campaign.from_config(validated(cfg), root=tmp_path, torch_available=True)


def test_summary_and_plot_compare_the_capture_with_the_calibrated_point(tmp_path):
    camp = Campaign.from_config(validated(_config(tmp_path)), root=tmp_path, torch_available=True)
    camp.write()
    _write_calibration(camp)
    camp = Campaign.load(camp.plan_path)
    step = {"p": 1_000_000, "here": 3_000_000}
    for name, w in camp.workloads.items():
        rows = [simulated_row("m1", name, pid, camp.points[pid].platform, 2, step[pid]) for pid in w.shards[0]]
        write_shard(camp, name, 0, rows)
    write_measured(
        camp,
        "cap",
        {"backend": "gloo", "steps": 1, "median_step_time_ms_untraced": 2.5},
        {"step_time_ns": {"median": 4e6, "per_iteration": [4e6]}, "environment": {}},
    )
    info = build(camp, aggregate(camp, commit="x"), camp.report_dir)
    # the calibrated point, not the baseline p, is this machine: 3.0 ms vs 2.5 ms captured, 4.0 ms replayed
    assert info["fidelity"] == {
        "cap": {
            "simulated_point": "here",
            "calibrated": True,
            "captured_ns": 2_500_000,
            "replayed_ns": 4_000_000,
            "simulated_ns": 3_000_000,
            "rel_error_vs_captured": 0.2,
            "rel_error_vs_replayed": -0.25,
        }
    }
    assert json.loads((Path(camp.report_dir) / "summary.json").read_text())["fidelity"] == info["fidelity"]
    png = Path(camp.report_dir) / "plots" / "fidelity.png"
    assert png.stat().st_size > 10_000  # a drawn chart, not the "nothing to compare" placeholder


def test_without_torch_the_measured_platform_is_skipped_with_a_note(tmp_path):
    cfg = _config(tmp_path)
    cfg["hardware"]["baseline"] = ["here", "p"]
    del cfg["workloads"]["cap"]
    camp = Campaign.from_config(validated(cfg), root=tmp_path, torch_available=False)
    assert list(camp.points) == ["p"] and camp.calibrations == {}
    assert camp.workloads["ar"].shards == [["p"]] and camp.workloads["ar"].baseline == "p"
    assert "measured platforms here skipped: PyTorch is not installed" in camp.notes
