"""Grid expansion and campaign planning: point ids, cartesian order, overrides, shards, config errors."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
import yaml
from conftest import validated

from chakra_pipe.errors import ConfigError
from chakra_pipe.sweep.campaign import Campaign, name_pattern
from chakra_pipe.sweep.grid import expand

REPO = Path(__file__).resolve().parent.parent
SYSTEM = {
    "scheduling-policy": "LIFO",
    "collective-optimization": "localBWAware",
    "endpoint-delay": 10,
    "preferred-dataset-splits": 4,
    "active-chunks-per-dimension": 1,
    "local-mem-bw": 1600,
    "all-reduce-implementation": ["ring"],
    "all-gather-implementation": ["ring"],
    "reduce-scatter-implementation": ["ring"],
    "all-to-all-implementation": ["ring"],
}
SCHEMA = REPO / "workflow" / "schemas" / "config.schema.yaml"


def _hw(tmp_path: Path, dims: int = 1) -> dict:
    (tmp_path / "net.yml").write_text(
        "topology: [%s]\nnpus_count: [%s]\nbandwidth: [%s]\nlatency: [%s]\n"  # noqa: UP031
        % (
            ", ".join(["Ring"] * dims),
            ", ".join(["4"] * dims),
            ", ".join(["50.0"] * dims),
            ", ".join(["500.0"] * dims),
        )
    )
    (tmp_path / "sys.json").write_text(json.dumps(SYSTEM))
    return {"network": "net.yml", "system": "sys.json"}


def _config(tmp_path: Path, **platform) -> dict:
    return {
        "campaign": "t",
        "workloads": {"ar": {"kind": "collective", "type": "all_reduce", "npus": 4, "size": "1MiB"}},
        "hardware": {"platforms": {"p": {**_hw(tmp_path), **platform}}},
    }


def test_cartesian_product_order_ids_and_overrides(tmp_path):
    spec = {
        **_hw(tmp_path),
        "axes": {"network.bandwidth": [100, 200, 400], "system.all-reduce-implementation": ["ring", "direct"]},
    }
    points = expand({"p": spec}, tmp_path)
    assert len(points) == 6  # 3 x 2
    # last axis varies fastest, ids name the key's last part and the value
    assert [p.id for p in points[:3]] == [
        "p[bandwidth=100,all-reduce-implementation=ring]",
        "p[bandwidth=100,all-reduce-implementation=direct]",
        "p[bandwidth=200,all-reduce-implementation=ring]",
    ]
    # a scalar fills every dimension of a per-dimension list
    assert points[2].network["bandwidth"] == [200]
    assert points[3].system["all-reduce-implementation"] == ["direct"]
    # the base dict is never mutated between points
    assert points[0].network["latency"] == [500.0] and points[0].network["bandwidth"] == [100]
    assert {p.npus for p in points} == {4}


def test_scalar_broadcast_on_two_dimensions(tmp_path):
    spec = {**_hw(tmp_path, dims=2), "axes": {"network.bandwidth": [25, [100, 50]]}}
    points = expand({"p": spec}, tmp_path)
    assert points[0].network["bandwidth"] == [25, 25]
    assert points[1].network["bandwidth"] == [100, 50]
    assert points[1].id == "p[bandwidth=100/50]"
    assert points[0].npus == 16


def test_zipped_axis_sets_several_keys_and_cost(tmp_path):
    spec = {
        **_hw(tmp_path),
        "cost": 1.0,
        "backend": "congestion_aware",
        "axes": {
            "link": [
                {"label": "slow", "network.bandwidth": 50, "cost": 1.5},
                {"network.bandwidth": 400, "network.latency": 100, "cost": 4},
            ]
        },
    }
    slow, fast = expand({"p": spec}, tmp_path)
    assert (slow.id, slow.cost, slow.network["bandwidth"]) == ("p[link=slow]", 1.5, [50])
    assert (fast.id, fast.cost, fast.network["latency"]) == ("p[link=1]", 4.0, [100])
    assert fast.backend == "congestion_aware"


def test_explicit_points_and_no_axes(tmp_path):
    only_base = expand({"p": _hw(tmp_path)}, tmp_path)
    assert [p.id for p in only_base] == ["p"]
    spec = {**_hw(tmp_path), "points": [{"id": "two", "set": {"network.npus_count": 2}, "cost": 3}]}
    points = expand({"p": spec}, tmp_path)
    assert [p.id for p in points] == ["two"]  # explicit points only when no axes are given
    assert points[0].npus == 2 and points[0].cost == 3.0


@pytest.mark.parametrize(
    "axes, message",
    [
        ({"network.bandwith": [1]}, "unknown network key 'bandwith'"),
        ({"sytem.x": [1]}, "unknown key 'sytem.x'"),
        ({"backend": ["fast"]}, "backend must be one of"),
        ({"cost": [-1]}, "cost must be a non-negative number"),
        ({"link": [5]}, "each value must be a mapping"),
        ({"network.bandwidth": []}, "non-empty list"),
    ],
)
def test_bad_axes_name_the_key(tmp_path, axes, message):
    with pytest.raises(ConfigError) as err:
        expand({"p": {**_hw(tmp_path), "axes": axes}}, tmp_path)
    assert message in str(err.value)
    assert "hardware.platforms.p" in str(err.value)


@pytest.mark.parametrize(
    "axes, message",
    [
        ({"network.bandwidth": [100, -5]}, "point 'p[bandwidth=-5]': network.bandwidth: must be > 0"),
        (
            {"system.all-reduce-implementation": ["ring", "rnig"]},
            "point 'p[all-reduce-implementation=rnig]': system.all-reduce-implementation: unknown algorithm 'rnig'",
        ),
        ({"network.npus_count": [[4, 2]]}, "network.npus_count: has 2 entries but topology has 1"),
    ],
)
def test_bad_values_fail_when_the_plan_is_made(tmp_path, axes, message):
    with pytest.raises(ConfigError, match="hardware.platforms.p.axes") as err:
        expand({"p": {**_hw(tmp_path), "axes": axes}}, tmp_path)
    assert message in str(err.value)


def test_missing_hardware_file_names_key(tmp_path):
    _hw(tmp_path)
    with pytest.raises(ConfigError, match=r"hardware.platforms.p.system: cannot read hardware file"):
        expand({"p": {"network": "net.yml", "system": "nope.json"}}, tmp_path)


def test_shards_baseline_and_npus_matching(tmp_path):
    cfg = _config(tmp_path, axes={"network.bandwidth": [1, 2, 3, 4, 5]})
    cfg["shard_size"] = 2
    cfg["hardware"]["baseline"] = "p[bandwidth=3]"
    camp = Campaign.from_config(validated(cfg), root=tmp_path, torch_available=False)
    w = camp.workloads["ar"]
    assert w.shards == [["p[bandwidth=1]", "p[bandwidth=2]"], ["p[bandwidth=3]", "p[bandwidth=4]"], ["p[bandwidth=5]"]]
    assert w.baseline == "p[bandwidth=3]"
    assert camp.shard_files()[2] == "reports/t/data/shards/ar/0002.csv"
    cfg["workloads"]["ar"]["npus"] = 8
    with pytest.raises(ConfigError, match=r"workloads.ar: no hardware grid point has 8 NPUs"):
        Campaign.from_config(validated(cfg), root=tmp_path, torch_available=False)


def test_bad_baseline_and_duplicate_ids(tmp_path):
    cfg = _config(tmp_path)
    cfg["hardware"]["baseline"] = ["p", "q"]
    with pytest.raises(ConfigError, match=r"hardware.baseline\[1\]: baseline point 'q'"):
        Campaign.from_config(validated(cfg), root=tmp_path, torch_available=False)
    cfg["hardware"]["baseline"] = []
    cfg["hardware"]["platforms"]["q"] = {**_hw(tmp_path), "points": [{"id": "p"}]}
    with pytest.raises(ConfigError, match="duplicate grid point id 'p'"):
        Campaign.from_config(validated(cfg), root=tmp_path, torch_available=False)


def test_capture_and_replay_follow_torch(tmp_path):
    cfg = _config(tmp_path)
    cfg["workloads"]["cap"] = {"kind": "capture", "model": "mlp", "ranks": 4}
    without = Campaign.from_config(validated(cfg), root=tmp_path, torch_available=False)
    assert "cap" not in without.workloads and without.replayed() == []
    assert any("replay skipped" in n for n in without.notes)
    with_torch = Campaign.from_config(validated(cfg), root=tmp_path, torch_available=True)
    assert with_torch.replayed() == ["cap"] and with_torch.notes == []
    cfg["replay"] = "never"
    assert Campaign.from_config(validated(cfg), root=tmp_path, torch_available=True).replayed() == []


def test_plan_round_trip_and_config_digest(tmp_path):
    cfg = _config(tmp_path, axes={"network.bandwidth": [1, 2]})
    camp = Campaign.from_config(validated(cfg), root=tmp_path, torch_available=False)
    camp.write(tmp_path / "plan.json")
    again = Campaign.load(tmp_path / "plan.json")
    assert again.to_json() == camp.to_json()
    same = Campaign.from_config(validated(copy.deepcopy(cfg)), root=tmp_path, torch_available=False)
    assert same.config_sha256 == camp.config_sha256
    # editing a hardware file changes the digest even when the config text does not
    (tmp_path / "net.yml").write_text((tmp_path / "net.yml").read_text().replace("500.0", "600.0"))
    edited = Campaign.from_config(validated(cfg), root=tmp_path, torch_available=False)
    assert edited.config_sha256 != camp.config_sha256


def test_generate_args_and_name_pattern(tmp_path):
    cfg = _config(tmp_path)
    cfg["workloads"]["m"] = {"kind": "llm", "model": "mixtral-8x7b", "dp": 2, "tp": 2, "ep": 2}
    (tmp_path / "net.yml").write_text("topology: [Ring]\nnpus_count: [4]\nbandwidth: [1]\nlatency: [1]\n")
    camp = Campaign.from_config(validated(cfg), root=tmp_path, torch_available=False)
    assert camp.workloads["m"].npus == 4
    assert (
        camp.workloads["m"].generate_args() == "llm --model mixtral-8x7b --layers 2 --dp 2 --tp 2 --pp 1 --ep 2".split()
    )
    assert camp.workloads["ar"].generate_args() == "collective --type all_reduce --npus 4 --size 1MiB".split()
    import re

    assert re.fullmatch(name_pattern(["a.b", "c"]), "a.b") and not re.fullmatch(name_pattern(["a.b"]), "axb")
    assert not re.fullmatch(name_pattern([]), "")


@pytest.mark.parametrize("name", ["config.yaml", "smoke.yaml"])
def test_shipped_configs_validate_and_plan(name):
    from snakemake.utils import validate

    cfg = yaml.safe_load((REPO / "config" / name).read_text())
    validate(cfg, str(SCHEMA))
    camp = Campaign.from_config(validated(cfg), root=REPO, torch_available=False)
    assert camp.workloads and all(w.shards for w in camp.workloads.values())
    assert all(w.baseline for w in camp.workloads.values())


@pytest.mark.parametrize(
    "mutate, key",
    [
        (lambda c: c.update(shard_sise=3), "shard_sise"),
        (lambda c: c["workloads"]["ar"].update(npu=4), "npu"),
        (lambda c: c["hardware"]["platforms"]["p"].update(axes={"network.bandwidth": []}), "network.bandwidth"),
        (lambda c: c.update(replay="sometimes"), "sometimes"),
    ],
)
def test_schema_rejects_bad_keys_naming_them(tmp_path, mutate, key):
    from snakemake.exceptions import WorkflowError
    from snakemake.utils import validate

    cfg = _config(tmp_path)
    mutate(cfg)
    with pytest.raises(WorkflowError) as err:
        validate(cfg, str(SCHEMA))
    assert key in str(err.value)


def test_product_size_unique_stable_ids(tmp_path):
    hypothesis = pytest.importorskip("hypothesis")
    st = hypothesis.strategies
    _hw(tmp_path)

    @hypothesis.settings(max_examples=30, deadline=None)
    @hypothesis.given(
        bw=st.lists(st.integers(1, 1000), min_size=1, max_size=4, unique=True),
        chunks=st.lists(st.integers(1, 8), min_size=1, max_size=3, unique=True),
        backends=st.sampled_from([["congestion_unaware"], ["congestion_unaware", "congestion_aware"]]),
    )
    def check(bw, chunks, backends):
        spec = {
            **_hw(tmp_path),
            "axes": {"network.bandwidth": bw, "system.active-chunks-per-dimension": chunks, "backend": backends},
        }
        points = expand({"p": spec}, tmp_path)
        assert len(points) == len(bw) * len(chunks) * len(backends)
        ids = [p.id for p in points]
        assert len(set(ids)) == len(ids)
        assert ids == [p.id for p in expand({"p": spec}, tmp_path)]
        assert [p.network["bandwidth"][0] for p in points[:: len(chunks) * len(backends)]] == bw

    check()


def test_sync_rewrites_the_plan_only_when_it_changes_and_digests_are_per_shard(tmp_path):
    cfg = _config(tmp_path, axes={"network.bandwidth": [1, 2, 3, 4]})
    cfg["outdir"] = str(tmp_path / "reports")
    cfg["shard_size"] = 2
    camp = Campaign.from_config(validated(cfg), root=tmp_path, torch_available=False)
    assert camp.sync() is True
    plan = Path(camp.plan_path)
    assert Campaign.load(plan).to_json() == camp.to_json()
    assert Campaign.from_config(validated(cfg), root=tmp_path, torch_available=False).sync() is False
    before = [camp.shard_digest("ar", i) for i in range(2)]
    cfg["hardware"]["platforms"]["p"]["axes"]["network.bandwidth"] = [1, 2, 3, 8]
    cfg["replay"] = "never"
    changed = Campaign.from_config(validated(cfg), root=tmp_path, torch_available=False)
    after = [changed.shard_digest("ar", i) for i in range(2)]
    assert after[0] == before[0] and after[1] != before[1]  # only the shard holding the edited point
    assert changed.sync() is True and Campaign.load(plan).points.keys() == changed.points.keys()
