"""``chakra-pipe transform``: what-if ops on rank sets, checked through the simulator and the bytes."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from chakra_pipe.cli import main
from chakra_pipe.et import TraceSet, read_trace, schema, write_trace
from chakra_pipe.et.attrs import get_attr, get_int
from chakra_pipe.et.process_groups import parse_process_groups
from chakra_pipe.generate import (
    CollectiveSpec,
    Layout,
    TrainingSpec,
    generate_collective,
    generate_llm,
    resolve_model,
)
from chakra_pipe.sim import load_hardware, simulate

SMALL = {"layers": 2, "hidden": 512, "heads": 8, "ffn": 1024, "vocab": 1000, "seq": 128}
RING_4CHUNKS = "astra-sim/system/native_collectives/Ring_4chunks.json"


def two_level_hardware(tmp_path: Path, dims: tuple[int, ...], roofline: int = 0):
    """A Ring (then Switch) network of ``dims`` NPUs; one dimension when ``dims`` has one entry."""
    k = len(dims)
    net = tmp_path / f"net{'x'.join(map(str, dims))}.yml"
    net.write_text(
        f"topology: [ {', '.join(['Ring', 'Switch'][:k])} ]\nnpus_count: {list(dims)}\n"
        f"bandwidth: {[200.0, 50.0][:k]}\nlatency: {[500.0, 1000.0][:k]}\n"
    )
    system = tmp_path / "sys.json"
    system.write_text(
        json.dumps(
            {
                "scheduling-policy": "LIFO",
                "endpoint-delay": 10,
                "active-chunks-per-dimension": 1,
                "preferred-dataset-splits": 4,
                "all-reduce-implementation": ["ring"] * k,
                "all-gather-implementation": ["ring"] * k,
                "reduce-scatter-implementation": ["ring"] * k,
                "all-to-all-implementation": ["ring"] * k,
                "collective-optimization": "localBWAware",
                "local-mem-bw": 1600,
                "roofline-enabled": roofline,
                "peak-perf": 900,
            }
        )
    )
    return load_hardware(system, net)


def llm(tmp_path: Path, name: str, model: str, dp: int, **kw) -> str:
    m = resolve_model(model, **SMALL, **({"experts": 8} if model.startswith("mixtral") else {}))
    layout = Layout(dp=dp, tp=kw.pop("tp", 1), pp=kw.pop("pp", 1), ep=kw.pop("ep", 1), moe=m.moe)
    generate_llm(m, TrainingSpec(layout, microbatches=2, global_batch=2 * dp, **kw), tmp_path / name)
    return str(tmp_path / name)


def transform(*argv: str) -> int:
    return main(["transform", *map(str, argv)])


def nodes_of(prefix: str, rank: int) -> list[bytes]:
    return [n.SerializeToString() for n in read_trace(f"{prefix}.{rank}.et")[1]]


def rank_count(prefix: str) -> int:
    return len(TraceSet.load(prefix))


# -- dp --to -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "model,kw,dims",
    [
        ("llama3-8b", {"tp": 2, "pp": 2}, (2, 16)),
        ("llama3-8b", {"tp": 2, "zero": 1, "bucket_mb": 0.3}, (2, 8)),
        ("mixtral-8x7b", {"tp": 2, "pp": 2, "ep": 2}, (2, 16)),
        ("mixtral-8x7b", {"ep": 2, "zero": 1, "metadata_node": False}, (8,)),
    ],
)
def test_dp_retarget_equals_generating_at_the_new_width(tmp_path, model, kw, dims):
    small = 4 if kw.get("ep") else 2
    src = llm(tmp_path, "src", model, small, **kw)
    ref = llm(tmp_path, "ref", model, 8, **kw)
    assert transform(src, tmp_path / "out", "dp", "--to", 8) == 0
    out = str(tmp_path / "out")
    n = rank_count(ref)
    assert rank_count(out) == n
    # Node for node the same program (ids included), the same groups, the same generator parameters.
    assert Path(out + ".comm_groups.json").read_bytes() == Path(ref + ".comm_groups.json").read_bytes()
    for rank in range(n):
        assert nodes_of(out, rank) == nodes_of(ref, rank), f"rank {rank}"
    config = [get_attr(read_trace(f"{p}.0.et")[0], "config") for p in (out, ref)]
    assert config[0] == config[1]
    hw = two_level_hardware(tmp_path, dims)
    assert simulate(TraceSet.load(out), hw).finish_ns == simulate(TraceSet.load(ref), hw).finish_ns


def test_dp_keeps_all_reduce_sizes_and_scales_zero_shards(tmp_path):
    src = llm(tmp_path, "src", "llama3-8b", 2, zero=1, bucket_mb=0.3)
    assert transform(src, tmp_path / "out", "dp", "--to", 8) == 0
    before = {
        n.name: get_int(n, "comm_size") for n in read_trace(f"{src}.0.et")[1] if n.name.startswith(("grad", "param"))
    }
    after = {
        n.name: get_int(n, "comm_size")
        for n in read_trace(f"{tmp_path}/out.0.et")[1]
        if n.name.startswith(("grad", "param"))
    }
    assert before.keys() == after.keys() and before
    for name, size in before.items():
        if name.endswith("reduce_scatter"):  # the whole bucket, re-padded to the wider group
            assert after[name] == math.ceil(size / 8) * 8
        else:  # each rank's shard of the same bucket
            assert after[name] == math.ceil(size * 2 / 8)


def test_dp_output_is_reproducible_and_records_provenance(tmp_path):
    src = llm(tmp_path, "src", "llama3-8b", 2, tp=2)
    for out in ("a", "b"):
        assert transform(src, tmp_path / out, "dp", "--to", 4, "compute", "--scale", "0.5") == 0
    for rank in range(8):
        assert (tmp_path / f"a.{rank}.et").read_bytes() == (tmp_path / f"b.{rank}.et").read_bytes()
    note = json.loads(get_attr(read_trace(tmp_path / "a.0.et")[0], "chakra_pipe.transform"))
    assert note == {
        "input_sha256": TraceSet.load(src).sha256(),
        "transforms": [{"op": "dp", "args": ["--to", "4"]}, {"op": "compute", "args": ["--scale", "0.5"]}],
    }
    stats = json.loads((tmp_path / "a.transform_stats.json").read_text())
    assert [s["op"] for s in stats["ops"]] == ["dp", "compute"]
    assert stats["ops"][0]["before"]["ranks"] == 4 and stats["ops"][0]["after"]["ranks"] == 8
    assert stats["ops"][1]["after"]["comp_micros"] < stats["ops"][1]["before"]["comp_micros"]


def test_dp_rewrites_metadata_tables_to_the_new_groups(tmp_path):
    src = llm(tmp_path, "src", "llama3-8b", 2, tp=2)
    assert transform(src, tmp_path / "out", "dp", "--to", 4) == 0
    groups = {k: v for k, v in json.loads((tmp_path / "out.comm_groups.json").read_text()).items()}
    for rank in range(8):
        meta = next(n for n in read_trace(tmp_path / f"out.{rank}.et")[1] if n.type == schema.METADATA_NODE)
        table, problem = parse_process_groups(meta.inputs.values)
        assert not problem
        # tp pairs (2r, 2r+1) and dp groups of 4 strided by tp = 2, each named as in the comm-group file.
        assert table == {
            "0": [],
            groups_key(groups, [rank - rank % 2, rank - rank % 2 + 1]): [rank - rank % 2, rank - rank % 2 + 1],
            groups_key(groups, list(range(rank % 2, 8, 2))): list(range(rank % 2, 8, 2)),
        }


def groups_key(groups: dict[str, list[int]], members: list[int]) -> str:
    return next(k for k, v in groups.items() if v == members)


@pytest.mark.parametrize(
    "argv,needle",
    [
        (["dp", "--to", "6"], "--to 6 is not a multiple of the set's DP width 4"),
        (["dp", "--to", "0"], "not a positive width"),
        (["straggler", "--ranks", "3", "99", "--delay", "1000"], "rank 99 is not in the set (ranks 0..7)"),
        (["straggler", "--ranks", "1", "--delay", "1500"], "whole number of µs"),
        (["compute", "--scale", "-1"], "is not a number >= 0"),
        (["compute", "--match", "("], "bad regular expression"),
        (["frobnicate"], "expected an op"),
        (["comm", "--scale", "0.5", "--drop"], "not allowed with argument"),
    ],
)
def test_bad_transforms_exit_2_with_one_line_and_write_nothing(tmp_path, capsys, argv, needle):
    src = llm(tmp_path, "src", "llama3-8b", 4, tp=2)
    assert transform(src, tmp_path / "out", *argv) == 2
    err = capsys.readouterr().err
    assert needle in err and err.count("\n") == 1
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith("out")) == []


def test_sets_without_a_dp_group_are_refused(tmp_path, capsys):
    no_dp = llm(tmp_path, "nodp", "llama3-8b", 1, tp=2)
    assert transform(no_dp, tmp_path / "out", "dp", "--to", 4) == 2
    assert "no DP group to widen" in capsys.readouterr().err
    ep_is_dp = llm(tmp_path, "epdp", "mixtral-8x7b", 2, ep=2)
    assert transform(ep_is_dp, tmp_path / "out", "dp", "--to", 4) == 2
    assert "expert-parallel groups are the DP groups" in capsys.readouterr().err
    # A set from another tool: groups smaller than the world, none labelled as data-parallel.
    generate_collective(CollectiveSpec("all_reduce", 4, 1024), tmp_path / "ar")
    (tmp_path / "ar.comm_groups.json").write_text('{"1": [0, 1], "2": [2, 3]}')
    assert transform(tmp_path / "ar", tmp_path / "out", "dp", "--to", 8) == 2
    assert "cannot identify the data-parallel groups" in capsys.readouterr().err
    assert not list(tmp_path.glob("out*"))
    assert transform(tmp_path / "ar", tmp_path / "out", "dp", "--to", 8, "--group", "7") == 2
    assert "the set has no process group '7'" in capsys.readouterr().err
    (tmp_path / "ar.comm_groups.json").write_text('{"1": [0, 2, 3]}')
    assert transform(tmp_path / "ar", tmp_path / "out", "dp", "--to", 8, "--group", "1") == 2
    assert "group 1 [0, 2, 3] is not an evenly strided set of replicas" in capsys.readouterr().err
    assert not list(tmp_path.glob("out*"))


def test_naming_the_dp_group_widens_an_unlabelled_set(tmp_path, fixtures_dir):
    """The user says the world is the DP group: the pairs are per-replica groups, copied into each block."""
    generate_collective(CollectiveSpec("all_reduce", 4, 1 << 20), tmp_path / "ar")
    (tmp_path / "ar.comm_groups.json").write_text('{"1": [0, 1], "2": [2, 3]}')
    assert transform(tmp_path / "ar", tmp_path / "w", "dp", "--to", 8, "--group", "0") == 0
    assert json.loads((tmp_path / "w.comm_groups.json").read_text()) == {
        "1": [0, 1],
        "2": [2, 3],
        "3": [4, 5],
        "4": [6, 7],
    }
    hw = load_hardware(fixtures_dir / RING_4CHUNKS, fixtures_dir / "astra-sim/network/analytical/Ring_8npus.yml")
    assert simulate(TraceSet.load(tmp_path / "w"), hw).finish_ns == [64_440] * 8  # spec §7.1


def test_a_failing_op_leaves_an_existing_output_untouched(tmp_path):
    src = llm(tmp_path, "src", "llama3-8b", 2)
    assert transform(src, tmp_path / "out", "compute", "--scale", "2") == 0
    before = {p.name: p.read_bytes() for p in tmp_path.glob("out*")}
    assert transform(src, tmp_path / "out", "compute", "--scale", "0.5", "dp", "--to", "3") == 2
    assert {p.name: p.read_bytes() for p in tmp_path.glob("out*")} == before


def test_a_set_without_groups_widens_as_one_dp_group(tmp_path, fixtures_dir):
    generate_collective(CollectiveSpec("all_reduce", 4, 1 << 20), tmp_path / "ar4")
    generate_collective(CollectiveSpec("all_reduce", 8, 1 << 20), tmp_path / "ar8")
    assert transform(tmp_path / "ar4", tmp_path / "w", "dp", "--to", 8) == 0
    hw = load_hardware(fixtures_dir / RING_4CHUNKS, fixtures_dir / "astra-sim/network/analytical/Ring_8npus.yml")
    assert simulate(TraceSet.load(tmp_path / "w"), hw).finish_ns == [64_440] * 8  # spec §7.1


# -- compute, straggler, comm ---------------------------------------------------------------------


def comp_durations(prefix: str, rank: int) -> list[int]:
    return [n.duration_micros for n in read_trace(f"{prefix}.{rank}.et")[1] if n.type == schema.COMP_NODE]


def test_compute_scale_halves_every_comp_duration_and_the_simulated_compute(tmp_path):
    src = llm(tmp_path, "src", "llama3-8b", 2, tp=2, pp=2)
    # Doubling first makes every duration even, so halving is exact and the round trip is the identity.
    assert transform(src, tmp_path / "x2", "compute", "--scale", "2") == 0
    assert transform(tmp_path / "x2", tmp_path / "half", "compute", "--scale", "0.5") == 0
    hw = two_level_hardware(tmp_path, (2, 4))
    doubled, halved = (simulate(TraceSet.load(tmp_path / p), hw) for p in ("x2", "half"))
    for rank in range(8):
        assert comp_durations(str(tmp_path / "half"), rank) == [
            d // 2 for d in comp_durations(str(tmp_path / "x2"), rank)
        ]
        assert nodes_of(str(tmp_path / "half"), rank) == nodes_of(src, rank)
    assert [c // 2 for c in doubled.compute_ns] == halved.compute_ns
    assert all(c > 0 for c in halved.compute_ns)


def test_compute_scale_rounds_half_up_and_scales_the_roofline(tmp_path):
    src = llm(tmp_path, "src", "llama3-8b", 2)
    assert transform(src, tmp_path / "half", "compute", "--scale", "0.5") == 0
    old, new = comp_durations(src, 0), comp_durations(str(tmp_path / "half"), 0)
    assert new == [(d + 1) // 2 for d in old] and any(d % 2 for d in old)
    x2 = tmp_path / "x2"
    assert transform(src, x2, "compute", "--scale", "2") == 0
    hw = two_level_hardware(tmp_path, (2,), roofline=1)
    base, doubled = (simulate(TraceSet.load(p), hw).compute_ns for p in (src, x2))
    assert all(abs(d - 2 * b) <= 2 * 40 for b, d in zip(base, doubled))  # ≤ 1 ns truncation per node


def test_compute_match_and_type_select_nodes(tmp_path):
    src = llm(tmp_path, "src", "llama3-8b", 2)
    assert transform(src, tmp_path / "m", "compute", "--scale", "3", "--match", r"\.attn\.", "--type", "COMP") == 0
    for a, b in zip(read_trace(f"{src}.0.et")[1], read_trace(tmp_path / "m.0.et")[1]):
        want = a.duration_micros * 3 if a.type == schema.COMP_NODE and ".attn." in a.name else a.duration_micros
        assert b.duration_micros == want
    assert transform(src, tmp_path / "c", "compute", "--scale", "3", "--type", "CPU") == 0
    assert nodes_of(str(tmp_path / "c"), 0) == nodes_of(src, 0)  # generated compute is all on the device


def test_per_rank_factors_reach_the_simulator(tmp_path):
    src = llm(tmp_path, "src", "llama3-8b", 4)
    factors = tmp_path / "f.json"
    factors.write_text('{"1": 2, "3": 0.5}')
    assert transform(src, tmp_path / "x2", "compute", "--scale", "2") == 0
    assert transform(tmp_path / "x2", tmp_path / "het", "compute", "--per-rank", factors) == 0
    hw = two_level_hardware(tmp_path, (4,))
    base = simulate(TraceSet.load(tmp_path / "x2"), hw).compute_ns
    het = simulate(TraceSet.load(tmp_path / "het"), hw).compute_ns
    assert het == [base[0], 2 * base[1], base[2], base[3] // 2]
    factors.write_text('{"4": 2}')
    assert transform(src, tmp_path / "bad", "compute", "--per-rank", factors) == 2


def test_straggler_delay_on_a_ring_all_reduce(tmp_path, fixtures_dir):
    generate_collective(CollectiveSpec("all_reduce", 8, 1 << 20), tmp_path / "ar")
    assert transform(tmp_path / "ar", tmp_path / "late", "straggler", "--ranks", 3, "--delay", 1_000_000) == 0
    hw = load_hardware(fixtures_dir / RING_4CHUNKS, fixtures_dir / "astra-sim/network/analytical/Ring_8npus.yml")
    base = simulate(TraceSet.load(tmp_path / "ar"), hw).finish_ns
    late = simulate(TraceSet.load(tmp_path / "late"), hw).finish_ns
    assert base == [64_440] * 8  # spec §7.1
    # The step ends exactly one delay later, on the straggler. The others had sent their data into
    # the straggler's buffer before it started, so it runs its ring steps without waiting and each rank
    # downstream receives its last message one network hop (N = 1,110 ns, §7.1) before the next one.
    assert late[3] == 64_440 + 1_000_000 == max(late)
    assert late == [late[3] - ((3 - r) % 8) * 1_110 for r in range(8)]


def test_straggler_delay_at_a_node_and_slowdown(tmp_path):
    src = llm(tmp_path, "src", "llama3-8b", 2)
    assert transform(src, tmp_path / "d", "straggler", "--ranks", 1, "--delay", 5000, "--at", r"head\.bwd") == 0
    nodes = read_trace(tmp_path / "d.1.et")[1]
    delays = [n for n in nodes if n.name == "chakra_pipe.straggler.delay"]
    heads = [n for n in nodes if "head.bwd" in n.name]
    assert len(delays) == len(heads) == 2 and all(d.duration_micros == 5 for d in delays)
    assert [list(h.data_deps) for h in heads] == [[d.id] for d in delays]
    assert nodes_of(str(tmp_path / "d"), 0) == nodes_of(src, 0)
    assert transform(src, tmp_path / "s", "straggler", "--ranks", 0, "--slowdown", 3) == 0
    assert comp_durations(str(tmp_path / "s"), 0) == [3 * d for d in comp_durations(src, 0)]
    assert comp_durations(str(tmp_path / "s"), 1) == comp_durations(src, 1)
    assert main(["validate", str(tmp_path / "d")]) == 0


def test_comm_scale_and_drop(tmp_path):
    src = llm(tmp_path, "src", "llama3-8b", 2, tp=2, pp=2)
    assert transform(src, tmp_path / "s", "comm", "--scale", "0.5", "--type", "all_reduce") == 0
    for a, b in zip(read_trace(f"{src}.2.et")[1], read_trace(tmp_path / "s.2.et")[1]):
        size = get_int(a, "comm_size")
        scaled = a.type == schema.COMM_COLL_NODE and get_int(a, "comm_type") == schema.ALL_REDUCE
        assert get_int(b, "comm_size") == ((size + 1) // 2 if scaled else size)
    assert transform(src, tmp_path / "free", "comm", "--drop") == 0
    assert main(["validate", str(tmp_path / "free")]) == 0
    hw = two_level_hardware(tmp_path, (2, 4))
    free = simulate(TraceSet.load(tmp_path / "free"), hw)
    base = simulate(TraceSet.load(src), hw)
    assert not free.collectives and free.compute_ns == base.compute_ns
    # With communication free every rank is bound by its own compute plus pipeline waits only.
    assert max(free.finish_ns) < max(base.finish_ns)
    kinds = {n.type for r in range(8) for n in read_trace(tmp_path / f"free.{r}.et")[1]}
    assert kinds == {schema.COMP_NODE, schema.METADATA_NODE}


def test_writing_over_the_input_is_refused(tmp_path, capsys):
    src = llm(tmp_path, "src", "llama3-8b", 2)
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    assert transform(src, src, "compute", "--scale", "2") == 2
    assert "OUT_PREFIX is the input set" in capsys.readouterr().err
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == before


def test_megatron_labelled_dp_groups_are_found_without_generator_parameters(tmp_path):
    """A set from another tool: Megatron-Core's ``DATA_PARALLEL_GROUP`` labels, no generator config."""
    from chakra_pipe.et import write_trace

    src = llm(tmp_path, "src", "llama3-8b", 2, tp=2)
    for rank in range(4):
        md, nodes = read_trace(f"{src}.{rank}.et")
        del md.attr[:]  # no generate llm parameters to fall back on
        for n in nodes:
            if n.type == schema.METADATA_NODE:
                n.inputs.values = n.inputs.values.replace('"pg_desc":"dp"', '"pg_desc":"DATA_PARALLEL_GROUP"')
        write_trace(f"{tmp_path}/mg.{rank}.et", md, nodes)
    (tmp_path / "mg.comm_groups.json").write_bytes(Path(src + ".comm_groups.json").read_bytes())
    ref = llm(tmp_path, "ref", "llama3-8b", 8, tp=2)
    assert transform(tmp_path / "mg", tmp_path / "out", "dp", "--to", 8) == 0
    assert (tmp_path / "out.comm_groups.json").read_bytes() == Path(ref + ".comm_groups.json").read_bytes()
    for rank in range(16):
        ours = read_trace(tmp_path / f"out.{rank}.et")[1]
        for n in ours:
            if n.type == schema.METADATA_NODE:
                n.inputs.values = n.inputs.values.replace('"DATA_PARALLEL_GROUP"', '"dp"')
        assert [n.SerializeToString() for n in ours] == nodes_of(ref, rank)


def test_factors_that_overflow_trace_fields_are_refused(tmp_path, capsys):
    src = llm(tmp_path, "src", "llama3-8b", 2)
    assert transform(src, tmp_path / "out", "compute", "--scale", "1e30") == 2
    assert "exceeds the int64 range of trace fields" in capsys.readouterr().err
    assert transform(src, tmp_path / "out", "comm", "--scale", "1e30") == 2
    assert "comm_size" in capsys.readouterr().err and not list(tmp_path.glob("out*"))


def test_dp_widens_pg_names_written_as_std_stoi_reads_them(tmp_path):
    """A set whose collectives name their groups ``"01"`` / ``" 1"`` (ASTRA-sim's ``std::stoi``
    reads group 1) widens as the set spelled ``"1"`` does: the output names the new groups plainly."""
    src = llm(tmp_path, "src", "llama3-8b", 2, tp=2)
    ref = llm(tmp_path, "ref", "llama3-8b", 4, tp=2)
    respelled = 0
    for rank in range(rank_count(src)):
        metadata, nodes = read_trace(f"{src}.{rank}.et")
        for a in (a for n in nodes for a in n.attr if a.name == "pg_name" and a.string_val not in ("", "0")):
            a.string_val = ("0" if rank % 2 else " ") + a.string_val
            respelled += 1
        write_trace(f"{src}.{rank}.et", metadata, nodes)
    assert respelled
    assert transform(src, tmp_path / "out", "dp", "--to", 4) == 0
    out = str(tmp_path / "out")
    assert rank_count(out) == rank_count(ref)
    for rank in range(rank_count(ref)):
        assert nodes_of(out, rank) == nodes_of(ref, rank), f"rank {rank}"
