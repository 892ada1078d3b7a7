"""The per-rank issue loop with a fake engine on a virtual clock: slots, order, deps, failures."""

from __future__ import annotations

import pytest
from test_replay_plan import coll, comp, p2p, write_set

from chakra_pipe.et import schema
from chakra_pipe.et.traceset import TraceSet
from chakra_pipe.replay.executor import BACKOFF_NS, NodeFailed, ReplayTimeout, run_iteration
from chakra_pipe.replay.plan import build_plan
from chakra_pipe.results.busbw import bandwidth, bus_factor, nccl_size


class Clock:
    """Virtual time: every read advances 100 ns, so polling loops make progress deterministically."""

    def __init__(self):
        self.t = 0

    def __call__(self) -> int:
        self.t += 100
        return self.t


class FakeEngine:
    """Each node takes its recorded duration (or ``comm_ns`` for communication) of virtual time."""

    def __init__(self, plan, clock, comm_ns=5_000, fail=None):
        self.plan, self.clock, self.comm_ns, self.fail = plan, clock, comm_ns, fail
        self.issued: list[int] = []

    def start(self, i):
        self.issued.append(self.plan.ids[i])
        if self.fail == self.plan.ids[i]:
            raise RuntimeError("Connection reset by peer\nmore detail")
        dur = self.plan.duration_ns[i] if self.plan.actions[i] == "compute" else self.comm_ns
        return None if dur == 0 else self.clock.t + dur

    def poll(self, handle):
        return self.clock.t >= handle

    def due(self, handle):
        return handle

    def finished_at(self, handle):
        return None

    def idle(self, polls, timeout_ns):
        pass  # the clock advances on every read


def run_rank(tmp_path, per_rank, rank=0, **kw):
    plan = build_plan(TraceSet.load(write_set(tmp_path, per_rank))).ranks[rank]
    clock = Clock()
    engine = FakeEngine(plan, clock, **{k: v for k, v in kw.items() if k in ("comm_ns", "fail")})
    timing = run_iteration(plan, engine, kw.get("deadline", 10**12), clock=clock)
    span = {plan.ids[i]: (timing.start_ns[i], timing.end_ns[i]) for i in range(len(plan))}
    return engine, timing, span


def overlaps(a, b):
    return a[0] < b[1] and b[0] < a[1]


class LatePoller(FakeEngine):
    """The backend stamps a collective done at its due time; the poll only notices 40 µs later (a
    rank thread that waited for a core)."""

    def poll(self, handle):
        return self.clock.t >= handle + 40_000

    def finished_at(self, handle):
        return handle


def test_completion_is_the_backends_stamp_not_the_late_poll(tmp_path):
    nodes = [coll(1, schema.ALL_REDUCE, 64), coll(2, schema.ALL_REDUCE, 64, data=[1])]
    plan = build_plan(TraceSet.load(write_set(tmp_path, [nodes]))).ranks[0]
    clock = Clock()
    timing = run_iteration(plan, LatePoller(plan, clock), 10**12, clock=clock)
    durations = [e - s for s, e in zip(timing.start_ns, timing.end_ns)]
    assert all(5_000 <= d <= 5_100 for d in durations), durations  # comm_ns, give or take a clock read
    assert timing.start_ns[1] >= timing.end_ns[0] + 40_000  # the child still waits for the poll


def test_one_compute_at_a_time_but_compute_overlaps_comm(tmp_path):
    nodes = [comp(1, 10), comp(2, 10), coll(3, schema.ALL_REDUCE, 64)]
    _, _, span = run_rank(tmp_path, [nodes])
    assert not overlaps(span[1], span[2])
    assert overlaps(span[1], span[3])


def test_ready_compute_issues_in_ascending_id(tmp_path):
    nodes = [comp(9, 5), comp(4, 5), comp(6, 5)]
    engine, _, _ = run_rank(tmp_path, [nodes])
    assert engine.issued == [4, 6, 9]


def test_cpu_ops_have_their_own_slot(tmp_path):
    nodes = [comp(1, 10), comp(2, 10, cpu=True)]
    _, _, span = run_rank(tmp_path, [nodes])
    assert overlaps(span[1], span[2])


def test_children_start_after_every_data_and_ctrl_parent(tmp_path):
    nodes = [
        comp(1, 30),
        comp(2, 5, cpu=True),
        coll(3, schema.ALL_REDUCE, 64, data=[1], ctrl=[2]),
        comp(4, 5, ctrl=[3]),
    ]
    _, timing, span = run_rank(tmp_path, [nodes])
    assert span[3][0] >= max(span[1][1], span[2][1])
    assert span[4][0] >= span[3][1]
    assert timing.wall_ns >= span[4][1]


def test_recv_needs_no_slot(tmp_path):
    # rank 1: a send occupies the comm slot while both receives are posted at once
    r0 = [p2p(1, False, 1, 0, 8, tag=1), p2p(2, False, 1, 0, 8, tag=2), p2p(3, True, 0, 1, 8, tag=3)]
    r1 = [p2p(1, True, 1, 0, 8, tag=1), p2p(2, True, 1, 0, 8, tag=2), p2p(3, False, 0, 1, 8, tag=3)]
    _, _, span = run_rank(tmp_path, [r0, r1], rank=0)
    assert overlaps(span[1], span[2]) and overlaps(span[1], span[3])


def test_backend_error_names_the_node(tmp_path):
    nodes = [comp(1, 1), coll(2, schema.ALL_REDUCE, 64, data=[1])]
    with pytest.raises(NodeFailed, match="^RuntimeError: Connection reset by peer$") as err:
        run_rank(tmp_path, [nodes], fail=2)
    assert err.value.index == 1


def test_deadline_reports_in_flight_and_unissued_nodes(tmp_path):
    nodes = [comp(1, 1000), coll(2, schema.ALL_REDUCE, 64, data=[1]), comp(3, 1000)]
    with pytest.raises(ReplayTimeout) as err:
        run_rank(tmp_path, [nodes], deadline=50_000)
    assert err.value.in_flight == [0]  # compute 1 is still running
    assert err.value.waiting == [1, 2]


# -- bandwidth (nccl-tests definitions; PERFORMANCE.md) -----------------------------------------


def test_bus_factors_match_nccl_tests():
    assert bus_factor(schema.ALL_REDUCE, 4) == pytest.approx(2 * 3 / 4)
    for ct in (schema.ALL_GATHER, schema.REDUCE_SCATTER, schema.ALL_TO_ALL):
        assert bus_factor(ct, 8) == pytest.approx(7 / 8)
    assert bus_factor(schema.BROADCAST, 8) == 1.0
    assert bus_factor(None, 2) == 1.0


def test_all_gather_size_is_the_gathered_buffer():
    # Chakra records the per-rank input; nccl-tests' size is the P-times larger output.
    assert nccl_size(schema.ALL_GATHER, 1 << 20, 4) == 4 << 20
    assert nccl_size(schema.ALL_REDUCE, 1 << 20, 4) == 1 << 20


def test_bandwidth_of_one_call():
    bw = bandwidth(schema.ALL_REDUCE, 1_000_000, 4, 1_000_000)  # 1 MB in 1 ms
    assert bw.algbw_GBps == pytest.approx(1.0)
    assert bw.busbw_GBps == pytest.approx(1.5)
    assert bandwidth(schema.BARRIER, 0, 4, 10) is None


def test_status_board_round_trip(tmp_path):
    from chakra_pipe.replay import status as st

    path = tmp_path / "status.bin"
    st.create(path, 3)
    writer = st.StatusBoard(path, 3)
    writer.set(2, st.RUNNING, 4, [7, 8, 9, 10, 11, 12, 13])
    writer.set(0, st.FAILED, 1, [5])
    reader = st.StatusBoard(path, 3, mode="r")
    assert reader.get(2) == st.RankStatus("running", 4, [7, 8, 9, 10, 11])  # capped at MAX_IN_FLIGHT
    assert reader.get(0) == st.RankStatus("failed", 1, [5])
    assert reader.get(1) == st.RankStatus("starting", 0, [])
    writer.set(2, st.DONE, 5)
    assert reader.get(2) == st.RankStatus("done", 5, [])


class IdleRecorder(FakeEngine):
    """Records how long the loop offered to sleep each time it found nothing finished."""

    def __init__(self, plan, clock):
        super().__init__(plan, clock)
        self.offers: list[tuple[int, int]] = []  # (clock at the offer, timeout_ns)

    def idle(self, polls, timeout_ns):
        self.offers.append((self.clock.t, timeout_ns))


@pytest.mark.parametrize("deadline", [10**12, 300_000])
def test_idle_sleeps_end_before_a_busy_wait_ends_and_by_the_deadline(tmp_path, deadline):
    plan = build_plan(TraceSet.load(write_set(tmp_path, [[comp(1, dur=1000)]]))).ranks[0]  # 1 ms busy-wait
    clock = Clock()
    engine = IdleRecorder(plan, clock)
    try:
        run_iteration(plan, engine, deadline, clock=clock)
    except ReplayTimeout:
        assert deadline == 300_000
    assert engine.offers and all(t >= 0 for _, t in engine.offers)
    due = 100 + 1_000_000  # the issue's clock read, plus the duration
    assert all(now + t <= min(due - 2 * BACKOFF_NS, deadline) + 100 for now, t in engine.offers)
