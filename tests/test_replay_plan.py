"""Replay plans: slots, dependency union, static comm order, process groups and the pre-flight checks."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from chakra_pipe.errors import EXIT_INPUT, EXIT_STUCK, StuckError
from chakra_pipe.et import schema, set_attr, write_trace
from chakra_pipe.et.schema import GlobalMetadata, IOInfo, Node
from chakra_pipe.et.traceset import TraceSet
from chakra_pipe.rankset import SetRefused
from chakra_pipe.replay.plan import (
    ACT_COLL,
    ACT_COMPUTE,
    ACT_NOOP,
    ACT_RECV,
    ACT_SEND,
    SLOT_COMM,
    SLOT_COMP,
    SLOT_CPU,
    SLOT_NONE,
    build_plan,
)


def comp(nid, dur=0, cpu=False, data=(), ctrl=(), num_ops=None):
    n = Node(
        id=nid, name=f"c{nid}", type=schema.COMP_NODE, duration_micros=dur, data_deps=list(data), ctrl_deps=list(ctrl)
    )
    set_attr(n, "is_cpu_op", cpu)
    if num_ops is not None:
        set_attr(n, "num_ops", num_ops)
    return n


def coll(nid, ctype, size, pg=None, data=(), ctrl=()):
    n = Node(id=nid, name=f"coll{nid}", type=schema.COMM_COLL_NODE, data_deps=list(data), ctrl_deps=list(ctrl))
    set_attr(n, "is_cpu_op", False)
    set_attr(n, "comm_type", ctype)
    set_attr(n, "comm_size", size)
    if pg is not None:
        set_attr(n, "pg_name", pg)
    return n


def p2p(nid, send, src, dst, size, tag=0, data=()):
    n = Node(
        id=nid, name=f"p{nid}", type=schema.COMM_SEND_NODE if send else schema.COMM_RECV_NODE, data_deps=list(data)
    )
    set_attr(n, "is_cpu_op", False)
    set_attr(n, "comm_src", src)
    set_attr(n, "comm_dst", dst)
    set_attr(n, "comm_tag", tag)
    set_attr(n, "comm_size", size)
    return n


def write_set(tmp: Path, per_rank: list[list[Node]], groups: dict | None = None, name: str = "w") -> str:
    prefix = tmp / name
    for r, nodes in enumerate(per_rank):
        write_trace(f"{prefix}.{r}.et", GlobalMetadata(version="0.0.4"), nodes)
    if groups is not None:
        Path(f"{prefix}.comm_groups.json").write_text(json.dumps(groups))
    return str(prefix)


def plan_of(tmp, per_rank, groups=None, name="w"):
    return build_plan(TraceSet.load(write_set(tmp, per_rank, groups, name)))


def test_slots_and_actions_follow_the_simulator(tmp_path):
    nodes = [
        comp(0, 5),
        comp(1, 5, cpu=True),
        coll(2, schema.ALL_REDUCE, 64),
        p2p(3, True, 0, 1, 8),
        Node(id=4, name="meta", type=schema.METADATA_NODE, inputs=IOInfo(values="['[]']")),
    ]
    peer = [
        comp(0, 5),
        comp(1, 5, cpu=True),
        coll(2, schema.ALL_REDUCE, 64),
        p2p(3, False, 0, 1, 8),
        Node(id=4, name="meta", type=schema.METADATA_NODE, inputs=IOInfo(values="['[]']")),
    ]
    plan = plan_of(tmp_path, [nodes, peer])
    r0, r1 = plan.ranks
    assert r0.slots == [SLOT_COMP, SLOT_CPU, SLOT_COMM, SLOT_COMM, SLOT_COMM]
    assert r1.slots[3] == SLOT_NONE  # a RECV never occupies a slot (§2.3)
    assert r0.actions == [ACT_COMPUTE, ACT_COMPUTE, ACT_COLL, ACT_SEND, ACT_NOOP]
    assert r1.actions[3] == ACT_RECV
    assert r0.duration_ns[0] == 5000
    assert r0.comm[3].peer == 1 and r1.comm[3].peer == 0


def test_data_and_ctrl_parents_are_both_enforced(tmp_path):
    nodes = [comp(10, 1), comp(11, 1), comp(12, 1, data=[10], ctrl=[11, 10])]
    plan = plan_of(tmp_path, [nodes])
    rp = plan.ranks[0]
    assert sorted(rp.parents[2]) == [0, 1]
    assert rp.children[0] == [2] and rp.children[1] == [2]


def test_comm_order_is_topological_with_ascending_ids(tmp_path):
    # coll 5 waits for compute 1; coll 3 is free: Kahn's order by id gives 3 then 5, and
    # coll 2 (which depends on 5) comes last even though its id is the smallest.
    nodes = [
        comp(1, 10),
        coll(5, schema.ALL_REDUCE, 64, data=[1]),
        coll(3, schema.ALL_GATHER, 16),
        coll(2, schema.BROADCAST, 8, data=[5]),
    ]
    rp = plan_of(tmp_path, [nodes]).ranks[0]
    assert [rp.ids[i] for i in rp.comm_order] == [3, 5, 2]
    assert [rp.ids[i] for i in rp.order] == [1, 3, 5, 2]


def test_dangling_dependency_names_file_and_node(tmp_path):
    with pytest.raises(
        SetRefused, match=r"w\.0\.et: node 7: error: dangling-ctrl-dep: ctrl_deps names ids absent .*: 99"
    ):
        plan_of(tmp_path, [[comp(1), comp(7, ctrl=[99])]])


def test_cycle_is_refused(tmp_path):
    with pytest.raises(StuckError, match="cycle-data: cycle over data_deps: 1 -> 2 -> 1") as e:
        plan_of(tmp_path, [[comp(0), comp(1, data=[2]), comp(2, data=[1])]])
    assert e.value.stuck == {0: [1, 2]} and e.value.exit_code == EXIT_STUCK
    # without any dependency-free node ASTRA-sim aborts at start: an input problem
    with pytest.raises(SetRefused) as refused:
        plan_of(tmp_path, [[comp(1, data=[2]), comp(2, data=[1])]], name="noroot")
    assert [p.rule for p in refused.value.problems] == ["cycle-data", "no-root"]
    assert refused.value.details[1].endswith(
        "error: no-root: no dependency-free node (ASTRA-sim aborts: 'No dependancy free nodes found')"
    )


def test_groups_from_comm_group_json_and_pg_name(tmp_path):
    per_rank = [
        [coll(1, schema.ALL_REDUCE, 64, pg="1" if r < 2 else "2"), coll(2, schema.ALL_REDUCE, 64, pg="0")]
        for r in range(4)
    ]
    plan = plan_of(tmp_path, per_rank, {"1": [0, 1], "2": [3, 2]})
    assert plan.groups == {"1": (0, 1), "2": (3, 2)}
    spec = plan.ranks[2].comm[0]
    assert spec.group == "2" and spec.members == (3, 2)
    assert plan.ranks[2].comm[1].members == (0, 1, 2, 3)  # "0" is the world


def test_groups_from_pytorch_metadata_node(tmp_path):
    table = json.dumps([{"pg_name": "0", "ranks": []}, {"pg_name": "7", "ranks": [0, 1]}])
    meta = Node(id=0, name="## process_group:init ##", type=schema.METADATA_NODE, inputs=IOInfo(values=f"['{table}']"))
    per_rank = [[meta, coll(1, schema.ALL_REDUCE, 64, pg="7")] for _ in range(2)]
    plan = plan_of(tmp_path, per_rank)
    assert plan.groups == {"7": (0, 1)}


def test_unknown_group_is_an_input_error(tmp_path):
    with pytest.raises(SetRefused, match=r"node 1: error: pg-name: pg_name 'tp' names no communicator group"):
        plan_of(tmp_path, [[coll(1, schema.ALL_REDUCE, 64, pg="tp")]])


def test_mismatched_collective_sequences_are_refused_before_running(tmp_path):
    r0 = [coll(1, schema.ALL_REDUCE, 64), coll(2, schema.ALL_GATHER, 64)]
    r1 = [coll(1, schema.ALL_REDUCE, 64), coll(2, schema.ALL_GATHER, 128)]
    # different sizes: both ranks reach the collective (no deadlock), but the set is refused as input
    with pytest.raises(
        SetRefused, match=r"w\.1\.et: node 2: error: collective-mismatch: .*collective #2 is ALL_GATHER of 128 B"
    ) as err:
        plan_of(tmp_path, [r0, r1])
    assert err.value.exit_code == EXIT_INPUT
    # one rank stops early: the other waits in the collective forever (exit 3, the stuck node named)
    with pytest.raises(
        StuckError, match=r"short\.1\.et: error: collective-mismatch: .*1 collectives here but 2 on rank 0"
    ) as e:
        plan_of(tmp_path, [r0, r0[:1]], name="short")
    assert e.value.stuck == {0: [2]}


def test_unmatched_p2p_is_refused(tmp_path):
    # a send completes when its data arrives (ASTRA-sim), so nothing hangs: an input problem
    with pytest.raises(
        SetRefused, match=r"w\.0\.et: node 1: error: p2p-unmatched: send to rank 1 \(tag 4, 64 B\) has no matching recv"
    ):
        plan_of(tmp_path, [[p2p(1, True, 0, 1, 64, tag=4)], [comp(1)]])


def test_p2p_endpoint_must_be_the_rank_itself(tmp_path):
    with pytest.raises(SetRefused, match=r"w\.1\.et: node 1: error: comm-node: .*comm_src 0 is not this file's rank 1"):
        plan_of(tmp_path, [[comp(1)], [p2p(1, True, 0, 1, 64)]])


def test_reduce_scatter_that_does_not_split_evenly_is_replayed_in_bytes(tmp_path):
    # validate and simulate accept it (ASTRA-sim rounds the last chunk up), so replay must too
    per_rank = [[coll(1, schema.REDUCE_SCATTER, 1001)] for _ in range(2)]
    spec = plan_of(tmp_path, per_rank).ranks[0].comm[0]
    assert (spec.nbytes, spec.elem_bytes, spec.members) == (1001, 1, (0, 1))


def test_element_size_keeps_the_exact_byte_count(tmp_path):
    per_rank = [
        [
            coll(1, schema.ALL_REDUCE, 1024),
            coll(2, schema.ALL_REDUCE, 1022),
            coll(3, schema.REDUCE_SCATTER, 18),
            coll(4, schema.REDUCE_SCATTER, 12),
        ]
        for _ in range(3)
    ]
    rp = plan_of(tmp_path, per_rank).ranks[0]
    # float32 only when the size (per-rank chunk for reduce-scatter) is a whole number of floats
    assert [rp.comm[i].elem_bytes for i in range(4)] == [4, 1, 1, 4]


def test_collective_without_comm_type_is_named(tmp_path):
    n = Node(id=3, name="c10d::broadcast_", type=schema.COMM_COLL_NODE)
    set_attr(n, "comm_size", 64)
    with pytest.raises(SetRefused, match=r"w\.0\.et: node 3: error: comm-node: .*comm_type missing"):
        plan_of(tmp_path, [[n]])


def test_collectives_crossing_between_groups_are_refused(tmp_path):
    # Each group sees one all-reduce per member (sequences match), yet rank 0 waits in group 1 for
    # rank 1, which waits in group 2 for rank 0: a real run would hang until the timeout.
    r0 = [coll(1, schema.ALL_REDUCE, 64, pg="1"), coll(2, schema.ALL_REDUCE, 64, pg="2")]
    r1 = [coll(1, schema.ALL_REDUCE, 64, pg="2"), coll(2, schema.ALL_REDUCE, 64, pg="1")]
    with pytest.raises(StuckError, match=r"w\.0\.et: node 1: error: set-deadlock: rank 0 cannot finish") as e:
        plan_of(tmp_path, [r0, r1], {"1": [0, 1], "2": [0, 1]})
    assert e.value.stuck == {0: [1, 2], 1: [1, 2]}  # each in one collective, the other ready behind it


def test_receives_waiting_on_their_own_replies_are_refused(tmp_path):
    r0 = [p2p(1, False, 1, 0, 8), p2p(2, True, 0, 1, 8, data=[1])]
    r1 = [p2p(1, False, 0, 1, 8), p2p(2, True, 1, 0, 8, data=[1])]
    with pytest.raises(StuckError, match=r"w\.0\.et: node 1: error: set-deadlock: rank 0 cannot finish") as e:
        plan_of(tmp_path, [r0, r1])
    assert e.value.stuck == {0: [1], 1: [1]}


def test_sends_facing_each_other_can_finish(tmp_path):
    # Both ranks send before they receive: fine, a send completes when its data arrives (§2.4).
    r0 = [p2p(1, True, 0, 1, 8), p2p(2, False, 1, 0, 8, data=[1]), coll(3, schema.ALL_REDUCE, 64, data=[2])]
    r1 = [p2p(1, True, 1, 0, 8), p2p(2, False, 0, 1, 8, data=[1]), coll(3, schema.ALL_REDUCE, 64, data=[2])]
    plan = plan_of(tmp_path, [r0, r1])
    assert [plan.ranks[0].ids[i] for i in plan.ranks[0].comm_order] == [1, 3]
