"""Shard jobs: one trace load, one simulation per grid point, ASTRA-sim's numbers in the CSV.

Expected step times are the spec's worked examples (astra-sim-semantics.md §7.1 and §7.5) for the
8-NPU 1 MB all-reduce fixture: Ring_8npus + Ring_4chunks -> 64,440 ns; the HGX-H100 pair -> 55,222 ns
congestion-unaware and 57,426 ns congestion-aware.
"""

from __future__ import annotations

import csv
import json
import re
from pathlib import Path

import pytest
from conftest import validated

from chakra_pipe.cli import main
from chakra_pipe.errors import ChakraPipeError
from chakra_pipe.results.schema import SHARD_COLUMNS
from chakra_pipe.sweep.campaign import Campaign
from chakra_pipe.sweep.shard import run_shard

MEM_BYTES, MEM_LATENCY, MEM_BW = 1_000_000, 500, 100  # remote-mem-bw is bytes/ns (spec §5.2)


def _mem_load_set(tmp_path: Path) -> str:
    """8 ranks, one remote-memory load each: it fails without memory expansion, and with per-NPU
    expansion takes remote-mem-latency + floor(tensor_size / remote-mem-bw) ns (spec §2.4, §5.2)."""
    from chakra_pipe.et import schema
    from chakra_pipe.et.attrs import set_attr
    from chakra_pipe.et.framing import write_trace

    prefix = tmp_path / "mem" / "mem"
    for rank in range(8):
        node = schema.Node(id=0, name="remote_load", type=schema.MEM_LOAD_NODE)
        set_attr(node, "tensor_size", MEM_BYTES)
        write_trace(f"{prefix}.{rank}.et", schema.GlobalMetadata(version="0.0.4"), [node])
    (tmp_path / "mem.json").write_text(
        json.dumps(
            {"memory-type": "PER_NPU_MEMORY_EXPANSION", "remote-mem-latency": MEM_LATENCY, "remote-mem-bw": MEM_BW}
        )
    )
    return str(prefix)


@pytest.fixture()
def plan(fixtures_dir: Path, tmp_path: Path) -> Campaign:
    a = fixtures_dir / "astra-sim"
    prefix = a / "workload/microbenchmarks/all_reduce/8npus_1MB/all_reduce"
    if not Path(f"{prefix}.0.et").is_file():
        pytest.skip(f"fixture {prefix}.0.et not found")
    cfg = {
        "campaign": "t",
        "outdir": str(tmp_path / "reports"),
        "shard_size": 2,
        "workloads": {
            "ar8": {"kind": "trace", "prefix": str(prefix), "npus": 8, "platforms": ["hgx", "ring"]},
            "mem8": {"kind": "trace", "prefix": _mem_load_set(tmp_path), "npus": 8, "platforms": ["ring_mem"]},
        },
        "hardware": {
            "platforms": {
                "hgx": {
                    "network": str(a / "network/analytical/HGX-H100-validated.yml"),
                    "system": str(a / "system/native_collectives/HGX-H100-validated.json"),
                    "memory": str(a / "remote_memory/analytical/no_memory_expansion.json"),
                    "axes": {"backend": ["congestion_unaware", "congestion_aware"]},
                },
                "ring": {
                    "network": str(a / "network/analytical/Ring_8npus.yml"),
                    "system": str(a / "system/native_collectives/Ring_4chunks.json"),
                },
                "ring_mem": {
                    "network": str(a / "network/analytical/Ring_8npus.yml"),
                    "system": str(a / "system/native_collectives/Ring_4chunks.json"),
                    "memory": str(tmp_path / "mem.json"),
                    "axes": {"memory.memory-type": ["NO_MEMORY_EXPANSION", "PER_NPU_MEMORY_EXPANSION"]},
                },
            }
        },
    }
    camp = Campaign.from_config(validated(cfg), root=tmp_path, torch_available=False)
    camp.write()
    return camp


def _rows(path: Path) -> dict[str, dict[str, str]]:
    with open(path, newline="") as fh:
        reader = csv.DictReader(fh)
        assert tuple(reader.fieldnames) == SHARD_COLUMNS
        return {r["point_id"]: r for r in reader}


def test_shard_reproduces_astra_sim_numbers(plan, tmp_path):
    assert plan.workloads["ar8"].shards == [
        ["hgx[backend=congestion_unaware]", "hgx[backend=congestion_aware]"],
        ["ring"],
    ]
    out = tmp_path / "s0.csv"
    assert run_shard(plan, "ar8", 0, out) == 0
    rows = _rows(out)
    assert rows["hgx[backend=congestion_unaware]"]["step_time_ns"] == "55222"
    assert rows["hgx[backend=congestion_aware]"]["step_time_ns"] == "57426"
    unaware = rows["hgx[backend=congestion_unaware]"]
    # one collective and no compute: everything is exposed all-reduce time
    assert unaware["compute_ns"] == "0" and unaware["exposed_comm_ns"] == "55222"
    assert unaware["comm_all_reduce_ns"] == "55222" and unaware["comm_other_ns"] == "0"
    assert unaware["status"] == "ok" and len(unaware["trace_sha256"]) == 64
    assert unaware["bandwidth_gbps"] == "400.0" and unaware["topology"] == "Switch"


def test_point_failing_in_the_simulator_becomes_a_status_row(plan, tmp_path):
    w = plan.workloads["mem8"]
    assert w.shards == [["ring_mem[memory-type=NO_MEMORY_EXPANSION]", "ring_mem[memory-type=PER_NPU_MEMORY_EXPANSION]"]]
    out = tmp_path / "mem.csv"
    assert run_shard(plan, "mem8", 0, out) == 1
    rows = _rows(out)
    failed = rows["ring_mem[memory-type=NO_MEMORY_EXPANSION]"]
    assert failed["status"] != "ok" and "NO_MEMORY_EXPANSION" in failed["status"] and failed["step_time_ns"] == ""
    ok = rows["ring_mem[memory-type=PER_NPU_MEMORY_EXPANSION]"]
    assert ok["status"] == "ok" and int(ok["step_time_ns"]) == MEM_LATENCY + MEM_BYTES // MEM_BW  # 10,500


def test_cli_run_and_errors(plan, tmp_path, capsys):
    out = tmp_path / "cli.csv"
    assert main(["sweep", "run", "--plan", plan.plan_path, "--workload", "ar8", "--shard", "1", "--out", str(out)]) == 0
    assert _rows(out)["ring"]["step_time_ns"] == "64440"  # spec §7.1
    assert (
        main(["sweep", "run", "--plan", plan.plan_path, "--workload", "mem8", "--shard", "0", "--out", str(out)]) == 0
    )
    assert "1 of 2 points failed" in capsys.readouterr().err
    assert (
        main(["sweep", "run", "--plan", plan.plan_path, "--workload", "nope", "--shard", "0", "--out", str(out)]) == 2
    )
    assert "workload 'nope' is not in the plan" in capsys.readouterr().err
    assert (
        main(
            [
                "sweep",
                "run",
                "--plan",
                str(tmp_path / "missing.json"),
                "--workload",
                "ar8",
                "--shard",
                "0",
                "--out",
                str(out),
            ]
        )
        == 2
    )
    assert "missing.json: cannot read" in capsys.readouterr().err


def test_shard_view_of_the_plan_checks_and_holds_its_own_points(plan, tmp_path):
    """A shard job's plan read (``Campaign.load(path, shard=...)``) holds the same points as the full
    read for its shard; a point of another shard is checked only in its structure (id, NPUs), so a
    damaged field there stops that shard's job and the aggregation, not this one."""
    full = Campaign.load(plan.plan_path)
    for name, w in full.workloads.items():
        for s, ids in enumerate(w.shards):
            view = Campaign.load(plan.plan_path, shard=(name, s))
            assert list(view.points) == [p for p in full.points if p in ids]
            assert all(view.points[p] == full.points[p] for p in ids)
            assert view.workloads == full.workloads and view.baseline == full.baseline
    doc = json.loads(Path(plan.plan_path).read_text())
    damaged = next(i for i, p in enumerate(doc["points"]) if p["id"] == "ring")  # shard ar8/1
    doc["points"][damaged]["cost"] = "cheap"
    path = tmp_path / "damaged.json"
    path.write_text(json.dumps(doc))
    assert list(Campaign.load(path, shard=("ar8", 0)).points) == plan.workloads["ar8"].shards[0]
    message = f"points[{damaged}].cost: damaged plan: expected a number or null, got str"
    for shard in (None, ("ar8", 1), ("ar8", 9), ("nope", 0)):  # its own shard, or no shard to narrow to
        with pytest.raises(ChakraPipeError, match=re.escape(message)):
            Campaign.load(path, shard=shard)


def test_times_beyond_the_64_bit_columns_make_a_failed_row(plan, tmp_path):
    """Absurd hardware (a 3e17 ns link latency) overflows int64 times: the simulator refuses the point,
    its row says so and the others are written, where the parquet writer used to die with an OverflowError."""
    doc = json.loads(Path(plan.plan_path).read_text())
    for p in doc["points"]:
        if p["id"] == "hgx[backend=congestion_aware]":
            p["network"]["latency"] = [326_019_685_808_363_840] * len(p["network"]["latency"])
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(doc))
    out = tmp_path / "big.csv"
    assert run_shard(Campaign.load(path), "ar8", 0, out) == 1
    rows = _rows(out)
    assert rows["hgx[backend=congestion_unaware]"]["step_time_ns"] == "55222"
    big = rows["hgx[backend=congestion_aware]"]
    assert big["status"].startswith("InputError: ") and "simulated times pass the 64-bit ns clock" in big["status"]
    assert big["step_time_ns"] == ""


def test_wrong_rank_count_is_refused(plan, fixtures_dir, tmp_path):
    four = fixtures_dir / "astra-sim/workload/microbenchmarks/all_reduce/4npus_1MB/all_reduce"
    if not Path(f"{four}.0.et").is_file():
        pytest.skip("4-NPU fixture not found")
    with pytest.raises(ChakraPipeError, match="trace set has 4 ranks but the plan expects 8"):
        run_shard(plan, "ar8", 0, tmp_path / "x.csv", prefix=str(four))
    assert not (tmp_path / "x.csv").exists()


def test_collectives_table_per_point_rank_and_collective(plan, tmp_path):
    """collectives.parquet: loaded with pandas, grouped by point and rank, nccl-tests bandwidths."""
    import pandas as pd

    from chakra_pipe.report.aggregate import aggregate_collectives
    from chakra_pipe.results.collectives import UNITS, write_table

    for i in range(len(plan.workloads["ar8"].shards)):
        assert run_shard(plan, "ar8", i, plan.shard_path("ar8", i)) == 0
    assert run_shard(plan, "mem8", 0, plan.shard_path("mem8", 0)) == 1
    out = tmp_path / "collectives.parquet"
    write_table(aggregate_collectives(plan), out)
    df = pd.read_parquet(out)
    # ar8: 3 points x 8 ranks x one 1 MiB all-reduce; mem8 has no communication
    assert len(df) == 24 and set(df["workload"]) == {"ar8"} and set(df["comm_type"]) == {"ALL_REDUCE"}
    assert df.groupby("point_id").size().to_dict() == {
        "hgx[backend=congestion_aware]": 8,
        "hgx[backend=congestion_unaware]": 8,
        "ring": 8,
    }
    ring = df[df["point_id"] == "ring"].set_index("rank")
    assert list(ring.index) == list(range(8)) and (ring["duration_ns"] == 64440).all()  # spec §7.1
    assert (ring["end_ns"] - ring["start_ns"] == ring["duration_ns"]).all()
    assert (ring["group_size"] == 8).all() and (ring["comm_size_bytes"] == 1 << 20).all()
    # nccl-tests: algbw = size / time (GB = 10^9 B), busbw = algbw x 2(n-1)/n for all-reduce
    assert ring["algbw_GBps"].iloc[0] == pytest.approx((1 << 20) / 64440)
    assert ring["busbw_GBps"].iloc[0] == pytest.approx((1 << 20) / 64440 * 2 * 7 / 8)
    assert str(df["duration_ns"].dtype) == "Int64" and str(df["algbw_GBps"].dtype) == "float64"
    import pyarrow.parquet as pq

    meta = json.loads(pq.read_schema(out).metadata[b"chakra_pipe.units"])
    assert meta == UNITS and "10^9" in meta["busbw_GBps"]


def _written(path, write, to_frame, rows) -> bytes | type:
    """The bytes ``write`` leaves at ``path`` (of ``to_frame(rows)`` when given), or its error's type."""
    try:
        write(to_frame(rows) if to_frame else rows, path)
    except (TypeError, ValueError) as exc:
        return type(exc)
    return path.read_bytes()


def test_shard_part_writer_matches_the_pandas_writer_byte_for_byte(tmp_path):
    """A shard writes its collectives part without pandas: same bytes as ``write_table(frame(rows))``
    (nulls, NaN bandwidths, uint64 node ids, non-ASCII names), so aggregation reads the same dtypes."""
    import subprocess
    import sys

    from chakra_pipe.results.collectives import frame, read_table, write_rows, write_table

    base = {
        "campaign": "c",
        "workload": "wé",
        "source": "simulated",
        "point_id": "p[x=1]",
        "backend": "congestion_unaware",
        "comm_type": "ALL_REDUCE",
        "group": "world",
        "group_size": 8,
        "comm_size_bytes": 1 << 20,
        "nccl_size_bytes": 1 << 20,
        "start_ns": 0,
        "end_ns": 64440,
        "duration_ns": 64440,
        "algbw_GBps": 16.27,
        "busbw_GBps": 28.5,
    }
    odd = {"nccl_size_bytes": None, "start_ns": None, "algbw_GBps": float("nan"), "busbw_GBps": None, "group": ""}
    for rows in ([], [{**base, "rank": r, "node_id": (1 << 64) - 1 - r, **(odd if r % 3 else {})} for r in range(11)]):
        old, new = tmp_path / "old.parquet", tmp_path / "new.parquet"
        write_table(frame(rows), old)
        write_rows(rows, new)
        assert new.read_bytes() == old.read_bytes()
        assert read_table(new).equals(frame(rows))  # NaN is read back as NaN, as from the pandas writer
    # values astype converts or refuses (NaN or a float in an integer column, a numeric string, NaN in a
    # string column) take the pandas writer: the same bytes, or the same error
    for bad in ({"start_ns": float("nan")}, {"start_ns": 3.7}, {"start_ns": "12"}, {"group": float("nan")}):
        rows = [{**base, "rank": 0, "node_id": 1, **bad}]
        assert _written(tmp_path / "old.parquet", write_table, frame, rows) == _written(
            tmp_path / "new.parquet", write_rows, None, rows
        ), bad
    row = {**base, "rank": 0, "node_id": 1}
    code = f"import sys; from chakra_pipe.results.collectives import write_rows; write_rows([{row!r}], "
    code += f"{str(tmp_path / 'x.parquet')!r}); print('pandas' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout == "False\n"


def test_replay_collectives_rows_use_nccl_tests_bandwidths():
    from chakra_pipe.results.collectives import frame, replayed_rows

    doc = {
        "collectives": [
            {
                "rank": 0,
                "node": 7,
                "comm_type": "ALL_GATHER",
                "group": "0",
                "group_size": 4,
                "comm_size": 1000,
                "median_time_ns": 2000,
            }
        ],
        "p2p": [{"rank": 1, "node": 3, "kind": "send", "comm_size": 500, "median_time_ns": 1000}],
    }
    df = frame(replayed_rows(doc, "c", "w"))
    ag, send = df.iloc[0], df.iloc[1]
    assert (ag["source"], ag["point_id"], ag["backend"]) == ("replayed", "", "")
    # all-gather: nccl-tests size = 4 x 1000 B; algbw 4000 B / 2000 ns = 2 GB/s; busbw x 3/4
    assert (ag["nccl_size_bytes"], ag["algbw_GBps"], ag["busbw_GBps"]) == (4000, 2.0, 1.5)
    assert pd_isna(ag["start_ns"]) and ag["duration_ns"] == 2000
    assert (send["comm_type"], send["group_size"], send["busbw_GBps"]) == ("SEND", 2, 0.5)


def pd_isna(x) -> bool:
    import pandas as pd

    return bool(pd.isna(x))
