"""Simulator edges: an all-gather cut into 0-byte chunks, zero-work roofline nodes, unbounded
``preferred-dataset-splits``, and exit codes that agree with the README's table."""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path

import pytest
from conftest import validated
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_robust_support import RING_SYSTEM, assert_clean, call_cli, corpus_builder

from chakra_pipe.errors import ConfigError
from chakra_pipe.et import schema
from chakra_pipe.et.attrs import set_attr
from chakra_pipe.sim.config import MAX_DATASET_SPLITS, SystemConfig

REPO = Path(__file__).resolve().parent.parent
HW = REPO / "config" / "hardware" / "hgx_h100"
README = REPO / "README.md"
SPLITS = json.loads((HW / "system.json").read_text())["preferred-dataset-splits"]


@pytest.fixture(scope="module")
def net4(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("net") / "switch4.yml"
    path.write_text("topology: [ Switch ]\nnpus_count: [ 4 ]\nbandwidth: [ 400.0 ]\nlatency: [ 936.25 ]\n")
    return path


@pytest.mark.parametrize("size", sorted({1, SPLITS - 1, SPLITS, SPLITS + 1, 2 * SPLITS + 3}))
def test_simulate_and_validate_agree_on_small_all_gathers(size, net4, tmp_path):
    prefix = tmp_path / "ag"
    assert (
        call_cli(["generate", "collective", "--type", "all_gather", "--npus", 4, "--size", size, "--out", prefix]).code
        == 0
    )
    sim = call_cli(
        [
            "simulate",
            f"--workload-configuration={prefix}",
            f"--system-configuration={HW / 'system.json'}",
            f"--network-configuration={net4}",
        ]
    )
    val = call_cli(["validate", prefix, "--system-configuration", HW / "system.json"])
    assert_clean(sim)
    assert_clean(val)
    rule = f"ALL_GATHER comm_size {size} B is smaller than preferred-dataset-splits {SPLITS}"
    if size < SPLITS:
        assert sim.code == 2 and rule in sim.stderr and "node 0" in sim.stderr
        assert val.code == 1 and rule in val.stdout
    else:
        assert sim.code == 0 and re.search(r"sys\[3\] finished, [1-9]\d* cycles", sim.stdout)
        assert val.code == 0
    # without a system file validate can only apply the system-independent part of the rule (0 bytes)
    assert call_cli(["validate", prefix]).code == 0


def test_small_all_gather_is_a_failed_row_in_a_campaign_not_a_failed_campaign(tmp_path):
    from chakra_pipe.sweep.campaign import Campaign
    from chakra_pipe.sweep.shard import run_shard

    cfg = {
        "campaign": "ag",
        "outdir": str(tmp_path / "reports"),
        "tracedir": str(tmp_path / "traces"),
        "workloads": {"ag": {"kind": "collective", "type": "all_gather", "npus": 8, "size": 1}},
        "hardware": {
            "platforms": {
                "hgx": {
                    "network": str(HW / "network.yml"),
                    "system": str(HW / "system.json"),
                    "axes": {"system.preferred-dataset-splits": [1, SPLITS]},
                }
            }
        },
    }
    camp = Campaign.from_config(validated(cfg), root=tmp_path, torch_available=False)
    w = camp.workloads["ag"]
    assert call_cli(["generate", *w.generate_args(), "--out", w.prefix]).code == 0
    out = tmp_path / "shard.csv"
    assert run_shard(camp, "ag", 0, out) == 1
    rows = out.read_text().splitlines()[1:]
    assert len(rows) == 2
    ok, failed = sorted(rows, key=lambda r: "SetRefused" in r)
    assert ",ok," in ok
    assert "SetRefused: " in failed and "smaller than preferred-dataset-splits" in failed


def _roofline_system(tmp_path: Path) -> Path:
    d = json.loads((HW / "system.json").read_text())
    d.update({"roofline-enabled": 1, "peak-perf": 100})
    path = tmp_path / "roofline.json"
    path.write_text(json.dumps(d))
    return path


def test_zero_work_roofline_node_takes_zero_time(tmp_path):
    from chakra_pipe.et.traceset import TraceSet
    from chakra_pipe.sim import load_hardware, simulate

    corpus = corpus_builder()
    net = tmp_path / "two.yml"
    net.write_text("topology: [ Switch ]\nnpus_count: [ 2 ]\nbandwidth: [ 400.0 ]\nlatency: [ 936.25 ]\n")
    hw = load_hardware(_roofline_system(tmp_path), net)

    def finish(nodes) -> int:
        for r in range(2):
            (tmp_path / f"t.{r}.et").write_bytes(corpus.encode(nodes))
        return simulate(TraceSet.load(tmp_path / "t"), hw).finish_ns[0]

    zero = corpus.comp(1, [], 5)
    set_attr(corpus.with_attr(zero, "num_ops", 0, "int64_val"), "tensor_size", 4096)
    alone = finish([corpus.comp(2, [], 5)])
    assert alone > 0
    assert finish([zero, corpus.comp(2, [1], 5)]) == alone
    assert finish([zero]) == 0


def _readme_row(code: int) -> str:
    """Exit code ``code``'s row of the README's exit-code table (other tables also start rows with a number)."""
    section = README.read_text().split("\n## Exit codes", 1)[1].split("\n## ", 1)[0]
    return next(line for line in section.splitlines() if re.match(rf"^\|\s*{code}\s*\|", line))


def _two_ranks(tmp_path: Path, name: str, nodes_by_rank: list[list[schema.Node]]) -> Path:
    corpus = corpus_builder()
    for r, nodes in enumerate(nodes_by_rank):
        (tmp_path / f"{name}.{r}.et").write_bytes(corpus.encode(nodes))
    return tmp_path / name


@pytest.fixture
def ring2(tmp_path) -> list[str]:
    net = tmp_path / "ring2.yml"
    net.write_text("topology: [ Ring ]\nnpus_count: [ 2 ]\nbandwidth: [ 50.0 ]\nlatency: [ 500.0 ]\n")
    return [f"--system-configuration={HW / 'system.json'}", f"--network-configuration={net}"]


def test_exit_codes_of_unfinishable_traces_agree_with_the_readme(tmp_path, ring2):
    c = corpus_builder()
    cases = {
        # every node waits on another: no dependency-free node, ASTRA-sim aborts at load -> invalid input
        "fully_cyclic": ([[c.comp(1, [2], 5), c.comp(2, [1], 5)]] * 2, 2, "no dependency-free node"),
        # a root runs, then a cycle can never issue -> stuck
        "cycle_behind_root": ([[c.comp(1, [], 5), c.comp(2, [1, 3], 5), c.comp(3, [2], 5)]] * 2, 3, "cycle behind"),
        # a receive whose send never comes -> stuck
        "lost_recv": ([[c.p2p(1, [], schema.COMM_RECV_NODE, 1)], [c.comp(1, [], 5)]], 3, "receive whose send never"),
        # a send nobody receives: validate reports it; ASTRA-sim completes it on arrival, and so does simulate
        "lost_send": ([[c.comp(1, [], 5)], [c.p2p(1, [], schema.COMM_SEND_NODE, 0)]], 0, "send nobody receives"),
    }
    for name, (ranks, code, phrase) in cases.items():
        prefix = _two_ranks(tmp_path, name, ranks)
        outcome = call_cli(["simulate", f"--workload-configuration={prefix}", *ring2])
        assert_clean(outcome, what=name)
        assert outcome.code == code, f"{name}: exit {outcome.code}: {outcome.stderr}"
        assert phrase in _readme_row(code), f"README does not document {name} ({phrase!r})"
    assert call_cli(["validate", tmp_path / "lost_send"]).code == 1


def test_dataset_splits_have_a_documented_bound():
    base = json.loads((HW / "system.json").read_text())
    assert (
        SystemConfig.from_dict({**base, "preferred-dataset-splits": MAX_DATASET_SPLITS}).preferred_dataset_splits
        == MAX_DATASET_SPLITS
    )
    for absurd in (MAX_DATASET_SPLITS + 1, 10**9, 10**30):
        with pytest.raises(
            ConfigError,
            match=rf"preferred-dataset-splits: {absurd} is past the supported "
            rf"{MAX_DATASET_SPLITS}",
        ):
            SystemConfig.from_dict({**base, "preferred-dataset-splits": absurd}, source="sys.json")
    assert f"{MAX_DATASET_SPLITS:,}" in README.read_text()


@pytest.fixture(scope="module")
def clock_sets(tmp_path_factory) -> dict[str, Path]:
    """A chained all-reduce (the ring fast path) and a small LLM step (symmetric engine, p2p, TP/DP)."""
    root = tmp_path_factory.mktemp("clock")
    sets = {"ar": root / "ar" / "ar", "llm": root / "llm" / "g"}
    argv_ar = ["generate", "collective", "--type", "all_reduce", "--npus", 4, "--size", "1MiB", "--iterations", 3]
    argv_llm = ["generate", "llm", "--model", "llama3-8b", "--tp", 2, "--dp", 2, "--layers", 1]
    for prefix, argv in ((sets["ar"], argv_ar), (sets["llm"], argv_llm)):
        assert call_cli([*argv, "--out", prefix]).code == 0
    (root / "system.json").write_text(json.dumps(RING_SYSTEM))
    return sets


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    workload=st.sampled_from(["ar", "llm"]),
    topology=st.sampled_from(["Ring", "Switch", "FullyConnected"]),
    backend=st.sampled_from(["congestion_unaware", "congestion_aware"]),
    bandwidth=st.sampled_from([1e-300, 1e-12, 1e-3, 100.0]),
    latency=st.integers(0, 2**70) | st.sampled_from([500, 1e15, 1e17, 4.6e18]),
)
def test_times_past_the_64_bit_clock_are_one_clean_error(
    clock_sets, tmp_path, workload, topology, backend, bandwidth, latency
):
    """Absurd hardware used to print 20-digit times on one path and an int64 OverflowError traceback on
    another (the ring, direct and symmetric engines count in int64 arrays); every path now either runs
    within the clock or refuses with exit 2 naming the network file."""
    net = tmp_path / "n.yml"
    net.write_text(f"topology: [{topology}]\nnpus_count: [4]\nbandwidth: [{bandwidth!r}]\nlatency: [{latency!r}]\n")
    prefix = clock_sets[workload]
    out = call_cli(
        [
            "simulate",
            "--workload-configuration",
            prefix,
            "--system-configuration",
            prefix.parent.parent / "system.json",
            "--network-configuration",
            net,
            "--backend",
            backend,
        ]
    )
    assert_clean(out, allowed={0, 2}, what=f"{topology} bw={bandwidth} lat={latency} {backend}")
    if out.code == 0:
        times = [int(t) for t in re.findall(r"finished, (-?\d+) cycles", out.stdout)]
        assert len(times) == 4 and all(0 <= t < 2**63 for t in times)
    else:
        assert f"{net}: simulated times pass the 64-bit ns clock" in out.stderr


def test_a_run_that_fits_the_clock_is_not_refused(clock_sets, tmp_path):
    """The check is on the times, not on the inputs: 10^15 ns of latency (11.6 days a hop) still runs."""
    net = tmp_path / "n.yml"
    net.write_text("topology: [Ring]\nnpus_count: [4]\nbandwidth: [100]\nlatency: [1e15]\n")
    sets = clock_sets["ar"]
    argv = ["simulate", "--workload-configuration", sets, "--system-configuration", sets.parent.parent / "system.json"]
    out = call_cli([*argv, "--network-configuration", net])
    assert out.code == 0, out.stderr
    assert min(int(t) for t in re.findall(r"finished, (\d+) cycles", out.stdout)) > 10**16


def test_a_generated_layout_past_the_clock_is_refused_too(tmp_path):
    """Sweeps, searches and scale runs simulate generated layouts in memory on the symmetric engine
    without going through ``simulate``: the same refusal holds there."""
    from test_sim_symmetric import hardware

    from chakra_pipe.errors import InputError
    from chakra_pipe.generate.options import resolve_llm
    from chakra_pipe.sweep.generated_layout import simulate_layout

    model, spec = resolve_llm({"model": "llama3-8b", "tp": 2, "dp": 2, "layers": 1})
    hw = hardware((4,))
    hw = dataclasses.replace(hw, network=dataclasses.replace(hw.network, latency=(4.6e18,)))
    with pytest.raises(InputError, match="simulated times pass the 64-bit ns clock"):
        simulate_layout(model, spec, hw, "x")
