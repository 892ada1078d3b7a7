"""Several queues per dimension on the congestion-aware ring fast path: chunks running both ways.

With two or more queues per dimension half of a collective's chunks run the ring the other way
round (spec §3.3; ``--num-queues-per-dim``). Where the two directions of every ring cross disjoint
links (fully-connected and ring dimensions of three or more NPUs) each direction's chunks are
batched and held as with one queue (``simulate.chunk_batching``), and the directions share nothing;
through a switch (both directions on every up- and downlink) or on a ring of two the run still goes
message by message from the start. Every case is compared on every rank with ``fast=False``.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sim_paths import (
    KIND_OF,
    KINDS,
    assert_collectives_all_fast,
    assert_random_case_equals_message_path,
    aware_exact,
    generated_steps,
    random_ranks,
)
from test_sim_examples import coll, write_set

from chakra_pipe.et import schema
from chakra_pipe.et.traceset import TraceSet
from chakra_pipe.sim import HardwareConfig, NetworkConfig, SystemConfig

STEPS = {
    "llama3-8b-t4d4-zero1": ["--model", "llama3-8b", "--layers", "1", "--tp", "4", "--dp", "4", "--zero", "1"],
    "gpt3-13b-t4d4p2": ["--model", "gpt3-13b", "--layers", "2", "--tp", "4", "--dp", "4", "--pp", "2"],
}


def _hw(
    topology: list[str],
    sizes: list[int],
    queues: int = 2,
    active: int = 2,
    splits: int = 4,
    optimization: str = "baseline",
) -> HardwareConfig:
    sysd = {
        "scheduling-policy": "LIFO",
        "endpoint-delay": 10,
        "active-chunks-per-dimension": active,
        "preferred-dataset-splits": splits,
        "collective-optimization": optimization,
        "local-mem-bw": 1600,
        **{f"{k}-implementation": ["ring"] * len(sizes) for k in KINDS},
    }
    net = {"topology": topology, "npus_count": sizes, "bandwidth": [100] * len(sizes), "latency": [700] * len(sizes)}
    return HardwareConfig(
        SystemConfig.from_dict(sysd, source="sys"),
        NetworkConfig.from_dict(net, source="net"),
        backend="congestion_aware",
        num_queues_per_dim=queues,
    )


@pytest.fixture(scope="module")
def steps(tmp_path_factory) -> dict[str, TraceSet]:
    return generated_steps(tmp_path_factory, STEPS)


@pytest.mark.parametrize(
    ("queues", "active", "optimization"), [(2, 2, "baseline"), (2, 4, "localBWAware"), (4, 4, "baseline")]
)
@pytest.mark.parametrize("step", sorted(STEPS))
def test_generated_steps_with_two_queues_take_the_fast_path(
    steps, step: str, queues: int, active: int, optimization: str, caplog
) -> None:
    """On a fully-connected network of all ranks: every collective message evaluated (only pipeline
    sends one by one), nothing redone, every rank equal to the message path. (On a 1-D ring network
    the TP and DP groups' rings route both directions over shared links: declined.)"""
    ts = steps[step]
    hw = _hw(["FullyConnected"], [len(ts.ranks)], queues, active, 4, optimization)
    assert_collectives_all_fast(ts, hw, caplog)
    assert not aware_exact(ts, _hw(["Ring"], [len(ts.ranks)], queues, active, 4, optimization))


def test_rings_whose_directions_share_links_are_declined(tmp_path: Path) -> None:
    """Through a switch both directions cross every up- and downlink, and a ring of two NPUs is the
    same pair of links both ways: those runs go message by message from the start; one chunk per
    collective (only different collectives overlap) keeps the run-time check as before."""
    ts = write_set(tmp_path, [[coll(0, schema.ALL_REDUCE, size=1 << 20)] for _ in range(8)])
    assert aware_exact(ts, _hw(["FullyConnected"], [8]))
    assert aware_exact(ts, _hw(["Ring"], [8]))
    assert aware_exact(ts, _hw(["FullyConnected", "Ring"], [4, 2])) is False  # dimension 1: a ring of two
    assert not aware_exact(ts, _hw(["Switch"], [8]))
    assert not aware_exact(ts, _hw(["FullyConnected", "Switch"], [4, 2]))
    assert aware_exact(ts, _hw(["Switch"], [8], splits=1))
    two = write_set(tmp_path / "two", [[coll(0, schema.ALL_REDUCE, size=1 << 20)] for _ in range(2)])
    assert not aware_exact(two, _hw(["FullyConnected"], [2]))


@st.composite
def _cases(draw) -> tuple[list[list], dict, dict, int]:
    sizes = draw(st.sampled_from([[3], [4], [5], [8], [3, 3], [3, 4], [4, 3], [2, 4], [4, 2]]))
    p = 1
    for s in sizes:
        p *= s
    splits = draw(st.sampled_from([2, 3, 4, 8]))
    active = draw(st.integers(1, 2 * splits))
    kinds = draw(st.lists(st.sampled_from(sorted(KIND_OF)), min_size=1, max_size=3))
    chunk = draw(st.sampled_from([1 << 10, 1 << 14, 3 << 16, 1 << 20]))
    ranks = random_ranks(draw, p, [KIND_OF[k] for k in kinds], chunk * splits)
    system = {
        "scheduling-policy": draw(st.sampled_from(["LIFO", "FIFO"])),
        "endpoint-delay": draw(st.sampled_from([0, 1, 10, 20])),
        "active-chunks-per-dimension": active,
        "preferred-dataset-splits": splits,
        "collective-optimization": draw(st.sampled_from(["baseline", "localBWAware"])),
        "local-mem-bw": 3350,
        **{f"{k}-implementation": ["ring"] * len(sizes) for k in KINDS},
    }
    network = {
        "topology": [draw(st.sampled_from(["FullyConnected", "Ring", "Switch"])) for _ in sizes],
        "npus_count": sizes,
        "bandwidth": [draw(st.sampled_from([25, 100, 400])) for _ in sizes],
        "latency": [draw(st.sampled_from([0, 1, 100, 500, 700])) for _ in sizes],
    }
    return ranks, system, network, draw(st.sampled_from([2, 3, 4]))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_cases())
def test_random_two_way_chunks_equal_the_message_path(case) -> None:
    """Random small sets: 1-D and 2-D FullyConnected / Ring (and Switch, declined) networks, 2–4
    queues per dimension, 2–8 splits, 1–16 active chunks, overlapping or chained collectives of every
    ring type, staggered starts, sends beside them, 0–700 ns latency, endpoint delay 0–20 ns, both
    collective optimizations: every rank equals ``fast=False``, whether the run stayed on the
    recurrence or was redone."""
    ranks, system, network, queues = case
    assert_random_case_equals_message_path(ranks, system, network, num_queues_per_dim=queues)
