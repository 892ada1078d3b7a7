"""Rank sets with stray far-away rank files: gaps are found from the file list, in bounded time and
memory, and reported as one summary (counts and ranges), never one finding per missing rank."""

from __future__ import annotations

import json

import pytest
from test_robust_support import RING_SYSTEM, assert_clean, chain_bytes, run_cli

from chakra_pipe.et.traceset import describe_ranges, missing_ranks


def test_missing_ranks_are_ranges_from_the_present_ones():
    assert missing_ranks([0, 1, 2]) == []
    assert missing_ranks([3, 0, 7, 8, 30_000_000]) == [(1, 2), (4, 6), (9, 29_999_999)]
    assert missing_ranks([3_000_000_000]) == [(0, 2_999_999_999)]
    assert describe_ranges([(1, 2), (4, 4)]) == "3 ranks (1-2, 4)"
    many = [(2 * i + 1, 2 * i + 1) for i in range(8)]
    assert describe_ranges(many, shown=2) == "8 ranks (1, 3 and 6 more ranges)"


@pytest.mark.parametrize("stray", [30_000_000, 3_000_000_000])
def test_a_stray_far_rank_file_is_refused_fast_by_every_verb(tmp_path, stray):
    """simulate once took 12.7 s / 3 GB, validate > 300 s / 4.7 GB, and rank 3*10^9 a MemoryError."""
    data = chain_bytes(3)
    for rank in (0, 1, 2, 3, stray):
        (tmp_path / f"t.{rank}.et").write_bytes(data)
    (tmp_path / "sys.json").write_text(json.dumps(RING_SYSTEM))
    (tmp_path / "net.yml").write_text("topology: [ Ring ]\nnpus_count: [ 4 ]\nbandwidth: [ 50.0 ]\nlatency: [ 5 ]\n")
    prefix = tmp_path / "t"
    expected = f"{stray - 4:,} ranks (4-{stray - 1})"
    for argv in (
        ["info", prefix],
        [
            "simulate",
            f"--workload-configuration={prefix}",
            f"--system-configuration={tmp_path / 'sys.json'}",
            f"--network-configuration={tmp_path / 'net.yml'}",
        ],
    ):
        outcome = run_cli(argv, timeout=20)
        assert_clean(outcome, allowed={2}, what=argv[0])
        assert "rank set has gaps" in outcome.stderr and expected in outcome.stderr, outcome.stderr
    outcome = run_cli(["validate", prefix], timeout=20)
    assert_clean(outcome, allowed={1})
    gap_lines = [line for line in outcome.stdout.splitlines() + outcome.stderr.splitlines() if "rank-gap" in line]
    assert len(gap_lines) == 1 and expected in gap_lines[0], outcome.stdout[-2000:]
