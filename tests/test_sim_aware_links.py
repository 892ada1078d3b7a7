"""The congestion-aware ring recurrence (``FifoRingLinks``) refuses to evaluate a phase out of the
order its messages reach the links, instead of giving FIFO times in the wrong order."""

from __future__ import annotations

from collections import deque

import numpy as np
import pytest

from chakra_pipe.sim import NetworkConfig
from chakra_pipe.sim.engine import EventQueue
from chakra_pipe.sim.network import make_network
from chakra_pipe.sim.network.aware import FifoRingLinks, LinkConflict, _Link

SIZE = 1 << 20


def _network():
    cfg = NetworkConfig.from_dict(
        {"topology": ["Switch"], "npus_count": [8], "bandwidth": [100], "latency": [700]}, source="net"
    )
    return make_network("congestion_aware", cfg, EventQueue())


def _phase(links, sent: list[int], arrays: bool) -> list[int]:
    links.begin(arrays=arrays)
    out = links.arrive(np.asarray(sent, dtype=np.int64) if arrays else list(sent))
    links.end()
    return list(out.tolist() if arrays else out)


@pytest.mark.parametrize("arrays", [False, True])
def test_fifo_times_carry_over_and_order_is_checked(arrays: bool) -> None:
    net = _network()
    ring = [0, 1, 2, 3]
    links = net.ring_links([ring[k - 1] for k in range(4)], ring, SIZE)
    hold, hop = _times()
    # free links: uplink then downlink, each latency + size / bandwidth
    assert _phase(links, [0, 0, 0, 0], arrays) == [2 * hop] * 4
    # the same senders a little later: each waits for its own uplink (free at hold) - FIFO carry-over
    assert _phase(links, [10, 10, 10, 10], arrays) == [hold + 2 * hop] * 4
    # the same senders earlier than their last message on the link: out of order, refused
    with pytest.raises(LinkConflict):
        _phase(links, [5, 100_000, 100_000, 100_000], arrays)


@pytest.mark.parametrize("arrays", [False, True])
def test_another_sender_must_find_the_link_free(arrays: bool) -> None:
    """NPU 3's message holds NPU 0's downlink until ``hop + hold``; NPU 7's may reach it at that ns
    (it starts then whichever event runs first), not one ns earlier."""
    hold, hop = _times()
    for sent, arrival in ((hold - 1, None), (hold, hold + 2 * hop)):
        net = _network()
        first = net.ring_links([3, 0, 1, 2], [0, 1, 2, 3], SIZE)
        second = net.ring_links([7], [0], SIZE)  # through the same downlink of NPU 0
        assert _phase(first, [0, 0, 0, 0], arrays) == [2 * hop] * 4
        if arrival is None:
            with pytest.raises(LinkConflict):
                _phase(second, [sent], arrays)
        else:
            assert _phase(second, [sent], arrays) == [arrival]


def _times() -> tuple[int, int]:
    """(hold, hop) of a SIZE-byte message on a 100 GB/s, 700 ns link (``_Link.times``)."""
    per_ns = 100 * (1 << 30) / 1e9
    return int(SIZE / per_ns), int(700 + SIZE / per_ns)


def test_a_reserved_event_runs_in_the_place_it_reserved() -> None:
    """The aware links schedule a link's free event only when a message waits, in the place
    ``reserve`` took when the link was taken: same-time events keep ASTRA-sim's insertion order."""
    q, log = EventQueue(), list[str]()
    q.schedule(5, log.append, "a")
    place = q.reserve()
    q.schedule(5, log.append, "c")
    q.schedule(0, lambda: q.schedule_reserved(5, place, log.append, "b"))
    q.run()
    assert log == ["a", "b", "c"]


@pytest.mark.parametrize("arrays", [False, True])
def test_copies_of_one_message_on_a_canonical_link_are_one_message(arrays: bool) -> None:
    """The symmetric engine's canonical links: two members whose hop is one link with one sender are
    the same real message, timed as if alone (not queued behind each other), and must arrive together."""
    hold, hop = _times()
    link, other = _Link(700, 100 * (1 << 30) / 1e9), _Link(700, 100 * (1 << 30) / 1e9)
    links = FifoRingLinks([[link], [link], [other]], SIZE, [5, 5, 6])
    assert _phase(links, [0, 0, 0], arrays) == [hop] * 3
    assert link.free_at == hold and link.sender == 5
    with pytest.raises(LinkConflict, match="copies of one message"):
        _phase(links, [10**6, 10**6 + 1, 10**6], arrays)


def test_two_messages_or_queued_messages_on_one_link_decline() -> None:
    """Two senders' messages on one link in one phase, or a link with messages queued on the message
    path: the recurrence cannot time them."""
    link = _Link(700, 100 * (1 << 30) / 1e9)
    with pytest.raises(LinkConflict, match="two messages of one ring phase"):
        FifoRingLinks([[link], [link]], SIZE, [5, 6])
    links = FifoRingLinks([[link]], SIZE, [5])
    link.pending = deque([[SIZE, [link], 0, None]])
    with pytest.raises(LinkConflict, match="queued"):
        links.begin()


@pytest.mark.parametrize("topology", ["Switch", "FullyConnected"])
@pytest.mark.parametrize("size", [1 << 20, 64 << 20])
def test_a_small_ring_phase_is_kept_per_start_pattern_and_link_state(
    tmp_path, monkeypatch, topology: str, size: int
) -> None:
    """Six all-reduces one after the other on 8 NPUs, 1 of 4 chunks active: 24 ring phases whose
    starts and links' state, relative to their earliest start, repeat, so the recurrence is evaluated
    for two of them and the rest are shifted (``RingCoordinator._kept_aware``); every rank equals the
    message path."""
    from test_sim_aware_direct_chunks import _hw
    from test_sim_examples import coll, write_set

    from chakra_pipe.et import schema
    from chakra_pipe.sim import simulate

    evaluated = []
    begin = FifoRingLinks.begin
    monkeypatch.setattr(FifoRingLinks, "begin", lambda self, *a, **k: evaluated.append(1) or begin(self, *a, **k))
    chain = [coll(i, schema.ALL_REDUCE, size=size, **({"data": [i - 1]} if i else {})) for i in range(6)]
    ts = write_set(tmp_path, [chain for _ in range(8)])
    hw = _hw(8, topology, 1, direct=())
    fast, slow = simulate(ts, hw, symmetric=False), simulate(ts, hw, fast=False)
    assert fast.fast_messages == fast.messages == slow.messages
    assert fast.to_dict() == slow.to_dict()
    assert len(evaluated) == 2  # 24 without keeping (one per chunk and collective)
