"""Direct phases with fewer active chunks than splits (chunks start at different times) on the
congestion-aware fast path of a 1-D fully-connected network.

A queue admits chunks one by one (chunk c+a starts when chunk c leaves), so a collective's chunks run
their direct phase partly at once, starting at different times. ``PhaseCoordinator.hold`` (with
``stagger``) keeps a complete phase until the ns before its earliest possible exit
(``direct_aware.earliest_exit``), the chunks completing meanwhile joining it, and
``direct_aware.outcome_chunks`` evaluates the batch over the FIFO links with each chunk's own starts,
the order checked on every link (``LinkConflict``: redone message by message). Through a switch such
runs go message by message from the start. Every case is compared on every rank with ``fast=False``.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from sim_paths import (
    RERUN,
    assert_collectives_all_fast,
    assert_random_case_equals_message_path,
    aware_exact,
    generated_steps,
)
from test_sim_aware_direct_chunks import EVERY_KIND, STEPS, _hw, direct_cases
from test_sim_examples import coll, write_set

from chakra_pipe.et import schema
from chakra_pipe.et.traceset import TraceSet
from chakra_pipe.sim import simulate


@pytest.fixture(scope="module")
def steps(tmp_path_factory) -> dict[str, TraceSet]:
    return generated_steps(tmp_path_factory, STEPS)


@pytest.mark.parametrize("active", [1, 2, 3])
@pytest.mark.parametrize("step", sorted(STEPS))
def test_generated_steps_with_staggered_direct_chunks_take_the_fast_path(steps, step: str, active: int, caplog) -> None:
    """Every collective direct, 1, 2 or 3 of 4 chunks active, fully connected: every collective
    message evaluated (only pipeline sends one by one), nothing redone, every rank equal to the
    message path; the default (symmetric) run equals both."""
    ts = steps[step]
    hw = _hw(len(ts.ranks), "FullyConnected", active, direct=EVERY_KIND)
    assert_collectives_all_fast(ts, hw, caplog)
    with caplog.at_level("INFO", logger="chakra_pipe.sim"):
        quick = simulate(ts, hw)
    assert "symmetric run of" in caplog.text and RERUN not in caplog.text
    assert quick.to_dict() == simulate(ts, hw, fast=False).to_dict()


@pytest.mark.parametrize("active", [2, 3])
@pytest.mark.parametrize("step", sorted(STEPS))
def test_staggered_direct_chunks_through_a_switch_go_message_by_message(steps, step: str, active: int) -> None:
    """Through a switch a chunk's reduce-scatter sends leave a member's uplink ahead of the chunk
    before's all-gather sends, which the batches evaluated one after the other refuse (every generated
    step reran): the run is not tried on the fast path, and the default run equals the message path."""
    ts = steps[step]
    hw = _hw(len(ts.ranks), "Switch", active, direct=EVERY_KIND)
    assert not aware_exact(ts, hw)
    assert simulate(ts, hw).to_dict() == simulate(ts, hw, fast=False).to_dict()


@pytest.mark.parametrize("kind", [schema.ALL_TO_ALL, schema.REDUCE_SCATTER, schema.ALL_GATHER, schema.ALL_REDUCE])
def test_chunks_admitted_one_by_one_batch_as_they_complete(tmp_path: Path, kind: int) -> None:
    """Two collectives on 8 NPUs, 2 of 4 chunks active: chunks 0 and 1 start in one pass, chunks 2
    and 3 as they leave; every rank equals the message path, whichever path the run kept."""
    ts = write_set(tmp_path, [[coll(0, kind, size=1 << 20), coll(1, kind, size=3 << 18, data=[0])] for _ in range(8)])
    hw = _hw(8, "FullyConnected", 2, direct=EVERY_KIND)
    assert aware_exact(ts, hw)
    fast, slow = simulate(ts, hw, symmetric=False), simulate(ts, hw, fast=False)
    assert fast.to_dict() == slow.to_dict()


@pytest.mark.parametrize("kind", [schema.ALL_TO_ALL, schema.REDUCE_SCATTER, schema.ALL_REDUCE])
def test_a_chunk_batch_on_busy_links_is_kept_per_start_pattern_and_state(
    tmp_path: Path, monkeypatch, kind: int
) -> None:
    """Six independent 64 MiB collectives, 2 of 4 chunks active: each collective's chunks 2 and 3
    start while chunks 0 and 1 still hold the links, so that batch depends on the links' state; the
    state relative to the starts repeats, so only the first collective's two batches are evaluated
    and the rest shifted (``direct_aware._kept``); every rank equals the message path."""
    from chakra_pipe.sim.network.aware import FifoBatchLinks
    from chakra_pipe.sim.system import direct_aware

    evaluated, busy = [], []
    evaluate, idle = direct_aware._outcome, FifoBatchLinks.idle_at
    monkeypatch.setattr(direct_aware, "_outcome", lambda *a: evaluated.append(1) or evaluate(*a))
    monkeypatch.setattr(FifoBatchLinks, "idle_at", lambda *a: idle(*a) or busy.append(1) or False)
    ts = write_set(tmp_path, [[coll(i, kind, size=64 << 20) for i in range(6)] for _ in range(8)])
    hw = _hw(8, "FullyConnected", 2, direct=EVERY_KIND)
    fast, slow = simulate(ts, hw, symmetric=False), simulate(ts, hw, fast=False)
    assert fast.fast_messages == fast.messages == slow.messages
    assert fast.to_dict() == slow.to_dict()
    assert len(busy) == 6 and len(evaluated) == 2


def _slots(value) -> int:
    """Every slot of nested lists and tuples (what ``PhaseCoordinator.cached`` counts at 8 B)."""
    return (
        len(value) + sum(_slots(v) for v in value if isinstance(v, list | tuple))
        if isinstance(value, list | tuple)
        else 0
    )


def test_a_kept_chunk_batch_counts_all_it_holds_against_the_cache_bound(tmp_path: Path, monkeypatch) -> None:
    """A kept direct-aware outcome (lists of lists; on busy links keyed by the links' state as
    bytes) counts every slot it holds and its key's state against ``CACHE_BYTES``: counted by its
    outer list's slots alone, 32 members' came to 24 B for ~110 KB, and the bound let millions of
    distinct busy states pile up."""
    from chakra_pipe.sim.system.phase_fast import PhaseCoordinator

    kept = []
    cached = PhaseCoordinator.cached

    def spy(self, key, build):
        value = cached(self, key, build)
        if key[0] == "direct-aware-outcome":
            kept.append((key, value, self.cache[key][1]))
        return value

    monkeypatch.setattr(PhaseCoordinator, "cached", spy)
    ts = write_set(tmp_path, [[coll(i, schema.ALL_TO_ALL, size=64 << 20) for i in range(6)] for _ in range(8)])
    simulate(ts, _hw(8, "FullyConnected", 2, direct=EVERY_KIND), symmetric=False)
    busy = [entry for entry in kept if isinstance(entry[0][-1], bytes)]
    assert busy and len(kept) > len(busy)
    for key, value, counted in kept:
        state = key[-1] if isinstance(key[-1], bytes) else b""
        assert counted >= 8 * _slots(value) + len(state)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(direct_cases(True, ("FullyConnected", "FullyConnected", "Switch")))  # a third on a switch
def test_random_staggered_direct_chunks_equal_the_message_path(case) -> None:
    """Random small sets: 2–16 NPUs, fully connected (a third on a switch), 2–8 splits with fewer
    chunks active, direct all-reduces / reduce-scatters / all-gathers / all-to-alls beside rings,
    overlapping or chained, staggered starts, sends beside them, 0–700 ns latency, endpoint delay
    0–20 ns, both collective optimizations: every rank equals ``fast=False``, whether the run stayed
    on the fast path or was redone."""
    ranks, system, network = case
    assert_random_case_equals_message_path(ranks, system, network)
