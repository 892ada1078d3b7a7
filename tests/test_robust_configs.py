"""Broken ASTRA-sim network/system/memory files and campaign configs: every error names file and key.

ASTRA-sim files go through the real ``simulate`` verb with the corpus' valid two-rank workload; each
case breaks one key of an otherwise valid configuration and expects exit 2 with one line
``chakra-pipe simulate: error: FILE: KEY: what``. Campaign configs go through the two steps the
Snakefile runs before any job — the JSON-schema check and ``Campaign.from_config`` — and must fail
naming the offending key.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
import yaml
from conftest import validated
from test_robust_support import assert_clean, call_cli

REPO = Path(__file__).resolve().parent.parent
WORKLOAD = REPO / "tests" / "data" / "robust" / "traces" / "valid"  # two ranks, one all-reduce each

NETWORK = {"topology": ["Ring"], "npus_count": [2], "bandwidth": [50.0], "latency": [500.0]}
SYSTEM = {
    "scheduling-policy": "LIFO",
    "collective-optimization": "baseline",
    "endpoint-delay": 10,
    "active-chunks-per-dimension": 1,
    "preferred-dataset-splits": 4,
    "local-mem-bw": 1600,
    "peak-perf": 900,
    "roofline-enabled": 0,
    **{f"{c}-implementation": ["ring"] for c in ("all-reduce", "all-gather", "reduce-scatter", "all-to-all")},
}
MEMORY = {"memory-type": "NO_MEMORY_EXPANSION"}

_DROP = object()


def _edit(base: dict, key: str, value) -> dict:
    d = copy.deepcopy(base)
    if value is _DROP:
        del d[key]
    else:
        d[key] = value
    return d


# (file, key, value or _DROP, text the one-line message must contain besides file and key)
BROKEN_KEYS = [
    ("network", "npus_count", _DROP, "missing"),
    ("network", "npus_count", [3], "npus_count multiplies to 3 NPUs but the workload has 2"),
    ("network", "npus_count", [2, 2], "entries but topology has 1"),
    ("network", "npus_count", ["two"], "expected numbers"),
    ("network", "npus_count", [2.5], "integer"),
    ("network", "bandwidth", [-50.0], "must be > 0"),
    ("network", "bandwidth", [0], "must be > 0"),
    ("network", "bandwidth", "50", "expected a non-empty list"),
    ("network", "bandwidth", [50.0, 50.0], "entries but topology has 1"),
    ("network", "latency", [-1], "must be >= 0"),
    ("network", "latency", _DROP, "missing"),
    ("network", "topology", ["Torus"], "unknown topology"),
    ("network", "topology", [], "non-empty list"),
    ("system", "all-reduce-implementation", ["ringo"], "unknown algorithm"),
    ("system", "all-reduce-implementation", "ring", "non-empty list"),
    ("system", "all-reduce-implementation", ["direct0"], "unknown algorithm"),
    ("system", "all-reduce-implementation", ["ring", "ring"], "2"),  # two dims named, the network has one
    ("system", "preferred-dataset-splits", _DROP, "missing"),
    ("system", "preferred-dataset-splits", 0, ">= 1"),
    ("system", "local-mem-bw", -1600, "> 0"),
    ("system", "endpoint-delay", "10", "expected a number"),
    ("system", "endpoint-delay", 1.5, "integer"),
    ("system", "active-chunks-per-dimension", True, "expected a number"),
    ("system", "scheduling-policy", "RANDOM", "unknown value"),
    ("memory", "memory-type", "HBM", "unknown value"),
    ("memory", "memory-type", _DROP, "missing"),
]


def _write_all(directory: Path, network: dict, system: dict, memory: dict) -> dict[str, Path]:
    paths = {"network": directory / "net.yml", "system": directory / "sys.json", "memory": directory / "mem.json"}
    paths["network"].write_text(yaml.safe_dump(network))
    paths["system"].write_text(json.dumps(system))
    paths["memory"].write_text(json.dumps(memory))
    return paths


def _simulate(paths: dict[str, Path]) -> list[str]:
    return [
        "simulate",
        f"--workload-configuration={WORKLOAD}",
        f"--system-configuration={paths['system']}",
        f"--network-configuration={paths['network']}",
        f"--remote-memory-configuration={paths['memory']}",
    ]


def test_valid_configuration_simulates(tmp_path):
    outcome = call_cli(_simulate(_write_all(tmp_path, NETWORK, SYSTEM, MEMORY)))
    assert_clean(outcome, allowed={0})


@pytest.mark.parametrize(
    "which,key,value,what",
    BROKEN_KEYS,
    ids=[f"{w}-{k}-{'missing' if v is _DROP else json.dumps(v)}" for w, k, v, _ in BROKEN_KEYS],
)
def test_broken_astra_sim_key_is_named_with_its_file(tmp_path, which, key, value, what):
    bases = {"network": NETWORK, "system": SYSTEM, "memory": MEMORY}
    bases[which] = _edit(bases[which], key, value)
    paths = _write_all(tmp_path, bases["network"], bases["system"], bases["memory"])
    outcome = call_cli(_simulate(paths))
    assert_clean(outcome, allowed={2})
    line = outcome.stderr.strip()
    assert f"{paths[which]}: {key}: " in line, line
    assert what in line, line


@pytest.mark.parametrize(
    "which,text,what",
    [
        ("network", "topology: [ Ring\nnpus_count: [2]\n", "invalid YAML"),
        ("network", "- just\n- a list\n", "mapping"),
        ("network", "", "mapping"),
        ("system", '{"scheduling-policy": "LIFO",', "invalid JSON"),
        ("system", "[1, 2]", "JSON object"),
        ("system", "\xff\xfe binary", "UTF-8"),
        ("system", "[" * 100_000 + "]" * 100_000, "nested"),
        ("memory", "null", "JSON object"),
    ],
)
def test_unparsable_configuration_file_is_named(tmp_path, which, text, what):
    paths = _write_all(tmp_path, NETWORK, SYSTEM, MEMORY)
    paths[which].write_bytes(text.encode("latin-1"))
    outcome = call_cli(_simulate(paths))
    assert_clean(outcome, allowed={2})
    line = outcome.stderr.strip()
    assert f"{paths[which]}: " in line and what in line, line


def test_missing_configuration_file_is_named(tmp_path):
    paths = _write_all(tmp_path, NETWORK, SYSTEM, MEMORY)
    paths["system"].unlink()
    outcome = call_cli(_simulate(paths))
    assert_clean(outcome, allowed={2})
    assert f"{paths['system']}: " in outcome.stderr


# -- campaign configs -----------------------------------------------------------------------------


def _smoke() -> dict:
    return yaml.safe_load((REPO / "config" / "smoke.yaml").read_text())


def _plan(config: dict):
    """What the Snakefile does before any job: schema validation, then campaign resolution."""
    from chakra_pipe.sweep.campaign import Campaign

    return Campaign.from_config(validated(config), root=REPO, torch_available=False)


def _platform(config: dict) -> dict:
    return config["hardware"]["platforms"]["hgx_h100"]


def _network_file(tmp_path: Path, **overrides) -> str:
    net = yaml.safe_load((REPO / "config/hardware/hgx_h100/network.yml").read_text())
    net.update(overrides)
    path = tmp_path / "network.yml"
    path.write_text(yaml.safe_dump(net))
    return str(path)


CAMPAIGN_CASES = {
    "workloads missing": (lambda c, t: c.pop("workloads"), "workloads"),
    "shard_size wrong type": (lambda c, t: c.update(shard_size="two"), "shard_size"),
    "shard_size zero": (lambda c, t: c.update(shard_size=0), "shard_size"),
    "workload kind unknown": (lambda c, t: c["workloads"]["allreduce_1MiB_8"].update(kind="magic"), "kind"),
    "workload kind missing": (lambda c, t: c["workloads"]["allreduce_1MiB_8"].pop("kind"), "kind"),
    "npus match no grid point": (
        lambda c, t: c["workloads"]["allreduce_1MiB_8"].update(npus=16),
        "workloads.allreduce_1MiB_8",
    ),
    "axis negative bandwidth": (
        lambda c, t: _platform(c)["axes"].update({"network.bandwidth": [-200, 400]}),
        "network.bandwidth",
    ),
    "axis unknown algorithm": (
        lambda c, t: (
            c["hardware"].pop("baseline"),
            _platform(c)["axes"].update({"system.all-reduce-implementation": [["ringo"]]}),
        ),
        "all-reduce-implementation",
    ),
    "network file dims mismatch": (
        lambda c, t: _platform(c).update(network=_network_file(t, npus_count=[8, 2])),
        "npus_count",
    ),
    "network file missing": (lambda c, t: _platform(c).update(network=str(t / "nope.yml")), "network"),
    "baseline not a point": (
        lambda c, t: c["hardware"].update(baseline="hgx_h100[bandwidth=999]"),
        "hardware.baseline",
    ),
}


@pytest.mark.parametrize("case", list(CAMPAIGN_CASES))
def test_broken_campaign_config_names_the_key(tmp_path, case):
    mutate, key = CAMPAIGN_CASES[case]
    config = _smoke()
    mutate(config, tmp_path)
    from chakra_pipe.errors import ChakraPipeError

    try:
        _plan(config)
    except ChakraPipeError as exc:
        assert exc.exit_code == 2
        assert key in exc.line(), exc.line()
        return
    except Exception as exc:  # snakemake's schema check raises WorkflowError
        assert type(exc).__name__ == "WorkflowError", f"{type(exc).__name__}: {exc}"
        assert key in str(exc), str(exc)
        return
    pytest.fail(f"{case}: the broken campaign config was accepted")


def test_absurdly_nested_config_is_one_line_not_a_traceback(tmp_path):
    """json recurses per nesting level; the CLI's last line of defence turns RecursionError into exit 2."""
    paths = _write_all(tmp_path, NETWORK, SYSTEM, MEMORY)
    paths["system"].write_text("[" * 100_000 + "]" * 100_000)
    assert_clean(call_cli(_simulate(paths)), allowed={2})


@pytest.mark.parametrize(
    "text,what",
    [
        ('{"1": [0, 5]}', "NPU 5"),
        ('{"1": "all"}', "non-empty list"),
        ('{"0": [0, 1]}', "integer > 0"),
        ('{"1": [0, 0]}', "listed twice"),
        ('{"1": [0, 1.5]}', "non-empty list"),
        ("[1, 2]", "expected an object"),
        ("nope", "invalid JSON"),
    ],
)
def test_broken_comm_group_file_is_named_with_its_group(tmp_path, text, what):
    paths = _write_all(tmp_path, NETWORK, SYSTEM, MEMORY)
    groups = tmp_path / "groups.json"
    groups.write_text(text)
    outcome = call_cli([*_simulate(paths), f"--comm-group-configuration={groups}"])
    assert_clean(outcome, allowed={2})
    line = outcome.stderr.strip()
    assert f"{groups}: " in line and what in line, line
