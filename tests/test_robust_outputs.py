"""Output targets as users name them: links, FIFOs, devices, ``-``, folders, read-only files; a closed
stdout; SIGTERM and SIGKILL mid-write. Every verb writes through ``chakra_pipe.atomic``, so the
property test over targets covers them all; the CLI tests check the verbs' side of the contract."""

from __future__ import annotations

import importlib.util
import os
import signal
import stat
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from processes import start_huge_generate, wait_for_rank_files
from test_robust_support import leftovers

from chakra_pipe.atomic import atomic_open, write_bytes
from chakra_pipe.errors import InputError
from chakra_pipe.lifecycle import sweep_dead_scratch

KINDS = (
    "absent",
    "file",
    "link",
    "link_chain",
    "dangling_link",
    "fifo",
    "devnull",
    "folder",
    "read_only",
    "link_to_read_only",
    "missing_parent",
)


def _make(root: Path, kind: str) -> tuple[Path, Path | None]:
    """(the path the user names, the real file that must receive the bytes, or None for a stream)."""
    real = root / "real.bin"
    if kind == "absent":
        return real, real
    if kind == "missing_parent":
        return root / "new" / "sub" / "out.bin", root / "new" / "sub" / "out.bin"
    if kind in ("file", "link", "link_chain", "read_only", "link_to_read_only"):
        real.write_bytes(b"old content")
    if kind in ("read_only", "link_to_read_only"):
        real.chmod(0o444)
    if kind in ("file", "read_only"):
        return real, real
    if kind in ("link", "dangling_link", "link_to_read_only"):
        (root / "link.bin").symlink_to("real.bin")
        return root / "link.bin", real
    if kind == "link_chain":
        (root / "hop.bin").symlink_to(real)
        (root / "link.bin").symlink_to("hop.bin")
        return root / "link.bin", real
    if kind == "fifo":
        os.mkfifo(root / "pipe")
        return root / "pipe", None
    if kind == "devnull":
        return Path(os.devnull), None
    (root / "folder").mkdir()
    return root / "folder", None


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(kind=st.sampled_from(KINDS), data=st.binary(max_size=300_000), gz=st.booleans())
def test_every_output_target_gets_the_bytes_or_a_clear_error(kind, data, gz):
    import gzip

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        named, real = _make(root, kind)
        if gz and kind not in ("devnull", "folder"):
            named = named.with_name(named.name + ".gz") if kind in ("absent", "missing_parent") else named
            real = named if kind in ("absent", "missing_parent") else real
        links_before = {p.name: os.readlink(p) for p in root.iterdir() if p.is_symlink()}
        received: list[bytes] = []
        reader = None
        if kind == "fifo":
            reader = threading.Thread(target=lambda: received.append(Path(named).read_bytes()))
            reader.start()
        refused = kind in ("folder", "read_only", "link_to_read_only")
        if refused:
            with pytest.raises(InputError) as exc, atomic_open(named, "wb", gzip_output=gz) as f:
                f.write(data)
            assert str(named) in str(exc.value) and "\n" not in str(exc.value)
        else:
            with atomic_open(named, "wb", gzip_output=gz) as f:
                f.write(data)
        if reader is not None:
            reader.join(timeout=30)
            assert not reader.is_alive()
            assert (gzip.decompress(received[0]) if gz else received[0]) == data
            assert stat.S_ISFIFO(os.lstat(named).st_mode)
        if real is not None and not refused:
            got = real.read_bytes()
            assert (gzip.decompress(got) if gz else got) == data
        if kind in ("read_only", "link_to_read_only"):
            assert (root / "real.bin").read_bytes() == b"old content"
        # links stay links, pointing where they pointed; no temporary is left anywhere
        assert {p.name: os.readlink(p) for p in root.iterdir() if p.is_symlink()} == links_before
        assert not leftovers(root)
        if (root / "real.bin").exists():
            (root / "real.bin").chmod(0o644)


def test_dash_is_stdout(capfdbinary):
    write_bytes("-", b"to stdout\n")
    assert capfdbinary.readouterr().out == b"to stdout\n"


def _cli(*argv, **kw) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "chakra_pipe.cli", *map(str, argv)], capture_output=True, text=True, timeout=120, **kw
    )


@pytest.fixture(scope="module")
def trace8(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("trace8")
    assert (
        _cli(
            "generate", "collective", "--type", "all_reduce", "--npus", 8, "--size", "1MiB", "--out", root / "ar"
        ).returncode
        == 0
    )
    return root / "ar"


HW = Path(__file__).resolve().parent.parent / "config" / "hardware" / "hgx_h100"


def _closed_stdout(*argv) -> subprocess.CompletedProcess:
    """Run a verb whose stdout is a pipe nobody reads (the reader is gone, as after ``| head -1``)."""
    r, w = os.pipe()
    os.close(r)
    try:
        return subprocess.run(
            [sys.executable, "-m", "chakra_pipe.cli", *map(str, argv)],
            stdout=w,
            stderr=subprocess.PIPE,
            text=True,
            timeout=120,
        )
    finally:
        os.close(w)


def _simulate_args(trace: Path, out: Path) -> list:
    """``simulate`` of ``trace`` on the 8-NPU test hardware, results to ``out``."""
    return [
        "simulate",
        "--workload-configuration",
        trace,
        "--system-configuration",
        HW / "system.json",
        "--network-configuration",
        HW / "network.yml",
        "--output-json",
        out,
    ]


def test_closed_stdout_keeps_simulate_outputs_and_exit_code(trace8, tmp_path):
    out, timeline = tmp_path / "o.json", tmp_path / "t.json"
    p = _closed_stdout(*_simulate_args(trace8, out), "--timeline", timeline)
    assert p.returncode == 0 and p.stderr == ""
    ref = _cli(*_simulate_args(trace8, tmp_path / "ref.json"))
    assert out.read_bytes() == (tmp_path / "ref.json").read_bytes() and timeline.stat().st_size > 0
    assert ref.stdout.startswith("sys[0] finished")


def test_closed_stdout_keeps_validate_findings_and_exit_code(trace8, tmp_path):
    bad = Path(__file__).resolve().parent / "data" / "robust" / "traces" / "duplicate_id"
    ref = _cli("validate", bad)
    assert ref.returncode == 1 and ref.stdout
    p = _closed_stdout("validate", bad, "--json", tmp_path / "f.json")
    assert (p.returncode, p.stderr) == (1, "")
    assert (tmp_path / "f.json").stat().st_size > 0
    ok = _closed_stdout("validate", trace8, "--json", tmp_path / "ok.json")
    assert ok.returncode == 0 and (tmp_path / "ok.json").exists()


def test_no_stdout_at_all_changes_nothing(trace8, tmp_path):
    """`>&-`: Python starts with sys.stdout None; printing must not crash the verb."""
    p = subprocess.run(
        [sys.executable, "-m", "chakra_pipe.cli", *map(str, _simulate_args(trace8, tmp_path / "o.json"))],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        timeout=120,
        preexec_fn=lambda: os.close(1),
    )
    assert (p.returncode, p.stderr) == (0, "") and (tmp_path / "o.json").stat().st_size > 0


def test_output_to_a_closed_stdout_is_not_reported_as_written(trace8):
    p = _closed_stdout("jsonize", f"{trace8}.0.et", "-")
    assert p.returncode == 2 and "standard output closed" in p.stderr


def test_sigterm_mid_write_leaves_no_temporary(tmp_path):
    proc = start_huge_generate(tmp_path / "big", stderr=subprocess.PIPE)
    wait_for_rank_files(proc, tmp_path / "big", 20)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 128 + signal.SIGTERM, err
    assert b"Traceback" not in err
    assert not leftovers(tmp_path)


def _dead_pid() -> int:
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    return p.pid


def test_next_write_sweeps_temporaries_of_killed_writers(tmp_path):
    from chakra_pipe.atomic import _SWEPT, _host

    dead = tmp_path / f".out.csv.{_dead_pid()}-{_host()}.abcdef123456.tmp"
    live = tmp_path / f".out.csv.{os.getpid()}-{_host()}.abcdef123456.tmp"
    other_target = tmp_path / f".other.csv.{_dead_pid()}-{_host()}.abcdef123456.tmp"
    foreign = tmp_path / ".out.csv.user-notes.tmp"  # not our pattern: never touched
    old = tmp_path / ".out.csv.1-0badc0de.abcdef123456.tmp"  # another host's, a day old
    for p in (dead, live, other_target, foreign, old):
        p.write_text("partial")
    os.utime(old, (time.time() - 2 * 86400,) * 2)
    _SWEPT.discard(str(tmp_path))
    write_bytes(tmp_path / "out.csv", b"x")
    assert not dead.exists() and not old.exists() and not other_target.exists()
    assert live.exists() and foreign.exists()
    # once per folder and process: a later kill's leftovers wait for the next process
    again = tmp_path / f".out.csv.{_dead_pid()}-{_host()}.abcdef123456.tmp"
    again.write_text("partial")
    write_bytes(tmp_path / "out2.csv", b"x")
    assert again.exists()


def test_scratch_folders_of_dead_runs_are_removed(tmp_path):
    dead = tmp_path / f".chakra-ranks-{_dead_pid()}-abc"
    live = tmp_path / f".chakra-ranks-{os.getpid()}-abc"
    other = tmp_path / ".chakra-ranks-notes"
    for d in (dead, live, other):
        d.mkdir()
        (d / "job.pkl").write_bytes(b"x")
    assert sweep_dead_scratch(".chakra-ranks-", str(tmp_path)) == [dead]
    assert live.exists() and other.exists()


def test_symlinked_standing_board_updates_the_shared_file_under_its_lock(tmp_path):
    from test_report_results import _plan, _write_shards

    from chakra_pipe.report import leaderboard
    from chakra_pipe.report.aggregate import aggregate

    shared = tmp_path / "shared" / "leaderboard.csv"
    shared.parent.mkdir()
    link = tmp_path / "reports" / "leaderboard.csv"
    link.parent.mkdir()
    link.symlink_to(shared)
    for name in ("c1", "c2"):
        camp = _plan(tmp_path, name)
        _write_shards(camp)
        leaderboard.update_standing(aggregate(camp, commit="x"), link, date="2026-01-01")
    assert link.is_symlink() and os.readlink(link) == str(shared)
    # both campaigns ran the same traces on the same hardware: the later one's rows replace the earlier's
    rows = shared.read_text().splitlines()[1:]
    assert len(rows) == 3 and all(",c2," in r for r in rows)
    assert (shared.parent / ".leaderboard.csv.lock").exists() and not (link.parent / ".leaderboard.csv.lock").exists()


def test_dash_through_the_cli_is_parseable_json(trace8):
    import json

    from test_robust_support import call_cli

    outcome = call_cli(["jsonize", f"{trace8}.0.et", "-"])
    assert outcome.code == 0 and json.loads(outcome.stdout)["nodes"][0]["id"] == 0
    assert outcome.stderr.strip() == "-: 1 nodes"


@pytest.mark.slow
@pytest.mark.skipif(
    importlib.util.find_spec("torch") is None, reason="replay needs torch (pip install 'chakra-pipe[torch]')"
)
def test_sigterm_mid_replay_removes_its_scratch_folder_and_ranks(tmp_path):
    from test_robust_support import corpus_builder

    c = corpus_builder()
    for r in range(2):  # a 30 s compute per rank: the replay is surely running when the signal comes
        (tmp_path / f"long.{r}.et").write_bytes(c.encode([c.comp(1, [], 30_000_000)]))
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    stale = scratch / f".chakra-ranks-{_dead_pid()}-old"  # what a SIGKILLed replay left
    stale.mkdir()
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "chakra_pipe.cli",
            "replay",
            str(tmp_path / "long"),
            "--iterations",
            "1",
            "--warmup",
            "0",
            "--backend",
            "gloo",
            "--timeout",
            "120",
            "--out",
            str(tmp_path / "r.json"),
        ],
        stderr=subprocess.PIPE,
        env={**os.environ, "TMPDIR": str(scratch)},
    )
    deadline = time.monotonic() + 60
    while (
        proc.poll() is None
        and time.monotonic() < deadline
        and not any((d / "log.1.txt").exists() for d in scratch.glob(".chakra-ranks-*"))
    ):
        time.sleep(0.1)
    assert not stale.exists(), "the next replay did not remove a dead replay's scratch folder"
    time.sleep(1)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 128 + signal.SIGTERM, err
    assert not list(scratch.glob(".chakra-ranks-*")), "SIGTERM left the replay's scratch folder"
    assert not (tmp_path / "r.json").exists() and not leftovers(tmp_path)
