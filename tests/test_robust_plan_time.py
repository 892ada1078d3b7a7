"""Config values the schema accepts but a job would refuse fail while the campaign is planned, naming the
config key and the workload: one bad workload must not surface as a failed job after the others ran."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
import yaml
from conftest import validated
from processes import cli, generate_collective_args, run_bounded, snakemake_cmd, workflow_env

from chakra_pipe.errors import ConfigError
from chakra_pipe.sweep.campaign import Campaign

REPO = Path(__file__).resolve().parent.parent


def _config(workload: dict) -> dict:
    cfg = yaml.safe_load((REPO / "config" / "smoke.yaml").read_text())
    cfg["workloads"] = {"bad": workload}
    cfg["capture"] = "always"
    del cfg["hardware"]["baseline"]
    cfg["hardware"]["platforms"]["hgx_h100"]["network"] = str(REPO / "config/hardware/hgx_h100/network.yml")
    cfg["hardware"]["platforms"]["hgx_h100"]["system"] = str(REPO / "config/hardware/hgx_h100/system.json")
    cfg["hardware"]["platforms"]["hgx_h100"]["memory"] = str(REPO / "config/hardware/no_memory.json")
    return cfg


@pytest.fixture(scope="module")
def four_rank_set(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("set4")
    run = run_bounded(cli(*generate_collective_args(root / "ar", 4, "1KiB")), timeout=60)
    assert run.returncode == 0
    return root / "ar"


CASES = [
    ({"kind": "llm", "model": "gpt-9"}, "workloads.bad.model", "invalid choice: 'gpt-9'"),
    (
        {"kind": "collective", "type": "all_reduce", "npus": 8, "size": -1},
        "workloads.bad.size",
        "cannot read size '-1'",
    ),
    ({"kind": "llm", "model": "mixtral-8x7b", "dp": 8, "ep": 3}, "workloads.bad.ep", "ep 3 must divide dp 8"),
    ({"kind": "llm", "model": "llama3-8b", "dp": 4, "ep": 2}, "workloads.bad.ep", "mixture-of-experts"),
    (
        {"kind": "llm", "model": "llama3-8b", "layers": 2, "pp": 4, "dp": 2},
        "workloads.bad.pp",
        "2 layers cannot fill 4",
    ),
    ({"kind": "llm", "model": "llama3-8b", "tp": 3}, "workloads.bad.tp", "tp 3 must divide"),
    ({"kind": "collective", "type": "all_gather", "npus": 8, "size": 0}, "workloads.bad.size", "0-byte all_gather"),
    ({"kind": "capture", "model": "resnet-huge", "ranks": 8}, "workloads.bad.model", "unknown model 'resnet-huge'"),
    ({"kind": "trace", "prefix": "{set4}", "npus": 8}, "workloads.bad.npus", "found 4 rank files (ranks 0..3)"),
    ({"kind": "trace", "prefix": "{set4}-absent", "npus": 8}, "workloads.bad.npus", "found no rank files"),
]


@pytest.mark.parametrize("workload, key, message", CASES)
def test_job_time_failures_are_refused_at_plan_time(workload, key, message, four_rank_set):
    workload = {k: (v.format(set4=four_rank_set) if isinstance(v, str) else v) for k, v in workload.items()}
    with pytest.raises(ConfigError) as err:
        Campaign.from_config(validated(_config(workload)), root=REPO, torch_available=True)
    assert err.value.where == key and message in err.value.what, str(err.value)


def test_the_checks_pass_what_the_jobs_accept(four_rank_set):
    cfg = _config({"kind": "llm", "model": "mixtral-8x7b", "dp": 4, "ep": 2, "tp": 2})
    cfg["workloads"]["set"] = {"kind": "trace", "prefix": str(four_rank_set), "npus": 4}
    cfg["workloads"]["cap"] = {"kind": "capture", "model": "mlp", "ranks": 8}
    cfg["hardware"]["platforms"]["hgx_h100"]["axes"]["network.npus_count"] = [[4], [8]]
    camp = Campaign.from_config(validated(cfg), root=REPO, torch_available=True)
    assert set(camp.workloads) == {"bad", "set", "cap"}


@pytest.mark.slow
def test_workflow_stops_before_any_job_naming_the_key(tmp_path):
    (tmp_path / "bad.yaml").write_text(
        yaml.safe_dump(_config({"kind": "llm", "model": "mixtral-8x7b", "dp": 8, "ep": 3}))
    )
    run = subprocess.run(
        snakemake_cmd(tmp_path, "bad.yaml", "--cores", "1"),
        cwd=tmp_path,
        env=workflow_env(),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode != 0
    assert "workloads.bad.ep: ep 3 must divide dp 8" in run.stderr
    assert not (tmp_path / "traces").exists() and not (tmp_path / "reports").exists()
