"""Capture -> convert -> validate -> simulate on 2 CPU ranks (gloo), checked against what was issued.

Expected comm nodes are derived from the capture plan and ASTRA-sim's ``comm_size`` semantics
(astra-sim-semantics.md §6.1), and DDP's gradient all-reduces from the model's parameter bytes;
nothing is copied from our own output.
"""

from __future__ import annotations

import os
import subprocess
from collections import Counter
from pathlib import Path

import pytest
from conftest import TORCH_EXTRA
from processes import capture_args, cli, run_bounded

from chakra_pipe.capture.plan import P2P_TAG, explicit_calls, sub_group_ranks
from chakra_pipe.et import read_trace, schema
from chakra_pipe.et.attrs import get_attr

DATA = Path(__file__).parent / "data" / "capture"
RANKS = 2
FLOAT = 4
# ASTRA-sim comm_size of each planned call: AG = per-rank input, RS/A2A = full input buffer.
COLL_OF = {
    "all_reduce": schema.ALL_REDUCE,
    "all_gather_into_tensor": schema.ALL_GATHER,
    "reduce_scatter_tensor": schema.REDUCE_SCATTER,
    "all_to_all_single": schema.ALL_TO_ALL,
    "broadcast": schema.BROADCAST,
}


def expected_comm(rank: int) -> Counter:
    """(node type, comm_type, bytes, pg_name, src, dst, tag) of every explicit call of one step."""
    out: Counter = Counter()
    for c in explicit_calls(rank, RANKS):
        pg = "1" if c.group == "sub" else "0"  # the capture's one sub-group is PyTorch's group "1"
        if c.kind == "send":
            out[(schema.COMM_SEND_NODE, None, c.numel * FLOAT, pg, rank, c.peer, c.tag)] += 1
        elif c.kind == "recv":
            out[(schema.COMM_RECV_NODE, None, c.numel * FLOAT, pg, c.peer, rank, c.tag)] += 1
        else:
            out[(schema.COMM_COLL_NODE, COLL_OF[c.kind], c.numel * FLOAT, pg, None, None, None)] += 1
    return out


def comm_nodes(path: Path) -> Counter:
    _, nodes = read_trace(path)
    return Counter(
        (
            n.type,
            get_attr(n, "comm_type", None),
            get_attr(n, "comm_size"),
            get_attr(n, "pg_name"),
            get_attr(n, "comm_src", None),
            get_attr(n, "comm_dst", None),
            get_attr(n, "comm_tag", None),
        )
        for n in nodes
        if n.type in (schema.COMM_COLL_NODE, schema.COMM_SEND_NODE, schema.COMM_RECV_NODE)
    )


def test_plan_has_every_simulated_kind_a_broadcast_a_subgroup_and_a_matched_pair():
    kinds = [c.kind for c in explicit_calls(0, 2)]
    assert set(COLL_OF) <= set(kinds) and "send" in kinds
    assert [c for c in explicit_calls(0, 2) if c.group == "sub"]
    recv = [c for c in explicit_calls(1, 2) if c.kind == "recv"]
    assert len(recv) == 1 and (recv[0].peer, recv[0].tag) == (0, P2P_TAG)
    assert sub_group_ranks(2) == [0, 1] and sub_group_ranks(8) == [0, 1, 2, 3]


@pytest.fixture(scope="module")
def torch_env():
    pytest.importorskip("torch", reason=TORCH_EXTRA)
    os.environ.setdefault("OMP_NUM_THREADS", "1")


def _capture_and_convert(model: str, out: Path) -> str:
    from chakra_pipe.capture.runner import CaptureConfig, run_capture
    from chakra_pipe.convert.rankset import convert_capture

    run_capture(CaptureConfig(model=model, ranks=RANKS, steps=1, backend="gloo", out=out / "cap"))
    for r in range(RANKS):
        assert (out / "cap" / f"rank{r}.host_et.json.gz").is_file()
        assert (out / "cap" / f"rank{r}.kineto.json.gz").is_file()
    prefix = str(out / "set" / model)
    summary = convert_capture(out / "cap", prefix)
    # Fresh CPU captures carry rf ids: (nearly) every host op links (spec §4: only the root does not).
    assert len(summary.links) == RANKS and all(s.matched >= 0.95 * s.host_ops for s in summary.links)
    return prefix


@pytest.mark.slow
@pytest.mark.parametrize("model", ["mlp", "resnet-tiny", "gpt-tiny"])
def test_builtin_capture_converts_validates_and_simulates(model: str, tmp_path: Path, torch_env):
    import json

    from chakra_pipe.capture.models import gradient_bytes

    prefix = _capture_and_convert(model, tmp_path)
    capture = json.loads((tmp_path / "cap" / "capture.json").read_text())
    assert capture["world_size"] == RANKS and capture["backend"] == "gloo"
    assert capture["median_step_time_ms_untraced"] > 0
    for rank in range(RANKS):
        got = comm_nodes(Path(f"{prefix}.{rank}.et"))
        want = expected_comm(rank)
        assert got & want == want, f"rank {rank}: missing {want - got}"
        rest = got - want
        # What is left is DDP: all-reduces on the default group adding up to the gradient bytes.
        assert {(k[0], k[1], k[3]) for k in rest} == {(schema.COMM_COLL_NODE, schema.ALL_REDUCE, "0")}
        assert sum(k[2] * c for k, c in rest.items()) == gradient_bytes(model)
    assert json.loads(Path(prefix + ".comm_groups.json").read_text()) == {"1": sub_group_ranks(RANKS)}

    from chakra_pipe.validate import validate_set

    report = validate_set(prefix, strict=True)
    assert report.errors == 0

    from chakra_pipe.et import TraceSet
    from chakra_pipe.sim import load_hardware, simulate

    hw = load_hardware(DATA / "system_ring.json", DATA / "network_ring_2npus.yml")
    result = simulate(TraceSet.load(prefix), hw)
    assert len(result.finish_ns) == RANKS and min(result.finish_ns) > 0


USER_SCRIPT = """
import torch
import torch.distributed as dist

def train_step(rank, world_size):
    x = torch.ones(100)
    dist.all_reduce(x)
    if rank == 0:
        dist.send(torch.ones(8), dst=1, tag=3)
    else:
        dist.recv(torch.empty(8), src=0, tag=3)
"""


@pytest.mark.slow
def test_user_script_capture_via_cli(tmp_path: Path, torch_env):
    script = tmp_path / "step.py"
    script.write_text(USER_SCRIPT)
    r = run_bounded(cli(*capture_args(script, tmp_path / "cap", "--steps", "1")), timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    r = run_bounded(cli("convert", "pytorch", "--ranks-dir", tmp_path / "cap", "--out", tmp_path / "u"), timeout=300)
    assert r.returncode == 0, r.stderr
    assert comm_nodes(tmp_path / "u.0.et") == Counter(
        {
            (schema.COMM_COLL_NODE, schema.ALL_REDUCE, 400, "0", None, None, None): 1,
            (schema.COMM_SEND_NODE, None, 32, "0", 0, 1, 3): 1,
        }
    )
    assert comm_nodes(tmp_path / "u.1.et") == Counter(
        {
            (schema.COMM_COLL_NODE, schema.ALL_REDUCE, 400, "0", None, None, None): 1,
            (schema.COMM_RECV_NODE, None, 32, "0", 0, 1, 3): 1,
        }
    )


def test_capture_cli_rejects_bad_arguments(tmp_path: Path, capsys):
    from chakra_pipe.cli import main

    for extra, needle in (
        (["--model", "nope"], "unknown model"),
        (["--model", "missing.py"], "no such script"),
        (["--model", "mlp", "--ranks", "0"], "--ranks"),
        (["--model", "mlp", "--bucket-mb", "0"], "--bucket-mb: must be a finite number > 0 MB"),
        (["--model", "mlp", "--bucket-mb", "inf"], "--bucket-mb: must be a finite number > 0 MB"),
        (["--model", "mlp", "--bucket-mb", "nan"], "--bucket-mb: must be a finite number > 0 MB"),
        (["--model", __file__, "--bucket-mb", "1"], "built-in models only"),
    ):
        assert main(["capture", "--out", str(tmp_path / "o"), *extra]) == 2
        err = capsys.readouterr().err
        assert needle in err and len(err.strip().splitlines()) == 1, err


@pytest.mark.slow
def test_a_failing_rank_stops_the_capture_with_one_line(tmp_path: Path, torch_env):
    script = tmp_path / "bad.py"
    script.write_text("def train_step(rank, world_size):\n    raise RuntimeError(f'boom on rank {rank}')\n")
    r = run_bounded(cli(*capture_args(script, tmp_path / "cap")), timeout=300)
    assert r.returncode == 2
    last = r.stderr.strip().splitlines()[-1]
    assert last.startswith("chakra-pipe capture: error:") and "RuntimeError: boom on rank" in last
    assert not list((tmp_path / "cap").glob("*.gz")) and not (tmp_path / "cap" / "capture.json").exists()


@pytest.mark.slow
def test_a_hanging_train_step_ends_at_the_timeout_with_nothing_left(tmp_path: Path, torch_env):
    script = tmp_path / "hang.py"
    script.write_text("import time\n\ndef train_step(rank, world_size):\n    time.sleep(3600)\n")
    r = run_bounded(cli(*capture_args(script, tmp_path / "cap", "--timeout", "8")), timeout=120)
    assert r.returncode == 2
    last = r.stderr.strip().splitlines()[-1]
    assert "did not finish within --timeout 8 s" in last and "Traceback" not in r.stderr
    assert not list((tmp_path / "cap").iterdir())
    ps = subprocess.run(["pgrep", "-f", str(script)], capture_output=True, text=True)
    assert ps.stdout.strip() == "", "a rank outlived the capture"
