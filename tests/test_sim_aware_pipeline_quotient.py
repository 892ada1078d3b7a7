"""Pipeline steps on a congestion-aware 1-D switch: the symmetric quotient's ring recurrence beside the
pipeline sends, identical to the message-level engine on every rank.

Through a switch a rank's downlink carries its TP predecessor's ring messages and its pipeline
peer's activation. When the activation holds the downlink as a TP ring message arrives, the full
engine's recurrence queues the ring message behind it (``CongestionAwareNetwork.check_order``: the
link is marked ``POINT_TO_POINT``); the quotient used to refuse that (its mark made the phase wait
until the activation had left), so the gpt3-175b t8d2p8 / t8d8p8 benchmark steps went message by
message. These cases are that shape at 32 and 64 ranks, and a random sweep over small layouts
checks the quotient, the full engine's fast path and ``fast=False`` against each other.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from chakra_pipe.generate.options import resolve_llm
from chakra_pipe.sim import HardwareConfig, NetworkConfig, SystemConfig, simulate, symmetric
from chakra_pipe.sweep.generated_layout import GeneratedLayout, simulate_layout

PER_RANK = ("finish_ns", "compute_ns", "cpu_ns", "exposed_comm_ns", "comm_ns", "idle_ns")


def hardware(npus: int, topology: str = "Switch", bandwidth: float = 400.0, latency: float = 936.25) -> HardwareConfig:
    """``benchmarks/simulator.py --realistic``'s aware 1-D ring point (baseline, one active chunk)."""
    system = {
        "scheduling-policy": "LIFO",
        "endpoint-delay": 10,
        "active-chunks-per-dimension": 1,
        "preferred-dataset-splits": 4,
        "collective-optimization": "baseline",
        "local-mem-bw": 3350,
        **{f"{k}-implementation": ["ring"] for k in ("all-reduce", "reduce-scatter", "all-gather", "all-to-all")},
    }
    network = {"topology": [topology], "npus_count": [npus], "bandwidth": [bandwidth], "latency": [latency]}
    return HardwareConfig(
        SystemConfig.from_dict(system, source="sys.json"),
        NetworkConfig.from_dict(network, source="net.yml"),
        backend="congestion_aware",
    )


def assert_every_rank_equal(sym, full) -> None:
    """Every per-rank figure, and the representatives' collective records, are the same."""
    for key in PER_RANK:
        assert getattr(sym, key) == getattr(full, key), key
    reps = {c.rank for c in sym.collectives}
    assert sym.collectives == [c for c in full.collectives if c.rank in reps]


@pytest.mark.parametrize(("tp", "dp", "pp"), [(8, 1, 4), (8, 2, 4)], ids=["t8d1p4", "t8d2p4"])
def test_activations_holding_a_downlink_leave_the_quotient_on_its_recurrence(monkeypatch, tp, dp, pp):
    model, spec = resolve_llm({"model": "gpt3-175b", "layers": 4, "tp": tp, "dp": dp, "pp": pp})
    hw = hardware(tp * dp * pp)
    runs: list[bool] = []  # ring_fast of each quotient run: a LinkConflict would add a False one
    run = symmetric._run

    def spy_run(*args, ring_fast, **kw):
        runs.append(ring_fast)
        return run(*args, ring_fast=ring_fast, **kw)

    monkeypatch.setattr(symmetric, "_run", spy_run)
    sym, how = simulate_layout(model, spec, hw, "x")
    assert how == f"symmetric: {pp} of {spec.layout.world} ranks simulated"
    assert runs == [True]
    sends = sum(c.kind == "SEND" for c in sym.collectives)
    assert sends > 0
    assert sym.messages - sym.fast_messages == sends  # every ring message evaluated, the sends one by one
    traces = GeneratedLayout(model, spec, "x").traces()
    fast = simulate(traces, hw, symmetric=False)
    assert fast.messages - fast.fast_messages == sends * tp * dp  # the full engine takes its fast path too
    slow = simulate(traces, hw, fast=False)
    assert_every_rank_equal(sym, slow)
    assert_every_rank_equal(fast, slow)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    layout=st.sampled_from([(2, 2, 2), (4, 1, 2), (4, 2, 2), (8, 1, 2), (2, 4, 2), (2, 2, 4), (4, 1, 4), (8, 1, 4)]),
    model=st.sampled_from(["gpt3-13b", "gpt3-175b"]),
    stage_layers=st.integers(1, 2),
    microbatches=st.integers(1, 4),
    topology=st.sampled_from(["Switch", "Switch", "FullyConnected"]),
    bandwidth=st.sampled_from([25.0, 100.0, 400.0, 900.0]),
    latency=st.sampled_from([0.0, 500.0, 936.25, 3000.0]),
)
def test_random_pipeline_steps_equal_the_message_level_engine(
    layout, model, stage_layers, microbatches, topology, bandwidth, latency
):
    tp, dp, pp = layout
    options = {"model": model, "layers": stage_layers * pp, "tp": tp, "dp": dp, "pp": pp}
    model_, spec = resolve_llm({**options, "microbatches": microbatches, "global_batch": dp * microbatches})
    hw = hardware(tp * dp * pp, topology, bandwidth, latency)
    sym, _ = simulate_layout(model_, spec, hw, "x")
    traces = GeneratedLayout(model_, spec, "x").traces()
    slow = simulate(traces, hw, fast=False)
    assert_every_rank_equal(sym, slow)
    assert_every_rank_equal(simulate(traces, hw, symmetric=False), slow)
