"""Sweep shards and their aggregation: damaged shard files must stop the report, never shrink it.

A small campaign (config/smoke.yaml: 2 workloads × 4 grid points in 2-point shards) is planned,
generated and simulated in-process; then one shard file is damaged the ways a crash, a full disk or a
hand edit leaves it, and ``report aggregate`` must refuse with exit 2 naming that shard instead of
writing results that silently lack its points (it once aggregated three of these with exit 0).
"""

from __future__ import annotations

import csv
import shutil
from pathlib import Path

import pytest
import yaml
from conftest import validated
from test_robust_support import assert_clean, call_cli

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def campaign(tmp_path_factory) -> Path:
    """A planned, generated and fully simulated smoke campaign in a scratch folder (cwd-relative paths)."""
    from chakra_pipe.sweep.campaign import Campaign

    root = tmp_path_factory.mktemp("campaign")
    shutil.copytree(REPO / "config", root / "config")
    config = yaml.safe_load((root / "config" / "smoke.yaml").read_text())
    config.update(tracedir=str(root / "traces"), outdir=str(root / "reports"))
    plan = Campaign.from_config(validated(config), root=root, torch_available=False)
    plan.write(root / plan.plan_path)
    for w in plan.workloads.values():
        assert_clean(call_cli(["generate", *w.generate_args(), "--out", w.prefix]), allowed={0})
        for shard in range(len(w.shards)):
            outcome = call_cli(
                [
                    "sweep",
                    "run",
                    "--plan",
                    root / plan.plan_path,
                    "--workload",
                    w.name,
                    "--shard",
                    shard,
                    "--out",
                    plan.shard_path(w.name, shard),
                ]
            )
            assert_clean(outcome, allowed={0})
    return root


def _aggregate(root: Path, out: Path):
    plan = next((root / "reports").glob("*/data/plan.json"))
    return call_cli(["report", "aggregate", "--plan", plan, "--out-dir", out])


def _rows(path: Path) -> list[dict[str, str]]:
    with open(path, newline="") as fh:
        return list(csv.DictReader(fh))


def test_intact_shards_aggregate_to_every_point(campaign, tmp_path):
    outcome = _aggregate(campaign, tmp_path / "out")
    assert_clean(outcome, allowed={0})
    assert len(_rows(tmp_path / "out" / "results.csv")) == 8  # 2 workloads x 4 grid points


def _damage(shard: Path, how: str) -> None:
    data = shard.read_bytes()
    if how == "truncated mid-header":
        shard.write_bytes(data[:120])
    elif how == "header only":
        shard.write_bytes(data[: data.index(b"\n") + 1])
    elif how == "truncated mid-row":
        shard.write_bytes(data[: data.rindex(b"\n", 0, len(data) - 1) + 20])
    elif how == "empty":
        shard.write_bytes(b"")
    elif how == "binary":
        shard.write_bytes(b"\x00\xff\xfe garbage\n")


@pytest.mark.parametrize("how", ["truncated mid-header", "header only", "truncated mid-row", "empty", "binary"])
def test_damaged_shard_stops_aggregation_naming_the_shard(campaign, tmp_path, how):
    # the plan records the scratch campaign's absolute paths: damage its shard in place, then restore it
    shard = next((campaign / "reports").glob("*/data/shards/allgather_256KiB_8/0000.csv"))
    saved = shard.read_bytes()
    try:
        _damage(shard, how)
        outcome = _aggregate(campaign, tmp_path / "out")
    finally:
        shard.write_bytes(saved)
    assert_clean(outcome, allowed={2})
    assert "0000.csv" in outcome.stderr, outcome.stderr
    assert not (tmp_path / "out" / "results.csv").exists()


def test_aggregate_and_build_twice_give_identical_bytes(campaign, tmp_path):
    """Results, leaderboard, plots, summary and HTML report of the same shards are byte-identical."""
    plan = next((campaign / "reports").glob("*/data/plan.json"))
    outputs = []
    for run in ("one", "two"):
        out = tmp_path / run
        assert_clean(_aggregate(campaign, out), allowed={0})
        assert_clean(call_cli(["report", "build", "--plan", plan, "--out-dir", out]), allowed={0})
        outputs.append({p.relative_to(out).as_posix(): p.read_bytes() for p in sorted(out.rglob("*")) if p.is_file()})
    assert sorted(outputs[0]) == sorted(outputs[1])
    assert {"results.csv", "results.parquet", "report.html", "summary.json"} <= set(outputs[0])
    differing = [name for name in outputs[0] if outputs[0][name] != outputs[1][name]]
    assert not differing, f"report outputs differ between identical runs: {differing}"
