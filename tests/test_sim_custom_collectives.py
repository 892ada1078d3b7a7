"""Chakra-defined custom collectives (spec §3.5, §3.2 item 6, §5.1, quirks 15-16).

Our own custom traces (ring all-reduces of 4 and 8 ranks, a fan-out) are written with
``et.framing.write_trace`` (through ``ranksets.RankSetSpec``), and every expected time is the spec's
§4.1 / §4.2 formula per message, messages issued as soon as their dependencies end: no chunking, no
memory-bus ``E``, no slots, COMP nodes ``duration_micros × 1000`` ns (at least 1), the workload
node's ``comm_size`` ignored. The system files use ``preferred-dataset-splits`` 1: upstream's
``Sys::generate_collective`` sizes the custom collective's data set by the native chunking and then
creates one stream, so any other value never completes (refused here, tested below).
"""

from __future__ import annotations

import json
import math
from dataclasses import replace
from pathlib import Path

import pytest
from ranksets import NodeSpec, RankSetSpec
from sim_paths import assert_fast_equals_message_path

from chakra_pipe import cli
from chakra_pipe.errors import EXIT_INPUT, EXIT_STUCK, ConfigError, InputError, StuckError
from chakra_pipe.et import schema
from chakra_pipe.et.traceset import TraceSet
from chakra_pipe.sim import HardwareConfig, NetworkConfig, SystemConfig, simulate

S = schema
LAT, BW = 500, 50  # ns, GB/s
PER_NS = BW * (1 << 30) / 1e9  # B' in bytes per ns (§4.1)
M = 1 << 20
COMP_US = 2


def unaware(hops: int, size: int) -> int:
    """§4.1: one message's delay, one truncation of the sum."""
    return math.floor(hops * LAT + size / PER_NS)


def ring_all_reduce(n: int, position: int, size: int = M, comp_us: int = COMP_US) -> list[NodeSpec]:
    """Position ``position``'s part of a ring all-reduce over ``n`` positions: 2(n−1) steps, each a
    send to the successor and a receive from the predecessor; the first n−1 receives are followed by
    a ``comp_us`` reduction, and the last receive by a 0 µs COMP (1 ns). Send s+1 waits for step s."""
    nodes: list[NodeSpec] = []
    nxt, prv = (position + 1) % n, (position - 1) % n
    before: tuple[int, ...] = ()
    for s in range(2 * (n - 1)):
        send, recv = 10 * s + 1, 10 * s + 2
        nodes.append(NodeSpec(send, S.COMM_SEND_NODE, data_deps=before, comm_size=size, peer=nxt, tag=s))
        nodes.append(NodeSpec(recv, S.COMM_RECV_NODE, comm_size=size, peer=prv, tag=s))
        before = (recv,)
        if s < n - 1:
            nodes.append(NodeSpec(10 * s + 3, S.COMP_NODE, data_deps=before, duration=comp_us))
            before = (10 * s + 3,)
    nodes.append(NodeSpec(999, S.COMP_NODE, data_deps=before, duration=0))
    return nodes


def ring_time(n: int, hops: int, size: int = M) -> int:
    """The ring above: every step's message after the previous step, n−1 reductions, the final 1 ns."""
    return 2 * (n - 1) * unaware(hops, size) + (n - 1) * COMP_US * 1000 + 1


def write_custom(directory: Path, name: str, positions: list[list[NodeSpec]]) -> str:
    """``directory/name.<position>.et``; the prefix as the system file names it."""
    return str(RankSetSpec(tuple(tuple(p) for p in positions)).write(directory, name))


def collective(node_id: int, ctype: int = S.ALL_REDUCE, size: int = 123, pg: str | None = None, deps=()) -> NodeSpec:
    return NodeSpec(node_id, S.COMM_COLL_NODE, data_deps=tuple(deps), comm_type=ctype, comm_size=size, pg_name=pg)


def hardware(npus: int, topology: str = "Ring", backend: str = "congestion_unaware", **system) -> HardwareConfig:
    sysd = {
        "scheduling-policy": "FIFO",
        "collective-optimization": "baseline",
        "preferred-dataset-splits": 1,
        "local-mem-bw": 50,
        "all-reduce-implementation": ["ring"],
        "all-gather-implementation": ["ring"],
        **system,
    }
    net = {"topology": [topology], "npus_count": [npus], "bandwidth": [BW], "latency": [LAT]}
    return HardwareConfig(
        SystemConfig.from_dict(sysd, source="sys.json"), NetworkConfig.from_dict(net, source="net.yml"), backend=backend
    )


def workload(tmp_path: Path, ranks: list[list[NodeSpec]], groups=None) -> TraceSet:
    return TraceSet.load(RankSetSpec(tuple(tuple(r) for r in ranks), groups).write(tmp_path, "w"))


@pytest.mark.parametrize("n", [4, 8])
def test_a_ring_all_reduce_takes_its_messages_and_reductions_and_ignores_the_node_size(tmp_path, n):
    prefix = write_custom(tmp_path, "ring", [ring_all_reduce(n, p) for p in range(n)])
    hw = hardware(n, **{"all-reduce-implementation-custom": [prefix]})
    for size in (123, 1 << 30):  # quirk 15: the workload node's comm_size plays no part
        res = simulate(workload(tmp_path, [[collective(0, size=size)]] * n), hw)
        assert res.finish_ns == [ring_time(n, 1)] * n
        assert [(c.kind, c.bytes, c.start_ns, c.end_ns) for c in res.collectives] == [
            ("ALL_REDUCE", size, 0, ring_time(n, 1))
        ] * n
        assert res.messages == n * 2 * (n - 1)


def test_positions_map_to_ranks_through_the_group(tmp_path):
    """Ranks 1, 3, 5, 7 of an 8-NPU ring run a 4-position ring: rank 3 is position 1 and loads
    ``prefix.1.et``; its successor, position 2, is rank 5, two hops away (§4.1 on the real ranks)."""
    prefix = write_custom(tmp_path, "ring", [ring_all_reduce(4, p) for p in range(4)])
    hw = hardware(8, **{"all-reduce-implementation-custom": [prefix]})
    ranks = [[collective(0, pg="1")] if r % 2 else [NodeSpec(0, S.COMP_NODE, duration=1)] for r in range(8)]
    res = simulate(workload(tmp_path, ranks, (("1", (1, 3, 5, 7)),)), hw)
    assert res.finish_ns == [ring_time(4, 2) if r % 2 else 1000 for r in range(8)]


def test_groups_of_one_layout_run_on_the_full_engine(tmp_path, caplog):
    """Four pairs, each its own group running a 2-position custom ring on an 8-NPU switch: a layout
    the symmetric quotient would take (tp 2), declined because the traces' peers are positions."""
    prefix = write_custom(tmp_path, "ring", [ring_all_reduce(2, p) for p in range(2)])
    groups = tuple((str(g + 1), (2 * g, 2 * g + 1)) for g in range(4))
    ts = workload(tmp_path, [[collective(0, pg=str(r // 2 + 1))] for r in range(8)], groups)
    with caplog.at_level("INFO", logger="chakra_pipe.sim.symmetric_files"):
        res = simulate(ts, hardware(8, "Switch", **{"all-reduce-implementation-custom": [prefix]}))
    assert res.finish_ns == [ring_time(2, 2)] * 8
    assert "custom (Chakra-defined) collectives" in caplog.text


def test_lookup_priority_per_node_then_collective_wide_then_native(tmp_path, monkeypatch):
    """Node 5 is listed per node (a ring of M/2), node 6 takes the all-reduce prefix (a ring of M)
    though a native all-reduce is configured too, node 7 (an all-gather) has no custom entry and runs
    the native ring: the same time as with no custom key at all. Paths are relative to the working
    directory, as upstream opens them."""
    monkeypatch.chdir(tmp_path)
    write_custom(tmp_path, "half", [ring_all_reduce(4, p, M // 2) for p in range(4)])
    write_custom(tmp_path, "full", [ring_all_reduce(4, p) for p in range(4)])
    Path("per_node.yaml").write_text("5: half\n")
    ranks = [[collective(5), collective(6, deps=[5]), collective(7, S.ALL_GATHER, 1 << 16, deps=[6])]] * 4
    ts = workload(tmp_path, ranks)
    custom = {"all-reduce-implementation-custom": ["full"], "per-node-custom-implementation": "per_node.yaml"}
    res = simulate(ts, hardware(4, **custom))
    native = simulate(workload(tmp_path, [[collective(7, S.ALL_GATHER, 1 << 16)]] * 4), hardware(4))
    (ag,) = {c.end_ns - c.start_ns for c in native.collectives}
    spans = {c.node_id: c.end_ns - c.start_ns for c in res.collectives if c.rank == 0}
    assert spans == {5: ring_time(4, 1, M // 2), 6: ring_time(4, 1), 7: ag}


@pytest.mark.parametrize("listed", [5, 6])
def test_a_named_group_keeps_the_implementation_of_its_first_collective_of_a_type(tmp_path, monkeypatch, listed):
    """Upstream's ``CommunicatorGroup::get_collective_plan`` caches its plan per collective type at the
    group's first collective of that type, so on a ``pg_name`` group node 6 runs what node 5 ran:
    node 5 listed per node makes both run its custom ring; node 6 listed runs native as node 5 did.
    On the world group (no ``pg_name``) each node is looked up on its own."""
    monkeypatch.chdir(tmp_path)
    write_custom(tmp_path, "half", [ring_all_reduce(4, p, M // 2) for p in range(4)])
    Path("per_node.yaml").write_text(f"{listed}: half\n")
    hw = hardware(4, **{"per-node-custom-implementation": "per_node.yaml"})
    half = ring_time(4, 1, M // 2)

    def spans(pg, system) -> dict[int, int]:
        ranks = [[collective(5, size=M, pg=pg), collective(6, size=M, pg=pg, deps=[5])]] * 4
        res = simulate(workload(tmp_path, ranks, (("1", (0, 1, 2, 3)),)), system)
        return {c.node_id: c.end_ns - c.start_ns for c in res.collectives if c.rank == 0}

    native = spans("1", hardware(4))[5]
    assert native != half
    assert spans("1", hw) == ({5: half, 6: half} if listed == 5 else {5: native, 6: native})
    assert spans(None, hw) == ({5: half, 6: native} if listed == 5 else {5: native, 6: half})


def test_a_custom_collective_takes_a_stream_id_as_a_native_one_does(tmp_path, monkeypatch):
    """Upstream's custom branch of ``Sys::generate_collective`` numbers its one stream as a native
    chunk (``num_streams++``), and native chunks use their stream id as the message tag. Rank 0 runs a
    custom all-reduce (one COMP node) and then a native one; rank 1 only the native one. Upstream,
    rank 0's native messages carry tag 1 and rank 1's tag 0, so they never match: the run stops (exit
    3). Without the custom node, or with rank 1 running a custom one too, it completes."""
    monkeypatch.chdir(tmp_path)
    write_custom(tmp_path, "solo", [[NodeSpec(1, S.COMP_NODE, duration=1)], [NodeSpec(1, S.COMP_NODE, duration=1)]])
    Path("per_node.yaml").write_text("5: solo\n")
    hw = hardware(2, **{"per-node-custom-implementation": "per_node.yaml"})
    both = [[collective(5), collective(6, deps=[5])]] * 2
    assert len(simulate(workload(tmp_path, both), hw).collectives) == 4
    one = [[collective(5), collective(6, deps=[5])], [collective(6)]]
    with pytest.raises(StuckError):
        simulate(workload(tmp_path, one), hw)


def fan_out() -> list[list[NodeSpec]]:
    """Position 0 sends M to positions 1 and 2 at once (node 1 before node 2); they receive.
    Position 3 has no file: rank 3 runs no custom collective (``fan_out_ranks``)."""
    return [
        [NodeSpec(1, S.COMM_SEND_NODE, comm_size=M, peer=1), NodeSpec(2, S.COMM_SEND_NODE, comm_size=M, peer=2)],
        [NodeSpec(1, S.COMM_RECV_NODE, comm_size=M, peer=0)],
        [NodeSpec(1, S.COMM_RECV_NODE, comm_size=M, peer=0)],
    ]


def fan_out_ranks() -> list[list[NodeSpec]]:
    """Ranks 0-2 issue the fan-out collective; rank 3 only computes for 0 µs (1 ns)."""
    return [[collective(0)]] * 3 + [[NodeSpec(0, S.COMP_NODE, duration=0)]]


def test_both_backends_two_messages_sharing_a_link(tmp_path):
    """Unaware (§4.1, Switch: latency twice, serialisation once): both messages at the closed form.
    Aware (§4.2): they share NPU 0's uplink; the second starts when the first has been serialised
    (⌊M/B'⌋) and each hop takes ⌊L + M/B'⌋, so it arrives ⌊M/B'⌋ later than the first."""
    prefix = write_custom(tmp_path, "fan", fan_out())
    ts = workload(tmp_path, fan_out_ranks())
    custom = {"all-reduce-implementation-custom": [prefix]}
    ser, hop = math.floor(M / PER_NS), math.floor(LAT + M / PER_NS)
    res = simulate(ts, hardware(4, "Switch", **custom))
    assert res.finish_ns == [unaware(2, M), unaware(2, M), unaware(2, M), 1]
    res = simulate(ts, hardware(4, "Switch", "congestion_aware", **custom))
    assert res.finish_ns == [ser + 2 * hop, 2 * hop, ser + 2 * hop, 1]


def test_with_rendezvous_a_custom_send_waits_for_the_handshake(tmp_path):
    """As a workload send: the receiver's 8,192-byte handshake first, then the data (§4.1 each)."""
    prefix = write_custom(tmp_path, "fan", fan_out())
    ts = workload(tmp_path, fan_out_ranks())
    hw = replace(hardware(4, "Switch", **{"all-reduce-implementation-custom": [prefix]}), rendezvous=True)
    both = unaware(2, 8192) + unaware(2, M)
    assert simulate(ts, hw).finish_ns == [both, both, both, 1]


@pytest.mark.parametrize("stagger", [0, 3, 7])
@pytest.mark.parametrize("backend", ["congestion_unaware", "congestion_aware"])
def test_custom_beside_native_collectives_is_the_message_path(tmp_path, backend, stagger):
    """A set mixing a custom all-reduce with native ring all-gathers, rank r starting after
    ``(r · stagger) mod 5`` µs of compute (so one rank's custom messages overlap another's native
    phases), gives the same records, times and message counts with the fast paths on as message by
    message. Unaware, the ring fast path still evaluates the native messages; aware, it is declined
    (no message evaluated by a recurrence); the symmetric quotient is declined on both."""
    prefix = write_custom(tmp_path, "ring", [ring_all_reduce(4, p) for p in range(4)])
    ranks = [
        [
            NodeSpec(9, S.COMP_NODE, duration=(r * stagger) % 5),
            collective(10, S.ALL_GATHER, 1 << 18, deps=[9]),
            collective(11, deps=[10]),
            collective(12, S.ALL_GATHER, 1 << 20, deps=[11]),
        ]
        for r in range(4)
    ]
    ts = workload(tmp_path, ranks)
    hw = hardware(4, "Switch", backend, **{"all-reduce-implementation-custom": [prefix]})
    assert_fast_equals_message_path(ts, hw)
    fast = simulate(ts, hw).fast_messages
    assert fast == 0 if backend == "congestion_aware" else fast > 0


# size 123 in 4 splits: chunks of 30 B, ceil(123 / 30) = 5 streams (the remainder rounds up, §3.2)
@pytest.mark.parametrize(
    "ctype, size, streams", [(S.ALL_REDUCE, 123, 5), (S.ALL_REDUCE, 1 << 30, 4), (S.ALL_GATHER, M, 4)]
)
def test_a_custom_collective_needs_the_chunking_to_give_one_stream(tmp_path, ctype, size, streams):
    """Upstream's ``Sys::generate_collective`` makes the data set wait for the ``ceil(size / chunk)``
    streams of the native chunking (§3.2 item 1) before its custom branch creates one stream, so with
    ``preferred-dataset-splits`` > 1 the collective never completes: invalid input naming the node
    (exit 2). With 1 split every size gives one stream and the collective runs."""
    prefix = write_custom(tmp_path, "ring", [ring_all_reduce(4, p) for p in range(4)])
    key = "all-gather-implementation-custom" if ctype == S.ALL_GATHER else "all-reduce-implementation-custom"
    ranks = [[collective(3, ctype, size)]] * 4
    assert simulate(workload(tmp_path, ranks), hardware(4, **{key: [prefix]})).finish_ns == [ring_time(4, 1)] * 4
    with pytest.raises(InputError, match="never completes") as e:
        simulate(workload(tmp_path, ranks), hardware(4, **{key: [prefix], "preferred-dataset-splits": 4}))
    assert e.value.where == "node 3" and f"into {streams} streams" in str(e.value)


def test_a_custom_all_gather_is_sized_as_a_native_one(tmp_path):
    """The chunk is computed before the custom branch, so an all-gather smaller than
    ``preferred-dataset-splits`` divides by zero upstream whether or not it is custom (README
    difference 15): simulate and validate refuse it alike."""
    prefix = write_custom(tmp_path, "ring", [ring_all_reduce(4, p) for p in range(4)])
    custom = {"all-gather-implementation-custom": [prefix]}
    ranks = [[collective(0, S.ALL_GATHER, size=1)]] * 4
    assert simulate(workload(tmp_path, ranks), hardware(4, **custom)).finish_ns == [ring_time(4, 1)] * 4
    sysd = {"scheduling-policy": "FIFO", "collective-optimization": "baseline", "local-mem-bw": 50}
    for splits, system, code in ((1, custom, 0), (4, custom, 1), (4, {}, 1)):
        (tmp_path / "sys.json").write_text(json.dumps({**sysd, "preferred-dataset-splits": splits, **system}))
        assert cli.main(["validate", str(tmp_path / "w"), "--system-configuration", str(tmp_path / "sys.json")]) == code


# -- configuration ------------------------------------------------------------------------------


@pytest.mark.parametrize("value", [[], ["a", "b"], "a", [1], [""]])
def test_a_custom_key_takes_a_list_of_exactly_one_prefix(value):
    with pytest.raises(ConfigError, match="exactly one custom-collective prefix"):
        hardware(4, **{"all-gather-implementation-custom": value})


def test_the_per_node_file_must_map_node_ids_to_prefixes(tmp_path):
    with pytest.raises(ConfigError, match="cannot read|No such file"):
        hardware(4, **{"per-node-custom-implementation": str(tmp_path / "missing.yaml")})
    for text, what in (
        ("[1, 2]", "expected a mapping"),
        ("x: p", "node id"),
        ("3: 4", "prefix"),
        ("true: p", "node id"),
    ):
        path = tmp_path / "per_node.yaml"
        path.write_text(text)
        with pytest.raises(ConfigError, match=what) as e:
            hardware(4, **{"per-node-custom-implementation": str(path)})
        assert e.value.file == str(path)


def test_per_node_keys_are_c_ints_and_node_ids_are_cast_to_them(tmp_path):
    """Upstream's ``parse_per_node_yaml_file`` reads each key ``as<int>()`` (a 32-bit int; anything
    else throws "YAML mapping keys must be integers.") and ``get_collective_impl`` looks a node up as
    ``static_cast<int>(workload_node_id)``: negative keys are accepted, and node ids 2^32 apart
    select the same entry."""
    path = tmp_path / "per_node.yaml"
    path.write_text("-1: neg\n2147483647: top\n5: five\n")
    hw = hardware(4, **{"per-node-custom-implementation": str(path)})
    lookups = {n: hw.system.custom_prefix(n, "ALL_REDUCE") for n in (5, (1 << 32) + 5, (1 << 32) - 1, (1 << 31) - 1)}
    assert lookups == {5: "five", (1 << 32) + 5: "five", (1 << 32) - 1: "neg", (1 << 31) - 1: "top"}
    for key in (1 << 31, -(1 << 31) - 1):
        path.write_text(f"{key}: p\n")
        with pytest.raises(ConfigError, match="32-bit"):
            hardware(4, **{"per-node-custom-implementation": str(path)})


def test_custom_keys_are_modelled_not_reported_unknown():
    hw = hardware(4, **{"reduce-scatter-implementation-custom": ["p"]})
    assert hw.system.custom == (("REDUCE_SCATTER", "p"),)
    assert hw.system.custom_prefix(9, "REDUCE_SCATTER") == "p"
    assert hw.system.custom_prefix(9, "ALL_REDUCE") is None


# -- bad custom traces: clean errors, README exit codes -----------------------------------------


def run_cli(tmp_path: Path, ranks: list[list[NodeSpec]], prefix: str, groups=None) -> int:
    wl = RankSetSpec(tuple(tuple(r) for r in ranks), groups).write(tmp_path, "w")
    sysd = {
        "scheduling-policy": "FIFO",
        "collective-optimization": "baseline",
        "preferred-dataset-splits": 1,
        "local-mem-bw": 50,
        "all-reduce-implementation-custom": [prefix],
    }
    (tmp_path / "sys.json").write_text(json.dumps(sysd))
    net = {"topology": ["Ring"], "npus_count": [len(ranks)], "bandwidth": [BW], "latency": [LAT]}
    (tmp_path / "net.yml").write_text(json.dumps(net))
    argv = ["--workload-configuration", str(wl), "--system-configuration", str(tmp_path / "sys.json")]
    return cli.main(["simulate", *argv, "--network-configuration", str(tmp_path / "net.yml")])


def test_a_missing_or_corrupt_custom_file_is_invalid_input(tmp_path, capsys):
    prefix = write_custom(tmp_path, "ring", [ring_all_reduce(2, p) for p in range(2)])
    Path(f"{prefix}.1.et").unlink()
    assert run_cli(tmp_path, [[collective(0)]] * 2, prefix) == EXIT_INPUT
    assert f"{prefix}.1.et: cannot read" in capsys.readouterr().err
    Path(f"{prefix}.1.et").write_bytes(b"\x05abc")
    assert run_cli(tmp_path, [[collective(0)]] * 2, prefix) == EXIT_INPUT
    err = capsys.readouterr().err
    assert f"{prefix}.1.et: byte 0:" in err and "Traceback" not in err


@pytest.mark.parametrize(
    "bad, what",
    [
        (NodeSpec(7, S.COMM_COLL_NODE, comm_type=S.ALL_REDUCE, comm_size=8), "node 7: node type COMM_COLL_NODE"),
        (
            NodeSpec(7, S.COMM_SEND_NODE, comm_size=8, peer=2),
            "node 7: peer position 2 is outside the collective's group of 2",
        ),
        (NodeSpec(7, S.COMM_SEND_NODE, comm_size=8, peer=0), "node 7: comm_dst 0 is this rank's own position"),
        (NodeSpec(7, S.COMM_SEND_NODE, comm_size=0, peer=1), "node 7: comm_size must be > 0"),
        (NodeSpec(7, S.COMM_RECV_NODE, comm_size=8), "node 7: missing required attribute comm_src"),
        (NodeSpec(7, S.COMP_NODE, data_deps=(42,)), "node 7: dependency on node 42"),
    ],
)
def test_a_bad_custom_node_names_the_file_and_node(tmp_path, capsys, bad, what):
    prefix = write_custom(tmp_path, "bad", [[bad], [NodeSpec(1, S.COMP_NODE)]])
    assert run_cli(tmp_path, [[collective(0)]] * 2, prefix) == EXIT_INPUT
    err = capsys.readouterr().err
    assert f"{prefix}.0.et: {what}" in err and "Traceback" not in err


def test_a_receive_with_no_send_is_a_deadlock_naming_the_custom_node(tmp_path, capsys):
    prefix = write_custom(
        tmp_path, "lonely", [[NodeSpec(1, S.COMP_NODE)], [NodeSpec(4, S.COMM_RECV_NODE, comm_size=8, peer=0)]]
    )
    assert run_cli(tmp_path, [[collective(0)]] * 2, prefix) == EXIT_STUCK
    out, err = capsys.readouterr()
    assert out == "sys[0] finished, 1 cycles, exposed communication 1 cycles.\n"
    assert f"NPU 1: custom collective {prefix}.1.et waits for node 4 (RECV from NPU 0)" in err
    assert "Traceback" not in err


def test_a_dependency_cycle_in_a_custom_trace_is_a_deadlock(tmp_path, capsys):
    """Upstream would end the collective with the cycle's nodes never run; here the run stops, as a
    workload cycle does (README difference 8)."""
    cycle = [
        NodeSpec(1, S.COMP_NODE, data_deps=(2,)),
        NodeSpec(2, S.COMP_NODE, ctrl_deps=(1,)),
        NodeSpec(3, S.COMP_NODE),
    ]
    prefix = write_custom(tmp_path, "cycle", [cycle, [NodeSpec(1, S.COMP_NODE)]])
    assert run_cli(tmp_path, [[collective(0)]] * 2, prefix) == EXIT_STUCK
    err = capsys.readouterr().err
    assert f"NPU 0: custom collective {prefix}.0.et waits for nodes that never become dependency-free" in err


@pytest.mark.parametrize(
    "trace", [[], [NodeSpec(1, S.COMP_NODE, data_deps=(2,)), NodeSpec(2, S.COMP_NODE, ctrl_deps=(1,))]]
)
def test_a_custom_trace_with_no_dependency_free_node_is_invalid_input(tmp_path, capsys, trace):
    """Upstream's feeder refuses such a trace when the collective is created ("No dependancy free
    nodes found"; ``CustomAlgorithm`` then exits 1): an empty file or one whose every node waits."""
    prefix = write_custom(tmp_path, "none", [trace, [NodeSpec(1, S.COMP_NODE)]])
    assert run_cli(tmp_path, [[collective(0)]] * 2, prefix) == EXIT_INPUT
    err = capsys.readouterr().err
    assert f"{prefix}.0.et: no dependency-free node" in err and "Traceback" not in err


# -- the custom stream's queue (dimension 0's queue 0) ------------------------------------------

H = 8192  # the rendezvous handshake (§2.4)


def hop(size: int) -> int:
    """§4.2: one FullyConnected hop of a message starting on a free link."""
    return math.floor(LAT + size / PER_NS)


def ser(size: int) -> int:
    """§4.2: how long a message keeps its link busy."""
    return math.floor(size / PER_NS)


def queued_pair(
    tmp_path: Path,
    first: list[list[NodeSpec]] | None,
    pgs: tuple[str | None, str | None] = (None, None),
    groups=None,
    npus: int = 2,
    lead: bool = False,
):
    """Ranks 0 and 1 (ranks 2… only compute 1 ns). Node 1: the first collective (a custom one,
    ``first`` per position, or native when None; after a native all-reduce, node 0, when ``lead``);
    node 2: a custom all-reduce in which position 1 (rank 1) sends M to position 0 (rank 0); nodes 1
    and 2 on the groups ``pgs`` names. Node 3: on rank 0 a workload receive of M from rank 1 issued
    in the same pass as node 2, on rank 1 its send, after node 2. Returns the trace set and the
    per-node file naming the custom nodes."""
    recv = NodeSpec(1, S.COMM_RECV_NODE, comm_size=M, peer=1, tag=1)
    entries = {2: write_custom(tmp_path, "two", [[recv], [NodeSpec(1, S.COMM_SEND_NODE, comm_size=M, peer=0, tag=1)]])}
    if first is not None:
        entries[1] = write_custom(tmp_path, "one", first)
    per_node = tmp_path / "per_node.yaml"
    per_node.write_text("".join(f"{k}: {v}\n" for k, v in entries.items()))
    head = [collective(0, size=M)] if lead else []
    head += [collective(1, size=M, pg=pgs[0], deps=[0] if lead else []), collective(2, size=M, pg=pgs[1], deps=[1])]
    ranks = [
        [*head, NodeSpec(3, S.COMM_RECV_NODE, data_deps=(1,), comm_size=M, peer=1, tag=7)],
        [*head, NodeSpec(3, S.COMM_SEND_NODE, data_deps=(2,), comm_size=M, peer=0, tag=7)],
    ] + [[NodeSpec(0, S.COMP_NODE, duration=0)]] * (npus - 2)
    return workload(tmp_path, ranks, groups), str(per_node)


@pytest.mark.parametrize("backend", ["congestion_aware", "congestion_unaware"])
@pytest.mark.parametrize("first", ["custom", "native", "native on a group", "native on another sub-group"])
def test_a_custom_collective_waits_in_queue_0_behind_the_stream_that_just_finished(tmp_path, first, backend):
    """Upstream's custom branch of ``Sys::generate_collective`` queues its stream as a native first
    phase: ``CollectivePhase(0, CustomAlgorithm)`` goes to the ready list and from there into
    dimension 0's queue 0 (``proceed_to_next_vnet_baseline``), where it starts only while fewer than
    ``ceil(active-chunks / queues)`` streams run (spec §3.3). The workload hears of a collective's
    end (``DataSet::notify_stream_finished``) before the finished stream leaves its queue, so a
    custom collective issued by that completion waits behind it, and starts in the same ns once
    the workload's issue pass is over and the old stream left (``notify_stream_removed``).

    Rank 0 ends node 1 at T — a custom COMP of 1 µs (T = 1000), a native all-reduce on the world
    group, on group "1" of both NPUs, or on sub-group "1" = (0, 1) of three NPUs with node 2 on
    group "2" = (0, 1) (a sub-group ring runs in dimension 0's queue too) — and issues node 2
    (custom: its one RECV sends an 8,192-byte rendezvous handshake to rank 1) and node 3 (a workload
    RECV: its handshake too) in ascending id. Upstream node 2 starts after node 3 was issued, so on
    link 0→1 (aware, §4.2, one queue, one active chunk) node 3's handshake goes first: it leaves at
    T + ser(H), and node 2's arrives at T + ser(H) + hop(H). Rank 1's custom send, posted at T,
    then sends M: node 2 ends on both ranks at T + ser(H) + hop(H) + hop(M) (starting node 2 at
    once would end it ser(H) earlier). Rank 1's node 3 then finds its handshake arrived and sends M
    on the free link: both ranks finish hop(M) later. On the unaware network (§4.1, no link state)
    the order of the two handshakes changes nothing: node 2 ends at T + hop(H) + hop(M)."""
    one = [[NodeSpec(1, S.COMP_NODE, duration=1)]] * 2
    npus, pgs, groups = 2, (None, None), None
    if first == "native on a group":
        pgs, groups = ("1", None), (("1", (0, 1)),)
    elif first == "native on another sub-group":
        npus, pgs, groups = 3, ("1", "2"), (("1", (0, 1)), ("2", (0, 1)))
    ts, per_node = queued_pair(tmp_path, one if first == "custom" else None, pgs, groups, npus)
    hw = hardware(npus, "FullyConnected", backend, **{"per-node-custom-implementation": per_node})
    res = simulate(ts, replace(hw, rendezvous=True))
    end = {(c.rank, c.node_id): c.end_ns for c in res.collectives}
    t = end[0, 1]
    if first == "custom":
        assert t == end[1, 1] == 1000
    two = t + (ser(H) if backend == "congestion_aware" else 0) + hop(H) + hop(M)
    assert (end[0, 2], end[1, 2]) == (two, two)
    assert res.finish_ns[:2] == [two + hop(M)] * 2


@pytest.mark.parametrize(
    "queues, active, waits",
    [(1, 1, True), (2, 1, False), (1, 2, False)],
    ids=["queue 0 busy", "queue 1 busy", "two active chunks"],
)
@pytest.mark.parametrize("scheduling", ["LIFO", "FIFO"])
def test_a_custom_collective_starts_at_once_when_queue_0_has_room(tmp_path, queues, active, waits, scheduling):
    """The same pair after a lead native all-reduce (node 0), node 1 native. With one queue and one
    active chunk node 1's chunk runs in queue 0 and node 2 waits behind it (as above: node 3's
    handshake first). With two queues per dimension the round-robin allocator put node 0's chunk
    in queue 0 and node 1's in queue 1 (§3.3), and with two active chunks per dimension queue 0 runs
    two streams: either way node 2 starts at once, inside the issue pass before node 3, so its
    handshake leaves first and node 2 ends at T + hop(H) + hop(M) on both ranks; node 3's handshake
    arrives ser(H) after it, long before rank 1 sends. The scheduling policy (the priority counter
    a custom collective steps as a native one) changes neither."""
    ts, per_node = queued_pair(tmp_path, None, lead=True)
    system = {"per-node-custom-implementation": per_node, "active-chunks-per-dimension": active}
    hw = hardware(2, "FullyConnected", "congestion_aware", **system, **{"scheduling-policy": scheduling})
    res = simulate(ts, replace(hw, rendezvous=True, num_queues_per_dim=queues))
    end = {(c.rank, c.node_id): c.end_ns for c in res.collectives}
    t = end[0, 1]
    two = t + (ser(H) if waits else 0) + hop(H) + hop(M)
    assert (end[0, 2], end[1, 2]) == (two, two)
    assert res.finish_ns == [two + hop(M)] * 2
