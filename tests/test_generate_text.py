"""ASTRA-sim 1.0 text workloads → Chakra: the edge rules of chakra-format.md §7, ids, metadata, errors."""

from __future__ import annotations

import pytest

from chakra_pipe.convert.text import convert_text
from chakra_pipe.errors import InputError
from chakra_pipe.et import TraceSet, read_trace, schema

#            name  res fwd  type      size ig  type      size wg  type      size upd
LAYERS = [
    "l0  -1  10  ALLTOALL  100  11  ALLTOALL  101  12  ALLREDUCE 102  5",
    "l1  -1  20  ALLGATHER 200  21  REDUCESCATTER 201 22 ALLREDUCE 202 5",
    "l2  -1  30  NONE      0    31  NONE      0    32  ALLGATHER 302  5",
]


def write(tmp_path, head: str, layers=LAYERS, count=None, name="wl.txt") -> str:
    path = tmp_path / name
    path.write_text("\n".join([head, str(len(layers) if count is None else count), *layers]) + "\n")
    return str(path)


def graph(path):
    """``[(name, [parent names])]`` in file order, plus the raw nodes."""
    _, nodes = read_trace(path)
    by_id = {n.id: n.name for n in nodes}
    return [(n.name, [by_id[d] for d in n.data_deps]) for n in nodes], nodes


def C(layer, phase):
    return f"COMP_NODE_{layer}_{phase}"


def M(label, kind):
    return f"COMM_COLL_NODE_{label}_{kind}"


def test_data_parallel_edges(tmp_path):
    convert_text(write(tmp_path, "DATA"), 1, tmp_path / "d")
    edges, nodes = graph(tmp_path / "d.0.et")
    assert edges == [
        (C("l0", "FWD"), []),
        (C("l1", "FWD"), [C("l0", "FWD")]),
        (C("l2", "FWD"), [C("l1", "FWD")]),
        (C("l2", "BWD_WG"), [C("l2", "FWD")]),
        (M("l2", "ALLGATHER"), [C("l2", "BWD_WG")]),
        (C("l2", "BWD_IG"), [C("l2", "BWD_WG")]),
        (C("l1", "BWD_WG"), [C("l2", "BWD_IG")]),
        (M("l1", "ALLREDUCE"), [C("l1", "BWD_WG")]),
        (C("l1", "BWD_IG"), [C("l1", "BWD_WG")]),
        (C("l0", "BWD_WG"), [C("l1", "BWD_IG")]),
        (M("l0", "ALLREDUCE"), [C("l0", "BWD_WG")]),
    ]
    assert [n.id for n in nodes] == list(range(11))
    assert [n.duration_micros for n in nodes if n.type == schema.COMP_NODE] == [10, 20, 30, 32, 31, 22, 21, 12]
    comm = [n for n in nodes if n.type == schema.COMM_COLL_NODE]
    assert [(a.name, a.WhichOneof("value")) for a in comm[0].attr] == [
        ("comm_type", "int64_val"),
        ("comm_size", "int64_val"),
    ]
    assert [(n.attr[0].int64_val, n.attr[1].int64_val) for n in comm] == [
        (schema.ALL_GATHER, 302),
        (schema.ALL_REDUCE, 202),
        (schema.ALL_REDUCE, 102),
    ]
    assert all(not n.attr for n in nodes if n.type == schema.COMP_NODE)  # no is_cpu_op, as upstream


def test_previous_pass_edges_and_id_counter_across_npus(tmp_path):
    convert_text(write(tmp_path, "DATA"), 2, tmp_path / "d", num_passes=2)
    edges, nodes = graph(tmp_path / "d.0.et")
    assert len(nodes) == 22
    second_fwd0 = edges[11]
    assert second_fwd0 == (C("l0", "FWD"), [M("l0", "ALLREDUCE")])  # FWD[i] <- WG_COMM[i] of pass 1
    assert edges[12] == (C("l1", "FWD"), [C("l0", "FWD"), M("l1", "ALLREDUCE")])
    _, npu1 = graph(tmp_path / "d.1.et")
    assert [n.id for n in npu1] == list(range(22, 44))  # one counter for every file, like upstream
    assert [n.name for n in npu1] == [n.name for n in nodes]
    ts = TraceSet.load(tmp_path / "d")
    for g in ts.ranks:
        ptr, parents = g.dep_indices("data")
        assert (parents >= 0).all()


def test_model_parallel_edges(tmp_path):
    convert_text(write(tmp_path, "MODEL"), 1, tmp_path / "m", num_passes=2)
    edges, _ = graph(tmp_path / "m.0.et")
    first = edges[:12]
    assert first == [
        (C("l0", "FWD"), []),
        (M("l0", "ALLTOALL"), [C("l0", "FWD")]),
        (C("l1", "FWD"), [M("l0", "ALLTOALL")]),
        (M("l1", "ALLGATHER"), [C("l1", "FWD")]),
        (C("l2", "FWD"), [M("l1", "ALLGATHER")]),
        (M("l2", "NONE"), [C("l2", "FWD")]),
        (C("l2", "BWD_IG"), [M("l2", "NONE")]),
        (M("l2", "NONE"), [C("l2", "BWD_IG")]),
        (C("l2", "BWD_WG"), [C("l2", "BWD_IG")]),
        (C("l1", "BWD_IG"), [C("l2", "BWD_WG"), M("l2", "NONE")]),
        (M("l1", "REDUCESCATTER"), [C("l1", "BWD_IG")]),
        (C("l1", "BWD_WG"), [C("l1", "BWD_IG")]),
    ]
    assert edges[12:14] == [
        (C("l0", "BWD_IG"), [C("l1", "BWD_WG"), M("l1", "REDUCESCATTER")]),
        (C("l0", "BWD_WG"), [C("l0", "BWD_IG")]),
    ]  # no IG collective for the first layer
    assert edges[14] == (C("l0", "FWD"), [C("l0", "BWD_WG")])  # pass 2: FWD[i] <- BWD_WG[i] of pass 1
    assert edges[16] == (C("l1", "FWD"), [M("l0", "ALLTOALL"), C("l1", "BWD_WG")])


@pytest.mark.parametrize("policy,ig_label", [("HYBRID_DATA_MODEL", "l1_IG_COMM_"), ("HYBRID_MODEL_DATA", "l1")])
def test_hybrid_edges(tmp_path, policy, ig_label):
    convert_text(write(tmp_path, policy), 1, tmp_path / "h", num_passes=2)
    edges, _ = graph(tmp_path / "h.0.et")
    names = [e[0] for e in edges]
    assert M(ig_label, "REDUCESCATTER") in names
    assert (M("l1", "ALLREDUCE"), [C("l1", "BWD_WG")]) in edges  # WG_COMM[i] <- BWD_WG[i]
    half = len(edges) // 2
    assert edges[half] == (C("l0", "FWD"), [M("l0", "ALLREDUCE")])  # FWD[i] <- WG_COMM[i] of pass 1
    assert edges[half + 2] == (C("l1", "FWD"), [M("l1", "ALLREDUCE"), M("l0", "ALLTOALL")])


def test_dlrm_edges(tmp_path):
    layers = [
        "emb -1 10 ALLTOALL 64 11 ALLTOALL 65 12 NONE 0 1",
        "bot -1 20 NONE 0 21 NONE 0 22 ALLREDUCE 200 1",
        "top -1 30 NONE 0 31 NONE 0 32 ALLREDUCE 300 1",
    ]
    convert_text(write(tmp_path, "HYBRID_DLRM 1", layers), 1, tmp_path / "r")
    edges, _ = graph(tmp_path / "r.0.et")
    assert edges == [
        (C("emb", "FWD"), []),
        (M("emb", "ALLTOALL"), [C("emb", "FWD")]),
        (C("bot", "FWD"), [C("emb", "FWD"), M("emb", "ALLTOALL")]),  # last_bottom_layer waits for the all-to-all
        (C("top", "FWD"), [C("bot", "FWD")]),
        (C("top", "BWD_WG"), [C("top", "FWD")]),
        (M("top", "ALLREDUCE"), [C("top", "BWD_WG")]),
        (C("top", "BWD_IG"), [C("top", "BWD_WG")]),
        # reaching last_bottom_layer + 1 ("top") emits layer 0's input-gradient all-to-all
        (M("emb", "ALLTOALL"), [C("top", "BWD_IG")]),
        (C("bot", "BWD_WG"), [C("top", "BWD_IG")]),
        (M("bot", "ALLREDUCE"), [C("bot", "BWD_WG")]),
        (C("bot", "BWD_IG"), [C("bot", "BWD_WG")]),
        (C("emb", "BWD_WG"), [C("bot", "BWD_IG"), M("emb", "ALLTOALL")]),  # NONE weight-gradient comm: no node
    ]
    _, nodes = read_trace(tmp_path / "r.0.et")
    assert nodes[7].attr[1].int64_val == 65  # the input-gradient all-to-all carries the IG size
    convert_text(write(tmp_path, "HYBRID_DLRM_ENHANCED 1 extra", layers), 1, tmp_path / "e")
    assert graph(tmp_path / "e.0.et")[0] == edges


def test_dlrm_input_gradient_all_to_all(tmp_path):
    layers = [
        "emb -1 10 ALLTOALL 64 11 ALLTOALL 65 12 NONE 0 1",
        "bot -1 20 NONE 0 21 NONE 0 22 ALLREDUCE 200 1",
        "mid -1 20 NONE 0 21 NONE 0 22 ALLREDUCE 200 1",
        "top -1 30 NONE 0 31 NONE 0 32 ALLREDUCE 300 1",
    ]
    convert_text(write(tmp_path, "HYBRID_DLRM 1", layers), 1, tmp_path / "r")
    edges, _ = graph(tmp_path / "r.0.et")
    i = edges.index((M("emb", "ALLTOALL"), [C("mid", "BWD_IG")]))
    assert edges[i - 1][0] == C("mid", "BWD_IG")
    assert (C("emb", "BWD_WG"), [C("bot", "BWD_IG"), M("emb", "ALLTOALL")]) in edges


def test_micro(tmp_path):
    convert_text(write(tmp_path, "MICRO"), 3, tmp_path / "u", num_passes=2)
    edges, nodes = graph(tmp_path / "u.2.et")
    assert edges == [(M(n, t), []) for n, t in (("l0", "ALLREDUCE"), ("l1", "ALLREDUCE"), ("l2", "ALLGATHER"))] * 2
    assert nodes[0].id == 12


def test_none_is_all_reduce_by_default_and_skipped_on_request(tmp_path):
    path = write(tmp_path, "MODEL")
    convert_text(path, 1, tmp_path / "p")
    _, nodes = read_trace(tmp_path / "p.0.et")
    none = [n for n in nodes if n.name.endswith("_NONE")]
    assert len(none) == 2 and all(n.attr[0].int64_val == schema.ALL_REDUCE and n.attr[1].int64_val == 0 for n in none)
    convert_text(path, 1, tmp_path / "f", skip_none=True)
    edges, nodes = graph(tmp_path / "f.0.et")
    assert not [n for n in nodes if n.name.endswith("_NONE")]
    assert (C("l2", "BWD_IG"), [C("l2", "FWD")]) in edges  # the skipped forward comm's parent takes its place
    assert (C("l1", "BWD_IG"), [C("l2", "BWD_WG"), C("l2", "BWD_IG")]) in edges


def test_metadata_carries_schema_and_input_text(tmp_path):
    path = write(tmp_path, "DATA")
    convert_text(path, 1, tmp_path / "d")
    md, _ = read_trace(tmp_path / "d.0.et")
    assert md.version == ""
    assert [(a.name, a.string_val) for a in md.attr] == [
        ("schema", "1.0.2-chakra.1.0.0"),
        ("input_file", open(path).read()),
    ]


def test_trailing_blank_lines_are_fine(tmp_path):
    path = tmp_path / "t.txt"
    path.write_text("MICRO\n1\n" + LAYERS[0] + "\n\n  \n")
    assert len(convert_text(path, 2, tmp_path / "t")) == 2


@pytest.mark.parametrize(
    "text,where,what",
    [
        ("HYBRID_TRANSFORMER\n1\n" + LAYERS[0], "line 1", "unsupported parallelism policy"),
        ("\n1\n" + LAYERS[0], "line 1", "missing parallelism policy"),
        ("HYBRID_DLRM\n1\n" + LAYERS[0], "line 1", "last_bottom_layer"),
        ("DATA\nthree\n" + LAYERS[0], "line 2", "layer count"),
        ("DATA\n1\nl0 -1 10 NONE 0 11", "line 3", "needs 12"),
        ("DATA\n2\n" + LAYERS[0] + "\nl1 -1 x NONE 0 1 NONE 0 1 NONE 0 1", "line 4", "column 3"),
        ("DATA\n1\nl0 -1 10 NONE -5 11 NONE 0 12 NONE 0 1", "line 3", "column 5"),
        ("DATA\n1\nl0 -1 10 ALLREDUC 5 11 NONE 0 12 NONE 0 1", "line 3", "unknown comm type"),
        ("DATA\n2\n" + LAYERS[0] + "\n\n" + LAYERS[1], "line 5", "blank line 4"),
        ("DATA\n0\n", "line 3", "no layer lines"),
        ("MODEL\n2\n" + "\n".join(LAYERS), "line 2", "declares 2 layers, 3 follow"),
        ("HYBRID_DLRM 0\n3\n" + "\n".join(LAYERS), "line 3", "forward ALLTOALL"),
    ],
)
def test_bad_input_names_file_and_line(tmp_path, text, where, what):
    path = tmp_path / "bad.txt"
    path.write_text(text)
    with pytest.raises(InputError) as info:
        convert_text(path, 2, tmp_path / "o")
    assert info.value.file == str(path) and info.value.where == where and what in info.value.what
    assert not list(tmp_path.glob("o.*"))


def test_missing_file_and_bad_counts(tmp_path):
    with pytest.raises(InputError, match="cannot read"):
        convert_text(tmp_path / "absent.txt", 1, tmp_path / "o")
    with pytest.raises(InputError, match="--npus"):
        convert_text(write(tmp_path, "DATA"), 0, tmp_path / "o")
    with pytest.raises(InputError, match="--passes"):
        convert_text(write(tmp_path, "DATA"), 1, tmp_path / "o", num_passes=0)


@pytest.mark.parametrize(
    "head",
    ["MICRO", "DATA", "MODEL", "HYBRID_DATA_MODEL", "HYBRID_MODEL_DATA", "HYBRID_DLRM 1", "HYBRID_DLRM_ENHANCED 1"],
)
def test_every_policy_validates_and_simulates(fixtures_dir, tmp_path, head):
    from chakra_pipe import sim, validate

    convert_text(write(tmp_path, head), 4, tmp_path / "w", num_passes=2)
    report = validate.validate_set(tmp_path / "w")
    assert report.errors == 0, "\n".join(report.lines())
    hw = sim.load_hardware(
        fixtures_dir / "astra-sim/system/native_collectives/Ring_4chunks.json",
        fixtures_dir / "astra-sim/network/analytical/Ring_4npus.yml",
    )
    result = sim.simulate(TraceSet.load(tmp_path / "w"), hw)
    assert len(set(result.finish_ns)) == 1 and result.finish_ns[0] > 0  # identical NPUs finish together
