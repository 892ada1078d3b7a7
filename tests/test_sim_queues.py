"""Chunk queues per dimension (spec §3.3): which queue and ring direction each phase takes, and the
queue deadlock ASTRA-sim shares with us.

Expected times come from the spec's closed forms (``ring_chunk``, §6.2) and the queue rules, never
from our own output: with ``threshold = ceil(active-chunks / queues)`` streams running per queue, the
chunks of one collective run ``threshold x (queues they spread over)`` at a time.
"""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest
from test_sim_direct_tree_fast import _hw, _write
from test_sim_examples import coll, make_node, ring_chunk, ring_hw, write_set

from chakra_pipe.errors import StuckError
from chakra_pipe.et import schema
from chakra_pipe.sim import simulate

CHUNK = (1 << 20) // 4  # 1 MiB in preferred-dataset-splits = 4 chunks
BACKENDS = ["congestion_unaware", "congestion_aware"]


def _two_queues(backend: str, opt: str):
    """Ring of 8 (50 GB/s, 500 ns), 2 queues per dimension, 2 active chunks: one running per queue."""
    hw = ring_hw(8, backend=backend, **{"active-chunks-per-dimension": 2, "collective-optimization": opt})
    return dataclasses.replace(hw, num_queues_per_dim=2)


def _all_reduce_set(tmp: Path):
    return write_set(tmp, [[coll(1, schema.ALL_REDUCE)] for _ in range(8)])


@pytest.mark.parametrize("backend", BACKENDS)
def test_local_bw_aware_all_reduce_takes_the_first_half_queue(tmp_path: Path, backend: str) -> None:
    """Upstream (PR #135) allocates the last dimension's all-reduce from the first half of the queues:
    with 2 queues that is always queue 0, so the 4 chunks run one after another (4 x 16,110 ns, the
    §7.1 chunk), not two at a time through both queues."""
    ts, hw = _all_reduce_set(tmp_path), _two_queues(backend, "localBWAware")
    expected = 4 * ring_chunk("AR", 8, CHUNK)
    assert expected == 64_440
    assert simulate(ts, hw).finish_ns == [expected] * 8
    assert simulate(ts, hw, fast=False).finish_ns == [expected] * 8


@pytest.mark.parametrize("backend", BACKENDS)
def test_baseline_upper_queue_of_dimension_0_runs_anticlockwise(tmp_path: Path, backend: str) -> None:
    """Baseline chunks alternate queues 0 and 1; on the analytical backends queue 1 of dimension 0
    runs the anticlockwise ring (upstream exempts dimension 0 only on Garnet). The two running chunks
    then use disjoint directed links, so even the congestion-aware network gives each the
    uncontended chunk time: 2 rounds x 16,110 ns. (Both clockwise, they would share every link.)"""
    ts, hw = _all_reduce_set(tmp_path), _two_queues(backend, "baseline")
    expected = 2 * ring_chunk("AR", 8, CHUNK)
    assert simulate(ts, hw).finish_ns == [expected] * 8
    assert simulate(ts, hw, fast=False).finish_ns == [expected] * 8


# -- the queue deadlock of a localBWAware all-reduce on 3 dimensions --------------------------------
def _staggered_3d(tmp: Path, algo: str, active: int = 1):
    """The reported run: [2, 4, 2] Ring/Switch/FullyConnected, 1 MiB localBWAware all-reduce in 4
    chunks, each rank first computing (r * 7) % 5 us, so the ranks issue it at different times."""
    ts = _write(tmp, 16, ["AR"], stagger_us=1)
    hw = _hw([algo] * 3, ["Ring", "Switch", "FullyConnected"], [2, 4, 2], 4, "localBWAware")
    system = dataclasses.replace(hw.system, active_chunks_per_dimension=active)
    return ts, dataclasses.replace(hw, system=system)


WAIT = re.compile(
    r"NPU (\d+) runs chunk stream (\d+) \((\w+), dimension (\d+), queue (\d+)\) and waits for NPU (\d+), "
    r"whose queue (\d+) runs stream (\d+) \((\w+)\) with stream (\d+) queued behind it"
)


@pytest.mark.parametrize("fast", [True, False])
@pytest.mark.parametrize("algo", ["direct", "halvingDoubling"])
def test_local_bw_aware_3d_queue_deadlock_is_explained(tmp_path: Path, algo: str, fast: bool) -> None:
    """ASTRA-sim deadlocks here too (spec §3.3: with one queue per dimension the reduce-scatter and
    all-gather phases of dimension 1 share its queue, which runs one chunk; issues #137 / #370).
    Dimension 1's queue receives reduce-scatter phases as chunks leave dimension 0 and all-gather
    phases as they leave dimension 2's all-reduce, so staggered ranks queue them in different orders.
    The error names the cycle: two NPUs of one dimension-1 ring, each running the chunk the other has
    queued behind its own running chunk, one a reduce-scatter and one an all-gather."""
    ts, hw = _staggered_3d(tmp_path, algo)
    with pytest.raises(StuckError) as err:
        simulate(ts, hw, fast=fast)
    msg = str(err.value)
    assert "chunk queues deadlock" in msg and "issues #137 and #370" in msg
    assert "active-chunks-per-dimension >= preferred-dataset-splits (4)" in msg
    waits = WAIT.findall(msg)
    assert len(waits) == 2, msg
    (a, s, ta, da, qa, pa, qpa, ra, tra, ba), (b, t, tb, db, qb, pb, qpb, rb, trb, bb) = waits
    assert (pa, pb) == (b, a)  # a waits for b and b for a
    assert da == db == "1" and qa == qb == qpa == qpb == "1"  # dimension 1's single queue
    assert (ra, ba) == (t, s) and (rb, bb) == (s, t)  # each runs what the other has queued behind
    assert {ta, tb} == {"REDUCE_SCATTER", "ALL_GATHER"} and (tra, trb) == (tb, ta)
    na, nb = int(a), int(b)
    assert na % 2 == nb % 2 and na // 8 == nb // 8  # same coordinates on dimensions 0 and 2
    assert err.value.stuck and all(ids == [2] for ids in err.value.stuck.values())


def test_every_chunk_active_avoids_the_queue_deadlock(tmp_path: Path) -> None:
    """The way out the message names: with active-chunks-per-dimension = splits every chunk runs at
    once, nothing waits behind another chunk, and fast and event paths agree."""
    ts, hw = _staggered_3d(tmp_path, "direct", active=4)
    fast, slow = simulate(ts, hw), simulate(ts, hw, fast=False)
    assert fast.finish_ns == slow.finish_ns and min(fast.finish_ns) > 0


def test_other_stuck_runs_keep_the_generic_reason(tmp_path: Path) -> None:
    """No queue cycle: a deadlock of issue order alone. Rank 0's send completes at once, so it issues
    its all-reduce and then its (independent) all-gather; rank 1 waits for the message, so its
    all-gather is issued first. World collectives pair up in issue order: AR meets AG and neither
    finishes. The message names the stuck nodes and does not claim a queue cycle."""
    size = 4096
    ranks = []
    for me in (0, 1):
        kind = schema.COMM_SEND_NODE if me == 0 else schema.COMM_RECV_NODE
        ranks.append(
            [
                make_node(1, kind, comm_src=0, comm_dst=1, comm_size=size, comm_tag=0),
                coll(2, schema.ALL_REDUCE, size, data=[1]),
                make_node(3, schema.COMP_NODE, dur=1, data=[2]),
                coll(4, schema.ALL_GATHER, size),
            ]
        )
    with pytest.raises(StuckError) as err:
        simulate(write_set(tmp_path, ranks), ring_hw(2))
    assert "chunk queues deadlock" not in str(err.value)
    assert "set-deadlock" in str(err.value)
    assert err.value.stuck == {0: [2, 4], 1: [2, 4]}
