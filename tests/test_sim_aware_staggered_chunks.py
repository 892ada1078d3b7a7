"""Chunks of one collective that start their phase at different times, on the aware ring fast path.

Fewer active chunks than ``preferred-dataset-splits`` (a queue admits chunks one by one) and several
dimensions with several chunks in flight (a chunk enters dimension 1 when it leaves dimension 0):
the chunks' phases are held back until just before their earliest possible exit and evaluated as
one FIFO recurrence with the chunks that joined meanwhile (``RingCoordinator._batch``), the order
checked on every link; a point-to-point message first settles the held phases crossing its link.
Every case is compared with the message-by-message run (``fast=False``) on every rank.
"""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sim_paths import (
    CHUNK_STEPS,
    RERUN,
    assert_collectives_all_fast,
    assert_random_case_equals_message_path,
    aware_hardware,
    generated_steps,
    random_ranks,
    tiered_network,
)
from test_sim_examples import coll, make_node, write_set

from chakra_pipe.et import schema
from chakra_pipe.sim import simulate

STEPS = CHUNK_STEPS
KINDS = [schema.ALL_REDUCE, schema.ALL_GATHER, schema.REDUCE_SCATTER, schema.ALL_TO_ALL]


@pytest.fixture(scope="module")
def steps(tmp_path_factory) -> dict:
    return generated_steps(tmp_path_factory, STEPS)


@pytest.mark.parametrize(
    ("topology", "split", "chunks", "splits"),
    [("Switch", False, 2, 4), ("FullyConnected", False, 3, 8), ("Switch", True, 2, 4), ("Switch", True, 4, 4)],
)
@pytest.mark.parametrize("step", sorted(STEPS))
def test_generated_steps_with_chunks_in_flight_take_the_fast_path(
    steps, step: str, topology: str, split: bool, chunks: int, splits: int, caplog
) -> None:
    """A queue admitting 2 of 4 (3 of 8) chunks on a 1-D network, and 2 or all 4 chunks on a 2-D
    switch: every ring message is evaluated (pipeline sends go one by one, settling the held
    phases on their links), nothing is redone, every rank equals the message path."""
    ts = steps[step]
    p = len(ts.ranks)
    hw = aware_hardware(tiered_network(topology, [2, p // 2] if split else [p]), "ring", chunks, splits, "localBWAware")
    assert_collectives_all_fast(ts, hw, caplog)


def test_symmetric_quotient_holds_chunks_as_the_full_engine(steps, caplog) -> None:
    """The quotient's chunk batching (``_QuotientChunks``) holds staggered chunks too: the pipeline
    step's representatives stay on the recurrence and every rank equals the message path."""
    ts = steps["gpt3-175b-t2d2p2"]
    hw = aware_hardware(tiered_network("Switch", [len(ts.ranks)]), "ring", 2, 4, "baseline")
    with caplog.at_level(logging.INFO, logger="chakra_pipe.sim"):
        quotient = simulate(ts, hw)
    assert "symmetric run of" in caplog.text and "declined" not in caplog.text
    assert quotient.fast_messages > 0
    assert quotient.to_dict() == simulate(ts, hw, fast=False).to_dict()


@st.composite
def _cases(draw) -> tuple[list[list], dict, dict]:
    sizes = draw(st.sampled_from([[4], [8], [3], [6], [2, 2], [2, 4], [4, 2], [2, 2, 2]]))
    p = 1
    for s in sizes:
        p *= s
    splits = draw(st.sampled_from([2, 3, 4, 8]))
    active = draw(st.integers(2, splits + 1))
    kinds = draw(st.lists(st.sampled_from(KINDS), min_size=1, max_size=3))
    chunk = draw(st.sampled_from([1 << 14, 3 << 16, 1 << 20]))
    ranks = random_ranks(draw, p, kinds, chunk * splits)
    system = {
        "scheduling-policy": draw(st.sampled_from(["LIFO", "FIFO"])),
        "endpoint-delay": draw(st.sampled_from([0, 10, 20])),
        "active-chunks-per-dimension": active,
        "preferred-dataset-splits": splits,
        "collective-optimization": draw(st.sampled_from(["baseline", "localBWAware"])),
        "local-mem-bw": 3350,
        **{
            f"{k}-implementation": ["ring"] * len(sizes)
            for k in ("all-reduce", "reduce-scatter", "all-gather", "all-to-all")
        },
    }
    network = {
        "topology": [draw(st.sampled_from(["Switch", "FullyConnected", "Ring"])) for _ in sizes],
        "npus_count": sizes,
        "bandwidth": [draw(st.sampled_from([25, 100, 400])) for _ in sizes],
        "latency": [draw(st.sampled_from([0, 1, 100, 500, 700])) for _ in sizes],
    }
    return ranks, system, network


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_cases())
def test_random_staggered_chunks_equal_the_message_path(case) -> None:
    """Random small sets: 1-D and 2-D / 3-D Switch, FullyConnected and Ring, 2–9 chunks in flight
    of 2–8 splits, staggered starts, overlapping or chained collectives of every ring type, sends
    beside them, 0–700 ns latency, endpoint delay, both collective optimizations: every rank equals
    ``fast=False``, whether the run stayed on the recurrence or was redone."""
    ranks, system, network = case
    assert_random_case_equals_message_path(ranks, system, network)


def test_a_late_chunk_joins_the_held_batch(tmp_path: Path, caplog, monkeypatch) -> None:
    """One all-reduce of 4 chunks, 2 active, 8 NPUs with staggered starts: chunks 3 and 4 start when
    chunks 1 and 2 leave, at different ns, and are evaluated together (one held batch of several
    chunks, no rerun), equal to ``fast=False``."""
    from chakra_pipe.sim.system.ring_fast import RingCoordinator

    ranks = [
        [make_node(0, schema.COMP_NODE, r % 3), coll(1, schema.ALL_REDUCE, size=1 << 22, data=[0])] for r in range(8)
    ]
    ts = write_set(tmp_path, ranks)
    hw = aware_hardware(tiered_network("Switch", [8]), "ring", 2, 4)
    flushed: list[int] = []  # chunks per evaluated batch
    flush = RingCoordinator._flush

    def spy(self, key):
        flushed.append(len(self._batches.get(key, ())))
        flush(self, key)

    monkeypatch.setattr(RingCoordinator, "_flush", spy)
    with caplog.at_level(logging.INFO, logger="chakra_pipe.sim.simulate"):
        fast = simulate(ts, hw, symmetric=False)
    assert RERUN not in caplog.text
    assert flushed == [2, 2]  # chunks 1-2, then 3-4 although they start at different ns (not [2, 1, 1])
    assert fast.fast_messages == fast.messages > 0
    assert fast.to_dict() == simulate(ts, hw, fast=False).to_dict()


def _group_beside_sends(tmp_path: Path, delay_us: int, size: int) -> tuple:
    """Ranks 0 and 1 all-reduce 4 MiB in group 5 (2 of 4 chunks active, 4-NPU aware switch), then each
    receives ``size`` bytes that rank 2 or 3 sends after ``delay_us``: the sends meet the held batches
    on the group's downlinks."""
    p2p = {"comm_size": size, "comm_tag": 3}
    ranks = [
        [
            coll(0, schema.ALL_REDUCE, size=1 << 22, pg_name="5"),
            make_node(1, schema.COMM_RECV_NODE, data=[0], comm_src=r + 2, comm_dst=r, **p2p),
        ]
        for r in (0, 1)
    ] + [
        [
            make_node(0, schema.COMP_NODE, delay_us),
            make_node(1, schema.COMM_SEND_NODE, data=[0], comm_src=r, comm_dst=r - 2, **p2p),
        ]
        for r in (2, 3)
    ]
    return write_set(tmp_path, ranks), aware_hardware(tiered_network("Switch", [4]), "ring", 2, 4)


def _count_settled(monkeypatch) -> list[int]:
    """How many held batches each ``RingCoordinator.settle`` call evaluated, call by call."""
    from chakra_pipe.sim.system.ring_fast import RingCoordinator

    counts: list[int] = []
    settle = RingCoordinator.settle

    def spy(self, link):
        held = len(self._batches)
        settle(self, link)
        counts.append(held - len(self._batches))

    monkeypatch.setattr(RingCoordinator, "settle", spy)
    return counts


@pytest.mark.parametrize("delay_us", [0, 5, 10, 15])
def test_a_send_settles_the_held_batch_on_its_link(tmp_path: Path, monkeypatch, delay_us: int) -> None:
    """Ranks 0 and 1 run a 4 MiB group all-reduce, 2 of 4 chunks active (held batches), while ranks
    2 and 3 send 1 MiB to them after ``delay_us``: each send's hop onto a downlink the held phases
    cross first evaluates them (``settle``), so the link sees both in arrival order; where the
    order cannot be proven the run is redone. Every rank equals ``fast=False``."""
    ts, hw = _group_beside_sends(tmp_path, delay_us, 1 << 20)
    flushed = _count_settled(monkeypatch)
    fast = simulate(ts, hw, {5: [0, 1]}, symmetric=False)
    assert any(flushed) == (delay_us < 15), flushed  # by 15 us the group's last batch has left
    assert fast.to_dict() == simulate(ts, hw, {5: [0, 1]}, fast=False).to_dict()


@pytest.mark.parametrize(("delay_us", "size"), [(0, 1 << 16), (1, 1 << 16), (7, 1 << 20), (10, 1 << 16)])
def test_a_send_ahead_of_the_held_batch_leaves_it_held(
    tmp_path: Path, monkeypatch, caplog, delay_us: int, size: int
) -> None:
    """The set above with sends that reach the group's downlinks before any message of the held
    batch can (``FifoRingLinks.earliest``: its members' first sends plus the idle latency of the
    uplink before): the batch stays held (no settle evaluates it), the send takes the link first and
    the batch queues behind it when it is evaluated — kept on the fast path, where evaluating it at
    the send placed its messages ahead of the send and the run was redone (before 2026-12-04)."""
    ts, hw = _group_beside_sends(tmp_path, delay_us, size)
    settled = _count_settled(monkeypatch)
    with caplog.at_level(logging.INFO, logger="chakra_pipe.sim.simulate"):
        fast = simulate(ts, hw, {5: [0, 1]}, symmetric=False)
    assert RERUN not in caplog.text
    assert settled and not any(settled[:2])  # the sends' first downlink hops left the batches held
    assert fast.fast_messages == fast.messages - 2 > 0
    assert fast.to_dict() == simulate(ts, hw, {5: [0, 1]}, fast=False).to_dict()
