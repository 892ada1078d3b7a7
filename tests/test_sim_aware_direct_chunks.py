"""Direct phases with every chunk of a collective in flight, on the congestion-aware fast path.

With one queue and at least as many active chunks as ``preferred-dataset-splits`` on a 1-D switch or
fully-connected network, each member starts all chunks' direct phases in one pass; their windows
leave it back to back on one uplink. ``PhaseCoordinator.hold`` keeps the chunks completing in one ns
and ``direct_aware.outcome_chunks`` evaluates them as one batch over the FIFO links, the order
checked on every link (``LinkConflict``: redone message by message). A direct all-reduce's
all-gather halves are a second batch, behind every chunk's reduce-scatter messages, with one joint
fixed point. Every case is compared on every rank with ``fast=False``.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sim_paths import (
    KIND_OF,
    KINDS,
    RERUN,
    assert_collectives_all_fast,
    assert_random_case_equals_message_path,
    aware_exact,
    generated_steps,
    random_ranks,
)
from test_sim_examples import coll, write_set

from chakra_pipe.et import schema
from chakra_pipe.et.traceset import TraceSet
from chakra_pipe.sim import HardwareConfig, NetworkConfig, SystemConfig, simulate
from chakra_pipe.sim.system.direct_aware import _one_chunk_per_ns
from chakra_pipe.sim.system.phase_fast import FastPathDeclined

STEPS = {
    "llama3-8b-t8d2-zero1": ["--model", "llama3-8b", "--layers", "2", "--tp", "8", "--dp", "2", "--zero", "1"],
    "mixtral-t2d4e2": ["--model", "mixtral-8x7b", "--layers", "1", "--tp", "2", "--dp", "4", "--ep", "2"],
    "gpt3-175b-t2d2p2": ["--model", "gpt3-175b", "--layers", "2", "--tp", "2", "--dp", "2", "--pp", "2"],
}
SINGLE_WINDOW = ("reduce-scatter", "all-gather", "all-to-all")
EVERY_KIND = ("all-reduce", *SINGLE_WINDOW)


def _hw(
    p: int,
    topology: str = "Switch",
    active: int = 4,
    splits: int = 4,
    direct: tuple[str, ...] = SINGLE_WINDOW,
    window: str = "direct",
    queues: int = 1,
    **system,
) -> HardwareConfig:
    sysd = {
        "scheduling-policy": "LIFO",
        "endpoint-delay": 10,
        "active-chunks-per-dimension": active,
        "preferred-dataset-splits": splits,
        "collective-optimization": "baseline",
        "local-mem-bw": 1600,
        **{f"{k}-implementation": [window if k in direct else "ring"] for k in KINDS},
        **system,
    }
    net = {"topology": [topology], "npus_count": [p], "bandwidth": [100], "latency": [700]}
    return HardwareConfig(
        SystemConfig.from_dict(sysd, source="sys"),
        NetworkConfig.from_dict(net, source="net"),
        backend="congestion_aware",
        num_queues_per_dim=queues,
    )


@pytest.fixture(scope="module")
def steps(tmp_path_factory) -> dict[str, TraceSet]:
    return generated_steps(tmp_path_factory, STEPS)


@pytest.mark.parametrize("direct", [SINGLE_WINDOW, EVERY_KIND])
@pytest.mark.parametrize("active", [4, 8])
@pytest.mark.parametrize("topology", ["Switch", "FullyConnected"])
@pytest.mark.parametrize("step", sorted(STEPS))
def test_generated_steps_with_direct_gathers_and_chunks_take_the_fast_path(
    steps, step: str, topology: str, active: int, direct: tuple[str, ...], caplog
) -> None:
    """Reduce-scatters, all-gathers and all-to-alls direct, all-reduces on rings or direct too, every
    chunk active: every collective message evaluated (only pipeline sends one by one), nothing
    redone, every rank equal to the message path."""
    ts = steps[step]
    assert_collectives_all_fast(ts, _hw(len(ts.ranks), topology, active, direct=direct), caplog)


@pytest.mark.parametrize("active", [4, 8])
@pytest.mark.parametrize("topology", ["Switch", "FullyConnected"])
@pytest.mark.parametrize("step", sorted(STEPS))
def test_generated_steps_take_the_chunk_batch_in_the_symmetric_run(
    steps, step: str, topology: str, active: int, caplog
) -> None:
    """The default run of a generated step is the proven-symmetric quotient (one representative per
    class), whose direct phases take the same chunk batch over every member: every collective
    message evaluated, nothing redone or declined, every rank equal to the full engine's fast and
    message paths."""
    ts = steps[step]
    hw = _hw(len(ts.ranks), topology, active, direct=EVERY_KIND)
    with caplog.at_level("INFO", logger="chakra_pipe.sim"):
        quick = simulate(ts, hw)
    assert "symmetric run of" in caplog.text and "declined" not in caplog.text and RERUN not in caplog.text
    p2p = sum(int((g.types == schema.COMM_SEND_NODE).sum()) for g in ts.ranks)
    assert quick.fast_messages > 0 and quick.messages - quick.fast_messages <= p2p
    assert quick.to_dict() == simulate(ts, hw, symmetric=False).to_dict() == simulate(ts, hw, fast=False).to_dict()


@pytest.mark.parametrize("p", [4, 16, 64])
@pytest.mark.parametrize("kind", [schema.ALL_TO_ALL, schema.REDUCE_SCATTER, schema.ALL_GATHER, schema.ALL_REDUCE])
def test_chunk_windows_queue_behind_each_other(tmp_path: Path, kind: int, p: int) -> None:
    """One collective, then another on the same links: 4 chunks' windows (4·(P−1) messages) leave
    each uplink back to back, each downlink takes P−1 senders' by arrival; one batch per collective
    (an all-reduce's all-gather halves a second one, behind every reduce-scatter message), the links
    carried over."""
    ts = write_set(tmp_path, [[coll(0, kind, size=1 << 20), coll(1, kind, size=3 << 18, data=[0])] for _ in range(p)])
    hw = _hw(p, direct=EVERY_KIND)
    assert aware_exact(ts, hw)
    fast, slow = simulate(ts, hw, symmetric=False), simulate(ts, hw, fast=False)
    assert fast.fast_messages == fast.messages == slow.messages > 0
    assert fast.to_dict() == slow.to_dict()


@pytest.mark.parametrize("kind", [schema.ALL_TO_ALL, schema.ALL_REDUCE])
def test_a_chunk_batch_on_idle_links_is_kept_per_start_pattern(tmp_path: Path, monkeypatch, kind: int) -> None:
    """Six collectives one after the other: each batch finds its links idle (every message of the one
    before has left them), so its outcome and the links' end state are evaluated once and shifted to
    each later start (``direct_aware._kept``); every rank equals the message path."""
    from chakra_pipe.sim.system import direct_aware

    evaluated = []
    evaluate = direct_aware._outcome
    monkeypatch.setattr(direct_aware, "_outcome", lambda *a: evaluated.append(1) or evaluate(*a))
    chain = [coll(i, kind, size=1 << 20, **({"data": [i - 1]} if i else {})) for i in range(6)]
    ts = write_set(tmp_path, [chain for _ in range(8)])
    hw = _hw(8, direct=EVERY_KIND)
    fast, slow = simulate(ts, hw, symmetric=False), simulate(ts, hw, fast=False)
    assert fast.fast_messages == fast.messages == slow.messages
    assert fast.to_dict() == slow.to_dict()
    assert len(evaluated) == 1


def test_what_the_batch_does_not_model_is_declined(tmp_path: Path) -> None:
    """Fewer active chunks than splits through a switch (chunks start apart), two queues (half the chunks run the other
    way), windows below P−1 and multi-hop rings go message by message from the start."""
    ts = write_set(tmp_path, [[coll(0, schema.ALL_TO_ALL, size=1 << 20)] for _ in range(8)])
    assert aware_exact(ts, _hw(8))
    assert aware_exact(ts, _hw(8, "FullyConnected", active=8))
    assert aware_exact(ts, _hw(8, window="direct7"))
    assert aware_exact(ts, _hw(8, direct=EVERY_KIND))
    assert aware_exact(ts, _hw(8, "FullyConnected", active=2))
    assert not aware_exact(ts, _hw(8, active=2))
    assert not aware_exact(ts, _hw(8, queues=2))
    assert not aware_exact(ts, _hw(8, window="direct3"))
    assert not aware_exact(ts, _hw(8, "Ring"))
    assert not aware_exact(ts, _hw(8, window="halvingDoubling"))


@st.composite
def direct_cases(draw, staggered: bool, topologies: tuple[str, ...]) -> tuple[list[list], dict, dict]:
    """Random small sets of direct and ring collectives: with ``staggered`` fewer chunks active than
    splits (a queue admits them one by one), else every chunk (or more) in flight at once."""
    p = draw(st.sampled_from([2, 3, 4, 6, 8, 16]))
    splits = draw(st.sampled_from([2, 3, 4, 8]))
    active = draw(st.integers(1, splits - 1) if staggered else st.sampled_from([splits, splits + 1, 2 * splits]))
    kinds = draw(st.lists(st.sampled_from(sorted(KIND_OF)), min_size=1, max_size=3))
    chunk = draw(st.sampled_from([1 << 10, 1 << 14, 3 << 16, 1 << 20]))
    ranks = random_ranks(draw, p, [KIND_OF[k] for k in kinds], chunk * splits)
    direct = draw(st.sets(st.sampled_from(EVERY_KIND), min_size=1))
    system = {
        "scheduling-policy": draw(st.sampled_from(["LIFO", "FIFO"])),
        "endpoint-delay": draw(st.sampled_from([0, 1, 10, 20])),
        "active-chunks-per-dimension": active,
        "preferred-dataset-splits": splits,
        "collective-optimization": draw(st.sampled_from(["baseline", "localBWAware"])),
        "local-mem-bw": draw(st.sampled_from([1600, 3350])),
        **{f"{k}-implementation": ["direct" if k in direct else "ring"] for k in KINDS},
    }
    network = {
        "topology": [draw(st.sampled_from(topologies))],
        "npus_count": [p],
        "bandwidth": [draw(st.sampled_from([25, 100, 400]))],
        "latency": [draw(st.sampled_from([0, 1, 100, 500, 700]))],
    }
    return ranks, system, network


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(direct_cases(False, ("Switch", "FullyConnected")))
def test_random_direct_chunks_equal_the_message_path(case) -> None:
    """Random small sets: 2–16 NPUs on a switch or fully-connected network, 2–8 splits with every
    chunk active, direct all-reduces / reduce-scatters / all-gathers / all-to-alls beside rings,
    overlapping or chained, staggered starts, sends beside them, 0–700 ns latency, endpoint delay
    0–20 ns, both collective optimizations: every rank equals ``fast=False``, whether the run stayed
    on the fast path or was redone."""
    ranks, system, network = case
    assert_random_case_equals_message_path(ranks, system, network)


def test_two_chunks_all_gather_sends_at_one_ns_decline() -> None:
    """A member's all-gather sends of two chunks at one ns leave in their generals' event order,
    which the batch does not model: declined; one chunk's sends at one ns (program order) are not."""
    _one_chunk_per_ns(np.array([[5, 5, 5, 7, 8, 9], [6, 6, 6, 7, 7, 7]]), 2)
    with pytest.raises(FastPathDeclined):
        _one_chunk_per_ns(np.array([[5, 6, 7, 3, 4, 7], [1, 2, 3, 4, 5, 6]]), 2)
