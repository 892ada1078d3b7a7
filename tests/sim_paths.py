"""The fast path's promise, checked one way everywhere: ``simulate`` equals ``simulate(fast=False)``.

Why one helper: the fast paths (ring, halving-doubling, direct, double-binary-tree, aware rings) are
exact by claim, and every test of one compares the same outputs with the message-by-message run.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from hypothesis import strategies as st

from chakra_pipe import cli
from chakra_pipe.errors import ChakraPipeError
from chakra_pipe.et import schema
from chakra_pipe.et.traceset import TraceSet
from chakra_pipe.rankset import analyze
from chakra_pipe.sim import HardwareConfig, NetworkConfig, SystemConfig, simulate
from chakra_pipe.sim.engine import EventQueue
from chakra_pipe.sim.network import make_network
from chakra_pipe.sim.simulate import aware_fast_path_is_exact

RERUN = "rerun message by message"  # simulate's log line when an aware fast run is redone
KINDS = ("all-reduce", "reduce-scatter", "all-gather", "all-to-all")  # system.json's *-implementation keys
KIND_OF = {  # each key's comm type
    "all-reduce": schema.ALL_REDUCE,
    "reduce-scatter": schema.REDUCE_SCATTER,
    "all-gather": schema.ALL_GATHER,
    "all-to-all": schema.ALL_TO_ALL,
}
# Small generated steps with TP, ZeRO-1, experts and a pipeline, whose collectives the several-chunk
# aware tests run chunk by chunk (generate llm flags by name; ``generated_steps`` builds them)
CHUNK_STEPS = {
    "llama3-8b-t8d2-zero1": ["--model", "llama3-8b", "--layers", "2", "--tp", "8", "--dp", "2", "--zero", "1"],
    "mixtral-t2d4e2": ["--model", "mixtral-8x7b", "--layers", "1", "--tp", "2", "--dp", "4", "--ep", "2"],
    "gpt3-175b-t2d2p2": ["--model", "gpt3-175b", "--layers", "2", "--tp", "2", "--dp", "2", "--pp", "2"],
}


def assert_fast_equals_message_path(ts, hw: HardwareConfig) -> None:
    """Per-rank finish and exposed times, every collective record and the message count agree."""
    fast, slow = simulate(ts, hw, symmetric=False), simulate(ts, hw, fast=False)
    assert fast.finish_ns == slow.finish_ns
    assert fast.exposed_comm_ns == slow.exposed_comm_ns
    assert [c.__dict__ for c in fast.collectives] == [c.__dict__ for c in slow.collectives]
    assert fast.messages == slow.messages
    assert min(fast.finish_ns) > 0


def generated_steps(tmp_path_factory, steps: dict[str, list[str]]) -> dict[str, TraceSet]:
    """``generate llm FLAGS`` once per named step (module-scoped fixtures share the sets)."""
    out = {}
    for name, flags in steps.items():
        prefix = tmp_path_factory.mktemp(name) / "w"
        assert cli.main(["generate", "llm", *flags, "--out", str(prefix)]) == 0
        out[name] = TraceSet.load(prefix)
    return out


def tiered_network(topology: str, sizes: list[int]) -> dict:
    """A network.yml of up to two tiers, as the fast-path tests use: 400 GB/s inside, 200 across."""
    return {
        "topology": [topology] * len(sizes),
        "npus_count": sizes,
        "bandwidth": [400, 200][: len(sizes)],
        "latency": [936.25, 1000][: len(sizes)],
    }


def aware_exact(ts, hw: HardwareConfig, comm_groups=None) -> bool:
    """``aware_fast_path_is_exact`` as ``simulate`` wires it (the set's group table, a fresh network)."""
    network = make_network(hw.backend, hw.network, EventQueue())
    return aware_fast_path_is_exact(ts, hw, analyze(ts, comm_groups).groups, network)


def aware_hardware(
    net: dict,
    algo: str,
    chunks: int,
    splits: int,
    optimization: str = "baseline",
    local_mem_bw: float = 3350,
    **extra,
) -> HardwareConfig:
    """A congestion-aware platform on ``net`` (a network.yml mapping) with ``algo`` for every
    dimension of every collective: the aware fast-path tests vary only these knobs."""
    system = {
        "scheduling-policy": "LIFO",
        "endpoint-delay": 10,
        "active-chunks-per-dimension": chunks,
        "preferred-dataset-splits": splits,
        "collective-optimization": optimization,
        "local-mem-bw": local_mem_bw,
        **{f"{k}-implementation": [algo] * len(net["npus_count"]) for k in KINDS},
    }
    return HardwareConfig(
        SystemConfig.from_dict(system, source="sys"),
        NetworkConfig.from_dict(net, source="net"),
        backend="congestion_aware",
        **extra,
    )


def assert_collectives_all_fast(ts, hw: HardwareConfig, caplog) -> None:
    """The aware fast path takes every collective message of ``ts`` (only pipeline sends go one by
    one), nothing is redone, and every rank equals the message path's."""
    assert aware_exact(ts, hw)
    with caplog.at_level("INFO", logger="chakra_pipe.sim.simulate"):
        fast = simulate(ts, hw, symmetric=False)
    assert RERUN not in caplog.text
    p2p = sum(int((g.types == schema.COMM_SEND_NODE).sum()) for g in ts.ranks)
    assert fast.messages - fast.fast_messages == p2p and fast.fast_messages > 0
    assert_fast_equals_message_path(ts, hw)


def random_ranks(draw, p: int, kinds: list[int], size: int) -> list[list]:
    """Ranks of the random fast-path sweeps: a staggered compute node, then collectives of ``kinds``
    (``size`` bytes; each after the one before, or all after the compute), and on an even set a send
    to and a receive from the partner ``r ^ 1`` after a drawn node: the message path beside the
    batched phases."""
    from test_sim_examples import coll, make_node

    chained = draw(st.booleans())
    stagger = draw(st.lists(st.integers(0, 3), min_size=p, max_size=p))
    p2p = p % 2 == 0 and draw(st.booleans())
    after, p2p_size = draw(st.integers(0, len(kinds))), draw(st.sampled_from([1 << 12, 1 << 18, 1 << 21]))
    ranks = []
    for r in range(p):
        nodes = [make_node(0, schema.COMP_NODE, stagger[r])]
        for c, kind in enumerate(kinds):
            nodes.append(coll(c + 1, kind, size=size, data=[c if chained else 0]))
        if p2p:
            n, peer = len(nodes), r ^ 1
            attrs = {"comm_size": p2p_size, "comm_tag": 5}
            nodes.append(make_node(n, schema.COMM_SEND_NODE, data=[after], comm_src=r, comm_dst=peer, **attrs))
            nodes.append(make_node(n + 1, schema.COMM_RECV_NODE, data=[after], comm_src=peer, comm_dst=r, **attrs))
        ranks.append(nodes)
    return ranks


def _outcome(ts, hw: HardwareConfig, **kw) -> object:
    try:
        return simulate(ts, hw, **kw).to_dict()
    except ChakraPipeError as exc:  # a set both paths stop on alike (a chunk-queue deadlock)
        return type(exc).__name__


def assert_random_case_equals_message_path(ranks: list[list], system: dict, network: dict, **hw_kw) -> None:
    """A random sweep's case on the congestion-aware backend: every rank (or the error) of the fast
    run, whether it stayed on the fast path or was redone, equals ``fast=False``'s."""
    from test_sim_examples import write_set

    with tempfile.TemporaryDirectory() as tmp:
        ts = write_set(Path(tmp), ranks)
        hw = HardwareConfig(
            SystemConfig.from_dict(system, source="sys"),
            NetworkConfig.from_dict(network, source="net"),
            backend="congestion_aware",
            **hw_kw,
        )
        assert _outcome(ts, hw, symmetric=False) == _outcome(ts, hw, fast=False)
