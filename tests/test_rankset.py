"""One definition of rank-set semantics: the disagreements issue #13 reproduced, each pinned down.

Every case builds a small rank set and asks validate, simulate and replay's plan about it: they must
refuse it for the same rule on the same file and node (or all accept it), with the exit codes of
the layer contract (validate 1, simulate/replay 2 on input grounds, 3 on a deadlock).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from chakra_pipe import cli
from chakra_pipe.errors import EXIT_INPUT, EXIT_STUCK, ChakraPipeError
from chakra_pipe.et import schema, set_attr, write_trace
from chakra_pipe.et.schema import GlobalMetadata, IOInfo, Node
from chakra_pipe.et.traceset import TraceSet
from chakra_pipe.rankset import SLOT_COMM, SLOT_CPU, SetRefused, SetStuck, analyze
from chakra_pipe.replay.plan import build_plan
from chakra_pipe.sim import HardwareConfig, NetworkConfig, SystemConfig, simulate
from chakra_pipe.validate.validator import validate_set

SYSTEM = {
    "scheduling-policy": "LIFO",
    "endpoint-delay": 10,
    "active-chunks-per-dimension": 1,
    "preferred-dataset-splits": 1,
    "all-reduce-implementation": ["ring"],
    "all-gather-implementation": ["ring"],
    "reduce-scatter-implementation": ["ring"],
    "all-to-all-implementation": ["ring"],
    "collective-optimization": "baseline",
    "local-mem-bw": 50,
}


def hw(npus: int) -> HardwareConfig:
    net = {"topology": ["Ring"], "npus_count": [npus], "bandwidth": [50.0], "latency": [500.0]}
    return HardwareConfig(
        system=SystemConfig.from_dict(SYSTEM, source="sys.json"), network=NetworkConfig.from_dict(net, source="n.yml")
    )


def node(nid: int, ntype: int = schema.COMP_NODE, data=(), ctrl=(), dur: int = 1, **attrs) -> Node:
    n = Node(id=nid, name=f"n{nid}", type=ntype, data_deps=list(data), ctrl_deps=list(ctrl), duration_micros=dur)
    set_attr(n, "is_cpu_op", attrs.pop("is_cpu_op", False))
    for k, v in attrs.items():
        set_attr(n, k, v)
    return n


def coll(nid: int, pg: str = "0", size: int = 1024, **kw) -> Node:
    return node(nid, schema.COMM_COLL_NODE, comm_type=schema.ALL_REDUCE, comm_size=size, pg_name=pg, **kw)


def metadata(nid: int, table: list[dict] | None, **kw) -> Node:
    n = node(nid, schema.METADATA_NODE, dur=0, **kw)
    if table is not None:
        n.inputs.CopyFrom(IOInfo(values="['" + json.dumps(table) + "']"))
    return n


def write_set(tmp: Path, ranks: list[list[Node]], groups: dict | None = None) -> str:
    prefix = tmp / "w"
    for r, nodes in enumerate(ranks):
        write_trace(f"{prefix}.{r}.et", GlobalMetadata(version="0.0.4"), nodes)
    if groups is not None:
        Path(f"{prefix}.comm_groups.json").write_text(json.dumps(groups))
    return str(prefix)


def verdicts(prefix: str) -> tuple[list, ChakraPipeError | None, ChakraPipeError | None]:
    """validate's errors, and what simulate and replay's plan raise (None: they accept the set)."""
    errors = [f for f in validate_set(prefix).findings if f.is_error]
    outcomes = []
    for run in (lambda ts: simulate(ts, hw(len(ts.ranks))), build_plan):
        try:
            run(TraceSet.load(prefix))
            outcomes.append(None)
        except ChakraPipeError as exc:
            outcomes.append(exc)
    return errors, outcomes[0], outcomes[1]


def where(problems) -> list[tuple[str, str, int | None]]:
    return sorted((Path(p.file).name, p.rule, p.node) for p in problems if p.is_error)


def assert_same_refusal(prefix: str, exc_type: type, expected: list[tuple[str, str, int | None]]) -> None:
    errors, sim, plan = verdicts(prefix)
    assert where(errors) == expected
    for exc in (sim, plan):
        assert isinstance(exc, exc_type), exc
        assert where(exc.problems) == expected
        # the printed lines are validate's lines, character for character
        assert set(exc.details) <= {f.line() for f in errors}


def test_comm_group_file_and_metadata_disagreeing_is_one_error_naming_the_node_and_the_file(tmp_path):
    table = [{"pg_name": "1", "ranks": [2, 3]}]
    ranks = [[metadata(0, table), coll(1, "1", data=[0])] for _ in range(4)]
    prefix = write_set(tmp_path, ranks, {"1": [0, 1]})
    # one group-members error per METADATA node (each rank's table contradicts the file); the file's
    # definition stands, so ranks 2 and 3 then issue collectives in a group without them
    expected = sorted(
        [(f"w.{r}.et", "group-members", 0) for r in range(4)]
        + [("w.2.et", "group-members", 1), ("w.3.et", "group-members", 1)]
    )
    assert_same_refusal(prefix, SetRefused, expected)
    (first, *_) = [f for f in validate_set(prefix).findings if f.rule == "group-members"]
    assert "w.comm_groups.json" in first.message and "as ranks 2, 3" in first.message


def test_metadata_node_without_a_process_group_table_is_refused_everywhere(tmp_path):
    prefix = write_set(tmp_path, [[metadata(0, None), node(1, data=[0])]] * 2)
    assert_same_refusal(prefix, SetRefused, [("w.0.et", "metadata-pg", 0), ("w.1.et", "metadata-pg", 0)])


def test_is_cpu_op_decides_the_slot_first_for_every_node_type(tmp_path):
    ranks = [[metadata(0, [], is_cpu_op=True), metadata(1, []), coll(2)]] * 2
    prefix = write_set(tmp_path, ranks)
    analysis = analyze(TraceSet.load(prefix))
    assert analysis.slots[0] == [SLOT_CPU, SLOT_COMM, SLOT_COMM]
    plan = build_plan(TraceSet.load(prefix))
    assert plan.ranks[0].slots == analysis.slots[0]
    result = simulate(TraceSet.load(prefix), hw(2))
    assert [w.slot(0) for w in result._workloads] == [SLOT_CPU, SLOT_CPU]


def test_one_reference_rank_blames_the_rank_that_stops_early(tmp_path):
    # rank 0 issues one all-reduce, ranks 1 and 2 issue two: the reference is the longest member,
    # so rank 0 is the one blamed (not ranks 1 and 2), by validate and by both stages
    long = [coll(1), coll(2, data=[1])]
    prefix = write_set(tmp_path, [long[:1], long, long])
    errors, sim, plan = verdicts(prefix)
    mismatch = [(Path(f.file).name, f.node) for f in errors if f.rule == "collective-mismatch"]
    assert mismatch == [("w.0.et", None)]
    assert isinstance(sim, SetStuck) and isinstance(plan, SetStuck)
    assert sim.exit_code == plan.exit_code == EXIT_STUCK
    deadlock = {int(Path(f.file).name.split(".")[1]): f.node for f in errors if f.rule == "set-deadlock"}
    assert deadlock == {1: 2, 2: 2} and sim.stuck == plan.stuck == {1: [2], 2: [2]}


def test_one_p2p_channel_key_pairs_messages_by_position_and_compares_sizes(tmp_path):
    def p2p(nid, send, peer, size, tag=5):
        me, other = ("comm_src", "comm_dst") if send else ("comm_dst", "comm_src")
        t = schema.COMM_SEND_NODE if send else schema.COMM_RECV_NODE
        return node(nid, t, comm_size=size, comm_tag=tag, **{other: peer, me: 0 if send else 1})

    prefix = write_set(tmp_path, [[p2p(1, True, 1, 64)], [p2p(1, False, 0, 128)]])
    errors, sim, plan = verdicts(prefix)
    assert where(errors) == [("w.0.et", "p2p-unmatched", 1)]
    assert "of 64 B is received there as 128 B (node 1)" in errors[0].message
    assert isinstance(plan, SetRefused) and plan.exit_code == EXIT_INPUT
    assert where(plan.problems) == where(errors)
    # ASTRA-sim matches on (tag, src, dst, size, k): the 64 B send completes on arrival (500 ns + 64 B at
    # 50 GiB/s = 501 ns), the 128 B receive never does; simulate stops the same way and says why
    assert isinstance(sim, SetStuck) and sim.exit_code == EXIT_STUCK
    assert where(sim.problems) == [*where(errors), ("w.1.et", "set-deadlock", 1)]
    assert sim.stuck == {1: [1]} and sim.finished == {0: (501, 501)}


def test_empty_means_no_groups_and_both_spellings_work_for_every_verb(tmp_path, capsys):
    prefix = write_set(tmp_path, [[coll(1, "1")]] * 2, {"1": [0, 1]})
    net = tmp_path / "n.yml"
    net.write_text("topology: [ Ring ]\nnpus_count: [ 2 ]\nbandwidth: [ 50.0 ]\nlatency: [ 500.0 ]\n")
    sysf = tmp_path / "sys.json"
    sysf.write_text(json.dumps(SYSTEM))
    sim = [
        "simulate",
        f"--workload-configuration={prefix}",
        f"--system-configuration={sysf}",
        f"--network-configuration={net}",
    ]
    for flag in ("--comm-group-configuration", "--comm-groups"):
        assert cli.main(["validate", prefix, flag, "empty"]) == 1
        out = capsys.readouterr().out
        assert "w.0.et: node 1: error: pg-name: pg_name '1' names no communicator group" in out
        assert cli.main([*sim, flag, "empty"]) == EXIT_INPUT
        err = capsys.readouterr().err.splitlines()
        assert "w.0.et: node 1: error: pg-name: pg_name '1' names no communicator group (known: none)" in err[1]
    # without the option, PREFIX.comm_groups.json is loaded by every verb
    assert cli.main(["validate", prefix]) == 0
    assert cli.main(sim) == 0
    assert build_plan(TraceSet.load(prefix)).groups == {"1": (0, 1)}
    with pytest.raises(SetRefused, match="pg-name"):
        build_plan(TraceSet.load(prefix, "empty"))


def test_dangling_ctrl_dep_of_an_upstream_converter_is_an_error_everywhere(tmp_path):
    prefix = write_set(tmp_path, [[node(1), node(2, data=[1], ctrl=[99])]] * 2)
    assert_same_refusal(prefix, SetRefused, [("w.0.et", "dangling-ctrl-dep", 2), ("w.1.et", "dangling-ctrl-dep", 2)])


def test_a_deadlock_names_the_same_stuck_nodes_in_validate_simulate_and_replay(tmp_path):
    # collectives crossing between two groups: every sequence matches, yet no rank can proceed
    r0 = [coll(1, "1"), coll(2, "2")]
    r1 = [coll(1, "2"), coll(2, "1")]
    prefix = write_set(tmp_path, [r0, r1], {"1": [0, 1], "2": [0, 1]})
    errors, sim, plan = verdicts(prefix)
    assert where(errors) == [("w.0.et", "set-deadlock", 1), ("w.1.et", "set-deadlock", 1)]
    assert all("stops at node(s) 1, 2" in f.message for f in errors)
    assert sim.exit_code == plan.exit_code == EXIT_STUCK
    assert sim.stuck == plan.stuck == {0: [1, 2], 1: [1, 2]}


def test_a_clean_set_is_accepted_by_every_stage(tmp_path):
    table = [{"pg_name": "0", "ranks": []}, {"pg_name": "3", "ranks": [0, 1]}]
    prefix = write_set(tmp_path, [[metadata(0, table, is_cpu_op=True), coll(1, "3", data=[0]), coll(2)]] * 2)
    errors, sim, plan = verdicts(prefix)
    assert (errors, sim, plan) == ([], None, None)


def p2p(nid: int, send: bool, me: int, peer: int, size: int = 4096, data=()) -> Node:
    t = schema.COMM_SEND_NODE if send else schema.COMM_RECV_NODE
    src, dst = (me, peer) if send else (peer, me)
    return node(nid, t, data=data, comm_src=src, comm_dst=dst, comm_tag=0, comm_size=size)


def gather(nid: int, data=()) -> Node:
    return node(nid, schema.COMM_COLL_NODE, data=data, comm_type=schema.ALL_GATHER, comm_size=4096, pg_name="0")


def test_a_collective_overtaking_in_time_lets_simulate_finish_what_the_static_order_cannot(tmp_path):
    # rank 0's all-reduce waits for a receive whose send follows rank 1's all-gather; ASTRA-sim's comm
    # slot issues the ready all-gather first and the set finishes. Replay walks the static issue order
    # (torch needs one order per group), where the all-reduce comes first: it can never finish there.
    r0 = [p2p(1, False, 0, 1), coll(2, data=[1]), gather(3)]
    r1 = [coll(2, data=[4]), gather(3), p2p(4, True, 1, 0, data=[3])]
    prefix = write_set(tmp_path, [r0, r1])
    errors, sim, plan = verdicts(prefix)
    # rank 0's all-reduce waits for a receive, its all-gather for nothing: which goes first depends on
    # timing (collective-order, validate and replay); in static order the ranks' first collectives
    # differ and the proof stops rank 0 with its receive and all-gather ready (the all-reduce heads
    # its comm slot). Simulate, as ASTRA-sim, runs it and finishes.
    expected = [
        ("w.0.et", "collective-order", 3),
        ("w.0.et", "set-deadlock", 1),
        ("w.1.et", "collective-mismatch", 3),
        ("w.1.et", "set-deadlock", 3),
    ]
    assert where(errors) == expected
    assert sim is None and isinstance(plan, SetStuck) and plan.stuck == {0: [1, 3], 1: [3]}


def test_a_deadlock_that_depends_on_time_is_printed_as_set_deadlock_lines(tmp_path, capsys):
    # rank 1's all-gather is ready at once, its all-reduce only after the receive: ASTRA-sim issues the
    # all-gather first there while rank 0 issues its all-reduce; the static order has both ranks issue
    # the all-reduce first and finishes, so the finish proof cannot see it. Validate and replay refuse
    # the set because its order depends on timing (collective-order, on both ranks: the all-gather
    # does not wait for the message the all-reduce waits for); simulate runs it, as ASTRA-sim, and
    # prints validate's lines and the timed run's stuck nodes as set-deadlock lines.
    r0 = [p2p(1, True, 0, 1), coll(2, data=[1]), node(3, data=[2]), gather(4)]
    r1 = [p2p(1, False, 1, 0), coll(2, data=[1]), node(3, data=[2]), gather(4)]
    prefix = write_set(tmp_path, [r0, r1])
    errors, sim, plan = verdicts(prefix)
    assert where(errors) == [("w.0.et", "collective-order", 4), ("w.1.et", "collective-order", 4)]
    assert isinstance(plan, SetRefused) and where(plan.problems) == where(errors)
    assert isinstance(sim, SetStuck) and sim.stuck == {0: [2, 4], 1: [2, 4]}
    assert sim.details == (
        *(f.line() for f in errors),
        f"{prefix}.0.et: node 2: error: set-deadlock: rank 0 cannot finish: it stops at node(s) 2, 4 (a collective "
        "some member never reaches, a receive whose send never comes, or a dependency cycle)",
        f"{prefix}.1.et: node 2: error: set-deadlock: rank 1 cannot finish: it stops at node(s) 2, 4 (a collective "
        "some member never reaches, a receive whose send never comes, or a dependency cycle)",
    )


def test_byte_identical_rank_files_are_checked_once_yet_every_finding_names_its_own_file(tmp_path):
    # a zero-duration COMP node is a per-file warning: every twin reports it under its own name
    prefix = write_set(tmp_path, [[node(1, dur=0), coll(2, data=[1])]] * 3)
    ts = TraceSet.load(prefix)
    a = analyze(ts)
    assert [(Path(f.file).name, f.node) for f in a.findings if f.rule == "zero-duration"] == [
        (f"w.{r}.et", 1) for r in range(3)
    ]
    # the twins share one check's results (that is the saving), not the finding objects
    assert a.ranks[2].result.issue_order is a.ranks[0].result.issue_order
    assert a.ranks[2].specs is a.ranks[0].specs
    # the simulator's columns are shared too, each naming its own file in its errors
    from chakra_pipe.rankset.twins import Twins
    from chakra_pipe.sim.simulate import rank_trace

    twins = Twins()
    cols = [rank_trace(g, twins) for g in ts.ranks]
    assert cols[1].types is cols[0].types and cols[2].children is cols[0].children
    assert [Path(c.path).name for c in cols] == ["w.0.et", "w.1.et", "w.2.et"]
    assert "w.2.et" in str(cols[2].error(0, "x")) and "w.0.et" not in str(cols[2].error(0, "x"))
    res = simulate(ts, hw(3))
    assert len(set(res.finish_ns)) == 1


def test_identical_files_with_a_send_are_not_twins_their_rank_decides_comm_src(tmp_path):
    # the same bytes on ranks 0 and 1: comm_src 0 is right for rank 0's file only
    prefix = write_set(tmp_path, [[p2p(1, True, 0, 1)]] * 2)
    errors = [f for f in analyze(TraceSet.load(prefix)).findings if f.rule == "comm-node"]
    assert [(Path(f.file).name, f.node) for f in errors] == [("w.1.et", 1)]
    assert "comm_src 0 is not this file's rank 1" in errors[0].message


def test_ranks_sharing_a_dependency_structure_share_its_checks_but_each_reports_its_own_problems(tmp_path):
    # same ids and deps, different durations (so not byte-identical): the structure is checked once
    prefix = write_set(tmp_path, [[node(1, dur=r + 1), coll(2, data=[1])] for r in range(2)])
    a = analyze(TraceSet.load(prefix))
    assert a.ranks[1].result.parents is a.ranks[0].result.parents
    assert [f for f in a.findings if f.is_error] == []
    # a structural problem is never shared away: each file of that structure reports it
    ranks = [[node(1, dur=r + 1), node(3, data=[1, 3]), coll(2, data=[1])] for r in range(2)]
    errors, sim, plan = verdicts(write_set(tmp_path, ranks))
    assert where(errors) == [("w.0.et", "self-dep", 3), ("w.1.et", "self-dep", 3)]
    assert where(sim.problems) == where(plan.problems) == where(errors)


# What ASTRA-sim's std::stoi reads as group 3: leading C white space, a sign, digits; the rest ignored.
READ_AS_3 = ["3", "03", "0" * 5000 + "3", " 3", "\t3", "\v\f 3", "+3", "+03", "3abc", "3 ", "3.5", "3e9"]
# What it cannot run: stoi throws (text, out of int range), or an id no group has (negative, 0).
REFUSED = {
    "-3": "as group id -3, and no group id is negative",
    "00": "as group id 0, not the default group",
    "+0": "as group id 0, not the default group",
    "-0": "as group id 0, not the default group",
    " 0": "as group id 0, not the default group",
    "2147483648": "out of int range and it throws",
    "-2147483649": "out of int range and it throws",
    "99999999999999999999": "out of int range and it throws",
    "1" * 5000: "out of int range and it throws",  # past int()'s 4,300 digits: no traceback
    "abc": "finds no number in it and throws",
    "+": "finds no number in it and throws",
    " ": "finds no number in it and throws",
    "\u0663": "finds no number in it and throws",  # Arabic-Indic 3: int() reads it, stoi does not
}


@pytest.mark.parametrize("pg", READ_AS_3, ids=lambda pg: repr(pg)[:20])
def test_a_pg_name_std_stoi_reads_as_a_group_id_selects_that_group_in_every_stage(tmp_path, pg):
    """ASTRA-sim reads a ``pg_name`` with ``std::stoi`` (``"03"``, ``" 3"``, ``"3abc"`` are comm-group
    id 3): validate, simulate and replay all accept it, the run is the one of ``"3"`` (its record keeps
    the name as written), and replay creates group 3."""
    groups = {"3": [0, 1], "2": [2, 3]}
    (tmp_path / "a").mkdir(), (tmp_path / "b").mkdir()
    prefix = write_set(tmp_path / "a", [[coll(1, pg)]] * 2 + [[coll(1, "2")]] * 2, groups)
    assert verdicts(prefix) == ([], None, None)
    ref = write_set(tmp_path / "b", [[coll(1, "3")]] * 2 + [[coll(1, "2")]] * 2, groups)
    runs = [simulate(TraceSet.load(p), hw(4), symmetric=False) for p in (prefix, ref)]
    assert runs[0].finish_ns == runs[1].finish_ns
    assert [c.group for c in runs[0].collectives] == [pg if c.rank < 2 else "2" for c in runs[0].collectives]
    plan = build_plan(TraceSet.load(prefix))
    assert plan.groups == build_plan(TraceSet.load(ref)).groups
    assert plan.ranks[0].comm[0].group == "3"  # the process group replay creates and runs it on


@pytest.mark.parametrize("pg", sorted(REFUSED), ids=lambda pg: repr(pg)[:20])
def test_a_pg_name_astra_sim_cannot_read_as_a_group_id_is_refused_by_every_stage_saying_why(tmp_path, pg):
    """Text, numbers out of int range (``std::stoi`` throws: ASTRA-sim crashes), negative ids and
    spellings of 0 other than ``"0"`` (group 0, which no comm-group file has) are refused alike, the
    message saying how ASTRA-sim reads the name."""
    prefix = write_set(tmp_path, [[coll(1, pg)], [coll(1, pg)]], {"3": [0, 1]})
    assert_same_refusal(prefix, SetRefused, [("w.0.et", "pg-name", 1), ("w.1.et", "pg-name", 1)])
    (first, _) = [f for f in validate_set(prefix).findings if f.rule == "pg-name"]
    assert REFUSED[pg] in first.message


def test_metadata_groups_are_keyed_by_the_number_too(tmp_path):
    """A METADATA group ``"03"`` is ASTRA-sim's group 3 (``stoi``): ``"3"`` and ``"+3"`` select it,
    and a comm-group file's group 3 with other members contradicts it."""
    table = [{"pg_name": "03", "ranks": [0, 1]}]
    ranks = [[metadata(0, table), coll(1, "+3", data=[0])], [metadata(0, table), coll(1, "3", data=[0])]]
    (tmp_path / "a").mkdir(), (tmp_path / "b").mkdir()
    assert verdicts(write_set(tmp_path / "a", ranks)) == ([], None, None)
    prefix = write_set(tmp_path / "b", ranks, {"3": [1, 0]})
    assert ("w.0.et", "group-members", 0) in where(verdicts(prefix)[0])


def test_a_metadata_group_00_is_matched_as_written_as_before(tmp_path):
    """Group 0 spelled otherwise than ``"0"`` exists only as a METADATA group ``"00"``; the name as
    written still selects it (ASTRA-sim: ``comm_groups[0]``, internal id 1)."""
    table = [{"pg_name": "00", "ranks": [0, 1]}]
    ranks = [[metadata(0, table), coll(1, "00", data=[0])] for _ in range(2)]
    assert verdicts(write_set(tmp_path, ranks)) == ([], None, None)
