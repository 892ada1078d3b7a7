"""A 2-rank gloo capture re-targeted to 8 and 64 ranks: converts, validates, simulates, groups right.

The capture's world is its only data-parallel group (DDP over all ranks), so widening copies the
two ranks as blocks: DDP's gradient all-reduces keep their bytes, the one sub-group (PyTorch's
group "1", all ranks of a 2-rank world) becomes every rank, and each block's send/recv pair is its own.
"""

from __future__ import annotations

import json
import os
from collections import Counter
from pathlib import Path

import pytest

from chakra_pipe.et import TraceSet, read_trace, schema
from chakra_pipe.et.attrs import get_attr, get_int
from chakra_pipe.et.process_groups import parse_process_groups

DATA = Path(__file__).parent / "data" / "capture"


@pytest.fixture(scope="module")
def captured(tmp_path_factory) -> str:
    pytest.importorskip("torch", reason="needs the torch extra (pip install -e '.[torch]') to capture")
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    from chakra_pipe.capture.runner import CaptureConfig, run_capture
    from chakra_pipe.convert.rankset import convert_capture

    out = tmp_path_factory.mktemp("capture")
    run_capture(CaptureConfig(model="mlp", ranks=2, steps=1, backend="gloo", out=out / "cap"))
    convert_capture(out / "cap", str(out / "mlp"))
    return str(out / "mlp")


def all_reduce_sizes(path: Path) -> Counter:
    return Counter(
        (get_attr(n, "pg_name", ""), get_int(n, "comm_size"))
        for n in read_trace(path)[1]
        if n.type == schema.COMM_COLL_NODE and get_int(n, "comm_type") == schema.ALL_REDUCE
    )


def ring_network(tmp_path: Path, npus: int, bandwidth: float = 50.0) -> Path:
    path = tmp_path / f"ring{npus}_{bandwidth}.yml"
    path.write_text(f"topology: [ Ring ]\nnpus_count: [ {npus} ]\nbandwidth: [ {bandwidth} ]\nlatency: [ 500.0 ]\n")
    return path


@pytest.mark.slow
@pytest.mark.parametrize("width", [8, 64])
def test_capture_retargets_validates_and_simulates(captured, tmp_path, width):
    from chakra_pipe.cli import main
    from chakra_pipe.sim import load_hardware, simulate
    from chakra_pipe.validate import validate_set

    out = tmp_path / "wide"
    assert main(["transform", captured, str(out), "dp", "--to", str(width)]) == 0
    assert validate_set(str(out), strict=False).errors == 0
    # Groups: the sub-group spans the new world, in the comm-group file and in every METADATA table.
    assert json.loads(Path(f"{out}.comm_groups.json").read_text()) == {"1": list(range(width))}
    for rank in range(width):
        src = rank % 2
        path = Path(f"{out}.{rank}.et")
        assert all_reduce_sizes(path) == all_reduce_sizes(Path(f"{captured}.{src}.et"))  # DDP sizes unchanged
        meta = [n for n in read_trace(path)[1] if n.type == schema.METADATA_NODE]
        assert meta
        for node in meta:
            table, problem = parse_process_groups(node.inputs.values)
            assert not problem and table == {"0": [], "1": []}  # PyTorch's "every rank"
            sizes = {e["pg_name"]: e["group_size"] for e in json.loads(node.inputs.values[2:-2])}
            assert sizes == {"0": width, "1": width}
        peers = {
            (n.type, get_int(n, "comm_src"), get_int(n, "comm_dst"), get_int(n, "comm_tag"))
            for n in read_trace(path)[1]
            if n.type in (schema.COMM_SEND_NODE, schema.COMM_RECV_NODE)
        }
        pair = (rank - src, rank - src + 1)
        kind = schema.COMM_SEND_NODE if src == 0 else schema.COMM_RECV_NODE
        assert peers == {(kind, *pair, 7)}
    hw = load_hardware(DATA / "system_ring.json", ring_network(tmp_path, width))
    result = simulate(TraceSet.load(out), hw)
    assert len(result.finish_ns) == width and min(result.finish_ns) > 0


def test_a_one_gpu_capture_widens_to_data_parallel_ranks(tmp_path):
    """One GPU, DDP at world size 1 (tests/data/capture/h200_1rank): its gradient all-reduces run on the
    one-member world group, which ``dp --to 4`` widens; the named sub-group is copied to every rank."""
    from chakra_pipe.cli import main
    from chakra_pipe.convert.rankset import convert_capture
    from chakra_pipe.sim import load_hardware, simulate
    from chakra_pipe.validate import validate_set

    one = str(tmp_path / "one")
    convert_capture(DATA / "h200_1rank" / "gpt-tiny", one)
    out = tmp_path / "wide"
    assert main(["transform", one, str(out), "dp", "--to", "4"]) == 0
    assert validate_set(str(out), strict=False).errors == 0
    assert json.loads(Path(f"{out}.comm_groups.json").read_text()) == {"1": [0], "2": [1], "3": [2], "4": [3]}
    sizes = all_reduce_sizes(tmp_path / "one.0.et")
    assert sizes[("0", 69504)] == 2  # gpt-tiny's gradients, one DDP bucket on the world group
    for rank in range(4):  # all-reduce buffers keep their bytes; each rank's sub-group is its own
        assert all_reduce_sizes(Path(f"{out}.{rank}.et")) == Counter(
            {(("0" if pg == "0" else str(rank + 1)), size): k for (pg, size), k in sizes.items()}
        )
    system = DATA / "system_ring.json"
    alone = simulate(TraceSet.load(one), load_hardware(system, ring_network(tmp_path, 1))).finish_ns[0]
    fast, slow = (
        simulate(TraceSet.load(str(out)), load_hardware(system, ring_network(tmp_path, 4, bw))).finish_ns
        for bw in (50.0, 0.05)
    )
    assert len(set(fast)) == 1 and alone < fast[0] < slow[0]  # the all-reduces now cost network time


def test_a_one_rank_set_without_a_world_collective_is_refused(tmp_path, capsys):
    """A one-GPU run without DDP has no gradient reduction: widening it would add no communication."""
    from test_rankset import coll, node, write_set

    from chakra_pipe.cli import main

    for nodes, needle in (
        ([node(1), coll(2, pg="1", data=[1])], "no collective on its world group"),
        ([node(1), coll(2, data=[1])], "--group: a one-rank set widens its world group (--group 0) only"),
    ):
        prefix = write_set(tmp_path, [nodes], {"1": [0]})
        argv = ["transform", prefix, str(tmp_path / "o"), "dp", "--to", "4"]
        assert main(argv + (["--group", "1"] if "--group" in needle else [])) == 2
        assert needle in capsys.readouterr().err
        assert not list(tmp_path.glob("o*"))


def test_a_one_rank_set_refuses_rather_than_keep_a_labelled_dp_group_local(tmp_path, capsys):
    """A one-rank set whose collectives run on a group labelled data-parallel (Megatron's
    ``DATA_PARALLEL_GROUP`` of one member) beside the world: widening only the world would leave its
    gradient reductions one-member copies, a network what-if with no gradient traffic. Refused; a
    generated one-rank set is refused naming its dp 1, as a generated multi-rank one."""
    from test_rankset import coll, metadata, write_set

    from chakra_pipe.cli import main

    table = [{"pg_name": "0", "ranks": [0]}, {"pg_name": "1", "ranks": [0], "pg_desc": "DATA_PARALLEL_GROUP"}]
    prefix = write_set(tmp_path, [[metadata(0, table), coll(1, data=[0]), coll(2, pg="1", data=[1])]], {"1": [0]})
    assert main(["transform", prefix, str(tmp_path / "o"), "dp", "--to", "4"]) == 2
    assert "collectives on group 1, labelled data-parallel" in capsys.readouterr().err
    assert not list(tmp_path.glob("o*"))
    one = tmp_path / "gen" / "one"
    assert main(["generate", "llm", "--model", "llama3-8b", "--layers", "1", "--out", str(one)]) == 0
    capsys.readouterr()
    assert main(["transform", str(one), str(tmp_path / "g"), "dp", "--to", "4"]) == 2
    assert "generated with dp 1" in capsys.readouterr().err
