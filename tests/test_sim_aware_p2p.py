"""Congestion-aware runs with point-to-point sends beside ring collectives stay exact on every rank.

The ring fast path evaluates a phase's messages ahead of the event clock while pipeline sends go
message by message over the same links (``CongestionAwareNetwork.check_order``). Each case is
compared with the message-by-message run (``fast=False``), and the counters say which path ran:
``fast_messages`` are the ring messages the recurrence evaluated, the rest went one by one.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from ranksets import NodeSpec, RankSetSpec
from sim_paths import assert_fast_equals_message_path, aware_hardware

from chakra_pipe import cli
from chakra_pipe.et import schema
from chakra_pipe.et.traceset import TraceSet
from chakra_pipe.sim import HardwareConfig, NetworkConfig, simulate
from chakra_pipe.sim.engine import EventQueue
from chakra_pipe.sim.network import make_network
from chakra_pipe.sim.network.aware import POINT_TO_POINT, LinkConflict

SIZE = 1 << 20
PER_NS = 100 * (1 << 30) / 1e9  # 100 GB/s in bytes per ns
HOLD, HOP = int(SIZE / PER_NS), int(700 + SIZE / PER_NS)  # a SIZE-byte message on one 700 ns link


def _checked_network():
    """An 8-NPU aware switch whose message path checks its order against the ring recurrence."""
    cfg = NetworkConfig.from_dict(
        {"topology": ["Switch"], "npus_count": [8], "bandwidth": [100], "latency": [700]}, source="net"
    )
    net = make_network("congestion_aware", cfg, EventQueue())
    net.check_order()
    return net


def _send_at(net, sends: list[tuple[int, int, int]]) -> dict[int, int]:
    """Send SIZE bytes ``src -> dst`` at ``t`` for each ``(t, src, dst)``; each sender's arrival ns."""
    arrived: dict[int, int] = {}
    for t, src, dst in sends:
        done = lambda src=src: arrived.__setitem__(src, net.queue.now)  # noqa: E731
        net.queue.schedule(t, net.send, src, dst, SIZE, 1, done)
    net.queue.run()
    return arrived


def _ring_phase(net, senders: list[int], receivers: list[int], sent: list[int]) -> list[int]:
    links = net.ring_links(senders, receivers, SIZE)
    links.begin(arrays=False)
    out = links.arrive(list(sent))
    links.end()
    return out


def test_a_send_after_evaluated_ring_messages_waits_for_them_and_one_no_later_is_refused() -> None:
    """A ring phase evaluated at 0 holds NPU 0's downlink from ``HOP`` to ``HOP + HOLD``. NPU 5's send
    reaching that link at ``HOP + 1`` queues behind it (the link's free time from the recurrence);
    one reaching it at ``HOP``, the ns the ring message arrived, is an order only the event sequence
    settles: ``LinkConflict``."""
    net = _checked_network()
    assert _ring_phase(net, [3, 0, 1, 2], [0, 1, 2, 3], [0, 0, 0, 0]) == [2 * HOP] * 4
    assert _send_at(net, [(1, 5, 0)]) == {5: HOP + HOLD + HOP}
    net = _checked_network()
    _ring_phase(net, [3, 0, 1, 2], [0, 1, 2, 3], [0, 0, 0, 0])
    with pytest.raises(LinkConflict, match="point-to-point"):
        _send_at(net, [(0, 5, 0)])


def test_a_ring_phase_after_a_send_waits_for_it_and_one_no_later_is_refused() -> None:
    """NPU 5's send reaches NPU 0's downlink at ``HOP`` and holds it until ``HOP + HOLD``; the link is
    marked. A later ring message from NPU 3 reaching it one ns after the send did waits for it; one
    reaching it at the same ns is refused."""
    for sent, arrival in ((1, [HOP + HOLD + HOP]), (0, None)):
        net = _checked_network()
        assert _send_at(net, [(0, 5, 0)]) == {5: 2 * HOP}
        downlink = net._path(5, 0)[1]
        assert (downlink.sender, downlink.offered, downlink.free_at) == (POINT_TO_POINT, HOP, HOP + HOLD)
        if arrival is None:
            with pytest.raises(LinkConflict):
                _ring_phase(net, [3], [0], [sent])
        else:
            assert _ring_phase(net, [3], [0], [sent]) == arrival


def test_two_sends_reaching_one_link_at_the_same_ns_are_refused() -> None:
    """The message path orders them by the global event sequence, which the fast path does not keep;
    one ns apart they queue in arrival order."""
    with pytest.raises(LinkConflict, match="with another message"):
        _send_at(_checked_network(), [(0, 5, 0), (0, 6, 0)])
    assert _send_at(_checked_network(), [(0, 5, 0), (1, 6, 0)]) == {5: 2 * HOP, 6: HOP + HOLD + HOP}


def _hw(
    npus: int, chunks: int = 1, bandwidth: float = 50, latency: float = 500, splits: int = 4, queues: int = 1
) -> HardwareConfig:
    net = {"topology": ["Switch"], "npus_count": [npus], "bandwidth": [bandwidth], "latency": [latency]}
    return aware_hardware(net, "ring", chunks, splits, num_queues_per_dim=queues)


def _pipeline_beside_ring(folder: Path, size: int, lead: int) -> TraceSet:
    """4 ranks: each computes ``lead`` us, then a 1 MiB all-reduce; rank 2 sends ``size`` bytes to rank 1
    at time 0, so the send shares rank 2's uplink and rank 1's downlink with the ring's messages."""
    ranks = []
    for r in range(4):
        nodes = [
            NodeSpec(0, schema.COMP_NODE, duration=lead),
            NodeSpec(1, schema.COMM_COLL_NODE, data_deps=(0,), comm_type=schema.ALL_REDUCE, comm_size=1 << 20),
        ]
        if r == 2:
            nodes = [
                NodeSpec(0, schema.COMM_SEND_NODE, comm_size=size, peer=1, tag=5),
                NodeSpec(1, schema.COMM_COLL_NODE, comm_type=schema.ALL_REDUCE, comm_size=1 << 20),
            ]
        elif r == 1:
            nodes.append(NodeSpec(3, schema.COMM_RECV_NODE, comm_size=size, peer=2, tag=5))
        ranks.append(tuple(nodes))
    return TraceSet.load(RankSetSpec(tuple(ranks)).write(folder, f"p2p_{size}_{lead}"))


def test_sends_beside_rings_are_exact_whether_the_fast_path_keeps_or_reruns(tmp_path, caplog) -> None:
    """A grid of send sizes and ring start times: the send either passes before the ring's messages
    (which then wait for it in the recurrence), or meets a ring message already evaluated on its link
    (``LinkConflict``: the run is redone message by message). Both happen, and every rank's finish,
    exposed time and collective record equal the message path's."""
    hw = _hw(4)
    kept_and_delayed = rerun = 0
    for size in (1 << 14, 1 << 17, 1 << 20):
        for lead in (0, 2, 5, 20):
            ts = _pipeline_beside_ring(tmp_path, size, lead)
            caplog.clear()
            with caplog.at_level("INFO", logger="chakra_pipe.sim.simulate"):
                assert_fast_equals_message_path(ts, hw)
            fast = simulate(ts, hw, symmetric=False)
            alone = simulate(_pipeline_beside_ring(tmp_path, 1, lead), hw)  # a 1-byte send delays nothing
            if "rerun message by message" in caplog.text:
                rerun += 1
                assert fast.fast_messages == 0  # the rerun went message by message
            else:
                assert fast.messages - fast.fast_messages == 1  # only the send took the message path
                kept_and_delayed += fast.finish_ns != alone.finish_ns
    assert kept_and_delayed and rerun  # both ways of meeting a ring were exercised


@pytest.fixture(scope="module")
def pipeline_step(tmp_path_factory) -> TraceSet:
    """A small version of the ``--realistic`` gpt3-175b case: TP 2, DP 2, PP 2 (pipeline send/recv)."""
    prefix = tmp_path_factory.mktemp("pp") / "w"
    flags = ["--model", "gpt3-175b", "--layers", "2", "--tp", "2", "--dp", "2", "--pp", "2"]
    assert cli.main(["generate", "llm", *flags, "--out", str(prefix)]) == 0
    return TraceSet.load(prefix)


def _sends(ts: TraceSet) -> int:
    return sum(int((g.types == schema.COMM_SEND_NODE).sum()) for g in ts.ranks)


def test_pipeline_step_keeps_ring_fast_path(pipeline_step) -> None:
    """At 400 GB/s every ring message of the step is evaluated by the recurrence and exactly the
    pipeline sends go one by one; at 5 GB/s an activation meets an evaluated ring message and the
    run is redone message by message. Exact either way."""
    for bandwidth, kept in ((400, True), (25, True), (5, False)):
        hw = _hw(len(pipeline_step.ranks), bandwidth=bandwidth)
        assert_fast_equals_message_path(pipeline_step, hw)
        fast = simulate(pipeline_step, hw, symmetric=False)
        message_path = _sends(pipeline_step) if kept else fast.messages
        assert fast.messages - fast.fast_messages == message_path, bandwidth


@pytest.mark.parametrize(("chunks", "queues"), [(2, 1), (1, 2), (4, 2)])
def test_several_active_chunks_or_queues(pipeline_step, chunks: int, queues: int) -> None:
    """With several chunks (or queues) per dimension an NPU runs several phases at once. With two
    queues half of a collective's chunks (4 dataset splits) run the other way over the same links,
    which the link check would refuse on the first collective: those runs go message by message from
    the start (``fast_messages == 0``). With one queue the chunks' phases are held and evaluated
    together, each send settling the held phases on its links first; with one chunk per collective
    only different collectives could overlap. Both keep the ring fast path, the sends one by one.
    Exact either way."""
    for splits in (4, 1):
        hw = _hw(len(pipeline_step.ranks), chunks, bandwidth=400, splits=splits, queues=queues)
        assert_fast_equals_message_path(pipeline_step, hw)
        fast = simulate(pipeline_step, hw, symmetric=False)
        message_path = fast.messages if splits > 1 and queues > 1 else _sends(pipeline_step)
        assert fast.messages - fast.fast_messages == message_path, splits
