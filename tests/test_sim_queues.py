"""Chunk queues per dimension (spec §3.3): which queue and ring direction each phase takes, and the
queue deadlock ASTRA-sim shares with us.

Expected times come from the spec's closed forms (``ring_chunk``, §6.2) and the queue rules, never
from our own output: with ``threshold = ceil(active-chunks / queues)`` streams running per queue, the
chunks of one collective run ``threshold x (queues they spread over)`` at a time.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from test_sim_examples import coll, ring_chunk, ring_hw, write_set

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
