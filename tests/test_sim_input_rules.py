"""Where simulate's input rules live, and what it does with sets ASTRA-sim runs despite validate's errors.

Part 1: every per-node rule the simulator used to check while issuing a COMM node (``sim/comm.py``)
is ``chakra_pipe.rankset``'s, applied by ``simulate`` before anything runs: each case here is refused
with validate's problem line naming the file and node, so the simulator no longer repeats the check.
What only the run can see stays a run-time error (a METADATA group used before its node ran).

Part 2 (astra-sim-semantics.md §4.3): ASTRA-sim matches every message on (tag, src, dst, size, k),
completes a send when its data arrives, received or not, and runs each member's collective at its
own size. So a send nobody receives finishes, a receive of another size than its send never does,
and a collective (an MoE all-to-all, say) whose size differs between members stops its group unless
its messages come out the same size anyway (the minimum-chunk rule, integer division). Simulate runs
such sets the same way: it prints the numbers ASTRA-sim prints (validate's problems as warnings), or
stops with exit 3 after the ``finished`` lines of the ranks that did finish. A peer outside the set
is refused (ASTRA-sim asserts).
"""

from __future__ import annotations

import io
import json
import logging
from pathlib import Path

import pytest
from test_rankset import SYSTEM, coll, hw, metadata, node, p2p, write_set

from chakra_pipe import cli
from chakra_pipe.errors import EXIT_STUCK, InputError
from chakra_pipe.et import schema
from chakra_pipe.et.attrs import make_attr
from chakra_pipe.et.traceset import TraceSet
from chakra_pipe.rankset import SetRefused, SetStuck
from chakra_pipe.sim import HardwareConfig, SystemConfig, astrasim, simulate

COLL, SEND, RECV = schema.COMM_COLL_NODE, schema.COMM_SEND_NODE, schema.COMM_RECV_NODE


def refusal(tmp_path: Path, ranks, splits: int = 1) -> list[tuple[str, int | None, str]]:
    """(file name, node, rule) of every problem simulate refuses the set for (it must refuse it)."""
    tmp_path.mkdir(exist_ok=True)
    prefix = write_set(tmp_path, ranks)
    system = SystemConfig.from_dict({**SYSTEM, "preferred-dataset-splits": splits}, source="sys.json")
    with pytest.raises(SetRefused) as exc:
        simulate(TraceSet.load(prefix), HardwareConfig(system, hw(len(ranks)).network))
    return [(Path(f.file).name, f.node, f.rule) for f in exc.value.problems]


def astrasim_argv(tmp_path: Path, prefix: str, npus: int) -> list[str]:
    """ASTRA-sim's arguments for ``prefix`` on :func:`test_rankset.hw`'s ring (files written to ``tmp_path``)."""
    (tmp_path / "sys.json").write_text(json.dumps(SYSTEM))
    (tmp_path / "n.yml").write_text(
        f"topology: [ Ring ]\nnpus_count: [ {npus} ]\nbandwidth: [ 50.0 ]\nlatency: [ 500.0 ]\n"
    )
    return [
        f"--workload-configuration={prefix}",
        f"--system-configuration={tmp_path / 'sys.json'}",
        f"--network-configuration={tmp_path / 'n.yml'}",
    ]


def non_integer_size() -> schema.Node:
    n = node(1, COLL, comm_type=schema.ALL_REDUCE, pg_name="0")
    n.attr.append(make_attr("comm_size", "1 MiB", "string_val"))
    return n


# -- part 1: the rules comm.py no longer checks, refused before the run with file and node ------------
@pytest.mark.parametrize(
    ("rank0", "rule", "text"),
    [
        (node(1, COLL, comm_type=schema.ALL_REDUCE, comm_size=64, is_cpu_op=True), "comm-node", "is_cpu_op is true"),
        (node(1, COLL, comm_type=schema.ALL_REDUCE), "comm-node", "comm_size missing"),
        (node(1, COLL, comm_size=64), "comm-node", "comm_type missing"),
        (non_integer_size(), "comm-node", "comm_size is string_val, not an integer"),
        (node(1, COLL, comm_type=schema.BARRIER, comm_size=64), "comm-type-unsupported", "BARRIER is not simulated"),
        (node(1, COLL, comm_type=42, comm_size=64), "comm-node", "comm_type 42 is outside"),
        (node(1, COLL, comm_type=schema.ALL_REDUCE, comm_size=-1), "comm-node", "comm_size -1 is negative"),
        (node(1, SEND, comm_src=0, comm_dst=1, comm_tag=0, comm_size=0), "p2p-empty", "comm_size is 0"),
        (node(1, RECV, comm_src=1, comm_dst=0, comm_tag=0, comm_size=-5), "comm-node", "comm_size -5 is negative"),
        (node(1, SEND, comm_src=1, comm_dst=1, comm_tag=0, comm_size=8), "comm-node", "comm_src 1 is not this file's"),
        (node(1, RECV, comm_src=1, comm_dst=1, comm_tag=0, comm_size=8), "comm-node", "comm_dst 1 is not this file's"),
        (node(1, SEND, comm_dst=5, comm_tag=0, comm_size=8), "p2p-peer", "rank 5 is not in the 2-rank set"),
        (node(1, RECV, comm_src=-1, comm_tag=0, comm_size=8), "p2p-peer", "rank -1 is not in the 2-rank set"),
        (coll(1, pg="7"), "pg-name", "pg_name '7' names no communicator group"),
    ],
)
def test_a_per_node_comm_rule_is_refused_before_the_run_naming_file_and_node(tmp_path, rank0, rule, text):
    prefix = write_set(tmp_path, [[rank0], [node(1)]])
    with pytest.raises(SetRefused) as exc:
        simulate(TraceSet.load(prefix), hw(2))
    first = exc.value.problems[0]
    assert (Path(first.file).name, first.node, first.rule) == ("w.0.et", 1, rule)
    assert text in first.message and exc.value.exit_code == 2


def test_a_rank_without_a_root_or_with_an_unknown_node_type_is_refused_before_the_run(tmp_path):
    # the workload layer no longer checks either: rankset's no-root and node-type rules refuse them
    cyclic = [node(1, data=[2]), node(2, data=[1])]
    assert ("w.0.et", None, "no-root") in refusal(tmp_path / "a", [cyclic, [node(1)]])
    assert refusal(tmp_path / "b", [[node(1, 9)], [node(1)]]) == [("w.0.et", 1, "node-type")]


def test_a_peer_outside_the_set_is_refused_even_when_the_set_also_deadlocks(tmp_path):
    # before: the deadlock let the run start, and the simulator stopped on the send with its own check
    ranks = [[node(1, SEND, comm_dst=5, comm_tag=0, comm_size=8), p2p(2, False, 0, 1)], [node(1)]]
    assert ("w.0.et", 1, "p2p-peer") in refusal(tmp_path, ranks)


def test_an_all_gather_smaller_than_the_runs_dataset_splits_is_refused_with_the_runs_splits(tmp_path):
    ag = node(1, COLL, comm_type=schema.ALL_GATHER, comm_size=3, pg_name="0")
    assert refusal(tmp_path, [[ag], [ag]], splits=4) == [("w.0.et", 1, "comm-node"), ("w.1.et", 1, "comm-node")]
    assert min(simulate(TraceSet.load(str(tmp_path / "w")), hw(2)).finish_ns) > 0  # splits 1: it runs


def test_a_group_whose_metadata_node_has_not_run_yet_is_a_run_time_error(tmp_path):
    # validate knows group "5" (rank 0's METADATA table), but the collective (id 1) is issued before
    # the METADATA node (id 2) creates it: only the run sees that; ASTRA-sim exits there too
    table = [{"pg_name": "5", "ranks": [0, 1]}]
    prefix = write_set(tmp_path, [[coll(1, pg="5"), metadata(2, table)]] * 2)
    with pytest.raises(InputError, match=r"w\.0\.et: node 1: pg_name '5' names no communicator group \(yet"):
        simulate(TraceSet.load(prefix), hw(2))


# -- part 2: the sets ASTRA-sim runs, run the same way ------------------------------------------------
def sizes_coll(nid: int, size: int, ctype: int = schema.ALL_REDUCE, pg: str = "0") -> schema.Node:
    return node(nid, COLL, comm_type=ctype, comm_size=size, pg_name=pg)


def test_a_send_nobody_receives_completes_on_arrival_and_is_a_warning(tmp_path, caplog):
    prefix = write_set(tmp_path, [[p2p(1, True, 0, 1)], [node(1)]])
    with caplog.at_level(logging.WARNING, logger="chakra_pipe.sim.simulate"):
        res = simulate(TraceSet.load(prefix), hw(2))
    # 4,096 B over 50 GiB/s (53.687 B/ns) after 500 ns: 576 ns; rank 1 computes 1 us
    assert res.finish_ns == [576, 1000]
    assert [r.message for r in caplog.records] == [
        f"{prefix}.0.et: node 1: warning: p2p-unmatched: send to rank 1 (tag 0, 4096 B) has no matching recv "
        "there (simulated as ASTRA-sim runs it)"
    ]


def test_messages_match_by_size_so_a_channel_received_in_another_order_finishes(tmp_path):
    # validate pairs a channel's messages by position (64 B with 128 B: an error, replay refuses it);
    # ASTRA-sim pairs them by size: 64 B arrives at 501 ns, 128 B (sent after it) at 501 + 502 = 1,003 ns
    r0 = [p2p(1, True, 0, 1, size=64), p2p(2, True, 0, 1, size=128, data=[1])]
    r1 = [p2p(1, False, 1, 0, size=128), p2p(2, False, 1, 0, size=64, data=[1])]
    assert simulate(TraceSet.load(write_set(tmp_path, [r0, r1])), hw(2)).finish_ns == [1003, 1003]


def test_a_receive_of_another_size_stops_after_the_sender_finished(tmp_path, capsys, monkeypatch):
    prefix = write_set(tmp_path, [[p2p(1, True, 0, 1, size=64)], [p2p(1, False, 1, 0, size=128)]])
    argv = astrasim_argv(tmp_path, prefix, 2)
    finished = "sys[0] finished, 501 cycles, exposed communication 501 cycles."
    assert cli.main(["simulate", *argv]) == EXIT_STUCK
    out, err = capsys.readouterr()
    assert out == finished + "\n"
    assert f"{prefix}.1.et: node 1: error: set-deadlock: rank 1 cannot finish" in err
    assert "error: p2p-unmatched: send to rank 1 (tag 0) of 64 B is received there as 128 B" in err
    monkeypatch.chdir(tmp_path)  # the drop-in writes log/ here
    out, err = io.StringIO(), io.StringIO()
    assert astrasim.run(argv, "congestion_unaware", out, err) == EXIT_STUCK
    lines = out.getvalue().splitlines()
    assert len(lines) == 1 and lines[0].endswith(f"[workload] [info] {finished}")


def test_a_stopped_run_prints_its_finished_ranks_in_finish_order(tmp_path, capsys, monkeypatch):
    # ASTRA-sim prints a rank's `finished` line when the rank finishes (astra-sim-semantics.md §1; the
    # conformance log's lines come in time order, not rank order), so the ranks that finished before
    # the run stopped are listed by finish time: rank 2's send at 501 ns, rank 1 at 2 µs, rank 0 at 5 µs
    ranks = [[node(1, dur=5)], [node(1, dur=2)], [p2p(1, True, 2, 3, size=64)], [p2p(1, False, 3, 2, size=128)]]
    prefix = write_set(tmp_path, ranks)
    with pytest.raises(SetStuck) as exc:
        simulate(TraceSet.load(prefix), hw(4))
    assert list(exc.value.finished.items()) == [(2, (501, 501)), (1, (2000, 0)), (0, (5000, 0))]
    argv = astrasim_argv(tmp_path, prefix, 4)
    lines = [
        "sys[2] finished, 501 cycles, exposed communication 501 cycles.",
        "sys[1] finished, 2000 cycles, exposed communication 0 cycles.",
        "sys[0] finished, 5000 cycles, exposed communication 0 cycles.",
    ]
    assert cli.main(["simulate", *argv]) == EXIT_STUCK
    assert capsys.readouterr().out.splitlines() == lines
    monkeypatch.chdir(tmp_path)  # the drop-in writes log/ here
    out = io.StringIO()
    assert astrasim.run(argv, "congestion_unaware", out, io.StringIO()) == EXIT_STUCK
    assert [line.split("[workload] [info] ", 1)[1] for line in out.getvalue().splitlines()] == lines


def test_collective_sizes_that_differ_stop_the_group(tmp_path):
    prefix = write_set(tmp_path, [[sizes_coll(1, 1 << 20)], [sizes_coll(1, 2 << 20)]])
    with pytest.raises(SetStuck) as exc:
        simulate(TraceSet.load(prefix), hw(2))
    assert exc.value.stuck == {0: [1], 1: [1]} and exc.value.finished == {}
    assert exc.value.problems[0].rule == "collective-mismatch"


@pytest.mark.parametrize(
    ("sizes", "equal"),
    [
        # on 4 NPUs a chunk under 4 B is rewritten to 4 B (spec §3.2): 2 B and 3 B run as 4 B everywhere
        ((2, 3), 4),
        # a ring all-reduce sends chunk / 4 per message: 1,000,001 B sends the 250,000 B of 1,000,000 B
        ((1_000_000, 1_000_001), 1_000_000),
    ],
)
def test_collective_sizes_whose_messages_come_out_equal_finish_as_the_equal_run(tmp_path, sizes, equal):
    uneven, even = tmp_path / "uneven", tmp_path / "even"
    uneven.mkdir(), even.mkdir()
    mixed = simulate(TraceSet.load(write_set(uneven, [[sizes_coll(1, sizes[r % 2])] for r in range(4)])), hw(4))
    same = simulate(TraceSet.load(write_set(even, [[sizes_coll(1, equal)]] * 4)), hw(4))
    assert mixed.finish_ns == same.finish_ns and len(set(same.finish_ns)) == 1 and same.finish_ns[0] > 0


def test_an_uneven_moe_all_to_all_stops_its_group_and_the_other_ranks_finish(tmp_path, capsys):
    # ranks 0 and 1 exchange an all-to-all whose per-rank size differs (expert load imbalance): their
    # chunks never match, as in ASTRA-sim; ranks 2 and 3 run an even one in their own group and finish
    a2a = schema.ALL_TO_ALL
    ranks = [[sizes_coll(1, 4096 * (r + 1), a2a, "1")] for r in range(2)] + [[sizes_coll(1, 4096, a2a, "2")]] * 2
    prefix = write_set(tmp_path, ranks, {"1": [0, 1], "2": [2, 3]})
    with pytest.raises(SetStuck) as exc:
        simulate(TraceSet.load(prefix), hw(4))
    assert exc.value.stuck == {0: [1], 1: [1]}
    assert sorted(exc.value.finished) == [2, 3]
    even = tmp_path / "even"
    even.mkdir()
    others = [[node(1)]] * 2 + [[sizes_coll(1, 4096, a2a, "2")]] * 2
    alone = simulate(TraceSet.load(write_set(even, others, {"2": [2, 3]})), hw(4))
    assert [exc.value.finished[r][0] for r in (2, 3)] == alone.finish_ns[2:]
    rules = [(Path(f.file).name, f.rule) for f in exc.value.problems]
    assert rules == [("w.1.et", "collective-mismatch"), ("w.0.et", "set-deadlock"), ("w.1.et", "set-deadlock")]


@pytest.mark.parametrize("which", ["data", "ctrl"])
def test_a_parent_listed_twice_is_one_parent_and_a_warning(tmp_path, caplog, which):
    # astra-sim-semantics.md §2.2: a node is issuable once every parent in the *union* of data_deps and
    # ctrl_deps has finished; ASTRA-sim's feeder keeps each node's parents in a set, so a repeated id
    # (a converter that wrote the same edge twice) is one parent and the set runs: 3 µs, then 3 µs.
    # validate's duplicate-dep error (chakra-format.md §9 item 10: Chakra's C++ feeder stalls on it)
    # becomes simulate's warning, as for the other sets ASTRA-sim runs despite validate's errors.
    twice = {which: [1, 1]}
    prefix = write_set(tmp_path, [[node(1, dur=3), node(2, dur=3, **twice)]] * 2)
    with caplog.at_level(logging.WARNING, logger="chakra_pipe.sim.simulate"):
        res = simulate(TraceSet.load(prefix), hw(2))
    assert res.finish_ns == [6000, 6000]
    assert [r.message for r in caplog.records] == [
        f"{prefix}.{r}.et: node 2: warning: duplicate-dep: {which}_deps repeats 1 (Chakra's C++ feeder frees one "
        "occurrence per parent and stalls) (simulated as ASTRA-sim runs it)"
        for r in (0, 1)
    ]
