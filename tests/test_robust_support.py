"""Shared checks for the robustness tests, and tests that those checks really fail on bad behaviour.

The robustness contract (README, "Exit codes and errors") is the same for every verb: a run ends
within a time bound, with exit code 0 or a documented error code (1 findings, 2 bad input, 3 stuck),
a single ``chakra-pipe VERB: error: file: where: what`` line on stderr when it fails, no traceback,
and no half-written or temporary output file left behind. ``run_cli`` runs the real entry point in
a subprocess under a wall-clock and address-space limit (so a hang or a memory blow-up is caught,
not suffered); ``call_cli`` runs ``cli.main`` in-process under an alarm, cheap enough for corpora.
The other robustness modules import these helpers (pytest puts ``tests/`` on ``sys.path``).
"""

from __future__ import annotations

import contextlib
import importlib.util
import io
import os
import re
import resource
import signal
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from chakra_pipe import cli
from chakra_pipe.et import schema
from chakra_pipe.et.framing import encode_varint, frame

CORPUS = Path(__file__).resolve().parent / "data" / "robust"  # committed broken rank sets + their builder
DOCUMENTED_CODES = {0, 1, 2, 3}
MEMORY_LIMIT = 3 << 30  # bytes of address space a single CLI run may map (a blow-up fails fast)
_ERROR_LINE = re.compile(r"^chakra-pipe [a-z-]+(?: [a-z-]+)?: error: \S.*$")
# A refused rank set lists its problems after the error line, one Finding.line() each (or a cap line).
_PROBLEM_LINE = re.compile(r"^\S.*: (?:node \d+: )?error: [a-z0-9-]+: \S.*$|^\S.*: \.\.\. \d+ more [a-z0-9-]+ findings")
_TEMP_NAME = re.compile(r"^\..+\.tmp$")  # atomic_open's temporary names: .<target>.<random>.tmp
# The system.json and network.yml the reader and CLI robustness tests start from: a 2-NPU ring with
# every collective on the ring algorithm, roofline off (a test that needs it spreads this and sets it).
RING_SYSTEM = {
    "scheduling-policy": "LIFO",
    "collective-optimization": "baseline",
    "endpoint-delay": 10,
    "preferred-dataset-splits": 4,
    "local-mem-bw": 1600,
    "peak-perf": 900,
    "roofline-enabled": 0,
    "all-reduce-implementation": ["ring"],
    "all-gather-implementation": ["ring"],
    "reduce-scatter-implementation": ["ring"],
    "all-to-all-implementation": ["ring"],
}
RING_NETWORK = "topology: [ Ring ]\nnpus_count: [ 2 ]\nbandwidth: [ 50.0 ]\nlatency: [ 500.0 ]\n"


@dataclass(frozen=True)
class Outcome:
    """What one CLI run did: exit code and captured streams."""

    code: int
    stdout: str
    stderr: str


class TimeBound(Exception):
    """Raised inside an in-process run that exceeded its time bound."""


@contextlib.contextmanager
def time_bound(seconds: int) -> Iterator[None]:
    """Fail the enclosed code with :class:`TimeBound` after ``seconds`` (main thread only)."""

    def _expired(signum, frame):
        raise TimeBound(f"still running after {seconds} s")

    previous = signal.signal(signal.SIGALRM, _expired)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def _limit_memory() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))


def run_cli(argv: list[str], *, timeout: float = 60, cwd: str | os.PathLike | None = None) -> Outcome:
    """Run ``chakra-pipe ARGV`` in a subprocess; a hang past ``timeout`` fails the test."""
    cmd = [sys.executable, "-m", "chakra_pipe.cli", *map(str, argv)]
    env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")  # 2 shared cores: no thread pools
    try:
        proc = subprocess.run(
            cmd, capture_output=True, text=True, timeout=timeout, cwd=cwd, env=env, preexec_fn=_limit_memory
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"hang: `chakra-pipe {' '.join(map(str, argv))}` still running after {timeout} s")
    return Outcome(proc.returncode, proc.stdout, proc.stderr)


def call_cli(argv: list[str], *, timeout: int = 20) -> Outcome:
    """Run ``cli.main(ARGV)`` in-process; any exception escaping it is the traceback a user would see."""
    out, err = io.StringIO(), io.StringIO()
    with time_bound(timeout), contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = cli.main([str(a) for a in argv])
        except SystemExit as exc:  # argparse usage errors
            code = exc.code if isinstance(exc.code, int) else 2
    return Outcome(int(code), out.getvalue(), err.getvalue())


def assert_clean(outcome: Outcome, *, allowed: set[int] = DOCUMENTED_CODES, what: str = "") -> None:
    """A documented exit code; on failure one ``error:`` line on stderr (followed only by the problem
    lines of a refused rank set, when it is one); never a traceback."""
    label = f"{what}: " if what else ""
    assert "Traceback" not in outcome.stderr + outcome.stdout, f"{label}traceback:\n{outcome.stderr[-2000:]}"
    assert outcome.code in allowed, (
        f"{label}exit code {outcome.code}, expected one of {sorted(allowed)}; stderr: {outcome.stderr[-500:]}"
    )
    if outcome.code in (2, 3):
        lines = outcome.stderr.strip().splitlines()
        assert lines, f"{label}no error line on stderr"
        assert _ERROR_LINE.match(lines[0]), f"{label}error line not in `chakra-pipe VERB: error: ...` form: {lines[0]}"
        odd = [ln for ln in lines[1:] if not _PROBLEM_LINE.match(ln)]
        assert not odd, f"{label}expected one error line (plus problem lines) on stderr, got: {outcome.stderr[-500:]}"


def leftovers(directory: str | os.PathLike) -> list[str]:
    """Temporary files an atomic writer left behind in ``directory`` (recursively)."""
    return sorted(str(p) for p in Path(directory).rglob(".*.tmp") if _TEMP_NAME.match(p.name))


def assert_no_partial_output(directory: str | os.PathLike, outcome: Outcome, outputs: list[Path]) -> None:
    """No temporary file survives; a failed run leaves none of its outputs (they were absent before)."""
    assert not leftovers(directory), f"temporary files left behind: {leftovers(directory)}"
    if outcome.code != 0:
        present = [str(p) for p in outputs if p.exists()]
        assert not present, f"a failed run (exit {outcome.code}) left outputs behind: {present}"


def corpus_builder():
    """``tests/data/robust/make_corpus.py`` as a module: its node constructors and ``build``."""
    spec = importlib.util.spec_from_file_location("robust_make_corpus", CORPUS / "make_corpus.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def chain_bytes(n: int, *, cycle: bool = False, fan_in: int = 0) -> bytes:
    """``n`` COMP nodes, node i depending on i-1 (and on the previous ``fan_in`` nodes); ``cycle``
    makes node 2 also depend on node n, so nodes 2..n form one long cycle behind root 1."""
    out = [frame(schema.GlobalMetadata(version="0.0.4").SerializeToString())]
    for i in range(1, n + 1):
        deps = list(range(max(1, i - fan_in), i)) if fan_in else ([i - 1] if i > 1 else [])
        if cycle and i == 2:
            deps.append(n)
        packed = b"".join(encode_varint(d) for d in deps)
        body = (
            b"\x08"
            + encode_varint(i)
            + b"\x12\x01c\x18\x04"
            + (b"\x2a" + encode_varint(len(packed)) + packed if deps else b"")
            + b"\x38\x01"
        )
        out.append(encode_varint(len(body)) + body)
    return b"".join(out)


# -- the checks themselves must be able to fail ----------------------------------------------------


def test_assert_clean_rejects_traceback_and_undocumented_codes():
    with pytest.raises(AssertionError, match="traceback"):
        assert_clean(Outcome(1, "", "Traceback (most recent call last):\n  File ...\nValueError: x\n"))
    with pytest.raises(AssertionError, match="exit code 7"):
        assert_clean(Outcome(7, "", "chakra-pipe info: error: f.et: boom\n"))
    with pytest.raises(AssertionError, match="one error line"):
        assert_clean(Outcome(2, "", "chakra-pipe info: error: f.et: a\nmore\n"))
    with pytest.raises(AssertionError, match="form"):
        assert_clean(Outcome(2, "", "something went wrong\n"))
    assert_clean(Outcome(2, "", "chakra-pipe validate: error: t.0.et: byte 12: truncated length prefix\n"))


def test_run_cli_reports_hangs_and_bounds_memory(tmp_path):
    """A run past its time bound fails the test instead of hanging CI; RLIMIT_AS stops a blow-up."""
    with pytest.raises(pytest.fail.Exception, match="hang"):
        run_cli(["info", "/dev/stdin"], timeout=0.01)
    hog = subprocess.run(
        [sys.executable, "-c", "b = bytearray(4 << 30)"], capture_output=True, preexec_fn=_limit_memory, timeout=60
    )
    assert hog.returncode != 0 and b"MemoryError" in hog.stderr


def test_leftovers_finds_atomic_temporaries(tmp_path):
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / ".out.json.abc123.tmp").write_text("{")
    (tmp_path / "out.json").write_text("{}")
    assert leftovers(tmp_path) == [str(tmp_path / "sub" / ".out.json.abc123.tmp")]
