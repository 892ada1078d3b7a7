"""Symmetric simulation of generated steps: identical to the full engine, or a logged fall-back.

Every case simulates the same layout twice, once with one representative per class and once with
every rank on the full message-level engine, and compares every per-rank figure to the ns.
"""

from __future__ import annotations

import logging

import pytest

from chakra_pipe.et.traceset import TraceSet
from chakra_pipe.generate.llm import generate_llm
from chakra_pipe.generate.options import resolve_llm
from chakra_pipe.sim import HardwareConfig, NetworkConfig, SystemConfig, simulate, symmetric
from chakra_pipe.sim.engine import EventQueue
from chakra_pipe.sim.network.aware import FifoRingLinks, _Link
from chakra_pipe.sim.network.common import LinkConflict
from chakra_pipe.sim.symmetric import RankSymmetry, SymmetryDeclined, _QuotientAwareNetwork, fit, symmetry_problem
from chakra_pipe.sim.system.ring_fast import RingCoordinator
from chakra_pipe.sweep.generated_layout import GeneratedLayout, simulate_layout
from chakra_pipe.sweep.shard import metrics

SMALL = {"model": "gpt3-13b", "layers": 4, "hidden": 512, "heads": 8, "ffn": 2048, "vocab": 1024, "seq": 256}
MOE = {"model": "mixtral-8x7b", "layers": 2, "hidden": 256, "heads": 8, "ffn": 512, "vocab": 512, "seq": 128}
PER_RANK = ("finish_ns", "compute_ns", "cpu_ns", "exposed_comm_ns", "comm_ns", "idle_ns")


def hardware(
    dims, topology=None, algo="ring", backend="congestion_unaware", chunks=1, bandwidth=(400.0, 50.0, 25.0)
) -> HardwareConfig:
    """A switch × switch × switch cluster (NVLink-like, rail, spine) with one algorithm everywhere."""
    system = {
        "scheduling-policy": "LIFO",
        "collective-optimization": "localBWAware",
        "endpoint-delay": 10,
        "active-chunks-per-dimension": chunks,
        "preferred-dataset-splits": 4,
        **{
            f"{k}-implementation": [algo] * len(dims)
            for k in ("all-reduce", "all-gather", "reduce-scatter", "all-to-all")
        },
        "local-mem-bw": 3350,
        "peak-perf": 989,
        "roofline-enabled": 0,
    }
    network = {
        "topology": topology or ["Switch"] * len(dims),
        "npus_count": list(dims),
        "bandwidth": list(bandwidth)[: len(dims)],
        "latency": [936.25, 2500.0, 5000.0][: len(dims)],
    }
    return HardwareConfig(
        system=SystemConfig.from_dict(system, source="sys.json"),
        network=NetworkConfig.from_dict(network, source="net.yml"),
        backend=backend,
    )


def both(options: dict, hw: HardwareConfig):
    model, spec = resolve_llm(options)
    sym, how = simulate_layout(model, spec, hw, "x")
    full, _ = simulate_layout(model, spec, hw, "x", symmetric=False)
    return sym, how, full


def assert_identical(sym, full) -> None:
    for key in PER_RANK:
        assert getattr(sym, key) == getattr(full, key), key
    assert metrics(sym) == metrics(full)
    reps = {c.rank for c in sym.collectives}
    assert sym.collectives == [c for c in full.collectives if c.rank in reps]
    assert 0 < sym.messages < full.messages


CASES = {
    "64 ranks, 1F1B over 4 stages": (
        {**SMALL, "dp": 4, "tp": 4, "pp": 4, "microbatches": 4, "global_batch": 16},
        (8, 2, 4),
        {},
    ),
    "256 ranks, ZeRO-1, 2 active chunks": (
        {**SMALL, "dp": 8, "tp": 8, "pp": 4, "microbatches": 2, "global_batch": 16, "zero": 1},
        (8, 4, 8),
        {"chunks": 2},
    ),
    "128 ranks, recomputation, TP across nodes": (
        {**SMALL, "heads": 16, "dp": 4, "tp": 16, "pp": 2, "microbatches": 2, "global_batch": 8, "recompute": True},
        (8, 2, 8),
        {},
    ),
    "64 ranks, expert all-to-alls (ring)": (
        {**MOE, "dp": 16, "tp": 2, "pp": 2, "ep": 4, "microbatches": 2, "global_batch": 32},
        (4, 4, 4),
        {},
    ),
    "64 ranks, expert all-to-alls (direct)": (
        {**MOE, "dp": 16, "tp": 2, "pp": 2, "ep": 2, "microbatches": 2, "global_batch": 32},
        (2, 16, 2),
        {"algo": "direct"},
    ),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_symmetric_run_equals_the_full_engine(case):
    options, dims, kw = CASES[case]
    sym, how, full = both(options, hardware(dims, **kw))
    model, spec = resolve_llm(options)
    reps = spec.layout.pp * spec.layout.ep
    assert how == f"symmetric: {reps} of {spec.layout.world} ranks simulated"
    assert len(sym.finish_ns) == spec.layout.world
    assert_identical(sym, full)


@pytest.mark.parametrize("scale_out", [[50.0, 25.0], [25.0, 12.5]], ids=["fast", "slim"])
def test_a_1024_gpu_gpt3_175b_layout_equals_its_campaign_point(tmp_path, scale_out):
    """The search's best gpt3-175b layout on 1,024 GPUs (dp64 tp4 pp4, ZeRO-1, recomputation), 4 layers so
    the full engine runs in seconds: rank files written by ``generate llm``, loaded and simulated as a
    campaign shard does, per rank equal to the symmetric run of 4 representatives, on two platforms."""
    options = {
        "model": "gpt3-175b",
        "layers": 4,
        "dp": 64,
        "tp": 4,
        "pp": 4,
        "microbatches": 4,
        "global_batch": 256,
        "zero": 1,
        "recompute": True,
    }
    hw = hardware((8, 16, 8), bandwidth=(400.0, *scale_out))
    model, spec = resolve_llm(options)
    sym, how = simulate_layout(model, spec, hw, "x")
    assert how == "symmetric: 4 of 1024 ranks simulated"
    generate_llm(model, spec, tmp_path / "best")
    files = TraceSet.load(tmp_path / "best")
    full = simulate(files, hw, symmetric=False)
    for key in PER_RANK:
        assert getattr(sym, key) == getattr(full, key), key
    assert metrics(sym) == metrics(full)
    quotient = simulate(files, hw)  # the rank files' symmetry, proven from the files themselves
    assert quotient.messages < full.messages
    assert quotient.to_dict() == full.to_dict()


AWARE = {"backend": "congestion_aware"}
TINY = {**SMALL, "layers": 8, "seq": 64, "hidden": 128, "ffn": 512, "vocab": 256}
AWARE_CASES = {
    # (options, dims, hardware keywords, representatives): FIFO links shared between TP, DP and pipeline traffic
    "64 ranks, 1-D switch: TP and DP share every downlink, 1F1B over 4 stages": (
        {**SMALL, "dp": 4, "tp": 4, "pp": 4, "microbatches": 4, "global_batch": 16},
        (64,),
        AWARE,
        4,
    ),
    "64 ranks, 3-D switch: DP over half a node and the rail (blk → blk+2)": (
        {**SMALL, "dp": 4, "tp": 4, "pp": 4, "microbatches": 4, "global_batch": 16},
        (8, 2, 4),
        AWARE,
        8,
    ),
    "128 ranks, TP 2 and DP 8 on one 16-NPU switch, 1F1B over 8 stages": (
        {**TINY, "dp": 8, "tp": 2, "pp": 8, "microbatches": 4, "global_batch": 32},
        (16, 8),
        AWARE,
        8,
    ),
    "256 ranks, ZeRO-1, 2 active chunks, rail × spine": (
        {**TINY, "dp": 4, "tp": 8, "pp": 8, "microbatches": 2, "global_batch": 8, "zero": 1},
        (8, 4, 8),
        {**AWARE, "chunks": 2},
        8,
    ),
    "64 ranks, FullyConnected × Switch × FullyConnected": (
        {**SMALL, "dp": 4, "tp": 4, "pp": 4, "microbatches": 4, "global_batch": 16},
        (4, 4, 4),
        {**AWARE, "topology": ["FullyConnected", "Switch", "FullyConnected"]},
        4,
    ),
    "64 ranks, expert all-to-alls (ring), experts across nodes": (
        {**MOE, "dp": 16, "tp": 2, "pp": 2, "ep": 4, "microbatches": 2, "global_batch": 32},
        (4, 4, 4),
        AWARE,
        16,
    ),
    "64 ranks, expert all-to-alls (direct), 1-D switch": (
        {**MOE, "dp": 16, "tp": 2, "pp": 2, "ep": 2, "microbatches": 2, "global_batch": 32},
        (64,),
        {**AWARE, "algo": "direct"},
        4,
    ),
    "1,024 ranks, TP 8 per node, DP 16 over the rail, 8 stages": (
        {**TINY, "dp": 16, "tp": 8, "pp": 8, "microbatches": 1, "global_batch": 16},
        (8, 16, 8),
        AWARE,
        8,
    ),
}


# How each case's ring phases ran: by the FIFO ring recurrence on canonical links ("recurrence"), by it
# until a LinkConflict and then message by message ("rerun": none of these cases since two active chunks'
# phases on one link are held and evaluated together), or message by message from the start
# ("messages": direct all-to-alls, no ring).
RING_PATH = {
    "64 ranks, expert all-to-alls (direct), 1-D switch": "messages",
}


# Which shortcuts of the recurrence each case's ring phases took: "one message" (every member's message a
# copy of one: FifoRingLinks.copies' closed form, e.g. a TP ring of one class) and "period" (members
# repeating with a period, e.g. a DP ring over 2 classes: the recurrence of one period).
SHORTCUTS = {
    "64 ranks, 3-D switch: DP over half a node and the rail (blk → blk+2)": {"one message", "period"},
    "64 ranks, expert all-to-alls (ring), experts across nodes": {"one message", "period"},
    "64 ranks, expert all-to-alls (direct), 1-D switch": set(),
    # two chunks in flight: each batch of chunks is one recurrence over every member (RingCoordinator._flush)
    "256 ranks, ZeRO-1, 2 active chunks, rail × spine": set(),
}


@pytest.mark.parametrize("case", sorted(AWARE_CASES))
def test_symmetric_run_on_the_congestion_aware_backend_equals_the_full_engine(case, monkeypatch):
    options, dims, kw, reps = AWARE_CASES[case]
    runs: list[bool] = []  # ring_fast of each quotient run
    phases = [0]  # ring phases evaluated by the recurrence
    shortcuts: set[str] = set()
    run, recurrence, flush = symmetric._run, RingCoordinator.recurrence, RingCoordinator._flush
    copies, reduced = FifoRingLinks.copies, FifoRingLinks.reduced

    def spy_copies(self, *args):
        shortcuts.add("one message")
        return copies(self, *args)

    def spy_reduced(self, q):
        shortcuts.add("period")
        return reduced(self, q)

    monkeypatch.setattr(FifoRingLinks, "copies", spy_copies)
    monkeypatch.setattr(FifoRingLinks, "reduced", spy_reduced)

    def spy_run(*args, ring_fast, **kw):
        runs.append(ring_fast)
        return run(*args, ring_fast=ring_fast, **kw)

    def spy_recurrence(self, algos):
        phases[0] += 1
        return recurrence(self, algos)

    def spy_flush(self, key):  # a batch of chunks: one recurrence over all of them
        phases[0] += 1
        return flush(self, key)

    monkeypatch.setattr(symmetric, "_run", spy_run)
    monkeypatch.setattr(RingCoordinator, "recurrence", spy_recurrence)
    monkeypatch.setattr(RingCoordinator, "_flush", spy_flush)
    sym, how, full = both(options, hardware(dims, **kw))
    model, spec = resolve_llm(options)
    assert how == f"symmetric: {reps} of {spec.layout.world} ranks simulated"
    assert len(sym.finish_ns) == spec.layout.world
    assert_identical(sym, full)
    path = RING_PATH.get(case, "recurrence")
    assert runs == ([True, False] if path == "rerun" else [True])
    assert (phases[0] > 0) == (path != "messages")
    assert shortcuts == SHORTCUTS.get(case, {"one message"})
    if path == "recurrence":  # every message of a representative counted once, as the message path does
        monkeypatch.setattr(symmetric, "_QuotientRings", lambda *a: None)
        slow, _ = simulate_layout(model, spec, hardware(dims, **kw), "x")
        assert (sym.finish_ns, sym.collectives, sym.messages) == (slow.finish_ns, slow.collectives, slow.messages)


def test_aware_symmetric_run_equals_both_paths_of_the_full_engine():
    """A 1-D FullyConnected network without pipeline sends: the full engine takes the aware ring fast
    path by default (``aware_fast_path_is_exact``) and the message path with ``fast=False``."""
    options = {**SMALL, "dp": 8, "tp": 8, "pp": 1, "microbatches": 1, "global_batch": 8, "zero": 1}
    hw = hardware((64,), topology=["FullyConnected"], **AWARE)
    sym, how, fast = both(options, hw)
    assert how == "symmetric: 1 of 64 ranks simulated"
    model, spec = resolve_llm(options)
    slow = simulate(GeneratedLayout(model, spec, "x").traces(), hw, fast=False)
    assert_identical(sym, fast)
    assert_identical(sym, slow)


def one_message_ring(carried: list[tuple[int, int, int]]) -> tuple[FifoRingLinks, list[_Link]]:
    """8 members whose messages are copies of one (a TP ring of one class on canonical links: the
    representative's up-link, sender 0, then its down-link, sender 7), each link's state
    ``(free_at, offered, sender)`` carried over from earlier phases."""
    links = [_Link(500.0, 50.0), _Link(700.0, 25.0)]
    for link, state in zip(links, carried):
        link.free_at, link.offered, link.sender = state
    return FifoRingLinks([links] * 8, 1 << 20, [0] * 8, [[0, 7]] * 8), links


CARRIED = {  # (up-link, down-link) state before the phase, which starts at 100,000 ns
    "fresh links": [(0, 0, -1), (0, 0, -1)],
    "both links still busy with the same senders' messages": [(130_000, 45_000, 0), (160_000, 60_000, 7)],
    "another sender's message left the up-link before": [(95_000, 60_000, 5), (0, 0, -1)],
    "another sender's message holds the up-link": [(130_000, 99_000, 3), (0, 0, -1)],
}


@pytest.mark.parametrize("steps", [1, 2, 14])
@pytest.mark.parametrize("carried", sorted(CARRIED))
def test_copies_of_one_message_time_as_the_recurrence_over_every_member(steps, carried):
    """``FifoRingLinks.copies`` (closed form) against the recurrence stepping all 8 members: the same
    last receive, the same link state left, and the same ``LinkConflict`` when the phase's first
    message reaches a link before another sender's last message left it."""
    start, d = 100_000, [10, 3_000, 10, 3_000, 10, 3_000, 10, 3_000, 10, 3_000, 10, 3_000, 10, 3_000, 10]
    fast, fast_links = one_message_ring(CARRIED[carried])
    slow, slow_links = one_message_ring(CARRIED[carried])
    assert fast.one_message and fast.period == 1
    stepped = RingCoordinator(None, None, None, aware=True)._evaluate
    pred = [7, 0, 1, 2, 3, 4, 5, 6]
    if carried == "another sender's message holds the up-link":
        with pytest.raises(LinkConflict):
            stepped(slow, [start] * 8, pred, d, steps)
        with pytest.raises(LinkConflict):
            fast.copies(start + d[0], sum(d[1:steps]), steps)
        return
    last = fast.copies(start + d[0], sum(d[1:steps]), steps)
    assert stepped(slow, [start] * 8, pred, d, steps) == [last] * 8
    state = [(link.free_at, link.offered, link.sender) for link in fast_links]
    assert state == [(link.free_at, link.offered, link.sender) for link in slow_links]
    # A step crosses the up-link (21,471 ns: 500 + 2²⁰ B / 50 B/ns) and the down-link (42,643 ns). When
    # both are busy, step 1 waits for the up-link until 130,000, reaches the down-link at 151,471 and
    # waits for it until 160,000; later steps never wait.
    first = 160_000 + 42_643 if carried.startswith("both") else start + d[0] + 21_471 + 42_643
    assert last == first + sum(d[1:steps]) + (steps - 1) * (21_471 + 42_643)


def test_fit_keeps_the_translations_that_are_network_automorphisms():
    """tp = 4 over a dimension 0 of 2 NPUs: t → t+1 carries into dimension 1 (not a product of
    per-dimension permutations), t → t+2 does not; DP 256 over a 16-NPU rail and part of the spine
    keeps blk → blk+16."""
    aware = hardware((2, 8), **AWARE)
    sym = RankSymmetry(tp=4, dp=2, pp=2)
    assert "the translation t → t+1 is not a network automorphism" in (symmetry_problem(sym, {}, aware) or "")
    assert fit(sym, aware) == RankSymmetry(tp=4, dp=2, pp=2, tp_step=2)
    assert fit(sym, hardware((2, 8))) == sym  # the unaware backend needs no automorphism
    big = fit(RankSymmetry(tp=8, dp=256, pp=8), hardware((8, 16, 128), **AWARE))
    assert (big.tp_step, big.block_step, len(big.reps())) == (1, 16, 128)
    assert big.rep(8 * 17 + 3) == 8 * 1 and big.translate(8 * 17 + 3, 8 * 17 + 3) == 8 * 1


def test_simultaneous_messages_of_two_senders_on_one_link_decline(caplog):
    """Two 1-byte messages of representative 0 (held 0 ns on its up-link) reach the switch together on
    their way to NPUs 1 and 2; both down-links map onto NPU 0's, where the full engine has NPUs 1 and 2
    offering at the same ns — an order only its global event sequence settles."""
    hw = hardware((4,), **AWARE)
    queue = EventQueue()
    network = _QuotientAwareNetwork(hw.network, queue, RankSymmetry(tp=2, dp=2, pp=1))
    network.send(0, 1, 1, 5, None)
    network.send(0, 2, 1, 6, None)
    with pytest.raises(SymmetryDeclined, match=r"NPUs 1 and 2 offer a message to one link at 936 ns"):
        queue.run()


@pytest.mark.parametrize("dims", [(8, 2), (2, 8)])
def test_two_queues_over_a_dimension_of_two_run_on_the_full_engine(dims):
    """Chunks running both ways round meet on links both directions share (a dimension of two NPUs),
    and the ring recurrence declines: the full engine's ranks of one class then finish apart (rank 0
    53 µs after rank 8 on 8 x 2), so the symmetric run must decline rather than rerun its quotient
    message by message, which gave every member its representative's time."""
    system = {
        "scheduling-policy": "LIFO",
        "endpoint-delay": 137,
        "active-chunks-per-dimension": 2,
        "preferred-dataset-splits": 4,
        "collective-optimization": "baseline",
        "local-mem-bw": 3350,
        **{f"{k}-implementation": ["ring"] * 2 for k in ("all-reduce", "all-gather", "reduce-scatter", "all-to-all")},
    }
    network = {"topology": ["FullyConnected"] * 2, "npus_count": list(dims), "bandwidth": [100] * 2, "latency": [0] * 2}
    hw = HardwareConfig(
        SystemConfig.from_dict(system, source="sys.json"),
        NetworkConfig.from_dict(network, source="net.yml"),
        backend="congestion_aware",
        num_queues_per_dim=2,
    )
    sym, how, full = both({**SMALL, "dp": 4, "tp": 4, "pp": 1, "microbatches": 1, "global_batch": 4}, hw)
    assert how.startswith("full engine: not symmetric (declined: chunks running both ways round would go message by")
    assert sym.finish_ns == full.finish_ns


def test_direct_phases_beside_chunks_running_both_ways_round_run_on_the_full_engine():
    """Two queues on a 1-D FullyConnected network keep the ring recurrence (the two directions cross
    different links), but direct phases then go message by message, and the quotient's answer was
    20 ns early on every rank at zero latency: the run is declined up front."""
    system = {
        "scheduling-policy": "LIFO",
        "endpoint-delay": 0,
        "active-chunks-per-dimension": 1,
        "preferred-dataset-splits": 8,
        "collective-optimization": "baseline",
        "local-mem-bw": 3350,
        "all-reduce-implementation": ["direct"],
        "all-gather-implementation": ["direct"],
        "reduce-scatter-implementation": ["ring"],
        "all-to-all-implementation": ["ring"],
    }
    network = {"topology": ["FullyConnected"], "npus_count": [16], "bandwidth": [25], "latency": [0]}
    hw = HardwareConfig(
        SystemConfig.from_dict(system, source="sys.json"),
        NetworkConfig.from_dict(network, source="net.yml"),
        backend="congestion_aware",
        num_queues_per_dim=2,
    )
    sym, how, full = both({"model": "llama3-8b", "layers": 1, "tp": 2, "dp": 8, "zero": 1}, hw)
    assert how.startswith("full engine: not symmetric (all_reduce uses direct with chunks running both ways round")
    assert sym.finish_ns == full.finish_ns


def test_a_declined_symmetric_run_reruns_on_the_full_engine_and_says_why(monkeypatch, caplog):
    """Wiring of the decline: whatever the quotient network declines, the layout still gets the full
    engine's result and the reason in its log line (here every first offer declines)."""

    def decline(self, link, msg):
        raise SymmetryDeclined("NPUs 1 and 2 offer a message to one link at 7 ns")

    monkeypatch.setattr(_QuotientAwareNetwork, "_offer", decline)
    options = {**SMALL, "dp": 2, "tp": 4, "pp": 2, "microbatches": 2, "global_batch": 4}
    model, spec = resolve_llm(options)
    hw = hardware((8, 2), **AWARE)
    with caplog.at_level(logging.WARNING, logger="chakra_pipe"):
        result, how = simulate_layout(model, spec, hw, "x")
    assert how == "full engine: not symmetric (declined: NPUs 1 and 2 offer a message to one link at 7 ns)"
    assert any("declined: NPUs 1 and 2" in r.getMessage() for r in caplog.records)
    full, _ = simulate_layout(model, spec, hw, "x", symmetric=False)
    assert result.finish_ns == full.finish_ns and len(result.finish_ns) == 16


BASE = {**SMALL, "dp": 2, "tp": 4, "pp": 2, "microbatches": 2, "global_batch": 4}
FALLBACKS = {
    "congestion-aware links, no translation is an automorphism": (
        {**SMALL, "dp": 3, "tp": 2, "pp": 2, "microbatches": 2, "global_batch": 6},
        (3, 2, 2),
        AWARE,
        "the translation t → t+1 is not a network automorphism: dimension 0",
    ),
    "ring topology": (BASE, (8, 2), {"topology": ["Ring", "Switch"]}, "network dimension 0 is a Ring"),
    "halving-doubling": (BASE, (16,), {"algo": "halvingDoubling"}, "all_reduce uses halvingDoubling"),
    "replicas across a node boundary": (
        {**BASE, "dp": 3, "global_batch": 6},
        (8, 3),
        {},
        "network dimensions 0..0 hold 8 NPUs, which does not nest with tp·dp = 12",
    ),
}


@pytest.mark.parametrize("case", sorted(FALLBACKS))
def test_without_symmetry_the_full_engine_runs_and_says_why(case, caplog):
    options, dims, kw, reason = FALLBACKS[case]
    model, spec = resolve_llm(options)
    with caplog.at_level(logging.WARNING, logger="chakra_pipe"):
        result, how = simulate_layout(model, spec, hardware(dims, **kw), "x")
    assert how.startswith("full engine: not symmetric (") and reason in how
    assert any(reason in r.getMessage() and "full engine" in r.getMessage() for r in caplog.records)
    assert len(result.finish_ns) == spec.layout.world
    assert sorted({c.rank for c in result.collectives}) == list(range(spec.layout.world))  # every rank ran


def test_a_group_spanning_every_rank_is_not_symmetric():
    hw = hardware((8, 8))
    assert symmetry_problem(RankSymmetry(tp=1, dp=64, pp=1), {}, hw) == (
        "a collective spans every rank (its plan follows the physical dimensions)"
    )


def test_a_rank_set_whose_groups_break_the_translation_is_refused():
    hw = hardware((4, 4))
    sym = RankSymmetry(tp=4, dp=2, pp=2)
    groups = {
        **{i + 1: [4 * i + k for k in range(4)] for i in range(4)},  # tp groups
        5: [0, 4],
        6: [1, 5],
        7: [2, 6],
        8: [3, 7],
        9: [8, 12],
        10: [9, 13],
        11: [10, 14],
        12: [11, 15],
    }
    assert symmetry_problem(sym, groups, hw) is None
    broken = {**groups, 4: [12, 13, 15, 14]}
    assert symmetry_problem(sym, broken, hw) == "group 4 is not an ascending list of distinct ranks"
    swapped = {**groups, 9: [8, 13], 10: [9, 12]}
    assert "ring successor does not map onto its representative's" in (symmetry_problem(sym, swapped, hw) or "")


def test_symmetric_runs_count_the_messages_their_ring_recurrences_evaluate():
    """``fast_messages`` says which path ran: a TP+DP step without pipeline sends is all ring phases,
    evaluated by the quotient's recurrence on every message, as the full engine's fast path does."""
    sym, how, full = both({**SMALL, "dp": 2, "tp": 4, "pp": 1}, hardware((4, 2)))
    assert how.startswith("symmetric: 1 of 8")
    assert_identical(sym, full)
    assert sym.fast_messages == sym.messages > 0
    assert full.fast_messages == full.messages


def test_a_system_file_without_keys_for_collectives_the_set_never_uses_runs_symmetric():
    """ASTRA-sim needs an ``*-implementation`` key only for the collectives a run issues; the
    symmetry check used to ask for all four and failed on a file with the all-reduce key alone."""
    base = {
        "scheduling-policy": "LIFO",
        "collective-optimization": "localBWAware",
        "endpoint-delay": 10,
        "active-chunks-per-dimension": 1,
        "preferred-dataset-splits": 4,
        "all-reduce-implementation": ["ring"] * 3,
        "local-mem-bw": 3350,
        "peak-perf": 989,
        "roofline-enabled": 0,
    }
    network = hardware((4, 2, 2)).network
    only_all_reduce = HardwareConfig(system=SystemConfig.from_dict(base, source="sys.json"), network=network)
    sym, how, full = both({**SMALL, "dp": 4, "tp": 2, "pp": 2, "microbatches": 2, "global_batch": 8}, only_all_reduce)
    assert "symmetric" in how, how
    assert_identical(sym, full)
