"""``chakra-pipe compare``: per-step captured / replayed / simulated times and their ratios."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from chakra_pipe.cli import main as cli_main


def write(path: Path, obj) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(obj))
    return path


@pytest.fixture
def inputs(tmp_path):
    cap = tmp_path / "cap"
    write(cap / "capture.json", {"steps": 2, "median_step_time_ms_untraced": 2.0, "median_step_time_ms_traced": 8.0})
    replay = write(tmp_path / "replay.json", {"step_time_ns": {"median": 6_000_000}})
    sim = write(tmp_path / "sim.json", {"max_finish_ns": 5_000_000})
    return cap, replay, sim


def test_ratios_are_per_step(inputs, tmp_path, capsys):
    cap, replay, sim = inputs
    out = tmp_path / "cmp.json"
    assert cli_main(["compare", str(cap), "--replay", str(replay), "--sim", str(sim), "--out", str(out)]) == 0
    doc = json.loads(out.read_text())
    # the trace spans 2 steps: 6 ms replayed and 5 ms simulated are 3 and 2.5 ms per step
    assert doc["captured_step_ns"] == 2_000_000
    assert doc["replayed_step_ns"] == 3_000_000
    assert doc["simulated_step_ns"] == 2_500_000
    assert doc["ratios"] == {
        "replayed/captured": 1.5,
        "simulated/captured": 1.25,
        "simulated/replayed": pytest.approx(2.5 / 3, rel=1e-5),
    }
    table = capsys.readouterr().out.splitlines()
    assert table[1].split()[-3:] == ["2.0000", "1.000", "-"]
    assert table[2].split()[1:] == ["3.0000", "1.500", "1.000"]
    assert table[3].split()[1:] == ["2.5000", "1.250", "0.833"]


def test_simulates_the_trace_when_given_hardware(fixtures_dir, tmp_path, capsys):
    prefix = fixtures_dir / "astra-sim/workload/microbenchmarks/all_reduce/8npus_1MB/all_reduce"
    replay = write(tmp_path / "replay.json", {"step_time_ns": {"median": 128_880}})
    out = tmp_path / "cmp.json"
    assert (
        cli_main(
            [
                "compare",
                str(prefix),
                "--replay",
                str(replay),
                "--out",
                str(out),
                "--system",
                str(fixtures_dir / "astra-sim/system/native_collectives/Ring_4chunks.json"),
                "--network",
                str(fixtures_dir / "astra-sim/network/analytical/Ring_8npus.yml"),
            ]
        )
        == 0
    )
    doc = json.loads(out.read_text())
    assert doc["captured_step_ns"] is None
    assert doc["simulated_step_ns"] == 64_440  # astra-sim-semantics.md §7.1
    assert doc["ratios"]["simulated/replayed"] == 0.5
    assert doc["ratios"]["replayed/captured"] is None


def test_half_a_hardware_description_is_an_input_error(inputs, capsys):
    cap, replay, _ = inputs
    assert cli_main(["compare", str(cap), "--replay", str(replay), "--system", "sys.json"]) == 2
    assert "give both --system and --network" in capsys.readouterr().err


def test_a_file_that_is_not_a_replay_result_is_named(inputs, tmp_path, capsys):
    cap, _, sim = inputs
    bad = write(tmp_path / "bad.json", {"finish": 1})
    assert cli_main(["compare", str(cap), "--replay", str(bad), "--sim", str(sim)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.endswith("bad.json: not a replay result (no step_time_ns.median)")
