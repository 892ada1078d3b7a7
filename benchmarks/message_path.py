"""Time and digest the simulator's message-by-message path (issue #15).

Runs realistic generated steps through the configurations that go message by message (the
congestion-aware backend with two queues per dimension through a switch, direct collectives with
fewer active chunks than splits, rendezvous, point-to-point sends, ``fast=False``) and prints one
line per case: CPU seconds, messages and a SHA-256 of every per-rank time, collective record and
message count. Run it on two trees (``PYTHONPATH=<tree>/src``) and diff the digests to check that a
change to the message path or the engine keeps every result and event order; compare the CPU
columns (alternating the trees) for its speed.

    python benchmarks/message_path.py WORKDIR [--digest] [--only NAME]

``WORKDIR`` receives the generated sets (made once, reused).
"""

from __future__ import annotations

import argparse
import hashlib
import itertools
import subprocess
import sys
import time
from pathlib import Path

from chakra_pipe.et.traceset import TraceSet
from chakra_pipe.rankset.problems import SetStuck
from chakra_pipe.sim import HardwareConfig, NetworkConfig, SystemConfig, simulate

# name -> chakra-pipe generate llm arguments
SETS = {
    "t8": ["--model", "llama3-8b", "--tp", "8"],
    "t8d8z1": ["--model", "llama3-8b", "--tp", "8", "--dp", "8", "--zero", "1"],
    "t2d2p2": ["--model", "gpt3-175b", "--layers", "4", "--tp", "2", "--dp", "2", "--pp", "2"],
}


def _system(algo: str, dims: int, active: int) -> dict:
    """benchmarks/simulator.py's ``_llm_system`` with ``active`` chunks per dimension."""
    impl = [algo] * dims
    kinds = ("all-reduce", "reduce-scatter", "all-gather", "all-to-all")
    return {
        "scheduling-policy": "LIFO",
        "endpoint-delay": 10,
        "active-chunks-per-dimension": active,
        "preferred-dataset-splits": 4,
        "collective-optimization": "baseline",
        "local-mem-bw": 3350,
        **{f"{k}-implementation": impl for k in kinds},
    }


def _network(npus: int, topology: str = "Switch") -> dict:
    return {"topology": [topology], "npus_count": [npus], "bandwidth": [400], "latency": [936.25]}


# timing cases: (name, set, backend, algorithm, queues, active chunks, fast, rendezvous)
TIMING = [
    ("t8d8z1 aware ring 2 queues", "t8d8z1", "congestion_aware", "ring", 2, 1, True, False),
    ("t8 aware direct 2 of 4 chunks", "t8", "congestion_aware", "direct", 1, 2, True, False),
    ("t8 aware ring event", "t8", "congestion_aware", "ring", 1, 1, False, False),
    ("t8 unaware ring event", "t8", "congestion_unaware", "ring", 1, 1, False, False),
    ("t8 aware ring rendezvous", "t8", "congestion_aware", "ring", 1, 1, True, True),
]


def _digest_cases() -> list[tuple]:
    """Both backends × ring / direct / halvingDoubling / doubleBinaryTree × 1, 2 queues × 1, 2 active
    chunks × fast and ``fast=False`` on the 8-rank TP step, and with rendezvous; the pipeline step's sends with and
    without rendezvous (which stops: its report is digested)."""
    algos = ("ring", "direct", "halvingDoubling", "doubleBinaryTree")
    backends = ("congestion_unaware", "congestion_aware")
    cases = [
        (f"t8 {b} {a} q{q} a{c} {'fast' if f else 'event'}", "t8", b, a, q, c, f, False)
        for b, a, q, c, f in itertools.product(backends, algos, (1, 2), (1, 2), (True, False))
    ]
    cases += [
        (f"t8 {b} {a} rdv1 {'fast' if f else 'event'}", "t8", b, a, 1, 1, f, True)
        for b, a, f in itertools.product(backends, algos, (True, False))
    ]
    cases += [
        (f"t2d2p2 {b} ring rdv{int(r)} {'fast' if f else 'event'}", "t2d2p2", b, "ring", 1, 1, f, r)
        for b, r, f in itertools.product(backends, (False, True), (True, False))
    ]
    return cases + TIMING[:2]


def _prefix(workdir: Path, name: str) -> str:
    prefix = workdir / name
    if not Path(f"{prefix}.0.et").exists():
        cmd = ["chakra-pipe", "generate", "llm", *SETS[name], "--out", str(prefix)]
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    return str(prefix)


def _run(workdir: Path, case: tuple) -> tuple[float, int, str]:
    _, name, backend, algo, queues, active, fast, rendezvous = case
    ts = TraceSet.load(_prefix(workdir, name))
    npus = len(ts.ranks)
    hw = HardwareConfig(
        SystemConfig.from_dict(_system(algo, 1, active), source="sys"),
        NetworkConfig.from_dict(_network(npus), source="net"),
        backend=backend,
        num_queues_per_dim=queues,
        rendezvous=rendezvous,
    )
    c0 = time.process_time()
    try:
        res = simulate(ts, hw, fast=fast)
    except SetStuck as exc:  # a run that stops (rendezvous on the pipeline step) is digested by its report
        return time.process_time() - c0, 0, hashlib.sha256(str(exc).encode()).hexdigest()[:16]
    cpu = time.process_time() - c0
    text = repr(
        (res.finish_ns, res.compute_ns, res.exposed_comm_ns, res.comm_ns, res.idle_ns, res.collectives)
        + (res.messages, res.fast_messages)
    )
    return cpu, res.messages, hashlib.sha256(text.encode()).hexdigest()[:16]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("workdir", type=Path)
    ap.add_argument("--digest", action="store_true", help="the digest cases (default: the timing cases)")
    ap.add_argument("--only", default="", help="run only the cases whose name contains this")
    args = ap.parse_args()
    args.workdir.mkdir(parents=True, exist_ok=True)
    for case in _digest_cases() if args.digest else TIMING:
        if args.only in case[0]:
            cpu, messages, digest = _run(args.workdir, case)
            print(f"{case[0]:44s} {cpu:7.2f} {messages:9d} {digest}", flush=True)


if __name__ == "__main__":
    sys.exit(main())
