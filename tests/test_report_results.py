"""Aggregation, leaderboards, the standing board, summary and plots, from hand-written shard results.

Numbers are chosen so every expected value is simple arithmetic on the inputs (speed-up = baseline /
step time, time x cost = step time x cost), independent of the simulator.
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
from campaign_files import simulated_row, write_measured, write_shard
from conftest import validated
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_sweep_grid import SYSTEM

from chakra_pipe.errors import InputError
from chakra_pipe.report import leaderboard
from chakra_pipe.report.aggregate import aggregate, read_results, write_results
from chakra_pipe.report.build import build
from chakra_pipe.report.plots import PLOTS
from chakra_pipe.results.collectives import frame, sidecar_path, write_table
from chakra_pipe.results.csvtext import rows_csv
from chakra_pipe.results.pareto import pareto_front
from chakra_pipe.results.schema import METRIC_NAMES, NS_METRICS, RESULT_COLUMNS, SHARD_COLUMNS
from chakra_pipe.sweep.campaign import Campaign

STEP = {"p[bandwidth=100]": 4000, "p[bandwidth=200]": 2000, "p[bandwidth=400]": 1000}
COST = {"p[bandwidth=100]": 1.0, "p[bandwidth=200]": 1.5, "p[bandwidth=400]": 4.0}


def _plan(tmp_path: Path, name: str = "c1") -> Campaign:
    (tmp_path / "net.yml").write_text("topology: [Switch]\nnpus_count: [4]\nbandwidth: [50]\nlatency: [500]\n")
    (tmp_path / "sys.json").write_text(json.dumps(SYSTEM))
    cfg = {
        "campaign": name,
        "outdir": str(tmp_path / "reports"),
        "shard_size": 2,
        "workloads": {"ar": {"kind": "collective", "type": "all_reduce", "npus": 4, "size": "1MiB"}},
        "hardware": {
            "baseline": "p[bandwidth=200]",
            "platforms": {
                "p": {"network": "net.yml", "system": "sys.json", "axes": {"network.bandwidth": [100, 200, 400]}}
            },
        },
    }
    return Campaign.from_config(validated(cfg), root=tmp_path, torch_available=False)


def _write_shards(camp: Campaign, fail: str | None = None) -> None:
    w = camp.workloads["ar"]
    for i, ids in enumerate(w.shards):
        rows = []
        for pid in ids:
            ok = pid != fail
            row = {
                "campaign": camp.name,
                "workload": "ar",
                "source": "simulated",
                "point_id": pid,
                "platform": "p",
                "backend": "congestion_unaware",
                "npus": 4,
                "cost": COST[pid],
                "bottleneck_bandwidth_gbps": float(pid.split("=")[1].rstrip("]")),
                "settings": "bandwidth=" + pid.split("=")[1].rstrip("]"),
                "status": "ok" if ok else "StuckError: deadlock",
                "trace_sha256": "ab" * 32,
            }
            if ok:
                row.update(dict.fromkeys(NS_METRICS, 0))
                row.update(
                    step_time_ns=STEP[pid],
                    compute_ns=STEP[pid] // 4,
                    exposed_comm_ns=STEP[pid] * 3 // 4,
                    idle_ns=STEP[pid] // 8,
                    comm_ns=STEP[pid] // 2,
                    comm_all_reduce_ns=STEP[pid] // 2,
                )
            rows.append(row)
        path = Path(camp.shard_path("ar", i))
        path.parent.mkdir(parents=True, exist_ok=True)
        write_table(frame([]), sidecar_path(path))
        path.write_text(rows_csv(rows, SHARD_COLUMNS))


def test_aggregate_derives_speedup_cost_and_provenance(tmp_path):
    camp = _plan(tmp_path)
    _write_shards(camp)
    df = aggregate(camp, commit="deadbeef")
    assert list(df.columns) == [
        *RESULT_COLUMNS,
        "topology_d0",
        "npus_d0",
        "bandwidth_gbps_d0",
        "latency_ns_d0",
        "hw.network.bandwidth",
        "wl.kind",
        "wl.npus",
        "wl.size_bytes",
        "wl.type",
    ]
    assert list(df["point_id"]) == list(STEP)  # plan order, not file order
    by = df.set_index("point_id")
    assert by.loc["p[bandwidth=100]", "speedup"] == pytest.approx(0.5)  # 2000 / 4000
    assert by.loc["p[bandwidth=400]", "speedup"] == pytest.approx(2.0)  # 2000 / 1000
    assert by.loc["p[bandwidth=200]", "time_x_cost"] == pytest.approx(3000.0)  # 2000 ns x 1.5
    assert set(df["git_commit"]) == {"deadbeef"} and set(df["config_sha256"]) == {camp.config_sha256}
    assert str(df["step_time_ns"].dtype) == "Int64"


def test_results_files_are_reproducible(tmp_path):
    camp = _plan(tmp_path)
    _write_shards(camp)
    out = tmp_path / "out"
    write_results(aggregate(camp, commit="x"), out)
    first = ((out / "results.parquet").read_bytes(), (out / "results.csv").read_bytes())
    write_results(aggregate(camp, commit="x"), out)
    assert ((out / "results.parquet").read_bytes(), (out / "results.csv").read_bytes()) == first
    back = pd.read_parquet(out / "results.parquet")
    assert list(back["step_time_ns"]) == [4000, 2000, 1000]


def test_failed_point_is_kept_but_not_ranked(tmp_path):
    camp = _plan(tmp_path)
    _write_shards(camp, fail="p[bandwidth=400]")
    df = aggregate(camp, commit="x")
    failed = df[df["status"] != "ok"]
    assert list(failed["point_id"]) == ["p[bandwidth=400]"] and pd.isna(failed["speedup"].iloc[0])
    board = leaderboard.campaign_board(df)
    assert list(board["point_id"]) == ["p[bandwidth=200]", "p[bandwidth=100]"]


def test_missing_shard_is_an_input_error(tmp_path):
    camp = _plan(tmp_path)
    with pytest.raises(InputError, match="0000.csv: shard result missing"):
        aggregate(camp, commit="x")


@pytest.mark.parametrize(
    "damage, message",
    [
        (lambda b: b[:60], "shard columns are not"),
        (lambda b: b[: b.index(b"\n") + 1], "shard holds 0 rows but the plan has 2 points"),
        (lambda b: b[:-30], "line 3: trace digest is not 64 hex digits"),
        (lambda b: b.replace(b",ok,4000,", b",ok,40x0,"), "line 2: step_time_ns '40x0' is not a whole number"),
        (
            lambda b: b.replace(b",ok,4000,", b",ok,99999999999999999999,"),
            "line 2: step_time_ns '99999999999999999999'",
        ),
        (lambda b: b.replace(b",ok,4000,", b",ok,-4000,"), "line 2: step_time_ns '-4000' is not a whole number"),
        (lambda b: b.replace(b",ok,4000,", b",fine,4000,"), "line 2: unknown status 'fine'"),
        (lambda b: b.replace(b"\nc1,", b"\nc9,"), "line 2: row of campaign 'c9', not of this plan's 'c1'"),
        (lambda b: b"\xff\xfe" + b, "not UTF-8 text (byte offset 0)"),
        (lambda b: b.replace(b"p[bandwidth=200]", b"p[bandwidth=999]"), "missing 1 of them, first 'p[bandwidth=200]'"),
    ],
)
def test_damaged_shard_stops_aggregation_naming_it(tmp_path, damage, message):
    camp = _plan(tmp_path)
    _write_shards(camp)
    shard = Path(camp.shard_path("ar", 0))
    shard.write_bytes(damage(shard.read_bytes()))
    with pytest.raises(InputError, match=r"0000\.csv: ") as err:
        aggregate(camp, commit="x")
    assert message in str(err.value)


def test_campaign_board_ranks_by_time_and_by_time_x_cost(tmp_path):
    camp = _plan(tmp_path)
    _write_shards(camp)
    board = leaderboard.campaign_board(aggregate(camp, commit="x"))
    assert list(board["point_id"]) == ["p[bandwidth=400]", "p[bandwidth=200]", "p[bandwidth=100]"]
    assert list(board["rank_time"]) == [1, 2, 3]
    # time x cost: 400 -> 4000, 200 -> 3000, 100 -> 4000 (tie broken by grid order: 100 before 400)
    assert dict(zip(board["point_id"], board["rank_time_x_cost"])) == {
        "p[bandwidth=200]": 1,
        "p[bandwidth=100]": 2,
        "p[bandwidth=400]": 3,
    }


def _board(path: Path):
    return pd.read_csv(path, dtype=str, keep_default_na=False)


def test_standing_board_is_idempotent_and_keyed_by_content(tmp_path):
    board_csv = tmp_path / "reports" / "leaderboard.csv"
    c1 = _plan(tmp_path, "c1")
    _write_shards(c1)
    r1 = aggregate(c1, commit="x")
    leaderboard.update_standing(r1, board_csv, date="2026-01-01")
    once = board_csv.read_bytes()
    leaderboard.update_standing(r1, board_csv, date="2026-02-01")  # rerun unchanged: same bytes
    assert board_csv.read_bytes() == once
    # another campaign simulating the same trace on the same hardware with the same version: same entries
    c2 = _plan(tmp_path, "c2")
    _write_shards(c2)
    r2 = aggregate(c2, commit="x")
    leaderboard.update_standing(r2, board_csv, date="2026-01-02")
    board = _board(board_csv)
    assert len(board) == 3 and not board.duplicated(list(leaderboard.KEY)).any()
    assert set(board["campaign"]) == {"c2"} and set(board["updated"]) == {"2026-01-02"}
    # a changed result replaces its entry and dates it; the others keep their date
    r1b = r2.copy()
    r1b.loc[r1b["point_id"] == "p[bandwidth=100]", "step_time_ns"] = 3900
    leaderboard.update_standing(r1b, board_csv, date="2026-03-01")
    board = _board(board_csv).set_index("point_id")
    assert board.loc["p[bandwidth=100]", "step_time_ns"] == "3900"
    assert board.loc["p[bandwidth=100]", "updated"] == "2026-03-01"
    assert board.loc["p[bandwidth=200]", "updated"] == "2026-01-02"
    assert "# Standing leaderboard" in board_csv.with_suffix(".md").read_text()


def test_standing_board_keeps_a_different_trace_under_the_same_name_apart(tmp_path):
    """The reproduction: a second campaign's different trace named like an existing workload."""
    board_csv = tmp_path / "leaderboard.csv"
    c1 = _plan(tmp_path, "c1")
    _write_shards(c1)
    r1 = aggregate(c1, commit="x")
    leaderboard.update_standing(r1, board_csv, date="2026-01-01")
    r2 = r1.copy()
    r2["campaign"] = "c2"
    r2["trace_sha256"] = "cd" * 32
    r2["step_time_ns"] = r2["step_time_ns"] * 10
    leaderboard.update_standing(r2, board_csv, date="2026-01-02")
    board = _board(board_csv)
    assert len(board) == 6
    for sha, campaign, scale in (("ab" * 32, "c1", 1), ("cd" * 32, "c2", 10)):
        g = board[board["trace_sha256"] == sha].set_index("point_id")
        assert set(g["campaign"]) == {campaign}
        assert {p: int(t) for p, t in g["step_time_ns"].items()} == {p: t * scale for p, t in STEP.items()}
        # each trace has its own fixed reference (the campaign baseline, p[bandwidth=200])
        assert list(g.index[g["reference"] == "yes"]) == ["p[bandwidth=200]"]
        assert float(g.loc["p[bandwidth=400]", "vs_reference"]) == 2.0
    assert board["trace_sha256"].iloc[0] == "ab" * 32  # ranked within a trace, not across traces


def test_standing_reference_is_fixed_and_backends_are_divisions(tmp_path):
    board_csv = tmp_path / "leaderboard.csv"
    c1 = _plan(tmp_path, "c1")
    _write_shards(c1)
    r1 = aggregate(c1, commit="x")
    leaderboard.update_standing(r1, board_csv, date="2026-01-01")
    before = _board(board_csv).set_index("point_id")["vs_reference"].to_dict()
    # a later campaign brings a faster machine (other hardware) with its own baseline: c1's numbers stay
    r3 = r1[r1["point_id"] == "p[bandwidth=400]"].copy()
    r3["campaign"], r3["hardware_sha256"], r3["point_id"] = "c3", "ee" * 32, "q[fast]"
    r3["step_time_ns"], r3["speedup"] = 500, 1.0
    leaderboard.update_standing(r3, board_csv, date="2026-01-02")
    board = _board(board_csv).set_index("point_id")
    assert {p: board.loc[p, "vs_reference"] for p in before} == before
    assert float(board.loc["q[fast]", "vs_reference"]) == 4.0  # 2000 / 500 against c1's fixed reference
    # the same trace on the other backend is another division with its own reference
    r4 = r1.copy()
    r4["backend"] = "congestion_aware"
    leaderboard.update_standing(r4, board_csv, date="2026-01-03")
    board = _board(board_csv)
    assert len(board) == 7
    assert (board.groupby("backend")["reference"].apply(lambda s: (s == "yes").sum()) == 1).all()


def test_standing_board_with_foreign_columns_is_refused(tmp_path):
    board_csv = tmp_path / "leaderboard.csv"
    board_csv.write_text("a,b\n1,2\n")
    camp = _plan(tmp_path)
    _write_shards(camp)
    with pytest.raises(InputError, match="standing leaderboard has columns"):
        leaderboard.update_standing(aggregate(camp, commit="x"), board_csv)
    assert board_csv.read_text() == "a,b\n1,2\n"


def test_pareto_front():
    # (cost, time): (1, 10) and (2, 5) and (4, 1) are optimal; (3, 6) is beaten by (2, 5); (1, 12) by (1, 10)
    pts = [(3, 6), (1, 10), (4, 1), (2, 5), (1, 12)]
    assert pareto_front(pts) == [1, 3, 2]


def test_build_writes_every_output_with_units(tmp_path):
    camp = _plan(tmp_path)
    _write_shards(camp)
    results = aggregate(camp, commit="x")
    out = tmp_path / "report"
    info = build(camp, results, out)
    for name in ("leaderboard.md", "leaderboard.csv", "summary.json", "report.html"):
        assert (out / name).stat().st_size > 0
    for name in PLOTS:
        assert (out / "plots" / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    summary = json.loads((out / "summary.json").read_text())
    assert set(summary["metrics"]) == set(METRIC_NAMES)
    assert summary["metrics"]["step_time_ns"] == {
        "unit": "ns",
        "better": "lower",
        "meaning": summary["metrics"]["step_time_ns"]["meaning"],
    }
    assert summary["metrics"]["speedup"]["better"] == "higher"
    assert summary["workloads"]["ar"]["best_point"] == "p[bandwidth=400]"
    assert summary["workloads"]["ar"]["best_step_time_ns"] == 1000
    assert info == summary
    html = (out / "report.html").read_text()
    assert html.count("data:image/png;base64,") == len(PLOTS) and "http" not in html.split("<body>")[1]
    # byte-identical on a rebuild
    before = {p.name: p.read_bytes() for p in out.rglob("*") if p.is_file()}
    build(camp, results, out)
    assert {p.name: p.read_bytes() for p in out.rglob("*") if p.is_file()} == before


def test_captured_and_replayed_rows_are_one_pass_over_the_trace(tmp_path):
    camp = _plan(tmp_path)
    cfg_workload = {"kind": "capture", "model": "mlp", "ranks": 4, "steps": 2}
    cfg = {
        "campaign": "c1",
        "outdir": str(tmp_path / "reports"),
        "tracedir": str(tmp_path / "traces"),
        "shard_size": 2,
        "workloads": {"ar": camp.workloads["ar"].spec, "cap": cfg_workload},
        "hardware": {
            "baseline": "p[bandwidth=200]",
            "platforms": {
                "p": {"network": "net.yml", "system": "sys.json", "axes": {"network.bandwidth": [100, 200, 400]}}
            },
        },
    }
    camp = Campaign.from_config(validated(cfg), root=tmp_path, torch_available=True)
    assert camp.replayed() == ["cap"]
    _write_shards(camp)
    cap = camp.workloads["cap"]
    row = simulated_row("c1", "cap", "", "p", 4, 5_000_000)
    for i, ids in enumerate(cap.shards):
        write_shard(camp, "cap", i, [dict(row, point_id=pid) for pid in ids])
    replay = write_measured(
        camp,
        "cap",
        {"backend": "gloo", "steps": 2, "median_step_time_ms_untraced": 1.25},
        {
            "step_time_ns": {"median": 3_000_000.4, "per_iteration": [3e6, 3e6]},
            "environment": {"backend": "gloo", "device": "cpu"},
        },
    )
    df = aggregate(camp, commit="x")
    measured = df[(df["workload"] == "cap") & (df["source"] != "simulated")].set_index("source")
    assert measured.loc["captured", "step_time_ns"] == 2_500_000  # 1.25 ms per step x 2 profiled steps
    assert measured.loc["replayed", "step_time_ns"] == 3_000_000
    # one meaning per column: the torch runtime is not a simulator backend, and no grid point ran
    assert measured.loc["replayed", "runtime"] == "gloo/cpu" and measured.loc["captured", "runtime"] == "gloo"
    assert set(measured["backend"]) == {""} and set(measured["point_id"]) == {""}
    assert set(df[df["source"] == "simulated"]["runtime"]) == {""}
    assert set(measured["trace_sha256"]) == {"cd" * 32}
    assert list(df[df["workload"] == "cap"]["source"])[-2:] == ["replayed", "captured"]
    board = leaderboard.campaign_board(df)
    assert set(board["workload"]) == {"ar", "cap"} and len(board) == 6  # measured rows are not ranked
    replay.write_text("{}")
    with pytest.raises(InputError, match="not a replay result"):
        aggregate(camp, commit="x")


def test_cli_verbs_and_their_errors(tmp_path, capsys):
    from chakra_pipe.cli import main

    camp = _plan(tmp_path)
    camp.write()
    assert main(["report", "aggregate", "--plan", camp.plan_path]) == 2
    assert "0000.csv: shard result missing" in capsys.readouterr().err
    _write_shards(camp)
    assert main(["report", "aggregate", "--plan", camp.plan_path]) == 0
    assert main(["report", "build", "--plan", camp.plan_path]) == 0
    out = Path(camp.report_dir)
    assert (out / "report.html").is_file() and (out / "plots" / "fidelity.png").is_file()
    board = tmp_path / "reports" / "leaderboard.csv"
    stamp = tmp_path / "stamp.json"
    assert (
        main(
            [
                "report",
                "standing",
                "--results",
                str(out / "results.parquet"),
                "--board",
                str(board),
                "--date",
                "2026-05-01",
                "--stamp",
                str(stamp),
            ]
        )
        == 0
    )
    assert len(json.loads(stamp.read_text())["rows"]) == 3
    capsys.readouterr()
    assert main(["report", "build", "--plan", camp.plan_path, "--results", str(tmp_path / "none.parquet")]) == 2
    assert "none.parquet: results table not found" in capsys.readouterr().err


def test_build_with_board_writes_what_build_then_standing_write(tmp_path, capsys):
    """The workflow's report job (`report build --board --stamp`) against the two verbs it replaced,
    on the same paths: every report file, the shared board (one foreign campaign's rows kept, a
    failed point left out) and the stamp, byte for byte."""
    from chakra_pipe.cli import main

    (tmp_path / "c0").mkdir()
    other = _plan(tmp_path / "c0", "c0")
    other.write()
    _write_shards(other)
    assert main(["report", "aggregate", "--plan", other.plan_path]) == 0
    camp = _plan(tmp_path)
    camp.write()
    _write_shards(camp, fail="p[bandwidth=400]")
    assert main(["report", "aggregate", "--plan", camp.plan_path]) == 0
    out, board, stamp = Path(camp.report_dir), tmp_path / "reports" / "leaderboard.csv", tmp_path / "stamp.json"
    other_results = str(Path(other.report_dir) / "results.parquet")
    build = ["report", "build", "--plan", camp.plan_path, "--out-dir", str(out)]
    standing = ["--board", str(board), "--date", "2026-05-01", "--stamp", str(stamp)]

    def run(*argvs: list[str]) -> dict[str, bytes]:
        for f in (board, board.with_suffix(".md"), stamp):
            f.unlink(missing_ok=True)
        assert (
            main(["report", "standing", "--results", other_results, "--board", str(board), "--date", "2026-04-01"]) == 0
        )
        for argv in argvs:
            assert main(argv) == 0
        files = [*(p for p in out.rglob("*") if p.is_file() and p.suffix != ".parquet"), board, stamp]
        return {str(p): p.read_bytes() for p in [*files, board.with_suffix(".md")]}

    two = run(build, ["report", "standing", "--results", str(out / "results.parquet"), *standing])
    assert run([*build, *standing]) == two
    assert len(json.loads(stamp.read_text())["rows"]) == 2 and b"c0," in two[str(board)]
    capsys.readouterr()
    assert main([*build, "--stamp", str(stamp)]) == 2
    assert "--stamp and --date go with --board" in capsys.readouterr().err


def test_results_csv_reads_back_like_the_parquet_and_builds(tmp_path):
    """`report build --results results.csv` must see the same table as the parquet file: empty text
    cells (a point with no settings) stay text, not NaN floats that crash the plots."""
    camp = _plan(tmp_path)
    _write_shards(camp)
    out = tmp_path / "out"
    write_results(aggregate(camp, commit="x"), out)
    from_csv, from_parquet = read_results(out / "results.csv"), read_results(out / "results.parquet")
    pd.testing.assert_frame_equal(from_csv, from_parquet, check_dtype=False)
    build(camp, from_csv, tmp_path / "report")
    assert (tmp_path / "report" / "report.html").stat().st_size > 0
    (tmp_path / "other.csv").write_text("a,b\n1,2\n")
    with pytest.raises(InputError, match="not a results table"):
        read_results(tmp_path / "other.csv")


AWKWARD_NAMES = [
    "NA",
    "nan",
    "NaN",
    "null",
    "None",
    "N/A",
    "",
    "007",
    "1e3",
    "-0",
    "true",
    "#N/A",
    " x ",
    "a,b",
    'q"uote',
    "line\nbreak",
    "ünï",
    "1.0",
]


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    names=st.lists(
        st.one_of(
            st.sampled_from(AWKWARD_NAMES[:-1]),
            st.text(st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=8),
        ),
        min_size=3,
        max_size=3,
    )
)
def test_names_survive_the_board_and_the_results_readers(tmp_path_factory, names):
    """Campaign and workload names are data: read back verbatim, never as NA or numbers (issue 12)."""
    tmp = tmp_path_factory.mktemp("names")
    base = _aggregated(tmp_path_factory)
    camp_a, camp_b, workload = (n if n.strip() else "x" + n for n in names)
    r1 = base.copy()
    r1["campaign"], r1["workload"] = camp_a, workload
    r1["campaign"], r1["workload"] = r1["campaign"].astype("string"), r1["workload"].astype("string")
    r2 = r1.copy()
    r2["campaign"], r2["trace_sha256"] = camp_b, "cd" * 32
    board_csv = tmp / "leaderboard.csv"
    leaderboard.update_standing(r1, board_csv, date="2026-01-01")
    leaderboard.update_standing(r2, board_csv, date="2026-01-01")
    first = board_csv.read_bytes()
    leaderboard.update_standing(r1, board_csv, date="2026-01-02")  # reruns: no duplicates, no renames
    leaderboard.update_standing(r2, board_csv, date="2026-01-02")
    assert board_csv.read_bytes() == first
    board = leaderboard.read_board(board_csv)
    assert len(board) == 6
    assert sorted(board["campaign"]) == sorted([camp_a] * 3 + [camp_b] * 3)
    assert set(board["workload"]) == {workload}
    out = tmp / "out"
    write_results(r1, out)
    for path in (out / "results.csv", out / "results.parquet"):
        back = read_results(path)
        assert list(back["campaign"]) == [camp_a] * 3 and list(back["workload"]) == [workload] * 3


_BASE: list = []


def _aggregated(factory):
    if not _BASE:
        tmp = factory.mktemp("base")
        camp = _plan(tmp)
        _write_shards(camp)
        _BASE.append(aggregate(camp, commit="x"))
    return _BASE[0]


def test_results_group_by_every_axis_without_string_parsing(tmp_path):
    """Each axis and dimension is a typed column; CSV and parquet read back to the same dtypes."""
    camp = _plan(tmp_path)
    _write_shards(camp)
    out = tmp_path / "out"
    write_results(aggregate(camp, commit="x"), out)
    pq = read_results(out / "results.parquet")
    csv = read_results(out / "results.csv")
    assert dict(pq.dtypes.astype(str)) == dict(csv.dtypes.astype(str))
    pd.testing.assert_frame_equal(pq, csv)
    raw = pd.read_parquet(out / "results.parquet")
    assert str(raw["bandwidth_gbps_d0"].dtype) == "float64" and str(raw["npus_d0"].dtype) == "Int64"
    assert str(raw["hw.network.bandwidth"].dtype) == "Int64" and str(raw["wl.size_bytes"].dtype) == "Int64"
    by_bw = raw.groupby("hw.network.bandwidth")["step_time_ns"].min().to_dict()
    assert by_bw == {100: 4000, 200: 2000, 400: 1000}
    assert raw.groupby("bandwidth_gbps_d0")["step_time_ns"].min().to_dict() == {100.0: 4000, 200.0: 2000, 400.0: 1000}
    assert set(raw["topology_d0"]) == {"Switch"} and set(raw["latency_ns_d0"]) == {500.0}
    assert raw.groupby("wl.size_bytes").size().to_dict() == {1 << 20: 3}
    import pyarrow.parquet as papq

    units = json.loads(papq.read_schema(out / "results.parquet").metadata[b"chakra_pipe.units"])
    assert units["step_time_ns"] == "ns" and "2^30" in units["bandwidth_gbps_d0"]


def test_report_page_has_contents_captions_and_sortable_tables(tmp_path):
    import re

    from chakra_pipe.report.html import duration

    camp = _plan(tmp_path)
    _write_shards(camp, fail="p[bandwidth=400]")
    out = tmp_path / "report"
    build(camp, aggregate(camp, commit="x"), out)
    page = (out / "report.html").read_text()
    toc = re.findall(r'<li><a href="#([a-z]+)">', page)
    assert toc == ["notes", "leaderboard", "plots", "failed", "results", "metrics"]
    assert all(f'id="{anchor}"' in page for anchor in toc)
    assert page.count("<figcaption>Figure ") == len(PLOTS)
    assert page.count("<table class='data'>") >= 4 and "aria-sort" in page  # sortable, filterable (script)
    # durations readable, exact value kept for sorting
    assert "<td data-v='4000.0'>4 µs</td>" in page and "<td data-v='2000.0'>2 µs</td>" in page
    assert (duration(950), duration(12_345), duration(4_560_000), duration(2.5e9)) == (
        "950 ns",
        "12.3 µs",
        "4.56 ms",
        "2.5 s",
    )
    for name in PLOTS:  # every plot as PNG and SVG
        assert (out / "plots" / name.replace(".png", ".svg")).read_bytes().lstrip().startswith(b"<?xml")


def test_fidelity_placeholder_names_the_real_reason(tmp_path):
    from chakra_pipe.report.build import why_no_fidelity

    camp = _plan(tmp_path)  # made with torch_available=False and capture/replay left on auto
    camp.notes = []
    assert "disabled" in why_no_fidelity(camp)
    camp.notes = ["replay skipped: PyTorch is not installed (replay: auto)"]
    assert "PyTorch is not installed" in why_no_fidelity(camp) and "disabled" not in why_no_fidelity(camp)
