"""Several active chunks of one collective on the congestion-aware ring fast path: exact or redone.

With every chunk of a collective running at once (1-D network, one queue, active chunks ≥
``preferred-dataset-splits``) the chunks' phases are evaluated together as one FIFO recurrence
(``RingCoordinator._flush``), the order checked on every link. Each case is compared with the
message-by-message run (``fast=False``); ``fast_messages`` tells which path ran.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from sim_paths import (
    CHUNK_STEPS,
    RERUN,
    assert_collectives_all_fast,
    assert_fast_equals_message_path,
    aware_exact,
    aware_hardware,
    generated_steps,
    tiered_network,
)
from test_sim_examples import _straggler_set, coll, make_node, write_set

from chakra_pipe.et import schema
from chakra_pipe.et.traceset import TraceSet
from chakra_pipe.sim import HardwareConfig, NetworkConfig, SystemConfig, simulate

STEPS = CHUNK_STEPS


def _hw(topology: str, sizes: list[int], chunks: int, splits: int = 4, **extra) -> HardwareConfig:
    return aware_hardware(tiered_network(topology, sizes), "ring", chunks, splits, "localBWAware", **extra)


@pytest.fixture(scope="module")
def steps(tmp_path_factory) -> dict[str, TraceSet]:
    return generated_steps(tmp_path_factory, STEPS)


@pytest.mark.parametrize("chunks", [4, 8])
@pytest.mark.parametrize("topology", ["Switch", "FullyConnected"])
@pytest.mark.parametrize("step", sorted(STEPS))
def test_generated_steps_with_every_chunk_active_take_the_fast_path(
    steps, step: str, topology: str, chunks: int, caplog
) -> None:
    """4 chunks per collective, 4 or 8 active: every ring message is evaluated (only pipeline sends go
    one by one), nothing is redone, and every rank's times and records equal the message path's."""
    ts = steps[step]
    hw = _hw(topology, [len(ts.ranks)], chunks)
    assert_collectives_all_fast(ts, hw, caplog)


@pytest.mark.parametrize("p", [8, 64])  # the joint recurrence in Python lists, then in numpy arrays
@pytest.mark.parametrize("kind", [schema.ALL_REDUCE, schema.ALL_GATHER, schema.REDUCE_SCATTER, schema.ALL_TO_ALL])
def test_chunks_started_together_are_one_recurrence(tmp_path: Path, kind: int, p: int) -> None:
    """Two collectives in a row, every chunk active: the chunks' messages queue behind each other on
    each member's uplink and downlink (step 1's all offered at one ns), and the links carry over."""
    ts = write_set(tmp_path, [[coll(0, kind), coll(1, schema.ALL_REDUCE, size=3 << 18, data=[0])] for _ in range(p)])
    net = {"topology": ["Switch"], "npus_count": [p], "bandwidth": [100], "latency": [700]}
    hw = HardwareConfig(
        _hw("Switch", [p], 4).system, NetworkConfig.from_dict(net, source="net"), backend="congestion_aware"
    )
    fast = simulate(ts, hw, symmetric=False)
    assert fast.fast_messages == fast.messages > 0
    assert_fast_equals_message_path(ts, hw)


@pytest.mark.parametrize("topology", ["Switch", "Ring", "FullyConnected"])
def test_staggered_chunks_stay_exact(tmp_path: Path, topology: str) -> None:
    """Staggered starts, then a small all-gather: a late member's chunks send at one ns after receives
    whose messages arrived at that ns for one chunk and earlier for the other. The order of two
    chunks' sends on a link is the SENDER's (its chains of same-ns callbacks, ``clocked``), and here
    the senders' chains agree with the recurrence: kept on the fast path, equal to ``fast=False``."""
    ts = _straggler_set(tmp_path, 4, schema.ALL_GATHER)
    net = {"topology": [topology], "npus_count": [4], "bandwidth": [100], "latency": [700]}
    hw = HardwareConfig(
        _hw(topology, [4], 4).system, NetworkConfig.from_dict(net, source="net"), backend="congestion_aware"
    )
    fast = simulate(ts, hw, symmetric=False)
    assert fast.fast_messages == fast.messages
    assert fast.to_dict() == simulate(ts, hw, fast=False).to_dict()


def test_a_tie_only_the_event_order_settles_reruns(tmp_path: Path, caplog) -> None:
    """Eight NPUs with uneven compute before an all-reduce and an all-to-all in 2 chunks: two chunks'
    sends meet a link at one ns where a sender's receive met its message's arrival at the same ns —
    their order is the global event sequence, which the recurrence does not model: ``LinkConflict``,
    the run is redone message by message and equals ``fast=False``."""
    lead = [0, 2, 0, 0, 0, 0, 0, 0]
    middle = [0, 0, 0, 2, 2, 0, 0, 0]
    ranks = [
        [
            make_node(0, schema.COMP_NODE, lead[r]),
            coll(1, schema.ALL_REDUCE, size=16384, data=[0]),
            make_node(2, schema.COMP_NODE, middle[r], data=[1]),
            coll(3, schema.ALL_TO_ALL, size=4096, data=[2]),
        ]
        for r in range(8)
    ]
    ts = write_set(tmp_path, ranks)
    sysd = {
        "scheduling-policy": "LIFO",
        "endpoint-delay": 0,
        "active-chunks-per-dimension": 2,
        "preferred-dataset-splits": 2,
        "collective-optimization": "baseline",
        "local-mem-bw": 3350,
        **{f"{k}-implementation": ["ring"] for k in ("all-reduce", "reduce-scatter", "all-gather", "all-to-all")},
    }
    net = {"topology": ["FullyConnected"], "npus_count": [8], "bandwidth": [100], "latency": [500]}
    hw = HardwareConfig(
        SystemConfig.from_dict(sysd, source="sys"),
        NetworkConfig.from_dict(net, source="net"),
        backend="congestion_aware",
    )
    with caplog.at_level("INFO", logger="chakra_pipe.sim.simulate"):
        fast = simulate(ts, hw, symmetric=False)
    assert "no later than the chunk before" in caplog.text and RERUN in caplog.text
    assert fast.fast_messages == 0
    assert fast.to_dict() == simulate(ts, hw, fast=False).to_dict()


def test_chunks_running_the_other_way_are_declined(steps) -> None:
    """Fewer active chunks than chunks (a queue admits the rest one by one) and several dimensions (a
    chunk enters the next dimension when it leaves the previous one) are held and evaluated together
    (``tests/test_sim_aware_staggered_chunks.py``); two queues run half the chunks the other way, over
    the same uplinks in another order: through a switch, message by message from the start (on a
    fully-connected network the directions share no link: ``tests/test_sim_aware_two_queues.py``)."""
    ts = steps["mixtral-t2d4e2"]
    assert aware_exact(ts, _hw("Switch", [8], 4))
    assert aware_exact(ts, _hw("Switch", [8], 2))
    assert aware_exact(ts, _hw("Switch", [2, 4], 4))
    assert not aware_exact(ts, _hw("Switch", [8], 4, num_queues_per_dim=2))
    assert aware_exact(ts, _hw("Switch", [2, 4], 4, splits=1))
