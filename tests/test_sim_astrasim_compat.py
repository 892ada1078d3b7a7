"""The drop-in ASTRA-sim binaries: ASTRA-sim's run-script pattern, flags, stdout and log/log.log.

The conformance folder holds ASTRA-sim's own ``log/log.log`` for its 111 runs (in ``expected.csv``
order); every rank's ``finished`` line and statistics lines must come out the same from ours.
"""

from __future__ import annotations

import csv
import io
import json
import os
import re
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from chakra_pipe.sim.astrasim import parse_flags, run

LINE = re.compile(r"^\[[^\]]*\] \[(?P<logger>[^\]]+)\] \[(?P<level>[^\]]+)\] (?P<msg>.*)$")
RANK = re.compile(r"^sys\[(\d+)\]")
REPO = Path(__file__).resolve().parent.parent


def parse_runs(text: str) -> list[dict[int, list[str]]]:
    """ASTRA-sim's log: runs end with ``Exiting``; per rank, its info-level workload/statistics lines."""
    runs: list[dict[int, list[str]]] = [{}]
    for line in text.splitlines():
        m = LINE.match(line)
        if not m:
            continue
        if m["msg"] == "Exiting":
            runs.append({})
        elif m["level"] == "info" and m["logger"] in ("workload", "statistics"):
            r = RANK.match(m["msg"])
            if r:
                runs[-1].setdefault(int(r.group(1)), []).append(m["msg"])
    return [r for r in runs if r]


def _key(lines: list[str]) -> tuple:
    """Head lines in order; the per-type ``X time`` lines as a set (ASTRA-sim prints them in hash order)."""
    types = frozenset(ln for ln in lines if re.search(r", (GPU|CPU|Comm|Remote mem|Invalid) time: ", ln))
    return tuple(ln for ln in lines if ln not in types), types


def _rows(conformance: Path) -> list[dict]:
    with open(conformance / "expected.csv", newline="") as fh:
        return list(csv.DictReader(fh))


def _argv(conformance: Path, row: dict, folder: Path) -> list[str]:
    argv = [
        f"--workload-configuration={conformance / row['workload']}",
        f"--system-configuration={conformance / row['system']}",
        f"--network-configuration={conformance / row['network']}",
        f"--logging-folder={folder}",
    ]
    if row["remote_memory"]:
        argv.append(f"--remote-memory-configuration={conformance / row['remote_memory']}")
    if row["comm_groups"]:
        argv.append(f"--comm-group-configuration={conformance / row['comm_groups']}")
    return argv


def test_every_conformance_run_prints_astrasim_log_lines(conformance_dir: Path, tmp_path: Path) -> None:
    expected_runs = parse_runs((conformance_dir / "log" / "log.log").read_text())
    rows = _rows(conformance_dir)
    assert len(expected_runs) == len(rows) == 111
    compared = with_stats = 0
    for n, (row, expected) in enumerate(zip(rows, expected_runs)):
        out = io.StringIO()
        folder = tmp_path / f"log{n}"
        assert run(_argv(conformance_dir, row, folder), row["backend"], out, io.StringIO()) == 0, row["case"]
        ours_stdout = parse_runs(out.getvalue())
        ours_log = parse_runs((folder / "log.log").read_text())
        assert ours_stdout == ours_log and len(ours_log) == 1
        ours = ours_log[0]
        finish = [int(x) for x in row["per_npu_finish_ns"].split(";")]
        assert sorted(ours) == list(range(len(finish)))
        for rank, lines in expected.items():
            assert lines[0] == ours[rank][0], row["case"]  # sys[i] finished, T cycles, exposed X cycles.
            assert f"finished, {finish[rank]} cycles" in ours[rank][0]
            if len(lines) > 2:  # ASTRA-sim asserted inside statistics for ranks with CPU/INVALID/MEM nodes
                assert _key(lines) == _key(ours[rank]), (row["case"], rank)
                with_stats += 1
            compared += 1
    assert compared == 1400 and with_stats == 1380


def _wrapper(bin_dir: Path, name: str) -> None:
    path = bin_dir / name
    path.write_text(
        f"#!/bin/sh\nexec {sys.executable} -c 'import sys; from chakra_pipe.sim.astrasim import "
        f'main_{name.rsplit("_", 1)[1].lower()} as m; m()\' "$@"\n'
    )
    path.chmod(path.stat().st_mode | stat.S_IEXEC)


RUN_SCRIPT = """#!/bin/bash
set -e
SCRIPT_DIR=$(dirname "$(realpath "$0")")
ASTRA_SIM={binary}
WORKLOAD="{fixtures}/workload/microbenchmarks/all_reduce/8npus_1MB/all_reduce"
SYSTEM="{fixtures}/system/native_collectives/Ring_4chunks.json"
NETWORK="{fixtures}/network/analytical/Ring_8npus.yml"
REMOTE_MEMORY="{fixtures}/remote_memory/analytical/no_memory_expansion.json"

"${{ASTRA_SIM:?}}" \\
    --workload-configuration="${{WORKLOAD}}" \\
    --system-configuration="${{SYSTEM:?}}" \\
    --remote-memory-configuration="${{REMOTE_MEMORY:?}}" \\
    --network-configuration="${{NETWORK:?}}"
"""


@pytest.mark.parametrize("binary", ["AstraSim_Analytical_Congestion_Unaware", "AstraSim_Analytical_Congestion_Aware"])
def test_upstream_run_script_runs_unchanged(binary: str, fixtures_dir: Path, tmp_path: Path) -> None:
    """The shipped examples/run_scripts/analytical pattern: binary name + flags, log/ in the cwd."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    _wrapper(bin_dir, binary)
    script = tmp_path / "run.sh"
    script.write_text(RUN_SCRIPT.format(binary=binary, fixtures=fixtures_dir / "astra-sim"))
    env = {
        **os.environ,
        "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
        "PYTHONPATH": os.pathsep.join([str(REPO / "src"), os.environ.get("PYTHONPATH", "")]),
    }
    proc = subprocess.run(
        ["bash", str(script)], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120, check=False
    )
    assert proc.returncode == 0, proc.stderr
    runs = parse_runs(proc.stdout)
    assert len(runs) == 1 and sorted(runs[0]) == list(range(8))
    for rank, lines in runs[0].items():  # spec §7.1: 8-NPU ring all-reduce of 1 MiB, 64,440 ns
        assert lines == [
            f"sys[{rank}] finished, 64440 cycles, exposed communication 64440 cycles.",
            f"sys[{rank}]. Post statistics processing start.",
            f"sys[{rank}]. Post statistics processing end.",
            f"sys[{rank}], Wall time: 64440",
            f"sys[{rank}], Comm time: 64440",
        ]
    assert parse_runs((tmp_path / "log" / "log.log").read_text()) == runs
    assert (tmp_path / "log" / "err.log").read_text() == ""


def _fixture_argv(fixtures: Path, folder: Path, system: Path | None = None) -> list[str]:
    f = fixtures / "astra-sim"
    return [
        f"--workload-configuration={f}/workload/microbenchmarks/all_reduce/4npus_1MB/all_reduce",
        f"--system-configuration={system or f / 'system/native_collectives/Ring_4chunks.json'}",
        "--network-configuration",
        str(f / "network/analytical/Ring_4npus.yml"),
        f"--logging-folder={folder}",
    ]


def test_unknown_flags_warn_and_are_ignored(fixtures_dir: Path, tmp_path: Path) -> None:
    out, err = io.StringIO(), io.StringIO()
    argv = _fixture_argv(fixtures_dir, tmp_path / "log") + ["--htsim_opts=-topo x", "stray", "--compute-scale=2"]
    assert run(argv, "congestion_unaware", out, err) == 0
    assert "ignoring unknown flag --htsim_opts" in err.getvalue()
    assert "ignoring positional argument 'stray'" in err.getvalue()
    assert "--compute-scale=2 has no effect" in err.getvalue()
    assert out.getvalue().count(" finished, ") == 4


def test_unmodelled_system_keys_warn_once_each(fixtures_dir: Path, tmp_path: Path) -> None:
    sys_cfg = json.loads((fixtures_dir / "astra-sim/system/native_collectives/Ring_4chunks.json").read_text())
    sys_cfg.update({"track-local-mem": 1, "trace-enabled": 1, "peak_perf": 5, "boost-mode": 1})
    path = tmp_path / "sys.json"
    path.write_text(json.dumps(sys_cfg))
    err = io.StringIO()
    assert run(_fixture_argv(fixtures_dir, tmp_path / "log", path), "congestion_aware", io.StringIO(), err) == 0
    assert err.getvalue().count("track-local-mem=1") == 1 and err.getvalue().count("trace-enabled=1") == 1
    assert "unknown system key 'peak_perf' ignored" in err.getvalue()
    assert "boost-mode=1 has no effect" in err.getvalue()
    assert "[astra-sim] [warning] track-local-mem=1" in (tmp_path / "log" / "log.log").read_text()


def test_bad_flags_and_inputs_exit_2_and_write_err_log(fixtures_dir: Path, tmp_path: Path) -> None:
    err = io.StringIO()
    argv = _fixture_argv(fixtures_dir, tmp_path / "log") + ["--num-queues-per-dim=two"]
    assert run(argv, "congestion_unaware", io.StringIO(), err) == 2
    assert "--num-queues-per-dim: expected an integer, got 'two'" in err.getvalue()
    assert "--num-queues-per-dim" in (tmp_path / "log" / "err.log").read_text()
    err = io.StringIO()
    assert (
        run(
            ["--system-configuration=x", f"--logging-folder={tmp_path / 'log1'}"],
            "congestion_unaware",
            io.StringIO(),
            err,
        )
        == 2
    )
    assert "--workload-configuration" in err.getvalue() and "--network-configuration" in err.getvalue()
    argv = _fixture_argv(fixtures_dir, tmp_path / "log2")
    argv[0] = f"--workload-configuration={tmp_path / 'missing'}"
    assert run(argv, "congestion_unaware", io.StringIO(), io.StringIO()) == 2
    assert "missing" in (tmp_path / "log2" / "err.log").read_text()


def test_flag_spellings() -> None:
    opts = parse_flags(
        [
            "--workload-configuration",
            "w",
            "--system-configuration=s",
            "--network-configuration=n",
            "--rendezvous-protocol",
            "--injection-scale=0.5",
            "--num-queues-per-dim",
            "2",
        ]
    )
    v = opts.values
    assert (
        v["workload-configuration"],
        v["rendezvous-protocol"],
        v["injection-scale"],
        v["num-queues-per-dim"],
        v["comm-group-configuration"],
        v["logging-folder"],
    ) == ("w", True, 0.5, 2, "empty", "log")
    assert (
        parse_flags(
            [
                "--workload-configuration=w",
                "--system-configuration=s",
                "--network-configuration=n",
                "--rendezvous-protocol=false",
            ]
        ).values["rendezvous-protocol"]
        is False
    )


def test_injection_scale_multiplies_endpoint_delay(fixtures_dir: Path, tmp_path: Path) -> None:
    sys_cfg = json.loads((fixtures_dir / "astra-sim/system/native_collectives/Ring_4chunks.json").read_text())
    sys_cfg["endpoint-delay"] = 100
    path = tmp_path / "sys.json"
    path.write_text(json.dumps(sys_cfg))
    times = []
    for scale in ("1", "3"):
        out = io.StringIO()
        argv = _fixture_argv(fixtures_dir, tmp_path / "log", path) + [f"--injection-scale={scale}"]
        assert run(argv, "congestion_unaware", out, io.StringIO()) == 0
        times.append(int(re.search(r"sys\[0\] finished, (\d+) cycles", out.getvalue()).group(1)))
    assert times[1] > times[0]


def test_chakra_pipe_simulate_warns_about_unused_scales(fixtures_dir: Path, tmp_path: Path, capsys) -> None:
    from chakra_pipe.cli import main

    argv = _fixture_argv(fixtures_dir, tmp_path / "log")[:4]
    assert main(["simulate", *argv[:2], "--network-configuration=" + argv[3], "--comm-scale=0.5"]) == 0
    assert "--comm-scale=0.5 has no effect" in capsys.readouterr().err


def test_closed_stdout_keeps_exit_status_and_log_files(fixtures_dir: Path, tmp_path: Path) -> None:
    """A reader that goes away (`| head`, here `| true`): exit 0 and log.log still gets every line."""
    argv = " ".join(f"'{a}'" for a in _fixture_argv(fixtures_dir, tmp_path / "log"))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO / "src"), os.environ.get("PYTHONPATH", "")])}
    script = f"{sys.executable} -m chakra_pipe.sim.astrasim {argv} | true; echo ${{PIPESTATUS[0]}}"
    proc = subprocess.run(["bash", "-c", script], env=env, capture_output=True, text=True, timeout=120, check=False)
    assert proc.stdout.strip() == "0", proc.stderr
    assert "Traceback" not in proc.stderr
    runs = parse_runs((tmp_path / "log" / "log.log").read_text())
    assert len(runs) == 1 and sorted(runs[0]) == [0, 1, 2, 3] and all(len(v) == 5 for v in runs[0].values())
