"""Replay faults end within the timeout with a named cause: a peer that never sends, a receive that is
never posted, a process-group mismatch, a cross-wait deadlock, and a rank that dies.

Static mismatches must be refused before any process starts (exit 3, naming rank and node); a deadlock
must end by ``--timeout`` at the latest, naming where each rank waits; a rank that
dies must stop its peers instead of leaving them blocked in a collective. (Killing a rank by signal
mid-replay is tested by the replay module's own tests.)
"""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import pytest
from conftest import TORCH_EXTRA
from test_robust_support import CORPUS, assert_clean, corpus_builder, leftovers, run_cli

pytestmark = [pytest.mark.slow, pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason=TORCH_EXTRA)]
TIMEOUT_S = 10


def _replay(prefix: Path, out: Path, wall: float, timeout_s: int = TIMEOUT_S):
    """Replay under a hard wall-clock bound (a hang fails the test)."""
    return run_cli(
        [
            "replay",
            prefix,
            "--timeout",
            timeout_s,
            "--iterations",
            1,
            "--warmup",
            0,
            "--compute",
            "skip",
            "--backend",
            "gloo",
            "--out",
            out,
        ],
        timeout=wall,
    )


@pytest.mark.parametrize(
    "case,code,cause",
    [
        ("unmatched_recv", 3, r"unmatched_recv\.0\.et: node 4: error: set-deadlock: rank 0 cannot finish"),
        ("unmatched_send", 2, r"unmatched_send\.0\.et: node 4: error: p2p-unmatched: send to rank 1 \(tag 7"),
        ("mismatched_tag", 3, r"mismatched_tag\.1\.et: node 4: error: set-deadlock: rank 1 cannot finish"),
        ("pg_mismatch", 3, r"pg_mismatch\.1\.et: error: collective-mismatch: group '1': 0 collectives here"),
        ("missing_collective", 3, r"missing_collective\.0\.et: error: collective-mismatch: the world group: 0 coll"),
    ],
)
def test_static_mismatch_is_refused_before_any_rank_starts(tmp_path, case, code, cause):
    """Refused with validate's problem lines: exit 3 when a rank would wait forever, 2 otherwise."""
    out = tmp_path / "replay.json"
    outcome = _replay(CORPUS / "traces" / case, out, wall=60)
    assert_clean(outcome, allowed={code})
    assert re.search(cause, outcome.stderr), outcome.stderr
    assert not out.exists() and not leftovers(tmp_path)


def test_cross_wait_deadlock_ends_by_the_timeout_naming_each_waiting_rank(tmp_path):
    """Both ranks receive before sending. Detected up front or stopped at ``--timeout``, either way the
    run ends within the bound and names where each rank waits."""
    out = tmp_path / "replay.json"
    outcome = _replay(CORPUS / "traces" / "p2p_cross_wait", out, wall=TIMEOUT_S + 90)
    assert_clean(outcome, allowed={3})
    for rank in (0, 1):
        assert f"p2p_cross_wait.{rank}.et: node 2: error: set-deadlock: rank {rank} cannot finish" in outcome.stderr
    assert not out.exists()


def test_a_rank_that_dies_stops_its_peer_and_is_named(tmp_path):
    """A 4 TiB all-reduce: each rank fails to allocate its buffer; the first failure is reported with
    its node and cause, and no peer is left waiting in the collective."""
    corpus = corpus_builder()
    data = corpus.encode([corpus.comp(1, [], 5), corpus.coll(2, [1], size=1 << 42), corpus.comp(3, [2], 3)])
    for rank in (0, 1):
        (tmp_path / f"huge.{rank}.et").write_bytes(data)
    out = tmp_path / "replay.json"
    # it ends on the failure, not the timeout: 30 s only leaves room for the workers' start-up, which
    # counts against --timeout and outlasted 10 s on a loaded machine (both ranks still connecting)
    outcome = _replay(tmp_path / "huge", out, wall=30 + 90, timeout_s=30)
    assert_clean(outcome, allowed={1})
    assert re.search(r"rank [01] failed at node 2 'coll2' \(COMM_COLL_NODE ALL_REDUCE\)", outcome.stderr)
    assert "allocate" in outcome.stderr and not out.exists()
