"""The system layer's per-shape caches: a collective's phase chain per (type, plan, involved
dimensions) and one never-started phase object per (dimension, type, size, direction), copied per
chunk. A cached entry must never serve another size, group, direction or dimension set: these tests
give every collective its spec (§6.2) or stand-alone time and would fail if one did.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from test_sim_examples import D, coll, make_node, ring_chunk, ring_hw, write_set

from chakra_pipe.et import schema
from chakra_pipe.sim import simulate
from chakra_pipe.sim.engine import EventQueue
from chakra_pipe.sim.network import make_network
from chakra_pipe.sim.simulate import RunStats
from chakra_pipe.sim.system.sys import Sys
from chakra_pipe.sim.system.topology import ANTICLOCKWISE, CLOCKWISE

BACKENDS = ["congestion_unaware", "congestion_aware"]
AR = schema.ALL_REDUCE


def _chain(ops: list[tuple[int, int]], ranks: int, pg=None) -> list[list]:
    """Per rank the collectives ``ops`` [(type, size)] one after another (each on ``pg(rank)`` if given)."""
    out = []
    for r in range(ranks):
        extra = {} if pg is None else {"pg_name": pg(r)}
        out.append([coll(k, t, s, data=[k - 1] if k else [], **extra) for k, (t, s) in enumerate(ops)])
    return out


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("fast", [True, False])
def test_sizes_of_one_type_and_group_each_get_their_own_phases(tmp_path: Path, backend: str, fast: bool) -> None:
    """1 MiB, 2 MiB, 1 MiB, 64 KiB all-reduces back to back on a 4-NPU ring: each takes the spec's
    4 chunks x ring_chunk of its own size (a 1 MiB phase reused for 2 MiB would be 2x too short)."""
    sizes = [D, 2 * D, D, D // 16]
    ts = write_set(tmp_path, _chain([(AR, s) for s in sizes], 4))
    expected = sum(4 * ring_chunk("AR", 4, s // 4) for s in sizes)
    assert expected == 2 * 4 * ring_chunk("AR", 4, D // 4) + 4 * ring_chunk("AR", 4, D // 2) + 4 * ring_chunk(
        "AR", 4, D // 64
    )
    assert simulate(ts, ring_hw(4, backend=backend), fast=fast).finish_ns == [expected] * 4


@pytest.mark.parametrize("fast", [True, False])
def test_types_and_groups_each_get_their_own_chain(tmp_path: Path, fast: bool) -> None:
    """The same size as all-reduce, reduce-scatter and all-gather, on the world and on two 2-NPU groups
    (local rings: 10-ns bus hop, the world ring's endpoint delay is 30): the chained run's finish is
    the sum of each collective simulated alone in a fresh run (fresh caches)."""
    hw = ring_hw(4, **{"endpoint-delay": 30})
    groups = {1: [0, 1], 2: [2, 3]}
    ops = [(AR, D), (schema.REDUCE_SCATTER, D), (schema.ALL_GATHER, D), (AR, D)]

    def pg(r: int) -> str:
        return "1" if r < 2 else "2"

    def alone(k: int, on_group: bool) -> int:
        folder = tmp_path / f"alone{k}{on_group}"
        folder.mkdir()
        ts = write_set(folder, _chain([ops[k]], 4, pg if on_group else None))
        res = simulate(ts, hw, comm_groups=groups if on_group else None, fast=fast)
        assert len(set(res.finish_ns)) == 1
        return res.finish_ns[0]

    world = [alone(k, False) for k in range(len(ops))]
    group = [alone(k, True) for k in range(len(ops))]
    assert world[0] == 4 * ring_chunk("AR", 4, D // 4, e=30)
    assert group[0] == 4 * ring_chunk("AR", 2, D // 4, e=10)
    assert len(set(world + group)) > 4  # the shapes really differ
    mixed = [ops[0], ops[1], ops[2], ops[3], ops[0], ops[2]]
    on_group = [False, True, False, True, True, False]
    ranks = []
    for r in range(4):
        ranks.append(
            [
                coll(k, t, s, data=[k - 1] if k else [], **({"pg_name": pg(r)} if g else {}))
                for k, ((t, s), g) in enumerate(zip(mixed, on_group))
            ]
        )
    (tmp_path / "mixed").mkdir()
    ts = write_set(tmp_path / "mixed", ranks)
    index = [0, 1, 2, 3, 0, 2]
    expected = sum((group if g else world)[k] for k, g in zip(index, on_group))
    assert simulate(ts, hw, comm_groups=groups, fast=fast).finish_ns == [expected] * 4


def _sys(queues: int = 1) -> Sys:
    hw = ring_hw(8, **{"active-chunks-per-dimension": 2, "collective-optimization": "baseline"})
    hw = dataclasses.replace(hw, num_queues_per_dim=queues)
    queue = EventQueue()
    return Sys(0, hw, queue, make_network(hw.backend, hw.network, queue), RunStats())


def test_phase_copies_are_independent_and_keyed_by_direction() -> None:
    """With 2 queues the baseline chunks alternate clockwise / anticlockwise: NPU 0 of an 8-ring
    sends to 1 then to 7. Each chunk gets its own object and packet counters, two prototypes exist
    (one per direction), and a later 2 MiB collective gets 2 MiB / 4 / 8 byte messages."""
    s = _sys(queues=2)
    s.generate_collective("ALL_REDUCE", D, None, None, 0)
    streams = [st for q in s.active.values() for st in q]
    algos = [st.phase.algorithm for st in streams] + [ph.algorithm for st in streams for ph in st.phases]
    assert len(streams) == 4
    assert sorted((a.direction, a.receiver, a.sender) for a in algos) == [
        (CLOCKWISE, 1, 7),
        (CLOCKWISE, 1, 7),
        (ANTICLOCKWISE, 7, 1),
        (ANTICLOCKWISE, 7, 1),
    ]
    assert len({id(a) for a in algos}) == 4 and len({id(a.counters) for a in algos}) == 4
    assert {a.msg_size for a in algos} == {D // 4 // 8}
    assert len(s._prototypes) == 2
    before = [(a.counters.zero_latency, a.counters.toggle) for a in algos]
    algos[0].counters.take(algos[0])  # one chunk's counters advance; its siblings' do not
    assert [(a.counters.zero_latency, a.counters.toggle) for a in algos[1:]] == before[1:]
    s.generate_collective("ALL_REDUCE", 2 * D, None, None, 0)
    assert len(s._prototypes) == 4
    assert sorted(p.msg_size for _, p in s._prototypes.values()) == [D // 32, D // 32, D // 16, D // 16]
    assert len(s._chains) == 1  # one chain for both sizes: it depends on type, plan and dimensions only


def test_chains_differ_by_involved_dimensions() -> None:
    """A collective limited to no dimension makes no phase; the same type on every dimension makes one."""
    s = _sys()
    none = s.generate_collective("ALL_REDUCE", D, [False], None, 0)
    assert none.total_streams == 1 and not any(s.active.values())
    s.generate_collective("ALL_REDUCE", D, [True], None, 0)
    assert sum(len(q) for q in s.active.values()) == 4
    assert sorted(len(steps) for _, steps in s._chains.values()) == [0, 1]


def test_phase_types_on_one_dimension_stay_apart() -> None:
    """A localBWAware all-reduce runs reduce-scatter and all-gather phases on one dimension: asked for
    both types at one size, the cache returns each its own message and final size (an 8-ring, 1 MiB:
    reduce-scatter sends 1/8 and keeps 1/8, all-gather sends all of it and ends with 8x)."""
    s = _sys()
    dim = s._plan("ALL_REDUCE", None).dims[0]
    rs = s._prototype("REDUCE_SCATTER", dim, D, CLOCKWISE, {})
    ag = s._prototype("ALL_GATHER", dim, D, CLOCKWISE, {})
    assert (rs.ctype, rs.msg_size, rs.final_data_size) == ("REDUCE_SCATTER", D // 8, D // 8)
    assert (ag.ctype, ag.msg_size, ag.final_data_size) == ("ALL_GATHER", D, 8 * D)


def test_direct_outcomes_are_reused_only_for_the_same_start_pattern(tmp_path: Path, monkeypatch) -> None:
    """The direct fast path keeps each phase's outcome per shape and relative start pattern. Ranks
    run direct all-reduces after compute of one rank-dependent pattern, then of another, then back to
    back: every rank still gets the message path's finish, collective records and message count, and
    the outcomes computed are one per distinct relative start pattern (fewer than the phases)."""
    from sim_paths import assert_fast_equals_message_path
    from test_sim_direct_tree_fast import _hw

    from chakra_pipe.sim.system import direct_fast

    pattern = [[0, 3, 1, 3], [2, 0, 0, 5], [0, 0, 0, 0], [0, 0, 0, 0], [2, 0, 0, 5]]
    ts = _staggered(tmp_path, pattern)
    patterns: list[tuple[int, ...]] = []
    computed: list[tuple[int, ...]] = []
    evaluate, outcome = direct_fast.evaluate, direct_fast._outcome

    def spy_evaluate(coord, algos) -> None:
        starts = [a.start_ns for a in algos]
        patterns.append(tuple(s - min(starts) for s in starts))
        evaluate(coord, algos)

    def spy_outcome(coord, first, starts, plan_key):
        computed.append(tuple(starts))
        return outcome(coord, first, starts, plan_key)

    monkeypatch.setattr(direct_fast, "evaluate", spy_evaluate)
    monkeypatch.setattr(direct_fast, "_outcome", spy_outcome)
    assert_fast_equals_message_path(ts, _hw(["direct"], ["Switch"], [4], 1, "baseline"))
    assert len(patterns) == len(pattern)  # one phase per collective (1 chunk, 1 dimension)
    assert sorted(computed) == sorted(set(patterns))
    assert len(computed) < len(patterns)


def _staggered(tmp: Path, patterns: list[list[int]]) -> object:
    """Per rank: compute of ``patterns[k][rank]`` µs, then a 1 MiB all-reduce, for each k in turn."""
    ranks = []
    for r in range(len(patterns[0])):
        nodes = []
        for k, durations in enumerate(patterns):
            nodes.append(make_node(2 * k, schema.COMP_NODE, dur=durations[r], data=[2 * k - 1] if k else []))
            nodes.append(coll(2 * k + 1, AR, D, data=[2 * k]))
        ranks.append(nodes)
    return write_set(tmp, ranks)


def test_unaware_ring_outcomes_are_reused_only_for_the_same_start_pattern(tmp_path: Path, monkeypatch) -> None:
    """The unaware ring fast path keeps each phase's outcome per ring shape and relative start pattern:
    every rank still gets the message path's times, and the recurrence runs once per distinct
    pattern of a shape (fewer times than there are phases)."""
    from sim_paths import assert_fast_equals_message_path

    from chakra_pipe.sim.system.ring_fast import RingCoordinator

    ts = _staggered(tmp_path, [[0, 3, 1, 3], [2, 0, 0, 5], [0, 0, 0, 0], [0, 0, 0, 0], [2, 0, 0, 5]])
    patterns: list[tuple] = []
    computed: list[tuple] = []
    shifted, recurrence = RingCoordinator._shifted, RingCoordinator.recurrence

    def key(algos) -> tuple:
        starts = [a.start_ns for a in algos]
        return (algos[0].msg_size, tuple(s - min(starts) for s in starts))

    def spy_shifted(self, algos):
        patterns.append(key(algos))
        return shifted(self, algos)

    def spy_recurrence(self, algos):
        computed.append(key(algos))
        return recurrence(self, algos)

    monkeypatch.setattr(RingCoordinator, "_shifted", spy_shifted)
    monkeypatch.setattr(RingCoordinator, "recurrence", spy_recurrence)
    assert_fast_equals_message_path(ts, ring_hw(4))
    assert len(patterns) == 5 * 4  # 4 chunks per all-reduce
    assert sorted(computed) == sorted(set(patterns))
    assert len(computed) < len(patterns)
