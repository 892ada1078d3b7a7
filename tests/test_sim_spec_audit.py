"""Statements of astra-sim-semantics.md that no other test pinned, each checked against the spec's formula.

An audit of the spec section by section against ``src/chakra_pipe`` found these implemented but
untested: the tag space of point-to-point messages (§2.4, quirk 16), replay-only mode (§2.4, §1),
the roofline's CPU and zero-``tensor_size`` cases beside ASTRA-sim's issue-pass copy (§2.4, §2.2),
a sub-group's one-entry ``direct`` list (§2.5), the logical dimension count taken from the
algorithm list (§3.2.5), ``involved_dim`` skipping dimensions (§3.2.4) and ``pg_name "0"`` always
meaning the world (§2.5). Expected values come from the closed forms of §6 (helpers of
``test_sim_examples``), never from a run.

It found three differences, fixed and pinned here: a named group's plan decides whatever
``involved_dim`` says, a repeated attribute reads its first entry (both as ASTRA-sim's workload and
feeder do), and a Chakra set written as the Symbolic Tensor Graph generator writes it runs as
ASTRA-sim reads it. One difference is kept on purpose (README deliberate difference 16): a
collective that has no dimension to run on (a one-member group, or ``involved_dim`` all false) gets
no chunk stream upstream (``Sys::generate_collective`` marks its data set inactive and never
notifies it), so ASTRA-sim never finishes the rank; here it completes at once.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_sim_examples import D, N, Pd, _fc_hw, coll, make_node, ring_chunk, ring_hw, ring_system, write_set

from chakra_pipe.et import schema
from chakra_pipe.et.attrs import make_attr
from chakra_pipe.sim import HardwareConfig, NetworkConfig, simulate
from chakra_pipe.sim.system.sys import TAG_SPACE

AR = schema.ALL_REDUCE


def test_tags_are_taken_modulo_the_tag_space(tmp_path: Path) -> None:
    """§2.4 / quirk 16: a send's tag is taken mod 5·10⁸, so tag 5·10⁸ + 7 meets a receive of tag 7."""
    assert TAG_SPACE == 5 * 10**8
    size = 1 << 20
    r0 = [make_node(0, schema.COMM_SEND_NODE, comm_src=0, comm_dst=1, comm_size=size, comm_tag=TAG_SPACE + 7)]
    r1 = [make_node(0, schema.COMM_RECV_NODE, comm_src=0, comm_dst=1, comm_size=size, comm_tag=7)]
    idle = [make_node(0, schema.COMP_NODE, 1)]
    res = simulate(write_set(tmp_path, [r0, r1, idle, idle]), ring_hw(4))
    assert res.finish_ns[:2] == [N(size, 1, 500, 50)] * 2  # both complete when the data arrives


def test_replay_only_replays_collectives_and_counts_them_as_gpu_time(tmp_path: Path) -> None:
    """§2.4: with ``replay-only`` every node takes ``duration_micros × 1000`` ns (collectives too, on
    their comm slot beside compute); §1: comm nodes are added to the GPU ticks, so exposed
    communication ``T − ticks`` goes below zero (signed here, README deliberate difference 3)."""
    nodes = [coll(0, AR, dur=3), make_node(1, schema.COMP_NODE, 2)]
    res = simulate(write_set(tmp_path, [nodes] * 4), ring_hw(4, **{"replay-only": 1}))
    assert res.finish_ns == [3_000] * 4  # not the simulated 4-chunk ring all-reduce
    assert res.exposed_comm_ns == [3_000 - (3_000 + 2_000)] * 4


def test_roofline_skips_zero_tensor_size_and_replays_cpu_ops(tmp_path: Path) -> None:
    """§2.4 roofline rows and §2.2's issue pass: node 0 (``tensor_size`` 0) is skipped as invalid in
    0 ns and frees node 2, which was not in the pass's copy of the free set, so it waits for the next
    completion: the CPU op (node 1, replayed for 7 µs on the CPU slot although roofline is on). Node 2
    then takes ``⌊num_ops / min(bw·OI, peak) · 10⁹⌋`` ns."""
    nodes = [
        make_node(0, schema.COMP_NODE, 5, num_ops=10**9, tensor_size=0),
        make_node(1, schema.COMP_NODE, 7, num_ops=10**9, tensor_size=10**6, is_cpu_op=True),
        make_node(2, schema.COMP_NODE, 5, data=[0], num_ops=10**9, tensor_size=10**6),
    ]
    hw = ring_hw(4, **{"roofline-enabled": 1, "peak-perf": 100, "local-mem-bw": 900})
    res = simulate(write_set(tmp_path, [nodes] * 4), hw)
    perf = min(900 * 10**9 * (10**9 // 10**6), 100 * 10**12)  # memory roof 9·10¹⁴ above the 10¹⁴ peak
    roofline_ns = 10**9 * 10**9 // perf
    assert roofline_ns == 10_000
    assert res.finish_ns == [7_000 + roofline_ns] * 4
    assert res.exposed_comm_ns == [7_000] * 4  # CPU time is not subtracted (issue #302)


def test_sub_group_keeps_a_one_entry_direct_list(tmp_path: Path) -> None:
    """§2.5: a sub-group keeps a one-entry ``direct`` list and costs ``3E + 2·N_max + 2·Pd`` per chunk
    (one ``Pd`` more than §6.3), with the "Local" bus delay E = 10 whatever ``endpoint-delay`` says."""
    members = [1, 3, 5, 7]
    ranks = [[coll(0, AR, pg_name="4")] if r in members else [make_node(0, schema.COMP_NODE, 1)] for r in range(8)]
    groups = {4: members}
    res = simulate(write_set(tmp_path, ranks), _fc_hw(8, **{"all-reduce-implementation": ["direct"]}), groups)
    m = D // 4 // 4  # 4 chunks, each split over the group's 4 members
    per_chunk = 3 * 10 + 2 * N(m, 1, 500, 50) + 2 * Pd(m, 1600)  # FullyConnected: every peer one hop
    assert [res.finish_ns[r] for r in members] == [4 * per_chunk] * 4


def _net_2x4() -> NetworkConfig:
    net = {"topology": ["Ring", "Ring"], "npus_count": [2, 4], "bandwidth": [50, 50], "latency": [500, 500]}
    return NetworkConfig.from_dict(net, source="net")


def test_a_one_entry_list_on_a_2d_network_runs_dimension_0_only(tmp_path: Path) -> None:
    """§3.2.5: the logical dimensions are the implementation list's entries, not the network's: a 2-D
    network with ``["ring"]`` runs the all-reduce on dimension 0 (2 NPUs) only."""
    res = simulate(write_set(tmp_path, [[coll(0, AR)]] * 8), HardwareConfig(ring_system(), _net_2x4()))
    assert res.finish_ns == [4 * ring_chunk("AR", 2, D // 4)] * 8


@pytest.mark.parametrize(("involved", "p"), [([True, False], 2), ([False, True], 4)])
def test_involved_dim_false_skips_its_dimension(tmp_path: Path, involved: list[bool], p: int) -> None:
    """§2.1 / §3.2.4: a dimension with ``involved_dim`` false is skipped; localBWAware then runs one
    all-reduce phase on the remaining dimension (dimension 1 is a 4-ring, one hop per step)."""
    sysd = {k: ["ring", "ring"] for k in ("all-reduce-implementation", "reduce-scatter-implementation")}
    sysd |= {k: ["ring", "ring"] for k in ("all-gather-implementation", "all-to-all-implementation")}
    hw = HardwareConfig(ring_system(**sysd), _net_2x4())
    res = simulate(write_set(tmp_path, [[coll(0, AR, involved_dim=involved)]] * 8), hw)
    assert res.finish_ns == [4 * ring_chunk("AR", p, D // 4)] * 8


def test_pg_name_0_is_the_world_even_when_a_metadata_table_names_0(tmp_path: Path) -> None:
    """§2.5: ``pg_name`` ``""`` or ``"0"`` selects the default group of all ranks; a PyTorch METADATA
    entry named "0" (here listing only ranks 0 and 1) does not replace it."""
    meta = make_node(0, schema.METADATA_NODE)
    meta.inputs.values = "['" + json.dumps([{"pg_name": "0", "ranks": [0, 1]}]) + "']"
    ranks = [[meta, coll(1, AR, data=[0], pg_name="0")]] * 4
    assert simulate(write_set(tmp_path, ranks), ring_hw(4)).finish_ns == [4 * ring_chunk("AR", 4, D // 4)] * 4


@pytest.mark.parametrize("style", ["legacy converter [true]", "one flag per NPU"])
def test_a_named_group_decides_the_plan_whatever_involved_dim_says(tmp_path: Path, style: str) -> None:
    """§2.5: ``pg_name`` selects the group; a group smaller than the world runs a one-dimensional ring
    over its members (E = 10). Upstream passes that group's plan, dimensions included, to
    ``Sys::generate_collective``, so a node's ``involved_dim`` counts only for the world group: traces
    that carry both (the legacy converter's ``[true]``, or tools writing one flag per NPU next to
    ``pg_name``) run on the named group."""
    members = [1, 3, 5, 7]
    involved = [True] if style.startswith("legacy") else [i in members for i in range(8)]
    idle = [make_node(0, schema.COMP_NODE, 1)]
    ranks = [[coll(0, AR, pg_name="4", involved_dim=involved)] if r in members else idle for r in range(8)]
    res = simulate(write_set(tmp_path, ranks), _fc_hw(8), {4: members})
    assert [res.finish_ns[r] for r in members] == [4 * ring_chunk("AR", 4, D // 4, e=10)] * 4


@pytest.mark.parametrize("case", ["one-member group", "involved_dim all false"])
def test_a_collective_with_no_dimension_to_run_on_completes_at_once(tmp_path: Path, case: str) -> None:
    """§3.2.4 skips dimensions of size 1 and those with ``involved_dim`` false; when that leaves none,
    upstream creates no chunk stream and the collective never completes (its rank never finishes).
    Deliberate difference (README 16, sim/README 20): it completes at once, as PyTorch's one-member
    group does, and the rank goes on to its next node (4 NPUs, so not difference 12's one-NPU network)."""
    after = make_node(1, schema.COMP_NODE, 5, data=[0])
    if case == "one-member group":
        ranks = [[coll(0, AR, pg_name=str(5 + r)), after] for r in range(4)]
        groups = {5 + r: [r] for r in range(4)}
    else:
        ranks = [[coll(0, AR, involved_dim=[False]), after] for r in range(4)]
        groups = None
    res = simulate(write_set(tmp_path, ranks), ring_hw(4), groups)
    assert res.finish_ns == [5_000] * 4


def test_a_repeated_attribute_reads_its_first_entry_as_astra_sim(tmp_path: Path) -> None:
    """§2.1: ASTRA-sim's feeder looks an attribute up by name and stops at the first match, so a node
    whose ``comm_size`` was appended again (a tool patching a trace) runs with its first value: here
    the 1 MiB all-reduce of table §7.3 (4 NPUs, 43,000 ns), not a 4 KiB one."""
    node = coll(0, AR)
    node.attr.append(coll(0, AR, size=4096).attr[-1])  # a second comm_size entry, 4,096 B
    assert [a.name for a in node.attr] == ["comm_type", "comm_size", "comm_size"]
    res = simulate(write_set(tmp_path, [[node]] * 4), ring_hw(4))
    assert res.finish_ns == [4 * ring_chunk("AR", 4, D // 4)] * 4 == [43_000] * 4


def _stg_node(nid: int, ntype: int, data: tuple[int, ...], attrs: list[tuple[str, object, str]]) -> schema.Node:
    """A node as the Symbolic Tensor Graph generator (ASTRA-sim's suggested LLM workload tool) writes
    it: integer attributes in int32/int64/uint64 kinds, ``is_cpu_op`` an int32, ``inputs``/``outputs``
    as string-list *attributes* (not the IOInfo fields), ``op_type``/``op_category`` on compute."""
    n = schema.Node(id=nid, name=f"stg{nid}", type=ntype)
    n.data_deps.extend(data)
    io = [("inputs", ["x", "4096"], "string_list"), ("outputs", ["y", "4096"], "string_list")]
    n.attr.extend(make_attr(name, value, kind) for name, value, kind in [*io, *attrs])
    return n


def test_a_symbolic_tensor_graph_style_set_runs_as_astra_sim_reads_it(tmp_path: Path) -> None:
    """Chakra sets from another tool (chakra-format §4 kinds read leniently, unknown attributes
    ignored; §2.5 groups): compute with ``num_ops``/``tensor_size``/``op_type`` and no duration
    (replayed as 1 ns), a collective in a comm-group-file group with ``involved_dim`` [true]·3 on a
    one-dimensional network (the group decides), then a send / receive with int32 peer and tag."""
    size = 1 << 20
    cpu = ("is_cpu_op", 0, "int32_val")
    comp = [("num_ops", 10**9, "int64_val"), ("tensor_size", 10**6, "uint64_val"), ("op_type", "M", "string_val")]
    comp += [("op_category", 0, "int32_val")]
    ranks = []
    for r in range(4):
        coll_attrs = [("comm_size", D, "int64_val"), ("comm_type", AR, "int64_val")]
        coll_attrs += [("pg_name", str(1 + r // 2), "string_val"), cpu, ("involved_dim", [True] * 3, "bool_list")]
        nodes = [_stg_node(1, schema.COMP_NODE, (), comp), _stg_node(2, schema.COMM_COLL_NODE, (1,), coll_attrs)]
        p2p = [("comm_size", size, "int64_val"), ("comm_tag", 9, "int32_val"), cpu]
        if r == 0:
            nodes.append(_stg_node(3, schema.COMM_SEND_NODE, (2,), [*p2p, ("comm_dst", 2, "int32_val")]))
        if r == 2:
            nodes.append(_stg_node(3, schema.COMM_RECV_NODE, (2,), [*p2p, ("comm_src", 0, "int32_val")]))
        ranks.append(nodes)
    res = simulate(write_set(tmp_path, ranks), ring_hw(4), {1: [0, 1], 2: [2, 3]})
    collective_done = 1 + 4 * ring_chunk("AR", 2, D // 4)  # each pair's ring; rank 0 to 1 is one hop
    arrival = collective_done + N(size, 2, 500, 50)  # rank 0 to rank 2: two hops on the 4-ring
    assert res.finish_ns == [arrival, collective_done, arrival, collective_done]


@pytest.mark.parametrize(
    ("node", "declines"),
    [
        (coll(0, AR, pg_name="4", involved_dim=[True]), False),  # the named group decides (above)
        (coll(0, AR, pg_name="4"), False),
        (coll(0, AR, pg_name="0", involved_dim=[True]), True),
        (coll(0, AR, involved_dim=[True, False]), True),
        (coll(0, AR), True),
    ],
    ids=["named group, involved_dim", "named group", "world name, involved_dim", "involved_dim", "no pg_name"],
)
def test_only_a_collective_on_the_world_plan_declines_the_symmetric_run(tmp_path: Path, node, declines: bool) -> None:
    """The proven-symmetric run declines a collective on the world group's global plan, whose peers
    its translations do not keep; a named group's collective runs there whatever ``involved_dim``
    says, as the full engine runs it (Symbolic-Tensor-Graph-style sets carry both)."""
    from chakra_pipe.et import load_graph
    from chakra_pipe.sim.symmetric import world_collective

    write_set(tmp_path, [[node]])
    graphs = {0: load_graph(tmp_path / "w.0.et")}
    assert (world_collective(graphs, {"4"}) is not None) == declines
