"""``convert pytorch --ranks-dir`` reads the upstream recipe's and the tutorials' file names, or a pattern."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from test_convert_whatif import ddp_pair

from chakra_pipe.et import read_trace, schema

CLI = [sys.executable, "-m", "chakra_pipe.cli", "-v", "convert", "pytorch"]  # -v: the link statistics


def _write_pair(folder: Path, host_name: str, device_name: str, ranks: int = 2) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    host, kineto = ddp_pair()
    for r in range(ranks):
        (folder / host_name.format(rank=r)).write_text(json.dumps(host))
        (folder / device_name.format(rank=r)).write_text(json.dumps(kineto))


def _convert(folder: Path, out: Path, *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        CLI + ["--ranks-dir", str(folder), "--out", str(out), *extra],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


@pytest.mark.parametrize(
    ("host", "device"),
    [
        ("host.{rank}.json", "device.{rank}.json"),
        ("pytorch_et_{rank}.json", "kineto_{rank}.json"),
        ("rank{rank}.host_et.json", "rank{rank}.kineto.json"),
    ],
)
def test_known_layouts_link_and_convert_every_rank(tmp_path, host, device):
    _write_pair(tmp_path / "in", host, device)
    r = _convert(tmp_path / "in", tmp_path / "out" / "w")
    assert r.returncode == 0, r.stderr
    assert r.stderr.count("convert: link: host ops matched 5/5") == 2  # linked, not host-only
    _, nodes = read_trace(tmp_path / "out" / "w.1.et")
    assert {n.name: n.duration_micros for n in nodes if n.type == schema.COMP_NODE}["aten::mm"] == 300


def test_explicit_patterns(tmp_path):
    _write_pair(tmp_path / "in", "et_{rank}.trace.json", "kt-{rank}.json")
    r = _convert(
        tmp_path / "in", tmp_path / "w", "--host-pattern", "et_{rank}.trace.json", "--device-pattern", "kt-{rank}.json"
    )
    assert r.returncode == 0, r.stderr
    assert r.stderr.count("host ops matched 5/5") == 2 and (tmp_path / "w.1.et").is_file()
    # Host only: the Kineto files are not picked up without --device-pattern.
    r = _convert(tmp_path / "in", tmp_path / "h", "--host-pattern", "et_{rank}.trace.json")
    assert r.returncode == 0 and "link:" not in r.stderr


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--host-pattern", "et.json"], "must be a file name containing {rank} exactly once"),
        (["--device-pattern", "kt-{rank}.json"], "--host-pattern is needed"),
        (["--host-pattern", "nothing_{rank}.json"], "no file names match the given patterns"),
    ],
)
def test_bad_patterns_are_one_line_errors(tmp_path, args, needle):
    _write_pair(tmp_path / "in", "et_{rank}.trace.json", "kt-{rank}.json")
    r = _convert(tmp_path / "in", tmp_path / "w", *args)
    assert r.returncode == 2 and needle in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr
