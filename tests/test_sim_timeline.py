"""The simulator's ``--timeline`` is valid Chrome trace-event JSON as Perfetto expects it.

Checked against the format: integer pids/tids, ``M`` metadata naming every process and thread that
has events, ``X`` events with non-negative durations and communication args, flows balanced (one
``s`` and one ``f`` per id, ``t`` between, each bound to a communication slice of a participant).
"""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path

from test_robust_determinism import SYSTEM

from chakra_pipe.cli import main

NETWORK = "topology: [ Ring, Ring ]\nnpus_count: [ 2, 2 ]\nbandwidth: [ 100.0, 50.0 ]\nlatency: [ 500.0, 500.0 ]\n"


def _timeline(tmp_path: Path) -> dict:
    (tmp_path / "sys.json").write_text(json.dumps(SYSTEM))
    (tmp_path / "net.yml").write_text(NETWORK)
    prefix = tmp_path / "llm"
    assert (
        main(
            [
                "generate",
                "llm",
                "--model",
                "gpt3-13b",
                "--layers",
                "1",
                "--hidden",
                "256",
                "--ffn",
                "512",
                "--heads",
                "4",
                "--vocab",
                "1000",
                "--seq",
                "64",
                "--dp",
                "2",
                "--tp",
                "2",
                "--out",
                str(prefix),
            ]
        )
        == 0
    )
    out = tmp_path / "timeline.json"
    assert (
        main(
            [
                "simulate",
                f"--workload-configuration={prefix}",
                f"--system-configuration={tmp_path / 'sys.json'}",
                f"--network-configuration={tmp_path / 'net.yml'}",
                f"--timeline={out}",
            ]
        )
        == 0
    )
    return json.loads(out.read_text())


def test_timeline_follows_the_trace_event_format(tmp_path: Path) -> None:
    doc = _timeline(tmp_path)
    events = doc["traceEvents"]
    assert doc["displayTimeUnit"] in ("ms", "ns")
    for ev in events:
        assert ev["ph"] in ("X", "M", "s", "t", "f")
        assert type(ev["pid"]) is int and type(ev["tid"]) is int
    names = {(ev["pid"], ev["tid"]): ev["args"]["name"] for ev in events if ev["name"] == "thread_name"}
    procs = {ev["pid"]: ev["args"]["name"] for ev in events if ev["name"] == "process_name"}
    slices = [ev for ev in events if ev["ph"] == "X"]
    assert procs == {r: f"rank {r}" for r in range(4)}
    assert {(ev["pid"], ev["tid"]) for ev in slices} <= set(names)
    assert set(names.values()) <= {"cpu", "gpu", "comm", "recv"}
    comm = [ev for ev in slices if ev["args"]["type"] == "COMM_COLL_NODE"]
    assert comm and all(ev["dur"] >= 0 and ev["ts"] >= 0 for ev in slices)
    for ev in comm:
        assert names[(ev["pid"], ev["tid"])] == "comm"
        assert ev["args"]["comm_type"] in ("ALL_REDUCE", "ALL_GATHER", "REDUCE_SCATTER", "ALL_TO_ALL")
        assert ev["args"]["comm_bytes"] > 0 and isinstance(ev["args"]["group"], str)


def test_flows_join_every_collective_and_are_balanced(tmp_path: Path) -> None:
    events = _timeline(tmp_path)["traceEvents"]
    comm = [ev for ev in events if ev["ph"] == "X" and ev["args"]["type"] == "COMM_COLL_NODE"]
    flows: dict[int, list[dict]] = defaultdict(list)
    for ev in events:
        if ev["ph"] in ("s", "t", "f"):
            flows[ev["id"]].append(ev)
    assert flows
    joined = 0
    for fid, steps in flows.items():
        phases = [ev["ph"] for ev in steps]
        assert phases[0] == "s" and phases[-1] == "f" and set(phases[1:-1]) <= {"t"}, fid
        assert [ev["ts"] for ev in steps] == sorted(ev["ts"] for ev in steps)
        assert len({ev["pid"] for ev in steps}) == len(steps)  # one step per participant
        for ev in steps:  # bound to the participant's collective slice that starts there
            hits = [c for c in comm if c["pid"] == ev["pid"] and c["tid"] == ev["tid"] and c["ts"] == ev["ts"]]
            assert len(hits) == 1
            joined += 1
    # TP groups (2 ranks) and DP groups (2 ranks): every collective slice belongs to exactly one flow
    assert joined == len(comm)
