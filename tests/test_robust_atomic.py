"""Atomic outputs: a writer that fails or is killed never leaves a truncated target, and every writer
in the package goes through ``chakra_pipe.atomic`` (checked by scanning the source)."""

from __future__ import annotations

import ast
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from processes import start_huge_generate, wait_for_rank_files
from test_robust_support import call_cli, chain_bytes, leftovers

from chakra_pipe.atomic import atomic_open, write_bytes

SRC = Path(__file__).resolve().parent.parent / "src" / "chakra_pipe"

# Direct writes allowed, each with the reason it cannot or need not be atomic. Keyed by
# (file relative to the package, enclosing function): line numbers move, functions rarely do.
ALLOWED_DIRECT_WRITES = {
    ("atomic.py", "_create_temp"): "the atomic writer's own temporary file",
    ("lifecycle.py", "_discard"): "/dev/null, opened to stand in for a stdout whose reader went away",
    ("atomic.py", "atomic_open"): "a FIFO or character device, written straight: there is no file to replace",
    ("launch/ranks.py", "_run"): "job.json in the run's private folder, read only by workers started afterwards",
    ("launch/ranks.py", "_spawn"): "a worker's live log stream in the run's private folder",
    ("replay/launcher.py", "prepare"): "a rank's plan in the run's private folder, read only by the worker "
    "started afterwards",
    ("replay/status.py", "create"): "the replay status board, a fixed-size file the ranks mmap and update in place",
    ("replay/status.py", "__init__"): "opening that status board for mmap (read-write for a rank, read-only for the "
    "launcher)",
    ("report/leaderboard.py", "locked"): "an empty lock file, opened only to flock it",
    (
        "sim/astrasim.py",
        "open",
    ): "log.log / err.log are append-only logs like spdlog's file sinks (runs share a folder)",
    ("sim/astrasim.py", "run"): "a closed stdout (| head) is pointed at /dev/null so the exit flush cannot fail",
}


def test_failed_writer_leaves_the_old_file_and_no_temporary(tmp_path):
    target = tmp_path / "results.csv"
    target.write_text("old,complete\n")
    with pytest.raises(RuntimeError):
        with atomic_open(target, "w") as f:
            f.write("new,half")
            raise RuntimeError("disk full")
    assert target.read_text() == "old,complete\n"
    assert not leftovers(tmp_path)


def test_gzip_output_is_reproducible_and_complete(tmp_path):
    for name in ("a.json.gz", "b.json.gz"):
        with atomic_open(tmp_path / name, "w") as f:
            f.write('{"x": 1}\n')
    assert (tmp_path / "a.json.gz").read_bytes() == (tmp_path / "b.json.gz").read_bytes()
    import gzip

    assert gzip.decompress((tmp_path / "a.json.gz").read_bytes()) == b'{"x": 1}\n'


@pytest.mark.parametrize("umask", [0o022, 0o002, 0o077])
def test_outputs_get_the_permissions_a_plain_open_would(tmp_path, umask):
    """mkstemp's private 0600 must not leak into results shared with a group or a cluster account."""
    old = os.umask(umask)
    try:
        write_bytes(tmp_path / "atomic.bin", b"x")
        with open(tmp_path / "plain.bin", "wb") as f:
            f.write(b"x")
    finally:
        os.umask(old)
    mode = lambda p: (tmp_path / p).stat().st_mode & 0o777  # noqa: E731
    assert mode("atomic.bin") == mode("plain.bin") == 0o666 & ~umask


_SLOW_WRITER = """
import sys, time
from chakra_pipe.atomic import atomic_open
with atomic_open(sys.argv[1], "wb") as f:
    for _ in range(1000):
        f.write(b"x" * 65536)
        f.flush()
        print("wrote", flush=True)
        time.sleep(0.01)
"""


def test_sigkill_mid_write_never_exposes_a_truncated_target(tmp_path):
    target = tmp_path / "shard.csv"
    target.write_bytes(b"previous complete result\n")
    proc = subprocess.Popen([sys.executable, "-c", _SLOW_WRITER, str(target)], stdout=subprocess.PIPE)
    for _ in range(3):  # the writer is mid-file: some chunks are on disk in the temporary
        proc.stdout.readline()
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    assert target.read_bytes() == b"previous complete result\n"
    temporaries = leftovers(tmp_path)
    assert len(temporaries) == 1 and Path(temporaries[0]).stat().st_size > 0  # the kill hit mid-write


def test_failing_cli_writer_leaves_no_output(tmp_path):
    """dejsonize refuses input after it has begun writing; the output must not appear."""
    src = tmp_path / "in.json"
    src.write_text('{"metadata": {}, "nodes": [{"id": 1, "name": "a"}, {}]}')  # 2nd node is all-default
    out = tmp_path / "out.et"
    outcome = call_cli(["dejsonize", src, out])
    assert outcome.code == 2 and "node #1" in outcome.stderr
    assert not out.exists() and not leftovers(tmp_path)


def _direct_writes(path: Path) -> list[tuple[str, int, str]]:
    """(function, line, call) of every call that writes a file without ``chakra_pipe.atomic``."""
    tree = ast.parse(path.read_text(), filename=str(path))
    found: list[tuple[str, int, str]] = []

    def visit(node: ast.AST, func: str) -> None:
        for child in ast.iter_child_nodes(node):
            name = child.name if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)) else func
            if isinstance(child, ast.Call):
                what = _write_call(child)
                if what:
                    found.append((name, child.lineno, what))
            visit(child, name)

    visit(tree, "<module>")
    return found


def _write_call(call: ast.Call) -> str | None:
    f = call.func
    if (
        isinstance(f, ast.Name)
        and f.id == "open"
        or isinstance(f, ast.Attribute)
        and f.attr == "open"
        and isinstance(f.value, ast.Name)
        and f.value.id in ("os", "io", "gzip", "bz2", "lzma")
    ):
        mode = call.args[1] if len(call.args) > 1 else next((k.value for k in call.keywords if k.arg == "mode"), None)
        flags = ast.unparse(mode) if mode is not None else ""
        if isinstance(f, ast.Attribute) and f.value.id == "os":
            return "os.open" if "O_WRONLY" in ast.unparse(call) or "O_RDWR" in ast.unparse(call) else None
        return f"open(mode={flags})" if any(c in flags for c in "wax+") else None
    if (
        isinstance(f, ast.Attribute)
        and f.attr in ("write_text", "write_bytes", "touch")
        and not (isinstance(f.value, ast.Name) and f.value.id == "atomic")
    ):
        return f".{f.attr}()"
    if (
        isinstance(f, ast.Attribute)
        and f.attr in ("save", "savez", "savez_compressed", "tofile")
        and isinstance(f.value, ast.Name)
        and f.value.id in ("np", "numpy")
    ):
        return f"np.{f.attr}()"
    return None


def test_every_writer_in_the_package_is_atomic():
    """New code that writes with open(..., "w"), Path.write_text or np.save fails here until it uses
    chakra_pipe.atomic (or is added to ALLOWED_DIRECT_WRITES with a reason)."""
    offenders = []
    for path in sorted(SRC.rglob("*.py")):
        rel = path.relative_to(SRC).as_posix()
        for func, line, what in _direct_writes(path):
            if (rel, func) not in ALLOWED_DIRECT_WRITES:
                offenders.append(f"{rel}:{line} in {func}: {what}")
    assert not offenders, "non-atomic writers:\n" + "\n".join(offenders)


def test_the_scan_finds_direct_writes(tmp_path):
    """The scanner itself must flag the patterns it promises to flag."""
    sample = tmp_path / "sample.py"
    sample.write_text(
        "import numpy as np\nfrom pathlib import Path\n"
        "def f(p):\n    open(p, 'w').write('x')\n    Path(p).write_text('x')\n"
        "    np.save(p, [1])\n    open(p).read()\n    open(p, mode='ab')\n"
    )
    assert [(fn, what) for fn, _, what in _direct_writes(sample)] == [
        ("f", "open(mode='w')"),
        ("f", ".write_text()"),
        ("f", "np.save()"),
        ("f", "open(mode='ab')"),
    ]


def test_killed_generate_never_leaves_a_set_that_loads_as_complete(tmp_path):
    """A rank set is many files; after a kill mid-way it must not pass for a complete, smaller set."""
    from chakra_pipe.errors import InputError
    from chakra_pipe.et.traceset import TraceSet

    prefix = tmp_path / "big"
    proc = start_huge_generate(prefix)
    wait_for_rank_files(proc, prefix, 51)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    written = len(list(tmp_path.glob("big.*.et")))
    assert 0 < written < 200_000, f"{written} rank files: the kill did not land mid-way"
    try:
        loaded = len(TraceSet.load(prefix).ranks)
    except InputError:
        return  # refused: the partial set cannot be mistaken for a complete one
    pytest.fail(f"a killed generate left {loaded} rank files that load as a complete {loaded}-rank set")


@pytest.mark.slow
def test_ctrl_c_ends_with_130_one_line_and_no_output(tmp_path):
    """SIGINT in the middle of a long validate: exit 130, one 'interrupted' line, no --json file."""
    trace = tmp_path / "big.0.et"
    trace.write_bytes(chain_bytes(1_000_000))
    out = tmp_path / "findings.json"
    proc = subprocess.Popen(
        [sys.executable, "-m", "chakra_pipe.cli", "validate", str(trace), "--json", str(out)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        # a shell without job control starts background jobs with SIGINT ignored, and Python keeps an
        # inherited SIG_IGN: give the child the default a user's terminal gives it
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    time.sleep(3)  # past interpreter start-up, inside loading or checking the million nodes
    assert proc.poll() is None, "validate finished before it could be interrupted"
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130 and err.strip() == "chakra-pipe validate: interrupted", err
    assert not out.exists() and not leftovers(tmp_path)


def test_writing_a_smaller_set_over_an_old_one_leaves_no_stale_ranks(tmp_path):
    """Two ranks generated over an old four-rank set must load as two ranks, not a mixed set of four."""
    from chakra_pipe.et.traceset import TraceSet

    prefix = tmp_path / "w"
    for npus in (4, 2):
        r = call_cli(
            ["generate", "collective", "--type", "all_reduce", "--npus", npus, "--size", "1MiB", "--out", prefix]
        )
        assert r.code == 0, r.stderr
    assert len(TraceSet.load(prefix).ranks) == 2
    assert sorted(p.name for p in tmp_path.iterdir()) == ["w.0.et", "w.1.et"]
