"""The congestion-aware ring fast path on 2-D and 3-D networks: exact on every rank, or redone.

A hierarchical collective runs one ring phase per dimension, each inside that dimension's group, so
its messages cross that group's links only (``simulate.aware_fast_path_is_exact`` has the argument).
Every case is compared with the message-by-message run (``fast=False``), and the counters say which
path ran: ``fast_messages`` are the ring messages the recurrence evaluated, the rest went one by one.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from sim_paths import KINDS, RERUN, assert_fast_equals_message_path, aware_exact, generated_steps
from test_sim_examples import coll, make_node, write_set

from chakra_pipe.et import schema
from chakra_pipe.et.traceset import TraceSet
from chakra_pipe.sim import HardwareConfig, NetworkConfig, SystemConfig, simulate

# generated steps (TP, DP, PP, EP, ZeRO-1) and the multi-dimensional networks they run on
STEPS = {
    "llama3-8b-t2d2-zero1": ["--model", "llama3-8b", "--layers", "2", "--tp", "2", "--dp", "2", "--zero", "1"],
    "mixtral-t2d4e2": ["--model", "mixtral-8x7b", "--layers", "1", "--tp", "2", "--dp", "4", "--ep", "2"],
    "gpt3-175b-t2d2p2": ["--model", "gpt3-175b", "--layers", "2", "--tp", "2", "--dp", "2", "--pp", "2"],
}
NETWORKS = {  # (step, topology, npus_count)
    "llama3-8b-t2d2-zero1": [("Switch", [2, 2]), ("Ring", [2, 2]), ("FullyConnected", [2, 2])],
    "mixtral-t2d4e2": [("Switch", [2, 4]), ("Switch", [2, 2, 2]), ("FullyConnected", [2, 2, 2])],
    "gpt3-175b-t2d2p2": [("Switch", [4, 2]), ("Switch", [2, 2, 2]), ("Ring", [2, 4])],
}


@pytest.fixture(scope="module")
def steps(tmp_path_factory) -> dict[str, TraceSet]:
    return generated_steps(tmp_path_factory, STEPS)


def _hw(topology: str, sizes: list[int], optimization: str = "localBWAware", **sys_overrides) -> HardwareConfig:
    system = {
        "scheduling-policy": "LIFO",
        "endpoint-delay": 10,
        "active-chunks-per-dimension": 1,
        "preferred-dataset-splits": 4,
        "collective-optimization": optimization,
        "local-mem-bw": 3350,
        **{f"{k}-implementation": ["ring"] * len(sizes) for k in KINDS},
        **sys_overrides,
    }
    net = {
        "topology": [topology] * len(sizes),
        "npus_count": sizes,
        "bandwidth": [400, 200, 100][: len(sizes)],
        "latency": [936.25, 1000, 2000][: len(sizes)],
    }
    return HardwareConfig(
        SystemConfig.from_dict(system, source="sys"),
        NetworkConfig.from_dict(net, source="net"),
        backend="congestion_aware",
    )


@pytest.mark.parametrize("optimization", ["localBWAware", "baseline"])
@pytest.mark.parametrize(
    ("step", "topology", "sizes"), [(s, t, n) for s, nets in NETWORKS.items() for t, n in nets], ids=str
)
def test_generated_steps_take_the_aware_fast_path_on_multidim_networks(
    steps, step: str, topology: str, sizes: list[int], optimization: str, caplog
) -> None:
    """Per-dimension ring phases (and the TP / DP / EP sub-group rings beside them) are evaluated by
    the recurrence: every ring message is a fast message, only the pipeline sends go one by one, no
    run is redone, and every rank's times and collective records equal the message path's."""
    ts = steps[step]
    hw = _hw(topology, sizes, optimization)
    assert aware_exact(ts, hw)
    with caplog.at_level("INFO", logger="chakra_pipe.sim.simulate"):
        fast = simulate(ts, hw, symmetric=False)
    assert RERUN not in caplog.text
    p2p = sum(int((g.types == schema.COMM_SEND_NODE).sum()) for g in ts.ranks)
    assert fast.messages - fast.fast_messages == p2p
    assert fast.fast_messages > 0
    assert_fast_equals_message_path(ts, hw)


def _conflict_set(tmp: Path, p: int) -> tuple[TraceSet, dict[int, list[int]]]:
    """A [p, 2] network: in dimension 0's group of NPUs 0 … p−1 the lower half all-gathers in a
    sub-group first while the upper half (and the other group) start the world all-reduce at once."""
    ranks = [
        [coll(0, schema.ALL_GATHER, pg_name="1"), coll(1, schema.ALL_REDUCE, data=[0])]
        if r < p // 2
        else [coll(1, schema.ALL_REDUCE)]
        for r in range(2 * p)
    ]
    return write_set(tmp, ranks), {1: list(range(p // 2))}


@pytest.mark.parametrize("p", [8, 48])  # the dimension-0 ring's check in Python lists, then in numpy arrays
def test_different_phases_meeting_on_a_link_rerun_message_by_message(tmp_path: Path, caplog, p: int) -> None:
    """NPU p−1's first world message (dimension 0's ring phase) reaches NPU 0's dimension-0 downlink
    while the sub-group's messages are on it: their FIFO order is event order, which the recurrence
    does not see. ``LinkConflict`` → the run is redone message by message and equals ``fast=False``."""
    ts, groups = _conflict_set(tmp_path, p)
    hw = _hw("Switch", [p, 2], "baseline")
    assert aware_exact(ts, hw, groups)
    with caplog.at_level("INFO", logger="chakra_pipe.sim.simulate"):
        fast = simulate(ts, hw, comm_groups=groups, symmetric=False)
    assert RERUN in caplog.text
    assert fast.fast_messages == 0
    slow = simulate(ts, hw, comm_groups=groups, fast=False)
    assert fast.to_dict() == slow.to_dict() and min(fast.finish_ns) > 0


def test_which_multidim_runs_are_declined(tmp_path: Path) -> None:
    """Before the run: a sub-group ring whose routes put two of its members' messages on one link,
    several active chunks of one collective, and a non-ring algorithm decline; rings of one sender
    per link pass, whatever dimensions their routes cross."""
    ranks = [[coll(0, schema.ALL_REDUCE, pg_name="1")] if r in (0, 1, 2, 5) else [] for r in range(8)]
    for r in range(8):
        ranks[r].append(coll(1, schema.ALL_REDUCE, data=[0] if ranks[r] else []))
    ts = write_set(tmp_path, ranks)
    hw = _hw("Switch", [4, 2])
    # 2 -> 5 goes 2 -> 1 in dimension 0, then 1 -> 5: NPU 1's dimension-0 downlink also carries 0 -> 1
    assert not aware_exact(ts, hw, {1: [0, 1, 2, 5]})
    # 5 -> 0 goes 5 -> 4 then 4 -> 0, 0 -> 5 goes 0 -> 1 then 1 -> 5: one sender per link, both dimensions
    good = {1: [5, 0, 2, 1]}
    assert aware_exact(ts, hw, good)
    # several chunks in flight: held and evaluated together (tests/test_sim_aware_staggered_chunks.py)
    assert aware_exact(ts, _hw("Switch", [4, 2], **{"active-chunks-per-dimension": 2}), good)
    assert aware_exact(
        ts, _hw("Switch", [4, 2], **{"active-chunks-per-dimension": 2, "preferred-dataset-splits": 1}), good
    )
    assert not aware_exact(ts, _hw("Switch", [4, 2], **{"all-reduce-implementation": ["ring", "direct"]}), good)
    for groups in ({1: [0, 1, 2, 5]}, good):
        fast, slow = (
            simulate(ts, hw, comm_groups=groups, symmetric=False),
            simulate(ts, hw, comm_groups=groups, fast=False),
        )
        assert fast.to_dict() == slow.to_dict() and min(fast.finish_ns) > 0
    # alone on the network, the cross-dimension sub-group ring is evaluated whole by the recurrence
    alone = write_set(
        tmp_path / "alone",
        [
            [coll(0, schema.ALL_REDUCE, pg_name="1")] if r in good[1] else [make_node(0, schema.COMP_NODE, 5)]
            for r in range(8)
        ],
    )
    fast = simulate(alone, hw, comm_groups=good, symmetric=False)
    assert fast.fast_messages == fast.messages > 0
    assert fast.to_dict() == simulate(alone, hw, comm_groups=good, fast=False).to_dict()


def test_one_ring_over_every_npu_crosses_dimensions_exactly(tmp_path: Path) -> None:
    """``oneRing`` makes one ring over all NPUs of a 2-D switch: its routes cross both dimensions' links
    with one sender each, so it takes the recurrence; staggered starts, several collectives."""
    ranks = [
        [coll(0, schema.ALL_REDUCE, size=3 << 18, involved_dim=[True, True]), coll(1, schema.ALL_GATHER, data=[0])]
        for _ in range(8)
    ]
    ts = write_set(tmp_path, ranks)
    hw = _hw("Switch", [4, 2], **{f"{k}-implementation": ["oneRing"] for k in KINDS})
    assert aware_exact(ts, hw)
    fast = simulate(ts, hw, symmetric=False)
    assert fast.fast_messages == fast.messages > 0
    assert_fast_equals_message_path(ts, hw)
