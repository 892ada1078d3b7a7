"""chakra-pipe search: valid layouts only, memory verdicts, and step times equal to a campaign's."""

from __future__ import annotations

import csv
import io
import json
import subprocess
import sys
from pathlib import Path

import pytest
from campaign_files import campaign_config
from conftest import run_campaign, validated

from chakra_pipe.generate.models import PRESETS, resolve_model
from chakra_pipe.search.layouts import enumerate_layouts
from chakra_pipe.search.run import SearchSpec, search
from chakra_pipe.sweep.campaign import Campaign
from chakra_pipe.sweep.grid import expand, select_points
from chakra_pipe.sweep.shard import run_shard

REPO = Path(__file__).resolve().parent.parent
SMALL = {"layers": 4, "hidden": 512, "heads": 8, "ffn": 2048, "vocab": 1024, "seq": 256}
PLATFORMS = {
    "hgx": {
        "network": "config/hardware/hgx_h100/network.yml",
        "system": "config/hardware/hgx_h100/system.json",
        "backend": "congestion_unaware",
        "hbm_gib": 0.25,
        "cost": 8.0,
    },
    "slow": {
        "network": "config/hardware/hgx_h100/network.yml",
        "system": "config/hardware/hgx_h100/system.json",
        "backend": "congestion_unaware",
        "hbm_gib": 0.25,
        "cost": 3.0,
        "axes": {"network.bandwidth": [64]},
    },
}


def test_layouts_of_gpt3_13b_on_64_gpus():
    layouts = enumerate_layouts(PRESETS["gpt3-13b"], 64, 64, [1, 2])
    splits = {(c.dp, c.tp, c.pp) for c in layouts}
    # 40 heads and 40 layers: tp and pp each from {1, 2, 4, 8} (16, 32, 64 divide 64 but not 40).
    assert splits == {(64 // (t * p), t, p) for t in (1, 2, 4, 8) for p in (1, 2, 4, 8)}
    assert all(c.dp * c.microbatches * c.micro_batch == 64 for c in layouts)
    # b = 2 needs dp <= 32: the 64-way data-parallel split has only b = 1; each split × ZeRO 0/1 × recompute.
    assert len(layouts) == (16 + 15) * 4


def test_moe_layouts_carve_ep_out_of_dp():
    moe = resolve_model("mixtral-8x7b", layers=4)
    eps = {(c.dp, c.ep) for c in enumerate_layouts(moe, 16, 16, [1]) if c.tp == 1 and c.pp == 1}
    assert eps == {(16, 1), (16, 2), (16, 4), (16, 8)}  # ep divides dp 16 and the 8 experts


def test_every_layout_has_a_verdict_and_best_equals_a_campaign_point(tmp_path):
    points = select_points(expand(PLATFORMS, REPO), ["hgx", "slow"], 8, None)
    spec = SearchSpec(model="gpt3-13b", gpus=8, global_batch=16, micro_batches=[1, 2], options=dict(SMALL))
    rows = search(spec, points, log=io.StringIO())
    layouts = enumerate_layouts(resolve_model("gpt3-13b", **SMALL), 8, 16, [1, 2])
    assert len(rows) == 2 * len(layouts)
    verdicts = {r["verdict"].split(":")[0] for r in rows}
    assert verdicts == {"ok", "pruned", "dominated"}
    for r in rows:
        if r["verdict"].startswith("pruned"):
            assert r["mem_total_gib"] > 0.25 and f"needs {r['mem_total_gib']:.2f} GiB" in r["verdict"]
        else:
            assert r["mem_total_gib"] <= 0.25
    for point in ("hgx", "slow[bandwidth=64]"):
        ok = [r for r in rows if r["point_id"] == point and r["verdict"] == "ok"]
        assert [r["rank"] for r in ok] == list(range(1, len(ok) + 1))
        assert [r["step_time_ns"] for r in ok] == sorted(r["step_time_ns"] for r in ok)
    # The best layout on the slow network, as a campaign workload: generated to files, simulated by a shard.
    top = next(r for r in rows if r["point_id"] == "slow[bandwidth=64]" and r["rank"] == 1)
    workload = {
        "kind": "llm",
        "model": "gpt3-13b",
        **SMALL,
        "dp": top["dp"],
        "tp": top["tp"],
        "pp": top["pp"],
        "microbatches": top["microbatches"],
        "global_batch": 16,
        "zero": top["zero"],
        "recompute": top["recompute"],
    }
    config = campaign_config(tmp_path, "check", {"best": workload}, {"slow": PLATFORMS["slow"]})
    plan = Campaign.from_config(validated(config), root=REPO)
    w = plan.workloads["best"]
    subprocess.run(
        [sys.executable, "-m", "chakra_pipe.cli", "generate", *w.generate_args(), "--out", w.prefix],
        check=True,
        cwd=REPO,
        capture_output=True,
    )
    run_shard(plan, "best", 0, tmp_path / "shard.csv")
    with open(tmp_path / "shard.csv", newline="") as fh:
        (row,) = list(csv.DictReader(fh))
    assert int(row["step_time_ns"]) == top["step_time_ns"]


def test_cli_writes_tables_and_refuses_a_platform_without_that_many_gpus(tmp_path):
    import yaml

    cfg = tmp_path / "hw.yaml"
    cfg.write_text(yaml.safe_dump({"hardware": {"platforms": PLATFORMS}}))
    base = [
        sys.executable,
        "-m",
        "chakra_pipe.cli",
        "search",
        "--model",
        "gpt3-13b",
        "--config",
        str(cfg),
        "--platform",
        "hgx",
        "--global-batch",
        "8",
        *[f"--{k}={v}" for k, v in SMALL.items()],
    ]
    run = subprocess.run(
        [*base, "--gpus", "16", "--out", str(tmp_path / "x")], cwd=REPO, capture_output=True, text=True, check=False
    )
    assert run.returncode == 2 and "platform hgx has no grid point with 16 NPUs (has 8)" in run.stderr
    assert not (tmp_path / "x").exists()
    run = subprocess.run(
        [*base, "--gpus", "8", "--hbm-gib", "40", "--keep-top", "1", "--out", str(tmp_path / "o")],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=False,
    )
    assert run.returncode == 0, run.stderr
    with open(tmp_path / "o/layouts.csv", newline="") as fh:
        rows = list(csv.DictReader(fh))
    best = json.loads((tmp_path / "o/best.json").read_text())["hgx"]
    assert rows[0]["layout"] == best["layout"] and rows[0]["rank"] == "1"
    assert all(r["verdict"] in ("ok",) or r["verdict"].startswith("dominated") for r in rows)  # 40 GiB fits all
    assert (tmp_path / "o/pareto.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert (tmp_path / "o/traces" / best["layout"] / f"{best['layout']}.0.et").is_file()
    assert "| 1 | `" + best["layout"] + "`" in (tmp_path / "o/layouts.md").read_text()


@pytest.mark.slow
def test_search_section_runs_in_the_workflow_and_reports_the_best_layouts(tmp_path):
    import importlib.util

    if importlib.util.find_spec("snakemake") is None:
        pytest.skip("snakemake is not installed")
    config = {
        "campaign": "co-design",
        "capture": "never",
        "replay": "never",
        "workloads": {"ar": {"kind": "collective", "type": "all_reduce", "npus": 8, "size": "1MiB"}},
        "search": {"small": {"model": "gpt3-13b", "gpus": 8, "global_batch": 8, "platforms": ["hgx", "slow"], **SMALL}},
        "hardware": {"platforms": PLATFORMS},
    }
    run_campaign(tmp_path, config, "s")
    out = tmp_path / "reports/co-design"
    with open(out / "search/small/layouts.csv", newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert {r["point_id"] for r in rows} == {"hgx", "slow[bandwidth=64]"}
    summary = json.loads((out / "summary.json").read_text())
    for point, best in summary["searches"]["small"].items():
        first = next(r for r in rows if r["point_id"] == point)
        assert (first["rank"], first["layout"]) == ("1", best["layout"])
    assert "Parallelism search <code>small</code>" in (out / "report.html").read_text()


def test_memory_only_lists_every_layout_without_simulating():
    points = select_points(expand(PLATFORMS, REPO), ["hgx"], 8, None)
    spec = SearchSpec(
        model="gpt3-13b", gpus=8, global_batch=16, micro_batches=[1, 2], options=dict(SMALL), memory_only=True
    )
    rows = search(spec, points, log=io.StringIO())
    assert {r["verdict"].split(":")[0] for r in rows} == {"fits", "pruned", "dominated"}
    assert all(r.get("step_time_ns") is None and r.get("rank") is None for r in rows)


def test_a_search_whose_platform_cannot_host_it_fails_when_planned():
    from chakra_pipe.errors import ConfigError

    config = {
        "campaign": "c",
        "capture": "never",
        "replay": "never",
        "workloads": {"ar": {"kind": "collective", "type": "all_reduce", "npus": 8, "size": "1MiB"}},
        "search": {"big": {"model": "gpt3-13b", "gpus": 64, "platforms": ["hgx"]}},
        "hardware": {"platforms": PLATFORMS},
    }
    with pytest.raises(ConfigError, match=r"search\.big\.platforms: platform hgx has no grid point with 64 NPUs"):
        Campaign.from_config(validated(config), root=REPO)
    config["search"]["big"]["gpus"] = 8
    plan = Campaign.from_config(validated(config), root=REPO)
    assert plan.search_args("big") == ["--model", "gpt3-13b", "--gpus", "8", "--platform", "hgx"]
    assert plan.search_files()[0] == "reports/c/search/big/layouts.parquet"
