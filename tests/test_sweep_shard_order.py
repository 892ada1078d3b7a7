"""A shard simulates its points grouped by ``preferred-dataset-splits`` and still writes plan order.

The rank-set check every simulation runs depends on the splits value and the simulator keeps one check
per set, so a grid whose fastest axis is the splits value used to redo it for every point. These tests
pin what users rely on: the shard's files do not depend on the order points are simulated in (same
bytes as one point per shard), and a bad hardware section still fails where it stands although
good ones are parsed once per plan.
"""

from __future__ import annotations

import csv
from pathlib import Path

import pytest
from conftest import validated

from chakra_pipe.errors import ConfigError
from chakra_pipe.rankset import analysis
from chakra_pipe.sweep.campaign import Campaign
from chakra_pipe.sweep.grid import check_hardware
from chakra_pipe.sweep.shard import analysis_order, run_shard

SPLITS = [1, 2, 4]
LATENCIES = [500.0, 700.0]


def _plan(fixtures_dir: Path, root: Path, shard_size: int) -> Campaign:
    a = fixtures_dir / "astra-sim"
    prefix = a / "workload/microbenchmarks/all_reduce/8npus_1MB/all_reduce"
    if not Path(f"{prefix}.0.et").is_file():
        pytest.skip(f"fixture {prefix}.0.et not found")
    cfg = {
        "campaign": "order",
        "outdir": str(root / "reports"),
        "shard_size": shard_size,
        "workloads": {"ar8": {"kind": "trace", "prefix": str(prefix), "npus": 8}},
        "hardware": {
            "platforms": {
                "ring": {
                    "network": str(a / "network/analytical/Ring_8npus.yml"),
                    "system": str(a / "system/native_collectives/Ring_4chunks.json"),
                    # splits is the fastest axis: consecutive points need different rank-set checks
                    "axes": {"network.latency": LATENCIES, "system.preferred-dataset-splits": SPLITS},
                }
            }
        },
    }
    return Campaign.from_config(validated(cfg), root=root, torch_available=False)


def _data_rows(path: Path) -> list[list[str]]:
    with open(path, newline="") as fh:
        return list(csv.reader(fh))[1:]


def test_order_groups_splits_values_and_keeps_plan_order_within(fixtures_dir, tmp_path):
    plan = _plan(fixtures_dir, tmp_path, shard_size=6)
    points = [plan.points[p] for p in plan.workloads["ar8"].shards[0]]
    assert [p.system["preferred-dataset-splits"] for p in points] == SPLITS * 2
    order = analysis_order(points)
    assert order == [0, 3, 1, 4, 2, 5]
    assert [points[i].system["preferred-dataset-splits"] for i in order] == [1, 1, 2, 2, 4, 4]


def test_shard_files_match_one_point_per_shard_and_check_once_per_splits(fixtures_dir, tmp_path, monkeypatch):
    import pandas as pd

    from chakra_pipe.results.collectives import read_table, sidecar_path

    calls: list[int] = []
    real = analysis._analyze
    monkeypatch.setattr(
        analysis, "_analyze", lambda ts, cg, gf, splits, full: calls.append(splits) or real(ts, cg, gf, splits, full)
    )
    whole = _plan(fixtures_dir, tmp_path / "whole", shard_size=6)
    out = tmp_path / "whole.csv"
    assert run_shard(whole, "ar8", 0, out) == 0
    assert calls == SPLITS[:1]  # no all-gather: one rank-set check serves every splits value

    single = _plan(fixtures_dir, tmp_path / "single", shard_size=1)
    parts = [tmp_path / f"p{i}.csv" for i in range(6)]
    for i, part in enumerate(parts):
        assert run_shard(single, "ar8", i, part) == 0
    rows = _data_rows(out)
    assert rows == [r for part in parts for r in _data_rows(part)]
    assert [r[3] for r in rows] == whole.workloads["ar8"].shards[0]  # plan order
    assert len({r[15] for r in rows}) > 1  # the splits value changes step times: the rows are not all alike
    pd.testing.assert_frame_equal(
        read_table(sidecar_path(out)),
        pd.concat([read_table(sidecar_path(p)) for p in parts], ignore_index=True),
    )


def test_a_bad_section_fails_each_time_after_good_ones_were_cached(fixtures_dir, tmp_path):
    plan = _plan(fixtures_dir, tmp_path, shard_size=6)
    point = next(iter(plan.points.values()))
    check_hardware(point.network, point.system, None)
    check_hardware(point.network, point.system, None)  # second time from the cache
    bad = {**point.network, "latency": [-1.0]}
    for _ in range(2):
        with pytest.raises(ConfigError) as err:
            check_hardware(bad, point.system, None)
        assert err.value.where.startswith("network.")


@pytest.mark.parametrize("size", [3, 4])
def test_a_check_is_reused_across_splits_values_only_where_no_all_gather_size_lies_between(size, tmp_path):
    """The splits value enters the check only through the all-gather rule (size < splits, the value in
    its message): a cached check serves another value when every all-gather is at least as large as
    both, and each value's findings and comm specs are those of a fresh check."""
    from chakra_pipe.cli import main
    from chakra_pipe.et.traceset import TraceSet

    prefix = tmp_path / "ag"
    argv = ["generate", "collective", "--type", "all_gather", "--npus", "4", "--size", str(size), "--out", str(prefix)]
    assert main(argv) == 0
    ts = TraceSet.load(str(prefix))
    cached, checked = analysis.analyze(ts, dataset_splits=1), 1
    for splits in (2, 3, 4, 5, 2, 1):
        got = analysis.analyze(ts, dataset_splits=splits)
        fresh = analysis._analyze(ts, ts.comm_groups, str(ts.comm_groups_file), splits, False)
        assert got.findings == fresh.findings and [v.specs for v in got.ranks] == [v.specs for v in fresh.ranks]
        assert any("smaller than preferred-dataset-splits" in f.message for f in got.findings) == (splits > size)
        assert (got is cached) == (max(checked, splits) <= size)
        if got is not cached:
            cached, checked = got, splits
