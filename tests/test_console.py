"""Diagnostics and progress of the chakra-pipe command: stderr only, progress only on a terminal."""

from __future__ import annotations

import logging
import os
import pty
import subprocess
import sys

import pytest
from conftest import TORCH_EXTRA

from chakra_pipe import console


def test_levels_follow_verbose_and_quiet():
    for args, level in (
        ((0, False), logging.WARNING),
        ((1, False), logging.INFO),
        ((2, False), logging.DEBUG),
        ((3, False), logging.DEBUG),
        ((2, True), logging.ERROR),
    ):
        console.configure(*args)
        assert logging.getLogger("chakra_pipe").level == level
    console.configure(0, False)


def test_track_passes_items_through_and_draws_nothing_off_a_terminal(capsys):
    console.configure(0, False)  # pytest's stderr is not a terminal
    assert list(console.track(iter(range(5)), "x", 5)) == [0, 1, 2, 3, 4]
    assert capsys.readouterr().err == ""


def _run_on_a_terminal(*argv: str) -> str:
    """Run ``python -m chakra_pipe ARGV`` with stderr on a pseudo-terminal; returns what it drew there."""
    main, sub = pty.openpty()
    proc = subprocess.Popen([sys.executable, "-m", "chakra_pipe", *argv], stdout=subprocess.DEVNULL, stderr=sub)
    os.close(sub)
    out = b""
    while True:
        try:
            chunk = os.read(main, 4096)
        except OSError:
            break
        if not chunk:
            break
        out += chunk
    assert proc.wait(timeout=120) == 0
    os.close(main)
    return out.decode()


@pytest.mark.parametrize("quiet", [False, True])
def test_generate_llm_shows_progress_on_a_terminal_unless_quiet(tmp_path, quiet):
    argv = [
        "generate",
        "llm",
        "--model",
        "llama3-8b",
        "--layers",
        "2",
        "--dp",
        "16",
        "--tp",
        "2",
        "--out",
        str(tmp_path / "w"),
    ]
    drawn = _run_on_a_terminal(*(["-q"] if quiet else []), *argv)
    assert ("generate llm: 32/32 ranks (100%)" in drawn) != quiet


def test_replay_shows_ranks_and_iterations_on_a_terminal(tmp_path):
    pytest.importorskip("torch", reason=TORCH_EXTRA)
    prefix = str(tmp_path / "ar")
    subprocess.run(
        [
            sys.executable,
            "-m",
            "chakra_pipe",
            "generate",
            "collective",
            "--type",
            "all_reduce",
            "--npus",
            "2",
            "--size",
            "4KiB",
            "--out",
            prefix,
        ],
        check=True,
        capture_output=True,
    )
    drawn = _run_on_a_terminal("replay", prefix, "--iterations", "3", "--out", str(tmp_path / "r.json"))
    assert "replay: 0/2 ranks finished" in drawn


def test_a_message_the_command_drops_imports_no_logging():
    """Below the command's level a message is dropped before :mod:`logging` is imported; at or above
    it (and with -v for INFO) it is printed as logging prints it."""
    code = (
        "import sys; from chakra_pipe import console\n"
        "console.configure(int(sys.argv[1]), False)\n"
        "log = console.logger('chakra_pipe.x')\n"
        "log.info('path %s', 'taken'); log.debug('detail')\n"
        "print('logging' in sys.modules)\n"
        "log.warning('careful %d', 5)\n"
    )
    for verbosity, stderr, imported_by_info in (
        (0, "chakra-pipe: WARNING: careful 5\n", "False"),
        (1, "chakra-pipe: INFO: path taken\nchakra-pipe: WARNING: careful 5\n", "True"),
        (2, "chakra-pipe: INFO: path taken\nchakra-pipe: DEBUG: detail\nchakra-pipe: WARNING: careful 5\n", "True"),
    ):
        done = subprocess.run([sys.executable, "-c", code, str(verbosity)], capture_output=True, text=True, check=True)
        assert (done.stdout.strip(), done.stderr) == (imported_by_info, stderr)


def test_logger_passes_through_to_logging_with_the_callers_line():
    """With :mod:`logging` loaded (an embedding program, a test) every message goes to the real logger,
    attributed to the line that logged it, not to the wrapper."""
    records: list[logging.LogRecord] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            records.append(record)

    target = logging.getLogger("chakra_pipe.test_console")
    keep, level = Keep(), target.level
    target.addHandler(keep)
    target.setLevel(logging.DEBUG)
    try:
        log = console.logger("chakra_pipe.test_console")
        log.debug("x %s", 1)
        log.log(logging.INFO, "y")
        assert log.isEnabledFor(logging.DEBUG)
    finally:
        target.removeHandler(keep)
        target.setLevel(level)
    here = "test_logger_passes_through_to_logging_with_the_callers_line"
    assert [(r.getMessage(), r.levelname, r.funcName) for r in records] == [("x 1", "DEBUG", here), ("y", "INFO", here)]
