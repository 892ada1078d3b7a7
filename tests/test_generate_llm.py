"""LLM training-step generator: structure ASTRA-sim needs, exact FLOP accounting, layout, determinism.

Expected numbers come from the formulas stated in ``src/chakra_pipe/generate/README.md`` (written
out again here), never from the generator's own helpers.
"""

from __future__ import annotations

import json
import math
from collections import Counter, defaultdict, deque

import numpy as np
import pytest

from chakra_pipe.cli import main
from chakra_pipe.errors import InputError
from chakra_pipe.et import TraceSet, read_trace, schema
from chakra_pipe.generate import Layout, TrainingSpec, generate_llm, resolve_model

COLL, SEND, RECV, COMP = schema.COMM_COLL_NODE, schema.COMM_SEND_NODE, schema.COMM_RECV_NODE, schema.COMP_NODE


# -- structural checks written against the TraceSet columns ---------------------------------------


def topological(g) -> bool:
    """Kahn's algorithm over data ∪ ctrl deps: True when every node can issue."""
    n = len(g)
    children = defaultdict(list)
    indeg = np.zeros(n, dtype=np.int64)
    for which in ("data", "ctrl"):
        ptr, parents = g.dep_indices(which)
        for child in range(n):
            for parent in parents[ptr[child] : ptr[child + 1]]:
                children[int(parent)].append(child)
                indeg[child] += 1
    ready = deque(np.flatnonzero(indeg == 0).tolist())
    done = 0
    while ready:
        i = ready.popleft()
        done += 1
        for c in children[i]:
            indeg[c] -= 1
            if indeg[c] == 0:
                ready.append(c)
    return done == n


def ancestors_reach(g, child: int, target: int) -> bool:
    """Whether record ``target`` is an ancestor of record ``child`` (deps only point to lower ids here)."""
    ptr, parents = g.dep_indices("data")
    stack, seen = [child], set()
    floor = int(g.ids[target])
    while stack:
        i = stack.pop()
        for p in parents[ptr[i] : ptr[i + 1]].tolist():
            if p == target:
                return True
            if p not in seen and int(g.ids[p]) > floor:
                seen.add(p)
                stack.append(p)
    return False


def check_rank_set(ts: TraceSet, ordered_comm: bool = True) -> dict:
    """Every property ASTRA-sim needs to finish a rank set; returns per-group collective sequences."""
    world = len(ts)
    groups = {str(k): list(v) for k, v in (ts.comm_groups or {}).items()}
    sends, recvs = Counter(), Counter()
    sequences: dict[str, dict[int, list]] = defaultdict(dict)
    for rank, g in enumerate(ts.ranks):
        assert len(np.unique(g.ids)) == len(g), f"rank {rank}: duplicate ids"
        for which in ("data", "ctrl"):
            ptr, parents = g.dep_indices(which)
            assert (parents >= 0).all(), f"rank {rank}: dangling {which} dep"
            for i in range(len(g)):  # no duplicate entries inside one list (C++ feeder stalls)
                row = parents[ptr[i] : ptr[i + 1]]
                assert len(set(row.tolist())) == len(row)
        assert (np.diff(g.data_ptr) == 0).any(), f"rank {rank}: no dependency-free node"
        assert topological(g), f"rank {rank}: dependency cycle"
        types = g.types
        src, dst, tag, size = (g.int_attr(k, -1) for k in ("comm_src", "comm_dst", "comm_tag", "comm_size"))
        assert not g.is_cpu_op[np.isin(types, [COLL, SEND, RECV])].any()
        for i in np.flatnonzero(types == SEND):
            assert src[i] == rank
            sends[(int(src[i]), int(dst[i]), int(tag[i]), int(size[i]))] += 1
        for i in np.flatnonzero(types == RECV):
            assert dst[i] == rank
            recvs[(int(src[i]), int(dst[i]), int(tag[i]), int(size[i]))] += 1
        comm = [int(i) for i in np.argsort(g.ids, kind="stable") if types[i] in (COLL, SEND)]
        if ordered_comm:  # one collective at a time, in file order: each waits for the previous one
            for a, b in zip(comm, comm[1:]):
                assert ancestors_reach(g, b, a), f"rank {rank}: {g.name(b)} does not wait for {g.name(a)}"
        ctype = g.int_attr("comm_type", -1)
        pg_names = g.pg_name
        for i in comm:
            if types[i] == COLL:
                pg = pg_names.get(i, "0") or "0"
                sequences[pg].setdefault(rank, []).append((int(ctype[i]), int(size[i])))
    assert sends == recvs, f"unmatched send/recv: {(sends - recvs) or (recvs - sends)}"
    for pg, per_rank in sequences.items():
        members = list(range(world)) if pg == "0" else groups[pg]
        assert sorted(per_rank) == sorted(members), f"group {pg}: issued by {sorted(per_rank)}, members {members}"
        first = per_rank[members[0]]
        assert all(per_rank[m] == first for m in members), f"group {pg}: members issue different collectives"
    return sequences


def make(
    tmp_path,
    model="llama3-8b",
    name="w",
    dp=2,
    tp=2,
    pp=2,
    ep=1,
    microbatches=None,
    global_batch=None,
    zero=0,
    metadata=True,
    **dims,
):
    m = resolve_model(model, **dims)
    layout = Layout(dp=dp, tp=tp, pp=pp, ep=ep, moe=m.moe)
    mbs = microbatches or pp
    spec = TrainingSpec(
        layout, microbatches=mbs, global_batch=global_batch or dp * mbs, zero=zero, metadata_node=metadata
    )
    result = generate_llm(m, spec, tmp_path / name)
    return m, spec, result, TraceSet.load(tmp_path / name)


# -- the analytic formulas of the README, written out independently -------------------------------


def step_flops(L, h, a, kv, f, V, S, B, gated, experts=0, top_k=2):
    t = B * S
    d = h // a
    attn = 2 * t * h * (h + 2 * kv * d) + 4 * t * S * h + 2 * t * h * h
    n = 3 if gated else 2
    mlp = 2 * n * t * h * f if not experts else 2 * t * h * experts + top_k * 2 * n * t * h * f
    return 3 * (L * (attn + mlp) + 2 * t * h * V)


def model_step_flops(m, spec) -> int:
    """:func:`step_flops` of a generated model and its run spec."""
    return step_flops(
        m.layers,
        m.hidden,
        m.heads,
        m.kv_heads,
        m.ffn,
        m.vocab,
        m.seq,
        spec.global_batch,
        m.gated_mlp,
        m.experts,
        m.top_k,
    )


def total_num_ops(ts: TraceSet) -> int:
    return sum(int(g.int_attr("num_ops")[g.types == COMP].sum()) for g in ts.ranks)


@pytest.mark.parametrize(
    "case",
    [
        dict(model="llama3-8b", layers=4, dp=2, tp=2, pp=2, seq=1024),
        dict(model="gpt3-13b", layers=5, dp=1, tp=4, pp=2, microbatches=3, seq=512),
        dict(model="mixtral-8x7b", layers=2, dp=4, tp=1, pp=1, ep=2, seq=256, global_batch=8),
        dict(model="llama2-70b", layers=3, dp=1, tp=8, pp=3, seq=128, hidden=1024, heads=16, ffn=2816, vocab=1000),
    ],
)
def test_flops_equal_the_analytic_training_flops(tmp_path, case):
    m, spec, result, ts = make(tmp_path, **case)
    expected = model_step_flops(m, spec)
    assert total_num_ops(ts) == pytest.approx(expected, rel=0.01)
    assert result.flops == total_num_ops(ts)


def test_llama3_8b_flops_against_hand_numbers(tmp_path):
    # llama3-8b, 2 layers, seq 1024, batch 2: per token per layer 2h(h + 2·8·128) + 4·S·h + 2h² + 2·3·h·f
    _, spec, _, ts = make(tmp_path, layers=2, dp=1, tp=1, pp=1, seq=1024, global_batch=2)
    h, f, V, S, t = 4096, 14336, 128256, 1024, 2048
    per_token_layer = 2 * h * (h + 2 * 1024) + 4 * S * h + 2 * h * h + 6 * h * f
    assert total_num_ops(ts) == 3 * t * (2 * per_token_layer + 2 * h * V)


@pytest.mark.parametrize(
    "case",
    [
        dict(dp=2, tp=2, pp=2),
        dict(dp=2, tp=1, pp=4, microbatches=6),
        dict(dp=4, tp=2, pp=1, zero=1),
        dict(dp=1, tp=2, pp=3, microbatches=2, layers=3),
        dict(model="mixtral-8x7b", dp=4, tp=2, pp=2, ep=2, layers=2),
        dict(model="mixtral-8x7b", dp=2, tp=1, pp=1, ep=2, layers=2, zero=1),
    ],
)
def test_generated_sets_are_structurally_valid(tmp_path, case):
    case.setdefault("layers", 4)
    case.setdefault("seq", 256)
    _, _, _, ts = make(tmp_path, **case)
    check_rank_set(ts)


def test_validator_accepts_generated_set(tmp_path):
    from chakra_pipe import validate

    make(tmp_path, model="mixtral-8x7b", dp=4, tp=2, pp=2, ep=2, layers=2, seq=256, zero=1)
    report = validate.validate_set(tmp_path / "w")
    assert report.errors == 0, "\n".join(report.lines())


def test_megatron_layout_and_group_numbering(tmp_path):
    _, _, result, ts = make(tmp_path, layers=2, seq=128)
    groups = json.loads(result.comm_groups_file.read_text())
    # TP pairs of adjacent ranks first, then DP pairs (stride tp) per stage.
    assert groups == {
        "1": [0, 1],
        "2": [2, 3],
        "3": [4, 5],
        "4": [6, 7],
        "5": [0, 2],
        "6": [1, 3],
        "7": [4, 6],
        "8": [5, 7],
    }
    assert ts.comm_groups == {int(k): v for k, v in groups.items()}
    g = ts.ranks[5]  # tp 1, dp 0, stage 1
    names = {g.name(i): pg for i, pg in g.pg_name.items()}
    assert names["mb0.layer1.attn.fwd.tp_all_reduce"] == "3"
    assert names["grad.dp.bucket0.all_reduce"] == "8"
    recv = [i for i in range(len(g)) if g.types[i] == RECV][0]
    assert (g.int_attr("comm_src")[recv], g.int_attr("comm_dst")[recv]) == (1, 5)  # same tp/dp, previous stage


def test_world_sized_group_uses_default_pg(tmp_path):
    _, _, result, ts = make(tmp_path, dp=4, tp=1, pp=1, layers=2, seq=128)
    assert json.loads(result.comm_groups_file.read_text()) == {}
    pgs = {pg for g in ts.ranks for pg in g.pg_name.values()}
    assert pgs == {"0"}
    check_rank_set(ts)


def test_metadata_node_lists_the_rank_groups_in_pytorch_format(tmp_path):
    _, _, result, _ = make(tmp_path, layers=2, seq=128)
    groups = json.loads(result.comm_groups_file.read_text())
    _, nodes = read_trace(tmp_path / "w.6.et")
    meta = nodes[0]
    assert meta.type == schema.METADATA_NODE and meta.id == 0 and not meta.data_deps
    assert not any(0 in n.data_deps for n in nodes[1:])  # no children: ASTRA-sim skips it without a rescan
    values = meta.inputs.values
    assert values.startswith("['") and values.endswith("']")
    listed = json.loads(values[2:-2])
    assert "'" not in values[2:-2] and "\\" not in values[2:-2]
    assert listed[0]["pg_name"] == "0" and listed[0]["ranks"] == []
    for entry in listed[1:]:
        assert groups[entry["pg_name"]] == entry["ranks"] and 6 in entry["ranks"]
    assert {e["pg_desc"] for e in listed[1:]} == {"tp", "dp"}


def test_without_metadata_node(tmp_path):
    _, _, _, ts = make(tmp_path, layers=2, seq=128, metadata=False)
    assert not (ts.ranks[0].types == schema.METADATA_NODE).any()
    assert ts.ranks[0].ids[0] == 0
    check_rank_set(ts)


def test_one_f_one_b_order_on_first_stage(tmp_path):
    _, _, _, ts = make(tmp_path, dp=1, tp=1, pp=4, microbatches=6, layers=4, seq=128)
    g = ts.ranks[0]
    order = [
        g.name(i).split(".")[0] + ("F" if g.name(i).endswith("attn.fwd") else "B")
        for i in range(len(g))
        if g.name(i).endswith(("layer0.attn.fwd", "layer0.attn.bwd"))
    ]
    assert order == ["mb0F", "mb1F", "mb2F", "mb3F", "mb0B", "mb4F", "mb1B", "mb5F", "mb2B", "mb3B", "mb4B", "mb5B"]
    last = ts.ranks[3]  # no warm-up on the last stage: F0 B0 F1 B1 ...
    order = [last.name(i)[:3] + last.name(i)[-3:] for i in range(len(last)) if ".head." in last.name(i)]
    assert order == [
        "mb0fwd",
        "mb0bwd",
        "mb1fwd",
        "mb1bwd",
        "mb2fwd",
        "mb2bwd",
        "mb3fwd",
        "mb3bwd",
        "mb4fwd",
        "mb4bwd",
        "mb5fwd",
        "mb5bwd",
    ]


def test_pipeline_messages_carry_activation_bytes(tmp_path):
    _, spec, _, ts = make(tmp_path, dp=1, tp=2, pp=2, microbatches=3, global_batch=6, layers=2, seq=128)
    g = ts.ranks[0]
    sends = g.types == SEND
    act = 2 * 128 * 4096 * 2  # micro-batch 2 × seq × hidden × bf16
    assert sends.sum() == 3
    assert set(g.int_attr("comm_size")[sends].tolist()) == {act}
    assert sorted(g.int_attr("comm_tag")[sends].tolist()) == [0, 2, 4]  # forward activations: tag 2m
    recvs = g.types == RECV
    assert sorted(g.int_attr("comm_tag")[recvs].tolist()) == [1, 3, 5]  # gradients back: tag 2m + 1


def stage_params(h, a, kv, f, V, layers, first, last, gated=True):
    d = h // a
    per_layer = h * (h + 2 * kv * d) + h * h + (3 if gated else 2) * h * f
    return layers * per_layer + (V * h if first else 0) + (V * h if last else 0)


@pytest.mark.parametrize("zero", [0, 1])
def test_data_parallel_gradients_cover_every_weight(tmp_path, zero):
    _, _, _, ts = make(tmp_path, dp=2, tp=2, pp=2, layers=4, seq=128, zero=zero)
    for rank, g in enumerate(ts.ranks):
        stage = rank // 4
        expected = 2 * stage_params(4096, 32, 8, 14336, 128256, 2, stage == 0, stage == 1) // 2  # bf16, / tp
        names = [g.name(i) for i in range(len(g))]
        size = g.int_attr("comm_size")
        if zero:
            rs = [size[i] for i, n in enumerate(names) if n.startswith("grad.dp.") and n.endswith("reduce_scatter")]
            ag = [size[i] for i, n in enumerate(names) if n.startswith("param.dp.")]
            assert expected <= sum(rs) < expected + 2 * len(rs)  # buckets padded to a multiple of dp
            assert [2 * x for x in ag] == rs  # all-gather comm_size is the per-rank shard
        else:
            ar = [size[i] for i, n in enumerate(names) if n.startswith("grad.dp.")]
            assert sum(ar) == expected
            assert len(ar) > 1  # bucketed, overlapping backward


def test_gradient_buckets_overlap_backward(tmp_path):
    _, _, _, ts = make(tmp_path, dp=2, tp=1, pp=1, layers=4, seq=128)
    g = ts.ranks[0]
    names = [g.name(i) for i in range(len(g))]
    first_bucket = next(i for i, n in enumerate(names) if n.startswith("grad.dp."))
    # Backward compute of earlier layers comes after the first bucket and does not wait for it.
    later = [i for i, n in enumerate(names) if n.endswith(".bwd") and i > first_bucket]
    assert later and not any(ancestors_reach(g, i, first_bucket) for i in later if g.types[i] == COMP)


def test_moe_all_to_all_over_expert_groups(tmp_path):
    _, _, result, ts = make(
        tmp_path, model="mixtral-8x7b", dp=4, tp=1, pp=1, ep=2, layers=2, seq=128, global_batch=4, microbatches=1
    )
    groups = json.loads(result.comm_groups_file.read_text())
    g = ts.ranks[1]
    a2a = [i for i in range(len(g)) if g.types[i] == COLL and g.int_attr("comm_type")[i] == schema.ALL_TO_ALL]
    assert len(a2a) == 2 * 2 * 2  # dispatch + combine, forward + backward, 2 layers
    assert {tuple(groups[g.pg_name[i]]) for i in a2a} == {(0, 1)}
    assert set(g.int_attr("comm_size")[a2a].tolist()) == {128 * 2 * 4096 * 2}  # tokens × top-2 × hidden × bf16
    edp = {g.name(i): groups[pg] for i, pg in g.pg_name.items() if g.name(i).startswith("grad.edp.")}
    assert edp and all(v == [1, 3] for v in edp.values())
    check_rank_set(ts)


def test_duration_follows_the_device_model(tmp_path):
    m, spec, _, ts = make(tmp_path, dp=1, tp=1, pp=1, layers=1, seq=128)
    g = ts.ranks[0]
    comp = np.flatnonzero(g.types == COMP)
    flops, nbytes = g.int_attr("num_ops")[comp], g.int_attr("tensor_size")[comp]
    for i, fl, nb in zip(comp, flops, nbytes):
        expected = max(1, math.ceil(max(fl / 989e12, nb / 3350e9) * 1e6))
        assert g.duration_micros[i] == expected
        assert nb > 0 and fl > 0


def test_canonical_attribute_kinds(tmp_path):
    make(tmp_path, layers=2, seq=128)
    _, nodes = read_trace(tmp_path / "w.4.et")
    expected = {
        "is_cpu_op": "bool_val",
        "num_ops": "int64_val",
        "tensor_size": "uint64_val",
        "comm_type": "int64_val",
        "comm_size": "int64_val",
        "comm_src": "int32_val",
        "comm_dst": "int32_val",
        "comm_tag": "int32_val",
        "pg_name": "string_val",
    }
    seen = set()
    for n in nodes:
        for a in n.attr:
            assert a.WhichOneof("value") == expected[a.name], (n.name, a.name)
            seen.add(a.name)
    assert seen == set(expected)


def test_output_is_byte_identical_across_runs(tmp_path):
    for name in ("a", "b"):
        make(tmp_path, model="mixtral-8x7b", name=name, dp=2, tp=2, pp=2, ep=2, layers=2, seq=128)
    for rank in range(8):
        assert (tmp_path / f"a.{rank}.et").read_bytes() == (tmp_path / f"b.{rank}.et").read_bytes()
    assert (tmp_path / "a.comm_groups.json").read_bytes() == (tmp_path / "b.comm_groups.json").read_bytes()


@pytest.mark.parametrize(
    "argv,where",
    [
        (["--dp", "4", "--ep", "3", "--model", "mixtral-8x7b"], "--ep"),
        (["--ep", "2", "--dp", "2"], "--ep"),  # dense model
        (["--pp", "4", "--layers", "2"], "--pp"),
        (["--dp", "2", "--global-batch", "3"], "--global-batch"),
        (["--heads", "7"], "--heads"),
        (["--tp", "3"], "--tp"),  # 32 heads do not split over 3 TP ranks
        (["--mem-bw", "0"], "--mem-bw"),
        (["--model", "gpt5"], None),
    ],
)
def test_cli_rejects_bad_configurations(tmp_path, capsys, argv, where):
    if "--model" not in argv:
        argv = ["--model", "llama3-8b", *argv]
    try:
        code = main(["generate", "llm", *argv, "--out", str(tmp_path / "x")])
    except SystemExit as exc:  # argparse choices
        code = exc.code
    assert code == 2
    if where:
        err = capsys.readouterr().err.strip()
        assert where in err and "\n" not in err
    assert not list(tmp_path.iterdir())


def test_cli_writes_a_set(tmp_path, capsys):
    assert (
        main(
            [
                "generate",
                "llm",
                "--model",
                "gpt3-13b",
                "--layers",
                "2",
                "--tp",
                "2",
                "--pp",
                "2",
                "--seq",
                "128",
                "--zero",
                "1",
                "--out",
                str(tmp_path / "g"),
            ]
        )
        == 0
    )
    assert "4 rank files" in capsys.readouterr().out
    check_rank_set(TraceSet.load(tmp_path / "g"))


def test_resolve_model_overrides():
    m = resolve_model("llama2-70b", layers=2, heads=16)
    assert (m.layers, m.heads, m.kv_heads, m.hidden) == (2, 16, 2, 8192)  # GQA ratio 8 kept
    with pytest.raises(InputError, match="--model"):
        resolve_model("nope")


def test_checker_catches_divergent_collectives_and_unmatched_sends(tmp_path):
    # The structural checker must be able to fail: swap in a rank file from another configuration.
    import shutil

    make(tmp_path, name="a", dp=2, tp=1, pp=1, layers=2, seq=128)
    make(tmp_path, name="b", dp=2, tp=1, pp=1, layers=3, seq=128)
    shutil.copy(tmp_path / "b.1.et", tmp_path / "a.1.et")  # rank 1: other sizes in the DP group
    with pytest.raises(AssertionError, match="different collectives"):
        check_rank_set(TraceSet.load(tmp_path / "a"))
    make(tmp_path, name="c", dp=1, tp=1, pp=4, layers=4, seq=128, microbatches=4)
    make(tmp_path, name="d", dp=1, tp=1, pp=4, layers=4, seq=128, microbatches=2)
    shutil.copy(tmp_path / "d.2.et", tmp_path / "c.2.et")  # rank 2 now runs 2 microbatches, not 4
    with pytest.raises(AssertionError, match="unmatched send/recv"):
        check_rank_set(TraceSet.load(tmp_path / "c"))


@pytest.mark.parametrize("seed", range(12))
def test_random_configurations_are_valid_and_exact(tmp_path, seed):
    """Random small layouts (seeded): every structural property and the FLOP formula hold."""
    rng = np.random.default_rng(seed)
    moe = bool(rng.integers(2))
    dp = int(rng.choice([1, 2, 4]))
    ep = int(rng.choice([e for e in (1, 2, 4) if dp % e == 0])) if moe else 1
    pp = int(rng.integers(1, 4))
    layers = int(rng.integers(pp, pp + 3))
    mbs = int(rng.integers(1, 5))
    case = dict(
        model="mixtral-8x7b" if moe else "gpt3-13b",
        dp=dp,
        tp=int(rng.choice([1, 2])),
        pp=pp,
        ep=ep,
        microbatches=mbs,
        global_batch=dp * mbs * int(rng.integers(1, 3)),
        zero=int(rng.integers(2)),
        layers=layers,
        seq=64,
        hidden=256,
        heads=4,
        ffn=512,
        vocab=500,
    )
    m, spec, _, ts = make(tmp_path, **case)
    check_rank_set(ts)
    expected = model_step_flops(m, spec)
    assert total_num_ops(ts) == pytest.approx(expected, rel=0.01)


@pytest.mark.parametrize(
    "options",
    [
        {"model": "gpt3-13b", "dp": 4, "tp": 2, "pp": 2, "microbatches": 4, "zero": 1},
        {"model": "gpt3-175b", "dp": 2, "tp": 4, "pp": 4, "layers": 8, "microbatches": 8, "recompute": True},
        {"model": "mixtral-8x7b", "dp": 8, "tp": 2, "pp": 2, "ep": 4, "microbatches": 4},
    ],
)
def test_template_nodes_are_canonical_protobuf(options):
    """Template bodies are assembled from separately serialized field pieces (the attribute part
    cached across microbatches): each must equal protobuf's serialization of the node it decodes to."""
    from chakra_pipe.et import schema
    from chakra_pipe.generate.llm import build_templates
    from chakra_pipe.generate.options import resolve_llm

    _, templates, _ = build_templates(*resolve_llm(options))
    for template in templates:
        for tn in template:
            node = schema.Node.FromString(tn.body)
            assert node.SerializeToString() == tn.body
