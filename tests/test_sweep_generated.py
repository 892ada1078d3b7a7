"""Generated campaign workloads simulated in memory by their shard jobs (issue #16: no rank files).

The reference is the file path every campaign took before: ``chakra-pipe generate`` writes the rank
set, the shard loads it and runs the full engine. The in-memory shard must give the same results CSV
byte for byte (step times, every metric, the trace digest), on hardware where the symmetric run
applies and where it falls back to the full engine.
"""

from __future__ import annotations

import io
from pathlib import Path

import pandas as pd
import pytest
from campaign_files import campaign_config
from conftest import validated

from chakra_pipe.cli import main
from chakra_pipe.errors import ConfigError
from chakra_pipe.generate import limits
from chakra_pipe.results import collectives
from chakra_pipe.sweep.campaign import Campaign
from chakra_pipe.sweep.shard import run_shard

REPO = Path(__file__).resolve().parent.parent
SCALEOUT = {
    "network": "config/hardware/scaleout_2d/network.yml",
    "system": "config/hardware/scaleout_2d/system.json",
}
GPT = {
    "kind": "llm",
    "model": "gpt3-13b",
    "layers": 2,
    "hidden": 256,
    "heads": 8,
    "ffn": 1024,
    "vocab": 512,
    "seq": 128,
    "tp": 2,
    "pp": 2,
    "dp": 8,
    "microbatches": 2,
}


def _plan(tmp_path: Path, workloads: dict, **extra) -> Campaign:
    platforms = {
        # 8-GPU nodes × 4: TP and DP nest with the nodes, so the symmetric run is exact
        "sym": {**SCALEOUT, "axes": {"network.bandwidth": [[400.0, 50.0], [400.0, 25.0]]}},
        # a Ring's hop count depends on the NPU pair: the full engine runs
        "full": {**SCALEOUT, "backend": "congestion_aware", "axes": {"network.topology": [["Ring", "Switch"]]}},
    }
    cfg = campaign_config(tmp_path, "mem", workloads, platforms, shard_size=4, **extra)
    return Campaign.from_config(validated(cfg), root=REPO)


def _shards(plan: Campaign, name: str, out: Path, prefix: str | None = None) -> tuple[bytes, pd.DataFrame, str]:
    """Every shard of ``name``: the CSVs' bytes concatenated, the collectives rows, the log."""
    log = io.StringIO()
    data, parts = b"", []
    for i in range(len(plan.workloads[name].shards)):
        csv_path = out / f"{i:04d}.csv"
        assert run_shard(plan, name, i, csv_path, prefix=prefix, log=log) == 0
        data += csv_path.read_bytes()
        parts.append(pd.read_parquet(collectives.sidecar_path(csv_path)))
    return data, pd.concat(parts, ignore_index=True), log.getvalue()


def _written(plan: Campaign, name: str) -> str:
    """The rank set the ``generate`` rule would write for ``name`` (its own command line)."""
    w = plan.workloads[name]
    Path(w.prefix).parent.mkdir(parents=True, exist_ok=True)
    assert main(["generate", *w.generate_args(), "--out", w.prefix]) == 0
    return w.prefix


def test_in_memory_shards_equal_the_rank_file_path(tmp_path):
    plan = _plan(tmp_path, {"gpt": GPT, "ar": {"kind": "collective", "type": "all_reduce", "npus": 32, "size": "1MiB"}})
    assert plan.workloads["gpt"].in_memory and plan.workloads["ar"].in_memory
    assert plan.written() == []
    for name in ("gpt", "ar"):
        mem_csv, mem_coll, log = _shards(plan, name, tmp_path / "mem" / name)
        assert not Path(plan.workloads[name].prefix).parent.exists()  # nothing written
        file_csv, file_coll, _ = _shards(plan, name, tmp_path / "files" / name, prefix=_written(plan, name))
        assert mem_csv == file_csv  # every metric, status and trace_sha256, byte for byte
        assert mem_csv.count(b",ok,") == 3  # three points, none failed
        if name == "gpt":
            assert log.count("symmetric: 2 of 32 ranks simulated") == 2  # the two `sym` points
            assert log.count("full engine: not symmetric (network dimension 0 is a Ring") == 1
            # symmetric points list the representatives' collectives, the full engine every rank's
            full_id = next(p for p in plan.points if p.startswith("full"))
            mem_full = mem_coll[mem_coll.point_id == full_id].reset_index(drop=True)
            assert mem_full.equals(file_coll[file_coll.point_id == full_id].reset_index(drop=True))
            reps = mem_coll[mem_coll.point_id != full_id]
            assert set(reps["rank"]) == {0, 16}
            same = file_coll[(file_coll.point_id != full_id) & file_coll["rank"].isin([0, 16])]
            assert reps.reset_index(drop=True).equals(same.reset_index(drop=True))
        else:
            assert log.count("full engine: a collective microbenchmark") == 3
            assert mem_coll.equals(file_coll)


def test_files_only_where_asked_or_read(tmp_path):
    plan = _plan(
        tmp_path,
        {
            "mem": GPT,
            "kept": {**GPT, "keep_traces": True},
            "src": {**GPT, "transforms": [{"compute": {"scale": [2.0]}}]},
        },
    )
    in_memory = {n: w.in_memory for n, w in plan.workloads.items()}
    assert in_memory["mem"] and not in_memory["kept"] and not in_memory["src"]
    derived = [n for n, w in plan.workloads.items() if w.kind == "transform"]
    assert derived and not any(in_memory[n] for n in derived)
    assert plan.written() == ["kept", "src"]
    plan.write(tmp_path / "plan.json")
    loaded = Campaign.load(tmp_path / "plan.json")
    assert {n: w.in_memory for n, w in loaded.workloads.items()} == in_memory
    # the reports' workload-parameter columns do not carry the switch
    from chakra_pipe.report.tidy import workload_columns

    assert "wl.keep_traces" not in workload_columns(plan.workloads["kept"].spec)


def test_generator_options_change_the_shard_digest(tmp_path):
    """An in-memory set has no files whose change reruns its shards: its generator options do."""
    a = _plan(tmp_path, {"gpt": GPT}).shard_digest("gpt", 0)
    b = _plan(tmp_path, {"gpt": {**GPT, "microbatches": 4}}).shard_digest("gpt", 0)
    kept = _plan(tmp_path, {"gpt": {**GPT, "keep_traces": True}})
    assert a != b
    assert kept.shard_digest("gpt", 0) == _plan(
        tmp_path, {"gpt": {**GPT, "keep_traces": True, "microbatches": 4}}
    ).shard_digest("gpt", 0)


def test_in_memory_sets_are_not_held_to_the_rank_file_limit(tmp_path, monkeypatch):
    """The rank-file limit protects the disk: an in-memory set writes nothing, so only a set whose files
    are written is refused by it (naming the config key), and a full-engine fall-back, which holds as
    many graphs as the files, keeps it. Lowered to 8 files so a 32-rank step is past it."""
    monkeypatch.setattr(limits, "MAX_RANK_FILES", 8)
    for spec, key, what in (
        (
            {**GPT, "keep_traces": True},
            "workloads.gpt.dp",
            "would write 32 rank files (limit 8): a campaign writes rank files only for keep_traces",
        ),
        (
            {"kind": "collective", "type": "all_reduce", "npus": 32, "size": "1MiB"},
            "workloads.gpt.npus",  # a collective always runs on the full engine
            "the full engine would hold all 32 ranks in memory (limit 8, as for rank files): a collective",
        ),
    ):
        with pytest.raises(ConfigError) as refused:
            _plan(tmp_path, {"gpt": spec})
        assert refused.value.where == key and refused.value.what.startswith(what), refused.value.line()
        assert "--allow-large" not in refused.value.what  # no campaign key lifts the limits
    with monkeypatch.context() as m:  # an in-memory set has limits too (a typo must not cost the machine)
        m.setattr(limits, "MAX_MEMORY_RANKS", 16)
        with pytest.raises(ConfigError) as refused:
            _plan(tmp_path, {"gpt": GPT})
        key, what = "workloads.gpt.dp", "would generate 32 ranks in memory (limit 16)"
        assert refused.value.where == key and refused.value.what.startswith(what), refused.value.line()
    plan = _plan(tmp_path, {"gpt": GPT})
    plan.write(tmp_path / "plan.json")
    assert Campaign.load(tmp_path / "plan.json").workloads["gpt"].in_memory
    log = io.StringIO()
    assert run_shard(plan, "gpt", 0, tmp_path / "mem.csv", log=log) == 1  # the `full` point
    assert not Path(plan.workloads["gpt"].prefix).parent.exists()
    assert log.getvalue().count("symmetric: 2 of 32 ranks simulated") == 2
    mem = pd.read_csv(tmp_path / "mem.csv", dtype=str).set_index("point_id")
    full_id = next(p for p in plan.points if p.startswith("full"))
    assert mem.loc[full_id, "status"].startswith(
        "InputError: gpt: the full engine would hold all 32 ranks in memory (limit 8, as for rank files): "
        "not symmetric (network dimension 0 is a Ring"
    )
    monkeypatch.undo()  # the same points from the written files: their symmetry proven on the files
    files_log = io.StringIO()
    assert run_shard(plan, "gpt", 0, tmp_path / "files.csv", prefix=_written(plan, "gpt"), log=files_log) == 0
    assert files_log.getvalue().count("symmetric: 2 of 32 ranks simulated (rank files)") == 2
    assert files_log.getvalue().count("full engine: rank files") == 1  # the Ring point
    files = pd.read_csv(tmp_path / "files.csv", dtype=str).set_index("point_id")
    sym = [p for p in plan.points if p != full_id]
    assert len(sym) == 2 and mem.loc[sym].equals(files.loc[sym])  # step times, metrics, trace_sha256
    assert (mem.loc[sym, "status"] == "ok").all() and (mem.loc[sym, "step_time_ns"].astype(int) > 0).all()
