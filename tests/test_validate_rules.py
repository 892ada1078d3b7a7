"""Each validator rule on small hand-built traces (chakra-format.md §9; astra-sim-semantics.md §2)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from chakra_pipe import cli
from chakra_pipe.errors import InputError, TraceFormatError
from chakra_pipe.et import schema, set_attr, write_trace
from chakra_pipe.et.framing import encode_varint
from chakra_pipe.validate import validate_set, validate_trace

COMP, COLL, SEND, RECV = schema.COMP_NODE, schema.COMM_COLL_NODE, schema.COMM_SEND_NODE, schema.COMM_RECV_NODE


def node(i: int, type_: int = COMP, data=(), ctrl=(), dur: int = 5, start: int = 1, **attrs) -> schema.Node:
    """A node that passes every rule unless the test breaks it (durations and start times set)."""
    n = schema.Node(
        id=i,
        name=f"n{i}",
        type=type_,
        data_deps=list(data),
        ctrl_deps=list(ctrl),
        duration_micros=dur,
        start_time_micros=start,
    )
    set_attr(n, "is_cpu_op", attrs.pop("is_cpu_op", False))
    for name, value in attrs.items():
        if isinstance(value, tuple):  # (value, kind) for a deliberately non-canonical kind
            set_attr(n, name, value[0], value[1])
        else:
            set_attr(n, name, value)
    return n


def coll(i: int, comm_type: int = schema.ALL_REDUCE, size: int = 1024, **kw) -> schema.Node:
    return node(i, COLL, comm_type=comm_type, comm_size=size, **kw)


def write(path: Path, nodes, version: str = "0.0.4") -> Path:
    write_trace(path, schema.GlobalMetadata(version=version), nodes)
    return path


def write_set(folder: Path, ranks: list[list[schema.Node]], groups: dict | None = None) -> Path:
    for r, nodes in enumerate(ranks):
        write(folder / f"w.{r}.et", nodes)
    if groups is not None:
        (folder / "w.comm_groups.json").write_text(json.dumps(groups))
    return folder / "w"


def rules(findings, severity: str | None = None) -> list[str]:
    return sorted(f.rule for f in findings if severity is None or f.severity == severity)


def check(tmp_path: Path, nodes, name: str = "t.0.et", **kw):
    return validate_trace(write(tmp_path / name, nodes), **kw)


def test_clean_trace_has_no_findings(tmp_path):
    assert check(tmp_path, [node(1), node(2, data=[1]), coll(3, data=[2])]) == []


def test_duplicate_ids(tmp_path):
    found = check(tmp_path, [node(1), node(1), node(2, data=[1])])
    assert rules(found) == ["duplicate-id"] and found[0].node == 1 and "2 records" in found[0].message


def test_dangling_data_dep_is_an_error_and_names_the_ids(tmp_path):
    found = check(tmp_path, [node(1), node(2, data=[1, 77, 78])])
    assert rules(found, "error") == ["dangling-data-dep"]
    assert found[0].node == 2 and "77, 78" in found[0].message


def test_dangling_ctrl_dep_is_an_error_as_astra_sim_refuses_the_file(tmp_path):
    nodes = [node(1), node(2, data=[1], ctrl=[99])]
    assert rules(check(tmp_path, nodes), "error") == ["dangling-ctrl-dep"]  # simulate and replay exit 2 on it


def test_duplicate_and_self_dependencies(tmp_path):
    found = check(tmp_path, [node(1), node(2, data=[1, 1]), node(3, data=[1], ctrl=[3])])
    assert rules(found, "error") == ["duplicate-dep", "self-dep"]
    assert {f.rule: f.node for f in found} == {"duplicate-dep": 2, "self-dep": 3}


def test_data_cycle_is_printed(tmp_path):
    found = check(tmp_path, [node(1), node(2, data=[1, 4]), node(3, data=[2]), node(4, data=[3])])
    (cycle,) = [f for f in found if f.rule == "cycle-data"]
    assert cycle.severity == "error"
    # parent -> child order, closed on its first node
    assert "2 -> 3 -> 4 -> 2" in cycle.message and "3 nodes can never issue" in cycle.message
    assert "cycle-ctrl" not in rules(found)  # the same cycle is not reported twice


def test_cycle_through_ctrl_deps(tmp_path):
    found = check(tmp_path, [node(1), node(2, data=[1], ctrl=[3]), node(3, data=[2])])
    assert rules(found) == ["cycle-ctrl"] and found[0].severity == "error"
    assert "2 -> 3 -> 2" in found[0].message or "3 -> 2 -> 3" in found[0].message


def test_cycle_through_ctrl_is_a_warning_when_ctrl_lists_dangle(tmp_path):
    """Legacy converters' ctrl lists (parent-op links naming absent ids) are repaired, not trusted."""
    found = check(tmp_path, [node(1, ctrl=[50]), node(2, data=[1], ctrl=[3]), node(3, data=[2], ctrl=[3])])
    assert rules(found, "error") == ["dangling-ctrl-dep"]
    assert rules(found, "warning") == ["cycle-ctrl", "self-dep"]


def test_no_dependency_free_node(tmp_path):
    found = check(tmp_path, [node(1, data=[2]), node(2, data=[1])])
    assert "no-root" in rules(found, "error")


def test_node_type_out_of_range_and_invalid_nodes(tmp_path):
    found = check(tmp_path, [node(1), node(2, type_=9), node(3, type_=schema.INVALID_NODE)])
    assert rules(found, "error") == ["node-type"] and rules(found, "warning") == ["invalid-node"]
    assert [f.node for f in found if f.rule == "node-type"] == [2]


def test_attribute_kinds(tmp_path):
    found = check(
        tmp_path,
        [
            coll(1, size=(1024, "uint64_val")),  # lenient readers cope: warning
            coll(2, size=(2048, "uint64_val")),
            coll(3, involved_dim=([1], "int64_list")),  # ASTRA-sim rejects: error
            coll(4, pg_name=(7, "int64_val")),  # pg_name must be a string
        ],
    )
    assert rules(found, "error") == ["involved-dim", "pg-name"]
    (kind,) = [f for f in found if f.rule == "attr-kind"]
    assert kind.severity == "warning" and "comm_size stored as uint64_val on 2 nodes" in kind.message


def test_informational_attribute_kinds(tmp_path):
    """rf_id etc. have no column in the graph; the strict decode pass checks them."""
    found = check(tmp_path, [node(1, rf_id=(3, "uint64_val"), tid=1), node(2, rf_id=(4, "uint64_val"), tid=1)])
    (kind,) = found
    assert kind.rule == "attr-kind" and kind.node == 1 and "rf_id stored as uint64_val on 2 nodes" in kind.message


def test_comm_node_problems_are_one_finding_per_node(tmp_path):
    n = node(1, COLL, is_cpu_op=True)  # CPU-side collective without comm_type/comm_size
    found = check(tmp_path, [n])
    assert rules(found) == ["comm-node"]
    msg = found[0].message
    assert "is_cpu_op is true" in msg and "comm_type missing" in msg and "comm_size missing" in msg


@pytest.mark.parametrize(
    "comm_type,size,problem",
    [
        (10, 8, "comm_type 10 is outside CollectiveCommType 0..9"),
        (schema.ALL_REDUCE, -4, "comm_size -4 is negative"),
        (("x", "string_val"), 8, "comm_type is string_val, not an integer"),
    ],
)
def test_collective_attribute_values(tmp_path, comm_type, size, problem):
    found = check(tmp_path, [node(1, COLL, comm_type=comm_type, comm_size=size)])
    assert rules(found, "error") == ["comm-node"] and problem in found[0].message


@pytest.mark.parametrize(
    "comm_type,expected",
    [
        (schema.BARRIER, "BARRIER is not simulated"),
        (schema.REDUCE, "REDUCE is not simulated"),
        (schema.BROADCAST, "BROADCAST is replayed"),
        (schema.REDUCE_SCATTER_BLOCK, "REDUCE_SCATTER_BLOCK is not"),
    ],
)
def test_collectives_astra_sim_does_not_simulate_are_errors_broadcast_a_warning(tmp_path, comm_type, expected):
    found = check(tmp_path, [coll(1, comm_type=comm_type)])
    severity = "warning" if comm_type == schema.BROADCAST else "error"  # simulate exits 2 on the others
    assert rules(found) == ["comm-type-unsupported"] and found[0].severity == severity
    assert expected in found[0].message


def test_point_to_point_attributes(tmp_path):
    found = check(
        tmp_path,
        [
            node(1, SEND, comm_dst=1, comm_tag=3, comm_size=64),  # fine
            node(2, SEND, comm_dst=1, comm_size=64),  # no tag
            node(3, RECV, comm_dst=0, comm_tag=3, comm_size=64),  # no src
            node(4, SEND, comm_src=5, comm_dst=1, comm_tag=3, comm_size=64),  # src is not rank 0
            node(5, SEND, comm_src=("0", "string_val"), comm_dst=1, comm_tag=3, comm_size=64),
        ],
        name="p.0.et",
    )
    by_node = {f.node: f.message for f in found}
    assert rules(found) == ["comm-node"] * 4 and set(by_node) == {2, 3, 4, 5}
    assert "comm_src is string_val, not an integer" in by_node[5]
    assert "comm_tag missing" in by_node[2] and "comm_src missing" in by_node[3]
    assert "comm_src 5 is not this file's rank 0" in by_node[4]


def test_memory_nodes_need_tensor_size_and_roofline_needs_both_inputs(tmp_path):
    found = check(
        tmp_path,
        [
            node(1, schema.MEM_LOAD_NODE),
            node(2, schema.MEM_STORE_NODE, tensor_size=8),
            node(3, num_ops=1000),
            node(4, num_ops=1000, tensor_size=16),
        ],
    )
    assert rules(found, "error") == ["mem-node"] and found[0].node == 1
    (roof,) = [f for f in found if f.rule == "roofline-inputs"]
    assert roof.severity == "warning" and roof.node == 3 and "1 COMP nodes" in roof.message


def metadata_node(i: int, values: str | None) -> schema.Node:
    n = schema.Node(id=i, name="## process_group:init ##", type=schema.METADATA_NODE, start_time_micros=1)
    if values is not None:
        n.inputs.values = values
    return n


PG_TABLE = "['" + json.dumps([{"pg_name": "0", "ranks": []}, {"pg_name": "7", "ranks": [0, 1]}]) + "']"


def test_metadata_groups_make_pg_names_known(tmp_path):
    found = check(
        tmp_path,
        [
            metadata_node(1, PG_TABLE),
            coll(2, pg_name="7"),
            coll(3, pg_name="0"),
            coll(4, pg_name=""),
            coll(5, pg_name="nope"),
        ],
    )
    assert rules(found) == ["pg-name"] and found[0].node == 5
    assert "'nope'" in found[0].message and "7" in found[0].message


def test_comm_group_file_makes_pg_names_known(tmp_path):
    assert check(tmp_path, [coll(1, pg_name="3")], comm_groups={3: [0, 1]}) == []
    assert rules(check(tmp_path, [coll(1, pg_name="3")])) == ["pg-name"]


@pytest.mark.parametrize(
    "values,problem",
    [
        (None, "ASTRA-sim needs"),
        ('["[]"]', "ASTRA-sim needs"),
        ('[\'[{"pg_name": "1"\'] ', "ASTRA-sim needs"),
        ("['{not json}']", "does not hold JSON"),
        ('[\'{"pg_name": "1"}\']', "not a list"),
        ("['[{\"ranks\": [0]}]']", "no string pg_name"),
        ('[\'[{"pg_name": "1", "ranks": [-1]}]\']', "non-negative integer ranks"),
    ],
)
def test_metadata_process_group_payload(tmp_path, values, problem):
    found = check(tmp_path, [metadata_node(1, values)])
    assert rules(found) == ["metadata-pg"] and problem in found[0].message


def test_header_and_timing_warnings(tmp_path):
    found = validate_trace(write(tmp_path / "t.et", [node(1, start=0, dur=0), node(2, start=0)], version=""))
    assert rules(found, "error") == []
    assert rules(found, "warning") == ["metadata-version", "start-time-zero", "zero-duration"]
    (zero,) = [f for f in found if f.rule == "zero-duration"]
    assert zero.node == 1 and "1 COMP nodes" in zero.message


def test_gzip_trace_is_a_warning(tmp_path):
    found = validate_trace(write(tmp_path / "t.et.gz", [node(1)]))
    assert rules(found) == ["gzip"]


# -- cross-rank -------------------------------------------------------------------------------


def test_matching_collectives_across_ranks(tmp_path):
    prefix = write_set(tmp_path, [[coll(1), coll(2, schema.ALL_GATHER, data=[1])]] * 3)
    report = validate_set(prefix)
    assert report.findings == [] and report.summary() == "0 errors, 0 warnings"


def test_divergent_collective_sizes(tmp_path):
    prefix = write_set(tmp_path, [[coll(1), coll(2, data=[1])], [coll(1), coll(2, size=512, data=[1])]])
    report = validate_set(prefix)
    (f,) = report.findings
    assert f.rule == "collective-mismatch" and f.file.endswith("w.1.et") and f.node == 2
    assert "collective #2 is ALL_REDUCE of 512 B" in f.message and "ALL_REDUCE of 1024 B" in f.message


def test_collective_order_follows_dependencies_not_ids(tmp_path):
    """Rank 1 issues the all-gather first: its ids differ but the dependency order is the same."""
    r0 = [coll(1), coll(2, schema.ALL_GATHER, data=[1])]
    r1 = [coll(2, data=[1]), coll(1, schema.ALL_GATHER)]
    assert validate_set(write_set(tmp_path, [r0, r1])).count("collective-mismatch") == 1
    r1_same = [coll(5, schema.ALL_GATHER, data=[9]), coll(9)]
    other = tmp_path / "b"
    other.mkdir()
    assert validate_set(write_set(other, [r0, r1_same])).findings == []


def test_missing_collective_on_one_rank(tmp_path):
    prefix = write_set(tmp_path, [[coll(1), coll(2, data=[1])], [coll(1)]])
    f, stuck = validate_set(prefix).findings
    assert f.rule == "collective-mismatch" and "1 collectives here but 2 on rank 0" in f.message
    # rank 0 waits in its second all-reduce forever: the node simulate reports as stuck
    assert (stuck.rule, stuck.file.endswith("w.0.et"), stuck.node) == ("set-deadlock", True, 2)


def test_group_sequences_and_membership(tmp_path):
    groups = {"1": [0, 1], "2": [2, 3]}
    ranks = [
        [coll(1, pg_name="1")],
        [coll(1, pg_name="1")],
        [coll(1, size=8, pg_name="2")],
        [coll(1, size=8, pg_name="2"), coll(2, pg_name="1")],
    ]
    report = validate_set(write_set(tmp_path, ranks, groups))
    (f,) = report.findings
    assert f.rule == "group-members" and f.file.endswith("w.3.et") and "group '1'" in f.message


def test_metadata_groups_across_ranks(tmp_path):
    table = lambda ranks: "['" + json.dumps([{"pg_name": "5", "ranks": ranks}]) + "']"  # noqa: E731
    same = [[metadata_node(1, table([0, 1])), coll(2, pg_name="5")]] * 2
    assert validate_set(write_set(tmp_path, same)).findings == []
    other = tmp_path / "b"
    other.mkdir()
    differ = [same[0], [metadata_node(1, table([1])), coll(2, pg_name="5")]]
    (f,) = validate_set(write_set(other, differ)).findings
    assert f.rule == "group-members" and f.file.endswith("w.1.et") and "rank 0 defines it as 0, 1" in f.message


def test_group_members_outside_the_set(tmp_path):
    report = validate_set(write_set(tmp_path, [[coll(1, pg_name="1")]] * 2), comm_groups={1: [0, 1, 5]})
    assert report.count("group-members") == 1 and "outside the 2-rank set" in report.findings[0].message


def test_point_to_point_matching(tmp_path):
    send = node(1, SEND, comm_src=0, comm_dst=1, comm_tag=7, comm_size=64)
    recv = node(1, RECV, comm_src=0, comm_dst=1, comm_tag=7, comm_size=64)
    assert validate_set(write_set(tmp_path, [[send], [recv]])).findings == []
    bad = tmp_path / "bad"
    bad.mkdir()
    recv_other_tag = node(1, RECV, comm_src=0, comm_tag=8, comm_size=64)
    report = validate_set(write_set(bad, [[send], [recv_other_tag]]))
    assert rules(report.findings) == ["p2p-unmatched", "p2p-unmatched", "set-deadlock"]
    msgs = sorted(f.message for f in report.findings if f.rule == "p2p-unmatched")
    assert "recv from rank 0 (tag 8, 64 B)" in msgs[0] and "send to rank 1 (tag 7, 64 B)" in msgs[1]


def test_send_to_a_rank_outside_the_set(tmp_path):
    send = node(1, SEND, comm_dst=4, comm_tag=1, comm_size=64)
    (f,) = validate_set(write_set(tmp_path, [[send]])).findings
    assert f.rule == "p2p-peer" and "rank 4 is not in the 1-rank set" in f.message


# -- rank gaps (a finding) and unreadable input (exit 2, one line, no traceback) ---------------


def test_gap_in_rank_set_is_an_error_finding(tmp_path, capsys):
    write(tmp_path / "w.0.et", [coll(1)])
    write(tmp_path / "w.2.et", [coll(1)])
    report = validate_set(tmp_path / "w")
    assert [(f.rule, f.severity) for f in report.findings if f.is_error] == [("rank-gap", "error")]
    assert "w.1.et is missing" in report.findings[0].message
    assert cli.main(["validate", str(tmp_path / "w")]) == 1
    assert capsys.readouterr().out.strip().splitlines()[-1].startswith("1 errors, ")
    with pytest.raises(InputError, match="no rank files"):
        validate_set(tmp_path / "nothing")


def test_record_that_does_not_parse_reports_its_byte_offset(tmp_path, capsys):
    """A name that is not UTF-8 passes the bulk column loader but not a strict protobuf decode."""
    good = write(tmp_path / "t.et", [node(1)]).read_bytes()
    bad_payload = b"\x08\x02" + b"\x12\x02\xff\xfe"  # id 2, name = two bytes of invalid UTF-8
    path = tmp_path / "bad.et"
    path.write_bytes(good + encode_varint(len(bad_payload)) + bad_payload)
    with pytest.raises(TraceFormatError) as err:
        validate_trace(path)
    assert err.value.where == f"byte {len(good)}"
    assert cli.main(["validate", str(path)]) == 2
    err_line = capsys.readouterr().err.strip()
    assert err_line.count("\n") == 0 and f"byte {len(good)}" in err_line


def test_cli_exit_codes_and_summary_line(tmp_path, capsys):
    ok = write(tmp_path / "ok.et", [node(1)])
    assert cli.main(["validate", str(ok)]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == "0 errors, 0 warnings"
    bad = write(tmp_path / "bad.et", [node(1), node(2, data=[5])])
    assert cli.main(["validate", str(bad)]) == 1
    lines = capsys.readouterr().out.splitlines()
    assert lines[-1] == "1 errors, 0 warnings"
    assert (
        lines[0] == f"{bad}: node 2: error: dangling-data-dep: data_deps names ids absent from the file: 5 "
        "(every simulator waits for it forever)"
    )


def test_simulator_refusals_are_validation_errors(tmp_path):
    """What the simulator refuses as input must not validate clean: a 0-byte all-gather and a METADATA
    process group whose pg_name is not an integer (ASTRA-sim numbers those groups pg_name + 1)."""
    from chakra_pipe.et import attrs as et_attrs

    write(tmp_path / "a.0.et", [coll(1, comm_type=schema.ALL_GATHER, size=0)])
    (f,) = [f for f in validate_set(tmp_path / "a").findings if f.is_error]
    assert f.rule == "comm-node" and "ALL_GATHER comm_size 0 B is smaller than preferred-dataset-splits" in f.message

    meta = schema.Node(id=5, name="## process_group:init ##", type=schema.METADATA_NODE)
    meta.inputs.values = '[\'[{"pg_name": "tp", "ranks": [0]}]\']'
    et_attrs.set_attr(meta, "is_cpu_op", False)
    write(tmp_path / "m.0.et", [meta, coll(1)])
    errors = [f for f in validate_set(tmp_path / "m").findings if f.is_error]
    assert len(errors) == 1 and "'tp' is not an integer" in errors[0].message
