"""Generators estimate their output first and refuse absurd sizes at once, naming the option
(``generate llm --dp 10^8`` hung; ``collective --npus 10^8`` died of MemoryError; ``--iterations
10^7`` and ``convert text --npus 10^8`` segfaulted). ``--allow-large`` lifts the limits."""

from __future__ import annotations

import pytest
from test_robust_support import assert_clean, run_cli

from chakra_pipe.generate import limits

TEXT = "DATA\n1\nlayer0 -1 5 NONE 0 5 NONE 0 5 ALLREDUCE 1024 10\n"


@pytest.mark.parametrize(
    "argv,option",
    [
        (["generate", "llm", "--model", "llama3-8b", "--dp", str(10**8)], "--dp"),
        (
            ["generate", "llm", "--model", "llama3-8b", "--layers", "4", "--pp", "2", "--microbatches", str(10**8)],
            "--microbatches",
        ),
        (["generate", "collective", "--type", "all_reduce", "--npus", str(10**8), "--size", "1KiB"], "--npus"),
        (
            [
                "generate",
                "collective",
                "--type",
                "all_reduce",
                "--npus",
                "4",
                "--size",
                "1KiB",
                "--iterations",
                str(10**7),
            ],
            "--iterations",
        ),
        (["convert", "text", "IN", "--npus", str(10**8)], "--npus"),
        (["convert", "text", "IN", "--npus", "2", "--passes", str(10**8)], "--passes"),
    ],
)
def test_absurd_outputs_are_refused_fast_naming_the_option(tmp_path, argv, option):
    (tmp_path / "in.txt").write_text(TEXT)
    argv = [str(tmp_path / "in.txt") if a == "IN" else a for a in argv] + ["--out", str(tmp_path / "o")]
    outcome = run_cli(argv, timeout=30)
    assert_clean(outcome, allowed={2})
    assert f": {option}: would write" in outcome.stderr and "--allow-large" in outcome.stderr, outcome.stderr
    assert not list(tmp_path.glob("o*")), "nothing may be written"


def test_limits_are_the_documented_numbers_and_allow_large_lifts_them():
    limits.check_output(limits.MAX_RANK_FILES, limits.MAX_NODES, "--npus")  # at the limits: fine
    with pytest.raises(Exception, match="65,537 rank files"):
        limits.check_output(limits.MAX_RANK_FILES + 1, 0, "--npus")
    limits.check_output(10**9, 10**12, "--npus", allow_large=True)


def test_a_legitimate_text_conversion_is_unchanged_by_the_estimate(tmp_path):
    """The sizing pass uses a scratch emitter: node ids (which continue across NPU files, as
    upstream's counter does) must be exactly as without it."""
    from chakra_pipe.convert.text import convert_text
    from chakra_pipe.et.framing import read_trace

    (tmp_path / "in.txt").write_text(TEXT)
    paths = convert_text(tmp_path / "in.txt", 2, tmp_path / "o", num_passes=2)
    ids = [[n.id for n in read_trace(p)[1]] for p in paths]
    per_file = len(ids[0])
    assert ids[0] == list(range(per_file)) and ids[1] == list(range(per_file, 2 * per_file))
