"""Configuration parsing: every bad value is a ConfigError naming the file and the key."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from chakra_pipe.errors import ConfigError
from chakra_pipe.sim import HardwareConfig, MemoryConfig, NetworkConfig, SystemConfig, load_hardware
from chakra_pipe.sim.config import Algorithm

SYS = {
    "scheduling-policy": "LIFO",
    "endpoint-delay": 10,
    "active-chunks-per-dimension": 1,
    "preferred-dataset-splits": 4,
    "collective-optimization": "localBWAware",
    "local-mem-bw": 1600,
    "all-reduce-implementation": ["ring"],
    "boost-mode": 0,
    "intra-dimension-scheduling": "FIFO",
}
NET = {"topology": ["Ring", "Switch"], "npus_count": [4, 2], "bandwidth": [50, 25], "latency": [500, 1000]}


def test_system_parses_every_key() -> None:
    s = SystemConfig.from_dict(
        {
            **SYS,
            "all-gather-implementation": ["direct4", "oneHalvingDoubling"],
            "roofline-enabled": 1,
            "peak-perf": 312,
            "replay-only": 0,
        },
        source="s.json",
    )
    assert s.scheduling_policy == "LIFO" and s.preferred_dataset_splits == 4 and s.local_mem_bw == 1600
    assert s.implementation("ALL_GATHER") == (Algorithm("direct", 4), Algorithm("oneHalvingDoubling"))
    assert s.roofline_enabled and s.peak_perf == 312 and not s.replay_only
    with pytest.raises(ConfigError, match="s.json: reduce-scatter-implementation"):
        s.implementation("REDUCE_SCATTER")


@pytest.mark.parametrize(
    "key,value,match",
    [
        ("preferred-dataset-splits", None, "required key is missing"),
        ("scheduling-policy", None, "required key is missing"),
        ("collective-optimization", None, "required key is missing"),
        ("local-mem-bw", None, "required key is missing"),
        ("local-mem-bw", 0, "must be > 0"),
        ("preferred-dataset-splits", 2.5, "expected an integer"),
        ("endpoint-delay", "10", "expected a number"),
        ("scheduling-policy", "RANDOM", "unknown value"),
        ("all-reduce-implementation", ["ring", "spiral"], "unknown algorithm 'spiral'"),
        ("all-reduce-implementation", "ring", "expected a non-empty list"),
        ("model-shared-bus", 1, "not supported"),
    ],
)
def test_system_errors_name_file_and_key(key: str, value, match: str) -> None:
    d = dict(SYS)
    if value is None:
        del d[key]
    else:
        d[key] = value
    with pytest.raises(ConfigError, match=match) as exc:
        SystemConfig.from_dict(d, source="sys.json")
    assert exc.value.file == "sys.json" and exc.value.where == key


def test_network_parses_and_validates() -> None:
    n = NetworkConfig.from_dict(NET, source="n.yml")
    assert n.npus == 8 and n.dims == 2 and n.latency == (500.0, 1000.0)


@pytest.mark.parametrize(
    "key,value,match",
    [
        ("topology", ["Ring", "Torus"], "unknown topology"),
        ("npus_count", [4], "has 1 entries but topology has 2"),
        ("npus_count", [4, 1], "integer > 1"),
        ("bandwidth", [50, 0], "must be > 0"),
        ("bandwidth", [50, -1], "must be > 0"),
        ("latency", [500, -5], ">= 0"),
        ("latency", None, "required key is missing"),
    ],
)
def test_network_errors(key: str, value, match: str) -> None:
    d = dict(NET)
    if value is None:
        del d[key]
    else:
        d[key] = value
    with pytest.raises(ConfigError, match=match) as exc:
        NetworkConfig.from_dict(d, source="net.yml")
    assert exc.value.file == "net.yml" and exc.value.where == key


def test_memory_config() -> None:
    assert MemoryConfig.from_dict({"memory-type": "NO_MEMORY_EXPANSION"}).remote_mem_bw == 0
    with pytest.raises(ConfigError, match="num-npus-per-node"):
        MemoryConfig.from_dict(
            {"memory-type": "PER_NODE_MEMORY_EXPANSION", "num-nodes": 2, "remote-mem-bw": 10}, source="m.json"
        )
    with pytest.raises(ConfigError, match="unknown value"):
        MemoryConfig.from_dict({"memory-type": "CXL"})


def test_files_and_injection_scale(tmp_path: Path) -> None:
    (tmp_path / "s.json").write_text(json.dumps(SYS))
    (tmp_path / "n.yml").write_text("topology: [ Ring ]\nnpus_count: [ 8 ]\nbandwidth: [ 50 ]\nlatency: [ 500 ]\n")
    hw = load_hardware(tmp_path / "s.json", tmp_path / "n.yml", injection_scale=2.0)
    assert hw.network.npus == 8 and hw.endpoint_delay == 20
    no_key = {k: v for k, v in SYS.items() if k != "endpoint-delay"}
    hw2 = HardwareConfig(SystemConfig.from_dict(no_key), hw.network, injection_scale=2.0)
    assert hw2.endpoint_delay == 10  # the scale applies only when the key is present (ASTRA-sim)
    (tmp_path / "bad.yml").write_text("topology: [ Ring\n")
    with pytest.raises(ConfigError, match="invalid YAML") as exc:
        NetworkConfig.from_file(tmp_path / "bad.yml")
    assert exc.value.file == str(tmp_path / "bad.yml")
    with pytest.raises(ConfigError, match="cannot read"):
        SystemConfig.from_file(tmp_path / "missing.json")
    with pytest.raises(ConfigError, match="unknown backend"):
        HardwareConfig(hw.system, hw.network, backend="ns3")


def test_algorithm_list_longer_than_network_is_rejected() -> None:
    system = SystemConfig.from_dict({**SYS, "all-reduce-implementation": ["ring", "ring", "ring"]}, source="s.json")
    with pytest.raises(ConfigError, match="3 algorithms listed") as exc:
        HardwareConfig(system, NetworkConfig.from_dict(NET, source="n.yml"))
    assert exc.value.file == "s.json" and exc.value.where == "all-reduce-implementation"


@pytest.mark.parametrize(
    "text,match", [(b"\xff\xfe binary", "not UTF-8"), (b"[" * 100_000 + b"]" * 100_000, "nested too deeply")]
)
def test_unreadable_json_is_a_config_error(tmp_path: Path, text: bytes, match: str) -> None:
    path = tmp_path / "s.json"
    path.write_bytes(text)
    with pytest.raises(ConfigError, match=match) as exc:
        SystemConfig.from_file(path)
    assert exc.value.file == str(path)
