"""Direct phases on the congestion-aware fast path: every window evaluated at once over FIFO links.

``system/direct_aware.py`` asks the network for each direct phase's hops (``FifoBatchLinks``: per link,
the messages by arrival and one cumulative maximum) instead of sending P·(P−1) messages one by one;
the order it assumes is checked on every link (``LinkConflict``: the run is redone message by
message). Each case is compared on every rank with ``fast=False``; ``fast_messages`` tells which
path ran.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from sim_paths import (
    KINDS,
    RERUN,
    assert_collectives_all_fast,
    assert_fast_equals_message_path,
    aware_exact,
    aware_hardware,
    generated_steps,
)
from test_sim_direct_tree_fast import _write

from chakra_pipe.et.traceset import TraceSet
from chakra_pipe.sim import HardwareConfig, SystemConfig, simulate

STEPS = {
    "llama3-8b-t8d8-zero1": ["--model", "llama3-8b", "--layers", "1", "--tp", "8", "--dp", "8", "--zero", "1"],
    "mixtral-t2d4e2": ["--model", "mixtral-8x7b", "--layers", "1", "--tp", "2", "--dp", "4", "--ep", "2"],
    "gpt3-175b-t2d2p2": ["--model", "gpt3-175b", "--layers", "2", "--tp", "2", "--dp", "2", "--pp", "2"],
}


def _hw(
    topology: list[str], sizes: list[int], algo: str = "direct", splits: int = 1, chunks: int = 1, bw: float = 100
) -> HardwareConfig:
    net = {"topology": topology, "npus_count": sizes, "bandwidth": [bw] * len(sizes), "latency": [700] * len(sizes)}
    return aware_hardware(net, algo, chunks, splits, local_mem_bw=1600)


@pytest.fixture(scope="module")
def steps(tmp_path_factory) -> dict[str, TraceSet]:
    return generated_steps(tmp_path_factory, STEPS)


@pytest.mark.parametrize("kinds", [["AR"], ["RS", "AG"], ["A2A", "AR"]])
@pytest.mark.parametrize("splits", [1, 4])
@pytest.mark.parametrize("topology", ["Switch", "FullyConnected"])
@pytest.mark.parametrize("p", [4, 8, 16])
def test_every_collective_type_takes_the_fast_path(
    tmp_path: Path, p: int, topology: str, splits: int, kinds: list[str]
) -> None:
    """Collectives in a chain, several chunks each: every message evaluated (a window's P−1 messages
    queue on each uplink, each downlink takes P−1 senders' by arrival, the links carry over from
    chunk to chunk and collective to collective), nothing redone, every rank as the message path."""
    ts = _write(tmp_path, p, kinds, stagger_us=0, size=3 << 19)
    hw = _hw([topology], [p], splits=splits)
    assert aware_exact(ts, hw)
    fast = simulate(ts, hw, symmetric=False)
    assert fast.fast_messages == fast.messages > 0
    assert_fast_equals_message_path(ts, hw)


@pytest.mark.parametrize("kinds", [["AR"], ["RS", "AG"]])
@pytest.mark.parametrize("splits", [1, 4])
@pytest.mark.parametrize("topology", ["Switch", "FullyConnected"])
@pytest.mark.parametrize("p", [4, 16, 64])
def test_halving_doubling_takes_the_fast_path(
    tmp_path: Path, p: int, topology: str, splits: int, kinds: list[str]
) -> None:
    """Halving-doubling: each step's messages (one per member, to its partner) one batch over the
    links, the partners and sizes changing per step; every message evaluated, every rank exact."""
    ts = _write(tmp_path, p, kinds, stagger_us=0, size=1 << 20)
    hw = _hw([topology], [p], algo="halvingDoubling", splits=splits)
    assert aware_exact(ts, hw)
    fast = simulate(ts, hw, symmetric=False)
    assert fast.fast_messages == fast.messages > 0
    assert_fast_equals_message_path(ts, hw)


@pytest.mark.parametrize("algo", ["direct", "halvingDoubling"])
def test_staggered_halving_doubling_and_direct_on_64(tmp_path: Path, algo: str) -> None:
    """64 members starting 0-12 µs apart: a step's message meeting another sender's still on a
    downlink is refused and the run redone, or evaluated; equal to ``fast=False`` either way."""
    ts = _write(tmp_path, 64, ["AR", "RS"], stagger_us=3, size=1 << 20)
    assert_fast_equals_message_path(ts, _hw(["Switch"], [64], algo=algo, splits=2))


@pytest.mark.parametrize("bw", [50, 400])
@pytest.mark.parametrize("kinds", [["AR", "A2A"], ["AG", "RS"]])
def test_64_npus(tmp_path: Path, kinds: list[str], bw: float) -> None:
    """64 NPUs, two chunks per collective, links slower and faster than the memory bus."""
    ts = _write(tmp_path, 64, kinds, stagger_us=0, size=1 << 20)
    hw = _hw(["Switch"], [64], splits=2, bw=bw)
    fast = simulate(ts, hw, symmetric=False)
    per_chunk = 64 * 63 * (3 if "AR" in kinds else 2)  # an all-reduce's phase sends two windows
    assert fast.fast_messages == fast.messages == 2 * per_chunk
    assert_fast_equals_message_path(ts, hw)


@pytest.mark.parametrize("topology", ["Switch", "FullyConnected"])
@pytest.mark.parametrize("kinds", [["AR"], ["RS", "AG"], ["A2A", "AR"]])
def test_staggered_starts_stay_exact(tmp_path: Path, kinds: list[str], topology: str) -> None:
    """Members starting 0–12 µs apart: the late members' messages queue behind the early ones' on the
    downlinks, or meet another sender's at one ns (then redone): equal to ``fast=False`` either way."""
    ts = _write(tmp_path, 8, kinds, stagger_us=3, size=1 << 20)
    assert_fast_equals_message_path(ts, _hw([topology], [8], splits=2))


def test_a_tie_on_a_downlink_reruns_message_by_message(tmp_path: Path, caplog) -> None:
    """Four NPUs on a switch starting 0, 6, 3 and 0 µs apart: two senders' messages reach one
    downlink at the same ns, whose order only the global event sequence settles (not modelled):
    ``LinkConflict``, the run is redone message by message and equals ``fast=False``."""
    ts = _write(tmp_path, 4, ["RS", "AG"], stagger_us=3, size=1 << 20)
    hw = _hw(["Switch"], [4], splits=2)
    with caplog.at_level("INFO", logger="chakra_pipe.sim.simulate"):
        fast = simulate(ts, hw, symmetric=False)
    assert "two senders' messages reach a link at the same ns" in caplog.text and RERUN in caplog.text
    assert fast.fast_messages == 0
    assert fast.to_dict() == simulate(ts, hw, fast=False).to_dict()


def test_direct_runs_outside_the_batch_layout_are_declined(tmp_path: Path) -> None:
    """Rings' multi-hop routes (a link carries some senders' messages, not the same number of each),
    several dimensions, windows below P−1 (sends as receives come), some chunks at once (windows
    interleaved on an uplink, chunks starting apart) go message by message from the start; every
    chunk at once is one batch (``tests/test_sim_aware_direct_chunks.py``)."""
    ts = _write(tmp_path, 8, ["AR"], stagger_us=0)
    assert aware_exact(ts, _hw(["Switch"], [8]))
    assert aware_exact(ts, _hw(["FullyConnected"], [8]))
    assert aware_exact(ts, _hw(["Switch"], [8], algo="direct7"))
    assert aware_exact(ts, _hw(["Switch"], [8], algo="oneDirect"))
    assert not aware_exact(ts, _hw(["Ring"], [8]))
    assert not aware_exact(ts, _hw(["Switch", "Switch"], [2, 4]))
    assert not aware_exact(ts, _hw(["Switch"], [8], algo="direct3"))
    assert aware_exact(ts, _hw(["Switch"], [8], splits=2, chunks=2))
    assert not aware_exact(ts, _hw(["Switch"], [8], splits=4, chunks=2))
    assert aware_exact(ts, _hw(["Switch"], [8], algo="halvingDoubling"))
    assert not aware_exact(ts, _hw(["Ring"], [8], algo="halvingDoubling"))
    assert aware_exact(ts, _hw(["Switch"], [8], algo="doubleBinaryTree"))  # tests/test_sim_aware_tree.py
    fast = simulate(ts, _hw(["Ring"], [8]), symmetric=False)
    assert fast.fast_messages == 0
    assert fast.finish_ns == simulate(ts, _hw(["Ring"], [8]), fast=False).finish_ns


@pytest.mark.parametrize("step", sorted(STEPS))
def test_generated_llm_steps_with_direct(steps, step: str, caplog) -> None:
    """Generated steps with every collective ``direct`` on an aware switch of all their NPUs (64 for
    llama3-8b t8d8): every collective message evaluated, only pipeline sends one by one, nothing
    redone, and every rank's times and records equal the message path's."""
    ts = steps[step]
    hw = _hw(["Switch"], [len(ts.ranks)], splits=4)
    assert_collectives_all_fast(ts, hw, caplog)


@pytest.mark.parametrize("reduce", ["ring", "halvingDoubling"])
@pytest.mark.parametrize("step", ["mixtral-t2d4e2", "gpt3-175b-t2d2p2", "llama3-8b-t8d8-zero1"])
def test_ring_and_direct_phases_share_the_links(steps, step: str, reduce: str, caplog) -> None:
    """Reductions and gathers on rings or halving-doubling, all-to-alls direct: the fast paths
    evaluate their phases over the same FIFO links (and pipeline sends go one by one beside them),
    each checking the order the others left; every rank equals the message path."""
    ts = steps[step]
    hw = _hw(["Switch"], [len(ts.ranks)], splits=4)
    system = {
        "scheduling-policy": "LIFO",
        "endpoint-delay": 10,
        "active-chunks-per-dimension": 1,
        "preferred-dataset-splits": 4,
        "collective-optimization": "baseline",
        "local-mem-bw": 1600,
        **{f"{k}-implementation": [reduce] for k in KINDS if k != "all-to-all"},
        "all-to-all-implementation": ["direct"],
    }
    hw = HardwareConfig(SystemConfig.from_dict(system, source="sys"), hw.network, backend="congestion_aware")
    assert aware_exact(ts, hw)
    with caplog.at_level("INFO", logger="chakra_pipe.sim.simulate"):
        fast = simulate(ts, hw, symmetric=False)
    assert RERUN not in caplog.text and fast.fast_messages > 0
    assert_fast_equals_message_path(ts, hw)
