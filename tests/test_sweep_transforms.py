"""Transforms in a campaign: schema, axis expansion with the hardware grid, derived workloads."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import validated
from test_sweep_grid import SYSTEM

from chakra_pipe.errors import ConfigError
from chakra_pipe.sweep.axes import combinations, label
from chakra_pipe.sweep.campaign import Campaign

REPO = Path(__file__).resolve().parent.parent


def _config(tmp_path: Path, transforms: list, npus_axis=(4, 8, 16)) -> dict:
    (tmp_path / "net.yml").write_text("topology: [Ring]\nnpus_count: [4]\nbandwidth: [50.0]\nlatency: [500.0]\n")
    (tmp_path / "sys.json").write_text(json.dumps(SYSTEM))
    return {
        "campaign": "t",
        "workloads": {"llm": {"kind": "llm", "model": "llama3-8b", "dp": 2, "tp": 2, "transforms": transforms}},
        "hardware": {
            "platforms": {
                "p": {
                    "network": "net.yml",
                    "system": "sys.json",
                    "axes": {"network.npus_count": list(npus_axis), "network.bandwidth": [50, 100]},
                }
            }
        },
    }


def _validate(config: dict) -> None:
    utils = pytest.importorskip("snakemake.utils")
    utils.validate(config, str(REPO / "workflow" / "schemas" / "config.schema.yaml"))


def test_axes_expand_last_fastest_with_safe_labels():
    combos = combinations([("dp.to", [8, 16]), ("compute.scale", [1.0, 0.5])])
    assert [label(c) for c in combos] == [
        "dp.to-8.compute.scale-1.0",
        "dp.to-8.compute.scale-0.5",
        "dp.to-16.compute.scale-1.0",
        "dp.to-16.compute.scale-0.5",
    ]
    assert label([("compute.match", "attn|mlp/x")]) == "compute.match-attn_mlp_x"
    assert combinations([]) == [[]]


def test_transform_axes_become_workloads_on_the_grid(tmp_path):
    cfg = _config(
        tmp_path,
        [
            {"dp": {"to": [4, 8]}},
            {"compute": {"scale": [1.0, 0.5], "type": "COMP"}},
            {"straggler": {"ranks": [1, 3], "delay": 2000}},
        ],
    )
    _validate(cfg)
    camp = Campaign.from_config(validated(cfg), root=tmp_path, torch_available=False)
    derived = [w for w in camp.workloads.values() if w.kind == "transform"]
    assert [w.name for w in derived] == [
        "llm.dp.to-4.compute.scale-1.0",
        "llm.dp.to-4.compute.scale-0.5",
        "llm.dp.to-8.compute.scale-1.0",
        "llm.dp.to-8.compute.scale-0.5",
    ]
    assert list(camp.workloads)[:2] == ["llm", derived[0].name]  # variants follow their source
    assert [w.npus for w in derived] == [8, 8, 16, 16]  # tp 2 × new dp
    w = derived[1]
    assert w.spec == {
        "source": "llm",
        "transform": "dp --to 4 | compute --scale 0.5 --type COMP | straggler --ranks 1 3 --delay 2000",
        "args": [
            "dp",
            "--to",
            "4",
            "compute",
            "--scale",
            "0.5",
            "--type",
            "COMP",
            "straggler",
            "--ranks",
            "1",
            "3",
            "--delay",
            "2000",
        ],
    }
    assert w.prefix == f"traces/t/{w.name}/et/{w.name}" and not w.replay
    # Each variant runs on exactly the grid points with its rank count.
    assert {p for s in derived[2].shards for p in s} == {p.id for p in camp.points.values() if p.npus == 16}
    again = Campaign.load(_write(camp, tmp_path))
    assert again.workloads[w.name].spec == w.spec and again.workloads[w.name].kind == "transform"


def _write(camp: Campaign, tmp_path: Path) -> Path:
    camp.write(tmp_path / "plan.json")
    return tmp_path / "plan.json"


def test_list_valued_parameters_take_lists_of_lists_as_axes(tmp_path):
    cfg = _config(
        tmp_path,
        [
            {"straggler": {"ranks": [[0], [1, 2]], "slowdown": 2}},
            {"comm": {"scale": 0.5, "type": ["all_reduce", "send"]}},
        ],
    )
    _validate(cfg)
    derived = [
        w
        for w in Campaign.from_config(validated(cfg), root=tmp_path, torch_available=False).workloads.values()
        if w.kind == "transform"
    ]
    assert [w.name for w in derived] == ["llm.straggler.ranks-0", "llm.straggler.ranks-1_2"]
    assert derived[1].spec["args"] == [
        "straggler",
        "--ranks",
        "1",
        "2",
        "--slowdown",
        "2",
        "comm",
        "--scale",
        "0.5",
        "--type",
        "all_reduce",
        "send",
    ]
    fixed = _config(tmp_path, [{"comm": {"drop": True}}])
    assert [
        w.name for w in Campaign.from_config(validated(fixed), root=tmp_path, torch_available=False).workloads.values()
    ] == ["llm", "llm.transformed"]


@pytest.mark.parametrize(
    "transforms,needle",
    [
        ([{"dp": {"to": 3}}], "dp.to 3 is not a multiple of the workload's DP width 2"),
        ([{"compute": {"scale": [1, 2]}}, {"compute": {"scale": [3]}}], "axis compute.scale appears in two ops"),
    ],
)
def test_bad_transform_plans_name_the_workload(tmp_path, transforms, needle):
    with pytest.raises(ConfigError, match="workloads.llm.transforms") as err:
        Campaign.from_config(validated(_config(tmp_path, transforms)), root=tmp_path, torch_available=False)
    assert needle in str(err.value)


@pytest.mark.parametrize(
    "transforms",
    [
        [{"dp": {"to": 8}, "compute": {"scale": 1}}],  # two ops in one item
        [{"dp": {"width": 8}}],  # unknown parameter
        [{"straggler": {"ranks": [1], "delay": 1500}}],  # not whole µs
        [{"straggler": {"ranks": [1]}}],  # neither delay nor slowdown
        [{"comm": {"scale": 0.5, "drop": True}}],  # both
        [{"compute": {"scale": -1}}],
        [{"teleport": {}}],
    ],
)
def test_schema_rejects_malformed_transforms(tmp_path, transforms):
    utils = pytest.importorskip("snakemake.utils")
    with pytest.raises(Exception, match="transforms|ValidationError|valid"):
        utils.validate(_config(tmp_path, transforms), str(REPO / "workflow" / "schemas" / "config.schema.yaml"))
