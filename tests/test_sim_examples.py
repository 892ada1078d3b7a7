"""Worked examples of spec §7 and workload-layer behaviour, expected values from the spec's formulas.

Closed forms (spec §6): ``N(m, h) = floor(h*L + m/B')`` with ``B' = BW * 2^30 / 10^9`` bytes/ns,
``Pd(m) = 3 * floor(m / M)``; per-chunk ring times of §6.2; chunks of one collective run back to back
with one active chunk per dimension.
"""

from __future__ import annotations

import dataclasses
import math
from fractions import Fraction
from pathlib import Path

import pytest

from chakra_pipe import cli
from chakra_pipe.errors import ConfigError, InputError, StuckError
from chakra_pipe.et import schema
from chakra_pipe.et.attrs import set_attr
from chakra_pipe.et.framing import write_trace
from chakra_pipe.et.traceset import TraceSet
from chakra_pipe.rankset import analyze
from chakra_pipe.sim import HardwareConfig, NetworkConfig, SystemConfig, load_hardware, simulate
from chakra_pipe.sim.engine import EventQueue
from chakra_pipe.sim.network import make_network
from chakra_pipe.sim.simulate import aware_fast_path_is_exact

E = 10
D = 1 << 20  # the fixtures' comm_size: 1 MiB


# -- spec formulas ----------------------------------------------------------------------------------
def bw_bytes_per_ns(gbps) -> Fraction:
    return Fraction(gbps) * 2**30 / 10**9


def N(m: int, hops: int, latency, gbps) -> int:
    return math.floor(hops * Fraction(latency) + m / bw_bytes_per_ns(gbps))


def Pd(m: int, mem_bw: int) -> int:
    return 3 * (m // mem_bw)


def ring_chunk(kind: str, p: int, c: int, latency=500, gbps=50, mem_bw=1600, hops=1, e=E) -> int:
    """Spec §6.2, one chunk of size c on a 1-D ring of p NPUs."""
    if kind == "AR":
        m = c // p
        return e + 2 * (p - 1) * (N(m, hops, latency, gbps) + e) + (p - 1) * Pd(m, mem_bw)
    if kind == "RS":
        m = c // p
        return e + (p - 1) * (N(m, hops, latency, gbps) + e + Pd(m, mem_bw))
    if kind == "AG":
        return e + (p - 1) * (N(c, hops, latency, gbps) + e)
    m = c // p
    return e + p * (p - 1) // 2 * (N(m, hops, latency, gbps) + e)


# -- trace helpers ----------------------------------------------------------------------------------
def make_node(nid: int, ntype: int, dur: int = 0, data=(), ctrl=(), name: str = "", **attrs) -> object:
    n = schema.Node(id=nid, name=name or f"n{nid}", type=ntype, duration_micros=dur)
    n.data_deps.extend(data)
    n.ctrl_deps.extend(ctrl)
    for k, v in attrs.items():
        set_attr(n, k, v)
    return n


def write_set(tmp: Path, ranks: list[list]) -> TraceSet:
    prefix = tmp / "w"
    for r, nodes in enumerate(ranks):
        write_trace(f"{prefix}.{r}.et", schema.GlobalMetadata(version="0.0.4"), nodes)
    return TraceSet.load(prefix)


def coll(nid: int, ctype: int, size: int = D, **kw) -> object:
    return make_node(nid, schema.COMM_COLL_NODE, comm_type=ctype, comm_size=size, **kw)


def ring_system(**sys_overrides) -> SystemConfig:
    """The Ring_4chunks system file of the fixtures, with overrides."""
    sysd = {
        "scheduling-policy": "LIFO",
        "endpoint-delay": 10,
        "active-chunks-per-dimension": 1,
        "preferred-dataset-splits": 4,
        "collective-optimization": "localBWAware",
        "local-mem-bw": 1600,
        **{
            k: ["ring"]
            for k in (
                "all-reduce-implementation",
                "reduce-scatter-implementation",
                "all-gather-implementation",
                "all-to-all-implementation",
            )
        },
    }
    sysd.update(sys_overrides)
    return SystemConfig.from_dict(sysd, source="sys")


def ring_hw(p: int, backend="congestion_unaware", **sys_overrides) -> HardwareConfig:
    net = {"topology": ["Ring"], "npus_count": [p], "bandwidth": [50], "latency": [500]}
    return HardwareConfig(ring_system(**sys_overrides), NetworkConfig.from_dict(net, source="net"), backend=backend)


@pytest.fixture(scope="module")
def astra(fixtures_dir: Path) -> Path:
    return fixtures_dir / "astra-sim"


def fixture_set(astra: Path, coll_name: str, p: int) -> TraceSet:
    d = astra / "workload" / "microbenchmarks" / coll_name / f"{p}npus_1MB"
    return TraceSet.load(d / coll_name)


# -- §7.1 / §7.3: fixture workloads with their own config files, unchanged --------------------------
TABLE_7_3 = {
    ("AR", 4): 43_000,
    ("AR", 8): 64_440,
    ("AR", 16): 99_640,
    ("RS", 4): 22_240,
    ("RS", 8): 33_080,
    ("RS", 16): 50_740,
    ("AG", 4): 64_744,
    ("AG", 8): 151_016,
    ("AG", 16): 323_560,
    ("A2A", 4): 41_560,
    ("A2A", 8): 125_480,
    ("A2A", 16): 391_240,
}
FIXTURE_NAMES = {"AR": "all_reduce", "AG": "all_gather", "A2A": "all_to_all"}


@pytest.mark.parametrize("backend", ["congestion_unaware", "congestion_aware"])
@pytest.mark.parametrize("kind,p", sorted(TABLE_7_3))
def test_table_7_3_with_fixture_configs(astra: Path, tmp_path: Path, kind: str, p: int, backend: str) -> None:
    hw = load_hardware(
        astra / "system/native_collectives/Ring_4chunks.json",
        astra / f"network/analytical/Ring_{p}npus.yml",
        astra / "remote_memory/analytical/no_memory_expansion.json",
        backend=backend,
    )
    if kind == "RS":  # no RS fixture: one node per rank, as the microbenchmarks are written
        ts = write_set(tmp_path, [[coll(r, schema.REDUCE_SCATTER)] for r in range(p)])
    else:
        ts = fixture_set(astra, FIXTURE_NAMES[kind], p)
    expected = 4 * ring_chunk(kind, p, D // 4)
    assert expected == TABLE_7_3[kind, p]  # the spec's table follows from its formulas
    res = simulate(ts, hw)
    assert res.finish_ns == [expected] * p
    assert res.exposed_comm_ns == [expected] * p


def test_local_mem_bw_50_aware_is_upstream_regression(astra: Path) -> None:
    hw = ring_hw(8, "congestion_aware", **{"local-mem-bw": 50})
    expected = 4 * ring_chunk("AR", 8, D // 4, mem_bw=50)
    assert expected == 117_780
    assert simulate(fixture_set(astra, "all_reduce", 8), hw).finish_ns == [expected] * 8


# -- §7.5 HGX-H100 (Switch) ------------------------------------------------------------------------
HGX_L, HGX_BW, HGX_M = Fraction("936.25"), 400, 3350


def hgx_hw(astra: Path, backend: str, splits: int = 4, active: int = 2) -> HardwareConfig:
    base = load_hardware(
        astra / "system/native_collectives/HGX-H100-validated.json",
        astra / "network/analytical/HGX-H100-validated.yml",
        backend=backend,
    )
    import json

    d = json.loads((astra / "system/native_collectives/HGX-H100-validated.json").read_text())
    d.update({"preferred-dataset-splits": splits, "active-chunks-per-dimension": active})
    return HardwareConfig(SystemConfig.from_dict(d, source="hgx"), base.network, backend=backend)


def test_hgx_unaware(astra: Path) -> None:
    m = D // 4 // 8
    n = N(m, 2, HGX_L, HGX_BW)  # latency twice, serialisation once
    expected = 2 * (E + 14 * (n + E) + 7 * Pd(m, HGX_M))
    assert expected == 55_222
    result = simulate(fixture_set(astra, "all_reduce", 8), hgx_hw(astra, "congestion_unaware"))
    assert result.finish_ns == [expected] * 8


@pytest.mark.parametrize("splits,active,published", [(4, 2, 57_426), (1, 1, 35_717), (4, 1, 114_700), (4, 4, 28_903)])
def test_hgx_aware_chunking(astra: Path, splits: int, active: int, published: int) -> None:
    c = D // splits
    m = c // 8
    step = 2 * N(m, 1, HGX_L, HGX_BW)  # store-and-forward through the switch: both hops pay serialisation
    t_chunk = E + 14 * (step + E) + 7 * Pd(m, HGX_M)
    serialisation = math.floor(m / bw_bytes_per_ns(HGX_BW))
    # concurrent chunks share each NPU's uplink: each is offset by one serialisation time (§7.5)
    expected = math.ceil(splits / active) * t_chunk + (min(active, splits) - 1) * serialisation
    assert expected == published
    res = simulate(fixture_set(astra, "all_reduce", 8), hgx_hw(astra, "congestion_aware", splits, active))
    assert res.finish_ns == [expected] * 8


# -- §7.4 other algorithms ---------------------------------------------------------------------------
def test_direct_all_reduce(astra: Path) -> None:
    hw = ring_hw(8, **{"all-reduce-implementation": ["direct"]})
    m = D // 4 // 8
    n_max = max(N(m, min(j, 8 - j), 500, 50) for j in range(1, 8))
    expected = 4 * (3 * E + 2 * n_max + Pd(m, 1600))
    assert expected == 21_240
    assert simulate(fixture_set(astra, "all_reduce", 8), hw).finish_ns == [expected] * 8


def test_halving_doubling_all_reduce(astra: Path) -> None:
    hw = ring_hw(8, **{"all-reduce-implementation": ["halvingDoubling"]})
    p, k, c = 8, 3, D // 4
    sizes = [c // 2**j for j in range(1, k + 1)] + [2 ** (i - 1) * c // p for i in range(1, k + 1)]
    hops = [min(2 ** (j - 1), p - 2 ** (j - 1)) for j in range(1, k + 1)]
    hops += [hops[k - i] for i in range(1, k + 1)]
    t_chunk = (
        E + sum(N(m, h, 500, 50) + E for m, h in zip(sizes, hops)) + sum(Pd(c // 2**j, 1600) for j in range(2, k + 1))
    )
    assert 4 * t_chunk == 63_168
    assert simulate(fixture_set(astra, "all_reduce", 8), hw).finish_ns == [4 * t_chunk] * 8


# -- workload layer ---------------------------------------------------------------------------------
def test_one_gpu_slot_serialises_compute(tmp_path: Path) -> None:
    nodes = [make_node(0, schema.COMP_NODE, 5), make_node(1, schema.COMP_NODE, 5)]
    res = simulate(write_set(tmp_path, [nodes] * 4), ring_hw(4))
    assert res.finish_ns == [10_000] * 4
    assert res.compute_ns == [10_000] * 4


def test_cpu_and_gpu_slots_overlap(tmp_path: Path) -> None:
    nodes = [make_node(0, schema.COMP_NODE, 5, is_cpu_op=True), make_node(1, schema.COMP_NODE, 7)]
    res = simulate(write_set(tmp_path, [nodes] * 4), ring_hw(4))
    assert res.finish_ns == [7_000] * 4
    assert res.exposed_comm_ns == [0] * 4  # CPU time is not subtracted (ASTRA-sim issue #302)


@pytest.mark.parametrize("dependent", [False, True])
def test_compute_beside_or_before_all_reduce(tmp_path: Path, dependent: bool) -> None:
    ar = 4 * ring_chunk("AR", 8, D // 4)
    nodes = [make_node(0, schema.COMP_NODE, 50), coll(1, schema.ALL_REDUCE, data=[0] if dependent else [])]
    res = simulate(write_set(tmp_path, [nodes] * 8), ring_hw(8))
    t = 50_000 + ar if dependent else max(50_000, ar)
    assert res.finish_ns == [t] * 8
    assert res.exposed_comm_ns == [t - 50_000] * 8
    assert (t, t - 50_000) == ((114_440, 64_440) if dependent else (64_440, 14_440))


def test_zero_durations_and_broadcast_take_one_ns(tmp_path: Path) -> None:
    nodes = [make_node(0, schema.COMP_NODE, 0), coll(1, schema.BROADCAST, data=[0])]
    res = simulate(write_set(tmp_path, [nodes] * 4), ring_hw(4))
    assert res.finish_ns == [2] * 4
    assert [c.kind for c in res.collectives if c.rank == 0] == ["BROADCAST"]


def test_send_recv_completes_at_arrival(tmp_path: Path) -> None:
    size = 1 << 20
    r0 = [make_node(0, schema.COMM_SEND_NODE, comm_src=0, comm_dst=1, comm_size=size, comm_tag=7)]
    r1 = [
        make_node(0, schema.COMP_NODE, 100),
        make_node(1, schema.COMM_RECV_NODE, data=[0], comm_src=0, comm_dst=1, comm_size=size, comm_tag=7),
    ]
    idle = [make_node(0, schema.COMP_NODE, 1)]
    res = simulate(write_set(tmp_path, [r0, r1, idle, idle]), ring_hw(4))
    arrival = N(size, 1, 500, 50)
    assert res.finish_ns[0] == arrival  # the send does not wait for the receive
    assert res.finish_ns[1] == max(arrival, 100_000)  # the receive completes when posted, data already there


def test_metadata_skip_does_not_hang(tmp_path: Path) -> None:
    meta = make_node(0, schema.METADATA_NODE)
    meta.inputs.values = "['[]']"  # an empty process-group table: ASTRA-sim refuses a METADATA node without one
    nodes = [meta, make_node(1, schema.COMP_NODE, 3, data=[0])]
    res = simulate(write_set(tmp_path, [nodes] * 4), ring_hw(4))
    assert res.finish_ns == [3_000] * 4  # ASTRA-sim would never print "finished" here (quirk 1, fixed)


def test_roofline_time(tmp_path: Path) -> None:
    nodes = [make_node(0, schema.COMP_NODE, num_ops=10**9, tensor_size=10**6)]
    hw = ring_hw(4, **{"roofline-enabled": 1, "peak-perf": 100, "local-mem-bw": 900})
    perf = min(Fraction(900 * 10**9) * Fraction(10**9, 10**6), 100 * 10**12)
    expected = math.floor(Fraction(10**9) / perf * 10**9)
    assert simulate(write_set(tmp_path, [nodes] * 4), hw).finish_ns == [expected] * 4


def test_results_are_deterministic_and_timeline_covers_every_node(astra: Path) -> None:
    ts = fixture_set(astra, "all_reduce", 8)
    a, b = simulate(ts, ring_hw(8)), simulate(ts, ring_hw(8))
    assert a.to_dict() == b.to_dict()
    events = [e for e in a.timeline()["traceEvents"] if e["ph"] == "X"]
    assert len(events) == 8 and {e["pid"] for e in events} == set(range(8))
    assert a.comm_time_by_type_ns() == {"ALL_REDUCE": 8 * 64_440}


# -- errors and stuck traces -------------------------------------------------------------------------
def test_unsupported_collective_is_a_clean_error(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="BARRIER"):
        simulate(write_set(tmp_path, [[coll(0, schema.BARRIER)]] * 4), ring_hw(4))


def test_send_without_peer_is_a_clean_error(tmp_path: Path) -> None:
    nodes = [make_node(0, schema.COMM_SEND_NODE, comm_size=8, comm_tag=1)]
    with pytest.raises(InputError, match="comm_dst"):
        simulate(write_set(tmp_path, [nodes] * 4), ring_hw(4))


def test_memory_node_needs_memory_model(tmp_path: Path) -> None:
    nodes = [make_node(0, schema.MEM_LOAD_NODE, tensor_size=64)]
    with pytest.raises(InputError, match="NO_MEMORY_EXPANSION"):
        simulate(write_set(tmp_path, [nodes] * 4), ring_hw(4))


def test_dangling_dependency_is_rejected(tmp_path: Path) -> None:
    nodes = [make_node(0, schema.COMP_NODE, 1, data=[42])]
    with pytest.raises(InputError, match="42"):
        simulate(write_set(tmp_path, [nodes] * 4), ring_hw(4))


def test_rank_count_must_match_network(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="npus_count"):
        simulate(write_set(tmp_path, [[make_node(0, schema.COMP_NODE, 1)]] * 3), ring_hw(4))


def test_collective_missing_on_one_rank_is_stuck(tmp_path: Path) -> None:
    ranks = [[coll(5, schema.ALL_REDUCE)]] * 3 + [[make_node(0, schema.COMP_NODE, 1)]]
    with pytest.raises(StuckError) as exc:
        simulate(write_set(tmp_path, ranks), ring_hw(4))
    assert exc.value.exit_code == 3
    assert set(exc.value.stuck) == {0, 1, 2} and exc.value.stuck[0] == [5]


def test_receive_deadlock_is_stuck(tmp_path: Path) -> None:
    def rank(me: int, peer: int) -> list:
        return [
            make_node(0, schema.COMM_RECV_NODE, comm_src=peer, comm_dst=me, comm_size=64, comm_tag=0),
            make_node(1, schema.COMM_SEND_NODE, data=[0], comm_src=me, comm_dst=peer, comm_size=64, comm_tag=0),
        ]

    ranks = [rank(0, 1), rank(1, 0), [make_node(0, schema.COMP_NODE, 1)], [make_node(0, schema.COMP_NODE, 1)]]
    with pytest.raises(StuckError) as exc:
        simulate(write_set(tmp_path, ranks), ring_hw(4))
    assert exc.value.stuck == {0: [0], 1: [0]}


# -- CLI ---------------------------------------------------------------------------------------------
def test_cli_prints_astra_sim_lines(astra: Path, capsys) -> None:
    rc = cli.main(
        [
            "simulate",
            f"--workload-configuration={astra}/workload/microbenchmarks/all_reduce/4npus_1MB/all_reduce",
            f"--system-configuration={astra}/system/native_collectives/Ring_4chunks.json",
            f"--network-configuration={astra}/network/analytical/Ring_4npus.yml",
            "--comm-group-configuration=empty",
        ]
    )
    assert rc == 0
    t = 4 * ring_chunk("AR", 4, D // 4)
    assert capsys.readouterr().out.splitlines() == [
        f"sys[{r}] finished, {t} cycles, exposed communication {t} cycles." for r in range(4)
    ]


def test_cli_exit_codes(astra: Path, tmp_path: Path, capsys) -> None:
    bad = tmp_path / "sys.json"
    bad.write_text('{"scheduling-policy": "LIFO", "collective-optimization": "baseline", "local-mem-bw": 50}')
    args = [
        f"--workload-configuration={astra}/workload/microbenchmarks/all_reduce/4npus_1MB/all_reduce",
        f"--system-configuration={bad}",
        f"--network-configuration={astra}/network/analytical/Ring_4npus.yml",
    ]
    assert cli.main(["simulate", *args]) == 2
    err = capsys.readouterr().err
    assert str(bad) in err and "preferred-dataset-splits" in err
    write_set(tmp_path, [[coll(0, schema.ALL_REDUCE)]] * 3 + [[make_node(0, schema.COMP_NODE, 1)]])
    args[0] = f"--workload-configuration={tmp_path / 'w'}"
    args[1] = f"--system-configuration={astra}/system/native_collectives/Ring_4chunks.json"
    assert cli.main(["simulate", *args]) == 3
    assert "cannot finish" in capsys.readouterr().err


# -- fast path ---------------------------------------------------------------------------------------
def _straggler_set(tmp: Path, p: int, kind: int) -> TraceSet:
    ranks = []
    for r in range(p):
        ranks.append(
            [
                make_node(0, schema.COMP_NODE, (r * 7) % 5),
                coll(1, kind, size=3 << 18, data=[0]),
                make_node(2, schema.COMP_NODE, 2, data=[1]),
                coll(3, schema.ALL_REDUCE, size=1 << 16, data=[2]),
            ]
        )
    return write_set(tmp, ranks)


@pytest.mark.parametrize("algo", ["ring", "halvingDoubling"])
@pytest.mark.parametrize("kind", [schema.ALL_REDUCE, schema.REDUCE_SCATTER, schema.ALL_GATHER, schema.ALL_TO_ALL])
@pytest.mark.parametrize("sysd", [{}, {"active-chunks-per-dimension": 2}, {"collective-optimization": "baseline"}])
def test_fast_path_equals_event_path(tmp_path: Path, kind: int, sysd: dict, algo: str) -> None:
    """Skewed starts, several chunks, a 2-D network: the recurrences must match the events exactly."""
    ts = _straggler_set(tmp_path, 8, kind)
    two_dims = {
        k: [algo, algo]
        for k in ("all-reduce-implementation", "reduce-scatter-implementation", "all-gather-implementation")
    }
    two_dims["all-to-all-implementation"] = ["ring", "ring"]  # halving-doubling has no all-to-all
    system = ring_system(**sysd, **two_dims)
    net = NetworkConfig.from_dict(
        {"topology": ["Ring", "Switch"], "npus_count": [4, 2], "bandwidth": [100, 25], "latency": [300, 2000]},
        source="net",
    )
    hw = HardwareConfig(system, net)
    fast, slow = simulate(ts, hw), simulate(ts, hw, fast=False)
    assert fast.finish_ns == slow.finish_ns
    assert fast.to_dict() == slow.to_dict()


@pytest.mark.parametrize("topology", ["Ring", "Switch", "FullyConnected"])
@pytest.mark.parametrize("kind", [schema.ALL_REDUCE, schema.ALL_GATHER, schema.ALL_TO_ALL])
def test_fast_aware_path_equals_event_path(tmp_path: Path, topology: str, kind: int) -> None:
    """FIFO links carried over from collective to collective, skewed starts, 4 chunks in turn."""
    ts = _straggler_set(tmp_path, 8, kind)
    net = NetworkConfig.from_dict(
        {"topology": [topology], "npus_count": [8], "bandwidth": [100], "latency": [700]}, source="net"
    )
    hw = HardwareConfig(ring_hw(8).system, net, backend="congestion_aware")
    fast, slow = simulate(ts, hw), simulate(ts, hw, fast=False)
    assert fast.to_dict() == slow.to_dict()


def test_aware_fast_path_only_where_exact(tmp_path: Path) -> None:
    ts = _straggler_set(tmp_path, 8, schema.ALL_REDUCE)
    hw = ring_hw(8, "congestion_aware")
    net = make_network(hw.backend, hw.network, EventQueue())
    assert aware_fast_path_is_exact(ts, hw, analyze(ts).groups, net)
    chunks2 = ring_hw(8, "congestion_aware", **{"active-chunks-per-dimension": 2})
    assert aware_fast_path_is_exact(ts, chunks2, analyze(ts).groups, net)  # held and evaluated together
    # half the chunks the other way round: on this ring i -> i+1 and i -> i-1 are different links, so
    # each direction's chunks are batched on their own; through a switch both share every uplink
    two_queues = dataclasses.replace(chunks2, num_queues_per_dim=2)
    assert aware_fast_path_is_exact(ts, two_queues, analyze(ts).groups, net)
    switch = NetworkConfig.from_dict({"topology": ["Switch"], "npus_count": [8], "bandwidth": [50], "latency": [500]})
    two_queues_switch = dataclasses.replace(two_queues, network=switch)
    switch_net = make_network(hw.backend, switch, EventQueue())
    assert not aware_fast_path_is_exact(ts, two_queues_switch, analyze(ts).groups, switch_net)
    direct = ring_hw(8, "congestion_aware", **{"all-reduce-implementation": ["direct"]})
    assert not aware_fast_path_is_exact(ts, direct, analyze(ts).groups, net)
    # A group no collective names changes nothing; one that is named must not share a link with the world ring.
    assert aware_fast_path_is_exact(ts, hw, analyze(ts, {1: [0, 1, 2, 3]}).groups, net)
    named = _group_then_world_set(tmp_path / "g")
    # On this ring 3 -> 0 goes the short way back (3-2-1-0): links of the other direction, one sender each.
    assert aware_fast_path_is_exact(named, hw, analyze(named, {1: [0, 1, 2, 3], 2: [4, 5, 6, 7]}).groups, net)
    # 0 -> 2 passes 1 -> 2, the world ring's link from NPU 1.
    assert not aware_fast_path_is_exact(named, hw, analyze(named, {1: [0, 2, 1, 3], 2: [4, 5, 6, 7]}).groups, net)


def _group_then_world_set(tmp: Path) -> TraceSet:
    """Ranks 0-3 all-gather in group 1, ranks 4-7 in group 2, then all eight in the world group."""
    tmp.mkdir()
    ranks = [
        [coll(0, schema.ALL_GATHER, pg_name="1" if r < 4 else "2"), coll(1, schema.ALL_GATHER, data=[0])]
        for r in range(8)
    ]
    return write_set(tmp, ranks)


@pytest.mark.parametrize("topology", ["Ring", "Switch", "FullyConnected"])
def test_aware_sub_groups_fast_equals_event(tmp_path: Path, topology: str, caplog) -> None:
    """Sub-group rings then the world ring: on FullyConnected (a link per ordered pair) and Ring (3 -> 0
    goes back over links no other NPU sends on, paths of 1 and 3 hops) no link has two senders; through
    a switch NPU 0's downlink has two (3, then 7), whose messages never overlap in time here, so the
    fast path runs without a conflict on all three; all exact."""
    ts, groups = _group_then_world_set(tmp_path / "g"), {1: [0, 1, 2, 3], 2: [4, 5, 6, 7]}
    net = NetworkConfig.from_dict(
        {"topology": [topology], "npus_count": [8], "bandwidth": [100], "latency": [700]}, source="net"
    )
    hw = HardwareConfig(ring_hw(8).system, net, backend="congestion_aware")
    assert aware_fast_path_is_exact(ts, hw, analyze(ts, groups).groups, make_network(hw.backend, net, EventQueue()))
    with caplog.at_level("INFO", logger="chakra_pipe.sim.simulate"):
        fast = simulate(ts, hw, comm_groups=groups)
    assert "rerun message by message" not in caplog.text
    slow = simulate(ts, hw, comm_groups=groups, fast=False)
    assert fast.to_dict() == slow.to_dict()
    assert fast.finish_ns == slow.finish_ns and min(fast.finish_ns) > 0


@pytest.mark.parametrize("p", [8, 64])  # the world ring's check in Python lists, then in numpy arrays
def test_aware_fast_path_conflict_reruns_message_by_message(tmp_path: Path, caplog, p: int) -> None:
    """The upper half starts the world all-gather at once while the lower half still runs a group
    all-gather: through a switch NPU p-1's first world message reaches NPU 0's downlink while the group's
    messages are on it. Their FIFO order is event order, which the recurrence does not see: the run
    is redone message by message (logged) and equals ``fast=False``."""
    ranks = [
        [coll(0, schema.ALL_GATHER, pg_name="1"), coll(1, schema.ALL_GATHER, data=[0])]
        if r < p // 2
        else [coll(1, schema.ALL_GATHER)]
        for r in range(p)
    ]
    ts, groups = write_set(tmp_path, ranks), {1: list(range(p // 2))}
    net = NetworkConfig.from_dict(
        {"topology": ["Switch"], "npus_count": [p], "bandwidth": [100], "latency": [700]}, source="net"
    )
    hw = HardwareConfig(ring_hw(p).system, net, backend="congestion_aware")
    assert aware_fast_path_is_exact(ts, hw, analyze(ts, groups).groups, make_network(hw.backend, net, EventQueue()))
    with caplog.at_level("INFO", logger="chakra_pipe.sim.simulate"):
        fast = simulate(ts, hw, comm_groups=groups)
    assert "rerun message by message" in caplog.text
    slow = simulate(ts, hw, comm_groups=groups, fast=False)
    assert fast.to_dict() == slow.to_dict() and min(fast.finish_ns) > 0


def test_rendezvous_protocol_adds_a_handshake(tmp_path: Path) -> None:
    size = 1 << 20
    r0 = [make_node(0, schema.COMM_SEND_NODE, comm_src=0, comm_dst=1, comm_size=size, comm_tag=7)]
    r1 = [
        make_node(0, schema.COMP_NODE, 100),
        make_node(1, schema.COMM_RECV_NODE, data=[0], comm_src=0, comm_dst=1, comm_size=size, comm_tag=7),
    ]
    idle = [make_node(0, schema.COMP_NODE, 1)]
    base = ring_hw(4)
    hw = HardwareConfig(base.system, base.network, rendezvous=True)
    res = simulate(write_set(tmp_path, [r0, r1, idle, idle]), hw)
    # the receiver's 8,192-byte handshake leaves when it posts the receive; the data follows it
    done = 100_000 + N(8192, 1, 500, 50) + N(size, 1, 500, 50)
    assert res.finish_ns[:2] == [done, done]


def test_dependency_cycle_is_stuck_not_success(tmp_path: Path) -> None:
    nodes = [
        make_node(1, schema.COMP_NODE, 5),
        make_node(3, schema.COMP_NODE, 3, data=[1, 5]),
        make_node(4, schema.COMP_NODE, 1, data=[3]),
        make_node(5, schema.COMP_NODE, 1, data=[4]),
    ]
    with pytest.raises(StuckError) as exc:
        simulate(write_set(tmp_path, [nodes] * 4), ring_hw(4))
    assert exc.value.stuck[0] == [3, 4, 5]


@pytest.mark.parametrize(
    "ctype,size,match",
    [
        (schema.ALL_REDUCE, -5, "comm-node: .*comm_size -5 is negative"),
        (schema.ALL_GATHER, 0, "ALL_GATHER comm_size 0 B is smaller than preferred-dataset-splits"),
        (schema.ALL_REDUCE, "big", "comm-node: .*comm_size is string_val, not an integer"),
    ],
)
def test_bad_comm_size_is_invalid_input(tmp_path: Path, ctype: int, size, match: str) -> None:
    n = make_node(0, schema.COMM_COLL_NODE, comm_type=ctype)
    set_attr(n, "comm_size", size, "string_val" if isinstance(size, str) else None)
    with pytest.raises(InputError, match=match):
        simulate(write_set(tmp_path, [[n]] * 4), ring_hw(4))


@pytest.mark.parametrize(
    "kind,ctype", [("AR", schema.ALL_REDUCE), ("RS", schema.REDUCE_SCATTER), ("A2A", schema.ALL_TO_ALL)]
)
def test_zero_size_collective_runs_minimum_chunks(tmp_path: Path, kind: str, ctype: int) -> None:
    """Spec §3.2: a chunk below the NPU count becomes one of `total_nodes` bytes and the size is rewritten
    to splits × total_nodes — so a 0-byte collective (ASTRA-sim 1.0 text workloads' NONE) still costs
    4 minimum chunks, not zero time."""
    p, splits = 8, 4
    res = simulate(write_set(tmp_path, [[coll(0, ctype, size=0)]] * p), ring_hw(p))
    assert res.finish_ns == [splits * ring_chunk(kind, p, p)] * p


# -- groups and memory ---------------------------------------------------------------------------------
def _fc_hw(p: int, e: int = 25, **sysd) -> HardwareConfig:
    net = NetworkConfig.from_dict(
        {"topology": ["FullyConnected"], "npus_count": [p], "bandwidth": [50], "latency": [500]}, source="net"
    )
    return HardwareConfig(ring_system(**{"endpoint-delay": e, **sysd}), net)


def test_metadata_process_group_runs_a_local_ring(tmp_path: Path) -> None:
    """A METADATA node's PyTorch process groups (§2.5): sub-group ring in listed order, bus hop 10 ns."""
    members = [1, 3, 5, 7]
    meta = make_node(0, schema.METADATA_NODE)
    meta.inputs.values = "['" + '[{"pg_name": "4", "ranks": [1, 3, 5, 7]}]' + "']"  # ['<json>'] (chakra-format §1.4)
    ranks = []
    for r in range(8):
        nodes = [meta] if r not in members else [meta, coll(1, schema.ALL_REDUCE, data=[0], pg_name="4")]
        ranks.append(nodes)
    res = simulate(write_set(tmp_path, ranks), _fc_hw(8))
    expected = 4 * ring_chunk("AR", 4, D // 4, e=10)  # E = 25 in the system file does not apply
    assert [res.finish_ns[r] for r in members] == [expected] * 4
    assert [res.finish_ns[r] for r in (0, 2, 4, 6)] == [0] * 4
    assert {c.group for c in res.collectives} == {"4"}


def test_comm_group_file_and_world_collective(tmp_path: Path) -> None:
    ranks = [
        [coll(0, schema.ALL_GATHER, pg_name="1" if r < 4 else "2"), coll(1, schema.ALL_GATHER, data=[0])]
        for r in range(8)
    ]
    res = simulate(write_set(tmp_path, ranks), _fc_hw(8), comm_groups={1: [0, 1, 2, 3], 2: [4, 5, 6, 7]})
    group = 4 * ring_chunk("AG", 4, D // 4, e=10)
    world = 4 * ring_chunk("AG", 8, D // 4, e=25)
    assert res.finish_ns == [group + world] * 8


def test_unknown_pg_name_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="pg_name '9'"):
        simulate(write_set(tmp_path, [[coll(0, schema.ALL_REDUCE, pg_name="9")]] * 4), ring_hw(4))


@pytest.mark.parametrize(
    "memory,expected",
    [
        ({"memory-type": "PER_NPU_MEMORY_EXPANSION", "remote-mem-latency": 100, "remote-mem-bw": 8}, [100 + 1000] * 2),
        ({"memory-type": "MEMORY_POOL", "remote-mem-latency": 100, "remote-mem-bw": 8}, [1100, 2200]),
    ],
)
def test_remote_memory_models(tmp_path: Path, memory: dict, expected: list[int]) -> None:
    from chakra_pipe.sim import MemoryConfig

    nodes = [make_node(0, schema.MEM_LOAD_NODE, tensor_size=8000, tensor_loc=1)]
    base = ring_hw(2)
    hw = HardwareConfig(base.system, base.network, MemoryConfig.from_dict(memory, source="mem"))
    assert simulate(write_set(tmp_path, [nodes, nodes]), hw).finish_ns == expected


def test_fifo_and_lifo_give_the_same_single_collective_time(tmp_path: Path, astra: Path) -> None:
    ts = fixture_set(astra, "all_reduce", 4)
    assert simulate(ts, ring_hw(4, **{"scheduling-policy": "FIFO"})).finish_ns == [43_000] * 4
