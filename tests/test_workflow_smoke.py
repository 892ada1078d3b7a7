"""The Snakemake workflow end to end on config/smoke.yaml: locally, and through cluster submissions.

Runs in a scratch working directory (``snakemake -s workflow/Snakefile -d DIR``) with a copy of config/, so the
checkout's traces/ and reports/ are never touched. Expected step times are the spec's HGX-H100 numbers
for a 1 MiB all-reduce on 8 NPUs (astra-sim-semantics.md §7.5): 55,222 ns congestion-unaware and
57,426 ns congestion-aware at 400 GB/s.
"""

from __future__ import annotations

import csv
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from conftest import validated
from processes import snakemake_cmd, workflow_env

from chakra_pipe.sweep.campaign import Campaign

REPO = Path(__file__).resolve().parent.parent
SNAKEFILE = REPO / "workflow" / "Snakefile"

pytestmark = pytest.mark.slow
OUTPUTS = [
    "results.parquet",
    "results.csv",
    "leaderboard.md",
    "leaderboard.csv",
    "summary.json",
    "report.html",
    "plots/step_time_vs_bandwidth.png",
    "plots/breakdown.png",
    "plots/pareto_cost_time.png",
    "plots/fidelity.png",
]


def _workdir(tmp: Path) -> Path:
    shutil.copytree(REPO / "config", tmp / "config")
    return tmp


def snakemake(workdir: Path, *args: str, timeout: int = 300) -> subprocess.CompletedProcess:
    cmd = snakemake_cmd(workdir, "config/smoke.yaml", *args)
    return subprocess.run(cmd, cwd=workdir, env=workflow_env(), capture_output=True, text=True, timeout=timeout)


def _job_counts(output: str) -> dict[str, int]:
    stats = output.split("Job stats:")[-1]
    return {m.group(1): int(m.group(2)) for m in re.finditer(r"^(\w+)\s+(\d+)$", stats, re.M)}


def _results(workdir: Path) -> dict[tuple[str, str], dict[str, str]]:
    with open(workdir / "reports/smoke/results.csv", newline="") as fh:
        return {(r["workload"], r["point_id"]): r for r in csv.DictReader(fh)}


@pytest.fixture(scope="module")
def local_run(tmp_path_factory) -> Path:
    workdir = _workdir(tmp_path_factory.mktemp("smoke"))
    run = snakemake(workdir, "--cores", "2")
    assert run.returncode == 0, run.stderr[-3000:]
    return workdir


def test_smoke_campaign_produces_every_output(local_run):
    for name in OUTPUTS:
        assert (local_run / "reports/smoke" / name).stat().st_size > 0, name
    rows = _results(local_run)
    assert len(rows) == 8  # 2 workloads x 4 grid points
    ar = "allreduce_1MiB_8"
    assert rows[(ar, "hgx_h100[bandwidth=400,backend=congestion_unaware]")]["step_time_ns"] == "55222"
    assert rows[(ar, "hgx_h100[bandwidth=400,backend=congestion_aware]")]["step_time_ns"] == "57426"
    assert float(rows[(ar, "hgx_h100[bandwidth=400,backend=congestion_unaware]")]["speedup"]) == 1.0
    assert all(r["status"] == "ok" and len(r["trace_sha256"]) == 64 for r in rows.values())
    standing = (local_run / "reports/leaderboard.csv").read_text().splitlines()
    assert len(standing) == 9 and all(line.endswith(",2026-01-01") for line in standing[1:])


def test_second_run_does_nothing_and_a_deleted_shard_alone_reruns(local_run):
    dry = snakemake(local_run, "-n")
    assert dry.returncode == 0 and "Nothing to be done" in dry.stdout + dry.stderr
    results = (local_run / "reports/smoke/results.csv").read_bytes()
    standing = (local_run / "reports/leaderboard.csv").read_bytes()
    (local_run / "reports/smoke/data/shards/allgather_256KiB_8/0001.csv").unlink()
    rerun = snakemake(local_run, "--cores", "2")
    assert rerun.returncode == 0, rerun.stderr[-3000:]
    counts = _job_counts(rerun.stdout + rerun.stderr)
    assert counts.get("simulate_shard") == 1 and "generate" not in counts and "validate" not in counts
    # same inputs, same bytes; the standing board neither duplicates nor re-dates unchanged rows
    assert (local_run / "reports/smoke/results.csv").read_bytes() == results
    assert (local_run / "reports/leaderboard.csv").read_bytes() == standing


def test_generated_sets_stay_in_memory_unless_kept(local_run, tmp_path):
    """The smoke campaign's generated sets were simulated in memory: no rank file, no generate or
    validate job. With ``keep_traces: true`` the files are written and validated first, and the
    results are the same but for the config digest."""
    assert not list(local_run.glob("traces/**/*.et"))
    workdir = _workdir(tmp_path)
    config = yaml.safe_load((workdir / "config/smoke.yaml").read_text())
    for spec in config["workloads"].values():
        spec["keep_traces"] = True
    (workdir / "config/kept.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    cmd = snakemake_cmd(workdir, "config/kept.yaml", "--cores", "2")
    run = subprocess.run(cmd, cwd=workdir, env=workflow_env(), capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    counts = _job_counts(run.stdout + run.stderr)
    assert counts["generate"] == counts["validate"] == 2, counts
    assert len(list(workdir.glob("traces/smoke/*/et/*.et"))) == 16
    kept, memory = _results(workdir), _results(local_run)
    assert kept.keys() == memory.keys()
    for key, row in kept.items():
        assert row.pop("config_sha256") != memory[key].pop("config_sha256")
        assert row == memory[key], key


def test_snakemake_report_has_every_plot_with_its_caption(local_run, tmp_path):
    import zipfile

    out = tmp_path / "report.zip"
    run = snakemake(local_run, "--report", str(out))
    assert run.returncode == 0, run.stderr[-3000:]
    names = zipfile.ZipFile(out).namelist()
    for plot in (
        "step_time_vs_bandwidth.png",
        "breakdown.png",
        "pareto_cost_time.png",
        "fidelity.png",
        "leaderboard.csv",
        "results.csv",
        "summary.json",
        "report.html",
    ):
        assert any(n.endswith(plot) for n in names), plot
    captions = (REPO / "workflow" / "report").glob("*.rst")
    assert {c.stem for c in captions} >= {"step_time_vs_bandwidth", "breakdown", "pareto_cost_time", "fidelity"}


def _default_campaign(workdir: Path, **overrides) -> Campaign:
    """The default campaign as the Snakefile plans it here (capture and replay follow torch)."""
    config = yaml.safe_load((workdir / "config/config.yaml").read_text())
    return Campaign.from_config(validated({**config, **overrides}), root=workdir)


def test_lint_and_dry_run_of_default_config(tmp_path):
    workdir = _workdir(tmp_path)
    base = [sys.executable, "-m", "snakemake", "-s", str(SNAKEFILE), "-d", str(workdir)]
    lint = subprocess.run(
        [*base, "--lint"], cwd=workdir, env=workflow_env(), capture_output=True, text=True, timeout=120
    )
    assert lint.returncode == 0 and "Congratulations" in lint.stdout + lint.stderr, lint.stdout + lint.stderr
    dry = subprocess.run([*base, "-n"], cwd=workdir, env=workflow_env(), capture_output=True, text=True, timeout=120)
    assert dry.returncode == 0, dry.stderr[-3000:]
    counts = _job_counts(dry.stdout + dry.stderr)
    campaign = _default_campaign(workdir)
    assert counts.get("generate", 0) == len(campaign.written())
    assert counts["validate"] == sum(not w.in_memory for w in campaign.workloads.values())
    assert counts["simulate_shard"] == len(campaign.shard_files()) and counts["report"] == 1
    assert counts.get("link", 0) == sum(w.npus for w in campaign.workloads.values() if w.kind == "capture")
    # neither the lint nor the dry run wrote anything beside Snakemake's own metadata
    assert sorted(p.name for p in workdir.iterdir()) == [".snakemake", "config"]


def test_a_configfile_with_one_key_merges_over_the_default_config(tmp_path):
    workdir = _workdir(tmp_path)
    (workdir / "one_key.yaml").write_text("shard_size: 1\n")
    dry = subprocess.run(
        snakemake_cmd(workdir, "one_key.yaml", "-n"),
        cwd=workdir,
        env=workflow_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert dry.returncode == 0, dry.stderr[-3000:]
    campaign = _default_campaign(workdir, shard_size=1)
    assert _job_counts(dry.stdout + dry.stderr)["simulate_shard"] == len(campaign.shard_files())
    assert all(len(shard) == 1 for w in campaign.workloads.values() for shard in w.shards)


def test_bad_config_key_fails_before_any_job(tmp_path):
    workdir = _workdir(tmp_path)
    smoke = workdir / "config/smoke.yaml"
    smoke.write_text(smoke.read_text().replace("shard_size: 2", "shard_sise: 2"))
    run = snakemake(workdir, "--cores", "2")
    assert run.returncode != 0
    assert "shard_sise" in run.stdout + run.stderr
    assert not (workdir / "traces").exists() and not (workdir / "reports").exists()
    smoke.write_text(
        smoke.read_text()
        .replace("shard_sise: 2", "shard_size: 2")
        .replace("network.bandwidth: [200, 400]", "network.bandwith: [200, 400]")
    )
    run = snakemake(workdir, "--cores", "2")
    assert run.returncode != 0
    message = "hardware.platforms.hgx_h100.axes.network.bandwith: unknown network key 'bandwith'"
    assert message in run.stdout + run.stderr


SUBMIT = """#!/bin/bash
# Local stand-in for a cluster's submit command: log the submission, run the job script detached,
# print a job id. Snakemake then waits for the script's own finished/failed marker files.
echo "$1" >> "{log}"
nohup bash "$1" > /dev/null 2>&1 &
echo "local-$!"
"""


def test_cluster_generic_executor_submits_every_job(local_run, tmp_path):
    workdir = _workdir(tmp_path / "cluster")
    log = tmp_path / "submissions.log"
    submit = tmp_path / "submit.sh"
    submit.write_text(SUBMIT.format(log=log))
    run = snakemake(
        workdir,
        "--executor",
        "cluster-generic",
        "--cluster-generic-submit-cmd",
        f"bash {submit}",
        "--jobs",
        "2",
        "--latency-wait",
        "10",
        timeout=600,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    submitted = log.read_text().splitlines()
    # every simulation shard went through its own submission; the tiny jobs (localrules) ran in Snakemake
    shards = len(list((workdir / "reports/smoke/data/shards").glob("*/*.csv")))
    assert shards == 4 and len(submitted) == shards and len(set(submitted)) == shards
    results = "reports/smoke/results.csv"
    assert (workdir / results).read_bytes() == (local_run / results).read_bytes()


def test_editing_one_grid_value_reruns_only_the_shards_that_hold_it(local_run):
    """Runs last in this module: it changes the smoke config of the shared working directory."""
    smoke = local_run / "config/smoke.yaml"
    smoke.write_text(
        smoke.read_text()
        .replace("network.bandwidth: [200, 400]", "network.bandwidth: [200, 800]")
        .replace("hgx_h100[bandwidth=400,", "hgx_h100[bandwidth=800,")
    )
    run = snakemake(local_run, "--cores", "2")
    assert run.returncode == 0, run.stderr[-3000:]
    counts = _job_counts(run.stdout + run.stderr)
    # shard 1 of each workload holds the 400 -> 800 points; shard 0 (200 GB/s) is untouched
    assert counts.get("simulate_shard") == 2 and "generate" not in counts, counts
    rows = _results(local_run)
    assert ("allreduce_1MiB_8", "hgx_h100[bandwidth=800,backend=congestion_unaware]") in rows
