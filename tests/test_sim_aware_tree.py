"""Double-binary-tree all-reduces on the congestion-aware fast path: one pass up, one down, over FIFO links.

``system/tree_aware.py`` advances each tree phase's messages over the links in the order each link
takes them, and places a phase's message that overtakes an earlier phase's tail among the messages
the link remembers (``network.aware.insert_kept``); a message that would move one already taken
raises ``LinkConflict`` and the run is redone message by message. Every case is compared on every
rank with ``fast=False``; ``fast_messages`` tells which path ran.
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from sim_paths import KINDS, RERUN, assert_fast_equals_message_path, aware_exact, aware_hardware
from test_sim_aware_p2p import _pipeline_beside_ring
from test_sim_direct_tree_fast import TYPES, _write

from chakra_pipe.et import schema
from chakra_pipe.et.attrs import set_attr
from chakra_pipe.et.framing import write_trace
from chakra_pipe.et.traceset import TraceSet
from chakra_pipe.sim import HardwareConfig, SystemConfig, simulate


def _hw(topology: str, p: int, splits: int, bw: float = 100, latency: float = 700) -> HardwareConfig:
    net = {"topology": [topology], "npus_count": [p], "bandwidth": [bw], "latency": [latency]}
    return aware_hardware(net, "doubleBinaryTree", 1, splits, local_mem_bw=1600)


def _all_fast(ts: TraceSet, hw) -> None:
    """Admitted, every message on the recurrence (nothing redone), every rank as the message path."""
    assert aware_exact(ts, hw)
    fast = simulate(ts, hw, symmetric=False)
    assert fast.fast_messages == fast.messages > 0
    assert_fast_equals_message_path(ts, hw)


@pytest.mark.parametrize("topology", ["Switch", "FullyConnected"])
@pytest.mark.parametrize("splits", [1, 2, 4])
@pytest.mark.parametrize("p", [2, 8, 64])
def test_chained_all_reduces_take_the_fast_path(tmp_path: Path, p: int, splits: int, topology: str) -> None:
    """Three all-reduces in a chain, 1–4 chunks each, the chunks alternating the two trees: a chunk's
    tree overtakes the previous one's tail on the switch's downlinks and is placed among its
    messages; every message evaluated, every rank exact."""
    _all_fast(_write(tmp_path, p, ["AR", "AR", "AR"], stagger_us=0), _hw(topology, p, splits))


@pytest.mark.parametrize("seed", range(12))
def test_random_sizes_ranks_and_chunks(tmp_path: Path, seed: int) -> None:
    """Random group sizes, message sizes, chunk counts, staggered starts, link speeds and latencies
    (down to 0 ns): equal to ``fast=False`` on every rank, on the recurrence throughout."""
    rnd = random.Random(seed)
    p = rnd.choice([2, 4, 8, 16, 32])
    size = rnd.choice([12345, 1 << 16, 3 << 18, 1 << 20])
    ts = _write(tmp_path, p, ["AR"] * rnd.randint(1, 3), stagger_us=rnd.choice([0, 1, 3, 10]), size=size)
    hw = _hw(
        rnd.choice(["Switch", "FullyConnected"]),
        p,
        rnd.randint(1, 4),
        rnd.choice([25, 100, 400]),
        rnd.choice([0, 100, 700]),
    )
    _all_fast(ts, hw)


@pytest.mark.parametrize("other", ["ring", "direct"])
def test_trees_beside_other_collectives_go_message_by_message(tmp_path: Path, other: str) -> None:
    """All-reduces on trees between reduce-scatters, all-to-alls and all-gathers on rings or direct:
    those fast paths refuse a phase overtaking a tree's tail (they do not place messages among a
    link's earlier ones), so the run is declined before it starts and goes message by message, exact."""
    ts = _write(tmp_path, 16, ["AR", "RS", "AR", "A2A", "AG", "AR"], stagger_us=1)
    system = {
        "scheduling-policy": "LIFO",
        "endpoint-delay": 10,
        "active-chunks-per-dimension": 1,
        "preferred-dataset-splits": 2,
        "collective-optimization": "baseline",
        "local-mem-bw": 1600,
        **{f"{k}-implementation": [other] for k in KINDS},
        "all-reduce-implementation": ["doubleBinaryTree"],
    }
    network = _hw("Switch", 16, 2).network
    hw = HardwareConfig(SystemConfig.from_dict(system, source="sys"), network, backend="congestion_aware")
    assert not aware_exact(ts, hw)
    assert aware_exact(_write(tmp_path / "ar", 16, ["AR", "AR"], stagger_us=1), hw)  # all-reduces only
    fast = simulate(ts, hw, symmetric=False)
    assert fast.fast_messages == 0
    assert_fast_equals_message_path(ts, hw)


def _all_reduces(tmp: Path, ranks: int, sizes: list[int], chained: bool, stagger_us: int = 0) -> TraceSet:
    """Per rank: a compute node of ``(rank · 7) mod 5 · stagger_us`` µs, then all-reduces of ``sizes``
    bytes after it, each after the one before (``chained``) or all at once."""
    prefix = tmp / "c"
    for r in range(ranks):
        nodes = [schema.Node(id=1, name="c", type=schema.COMP_NODE, duration_micros=(r * 7) % 5 * stagger_us)]
        for k, size in enumerate(sizes):
            n = schema.Node(id=2 + k, name=f"AR{k}", type=schema.COMM_COLL_NODE)
            n.data_deps.append(1 + k if chained else 1)
            set_attr(n, "comm_type", TYPES["AR"])
            set_attr(n, "comm_size", size)
            nodes.append(n)
        write_trace(f"{prefix}.{r}.et", schema.GlobalMetadata(version="0.0.4"), nodes)
    return TraceSet.load(prefix)


def test_sends_beside_trees_are_kept_or_rerun_and_exact(tmp_path: Path, caplog) -> None:
    """Rank 2 sends to rank 1 at time 0 beside the tree all-reduce (``test_sim_aware_p2p``'s set): a
    small send passes before the trees' messages, which wait for it on the links; a 1 MiB one still
    holds a link that a tree message reaches (the send is not among the messages a link remembers,
    so the tree message cannot be placed before it: ``LinkConflict``), and the run is redone message
    by message. Both happen, every rank equal to ``fast=False``."""
    hw = _hw("Switch", 4, 4, bw=50, latency=500)
    kept = rerun = 0
    for size in (1 << 14, 1 << 20):
        for lead in (0, 20):
            ts = _pipeline_beside_ring(tmp_path, size, lead)
            assert aware_exact(ts, hw)
            caplog.clear()
            with caplog.at_level("INFO", logger="chakra_pipe.sim.simulate"):
                fast = simulate(ts, hw, symmetric=False)
            if RERUN in caplog.text:
                assert fast.fast_messages == 0
                rerun += 1
            else:
                assert fast.fast_messages == fast.messages - 1  # the send alone one by one
                kept += 1
            assert_fast_equals_message_path(ts, hw)
    assert kept == 3 and rerun == 1


def test_all_reduces_at_once_or_of_several_sizes_go_message_by_message(tmp_path: Path) -> None:
    """All-reduces of one rank running at once (gradient buckets), or of different sizes, interleave
    their chunks on the links in ways the placement refuses: declined before the run, which is exact."""
    hw = _hw("Switch", 16, 4)
    assert aware_exact(_all_reduces(tmp_path / "chain", 16, [1 << 20, 1 << 20], chained=True), hw)
    assert not aware_exact(_all_reduces(tmp_path / "sizes", 16, [1 << 20, 7 << 20], chained=True), hw)
    ts = _all_reduces(tmp_path, 16, [1 << 20, 7 << 20, 3 << 16], chained=False)
    assert not aware_exact(ts, hw)
    fast = simulate(ts, hw, symmetric=False)
    assert fast.fast_messages == 0
    assert fast.to_dict() == simulate(ts, hw, fast=False).to_dict()


def test_trees_outside_the_one_owner_layout_are_declined(tmp_path: Path) -> None:
    """A ring network (a link carries several members' messages) goes message by message from the
    start."""
    ts = _write(tmp_path, 8, ["AR"], stagger_us=0)
    assert aware_exact(ts, _hw("Switch", 8, 1))
    assert aware_exact(ts, _hw("FullyConnected", 8, 1))
    assert not aware_exact(ts, _hw("Ring", 8, 1))
    fast = simulate(ts, _hw("Ring", 8, 1), symmetric=False)
    assert fast.fast_messages == 0
    assert fast.finish_ns == simulate(ts, _hw("Ring", 8, 1), fast=False).finish_ns
