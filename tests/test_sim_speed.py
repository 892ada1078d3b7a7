"""Simulator cost guards that do not time anything: what the CLI imports, and that work scales.

Wall-clock figures live in ``benchmarks/startup.py`` and ``benchmarks/simulator.py``; here the
properties behind them are asserted exactly (modules loaded, finish times of huge-but-trivial graphs).
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from fractions import Fraction
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from chakra_pipe.sim.ready import ReadySet

SRC = Path(__file__).resolve().parents[1] / "src"
# Stacks a simulation never needs; each verb's own ``cli`` module (flags only) is allowed.
HEAVY = (
    "pandas",
    "matplotlib",
    "snakemake",
    "torch",
    "chakra_pipe.report.build",
    "chakra_pipe.report.aggregate",
    "chakra_pipe.sweep.shard",
    "chakra_pipe.sweep.campaign",
    "chakra_pipe.validate.validator",
    "chakra_pipe.replay.launcher",
    "chakra_pipe.replay.worker",
    "numpy.ma",
)


def _loaded_after(code: str, timeout: int = 120) -> set[str]:
    """Top-level module names loaded in a fresh interpreter after running ``code``."""
    probe = code + "\nimport json, sys\nprint(json.dumps(sorted(sys.modules)))\n"
    env = dict(os.environ, PYTHONPATH=str(SRC))
    out = subprocess.run(
        [sys.executable, "-c", probe], env=env, capture_output=True, text=True, timeout=timeout, check=True
    ).stdout
    return set(json.loads(out.splitlines()[-1]))


def _heavy(mods: set[str]) -> list[str]:
    return sorted(m for m in mods if any(m == h or m.startswith(h + ".") for h in HEAVY))


def test_cli_parser_imports_no_numpy_protobuf_or_heavy_stacks() -> None:
    mods = _loaded_after("from chakra_pipe import cli\ncli.build_parser()")
    assert _heavy(mods) == []
    assert not {"numpy", "google", "yaml"} & {m.split(".")[0] for m in mods}


def test_simulate_run_imports_nothing_it_does_not_need(tmp_path: Path) -> None:
    prefix = tmp_path / "ar"
    sysf, netf = tmp_path / "sys.json", tmp_path / "net.yml"
    sysf.write_text(
        json.dumps(
            {
                "scheduling-policy": "LIFO",
                "endpoint-delay": 10,
                "active-chunks-per-dimension": 1,
                "preferred-dataset-splits": 4,
                "collective-optimization": "localBWAware",
                "local-mem-bw": 1600,
                "all-reduce-implementation": ["ring"],
            }
        )
    )
    netf.write_text("topology: [Ring]\nnpus_count: [4]\nbandwidth: [50]\nlatency: [500]\n")
    code = (
        f"from chakra_pipe.cli import main\n"
        f"assert main(['generate', 'collective', '--type', 'all_reduce', '--npus', '4', '--size', '1MiB', "
        f"'--out', {str(prefix)!r}]) == 0\n"
        f"import sys\nbefore = set(sys.modules)\n"
        f"assert main(['simulate', '--workload-configuration', {str(prefix)!r}, '--system-configuration', "
        f"{str(sysf)!r}, '--network-configuration', {str(netf)!r}]) == 0\n"
    )
    assert _heavy(_loaded_after(code)) == []


# -- wide graphs: issue and completion O(1) amortised per node ----------------------------------------
WIDE = 40_000
WIDE_SCRIPT = """
import json, sys
from chakra_pipe.et import schema
from chakra_pipe.et.attrs import set_attr
from chakra_pipe.et.framing import write_trace
from chakra_pipe.et.traceset import TraceSet
from chakra_pipe.sim import HardwareConfig, NetworkConfig, SystemConfig, simulate

n, msgs, prefix = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
md = schema.GlobalMetadata(version="0.0.4")

def comp(nid, dur, cpu=False, data=()):
    node = schema.Node(id=nid, name=f"c{nid}", type=schema.COMP_NODE, duration_micros=dur)
    node.data_deps.extend(data)
    if cpu:
        set_attr(node, "is_cpu_op", True)
    return node

def p2p(nid, kind, peer_attr, peer):
    node = schema.Node(id=nid, name=f"p{nid}", type=kind)
    set_attr(node, "comm_size", 1 << 20)
    set_attr(node, "comm_tag", 7)
    set_attr(node, peer_attr, peer)
    return node

# rank 0: n independent roots, ids in descending file order, GPU and CPU alternating, plus msgs sends
roots = [comp(3 * n - 3 * k, k % 5, cpu=bool(k % 2)) for k in range(n)]
sends = [p2p(3 * n + 1 + k, schema.COMM_SEND_NODE, "comm_dst", 1) for k in range(msgs)]
write_trace(prefix + ".0.et", md, roots + sends)
# rank 1: n GPU roots and one node with n data deps; msgs receives
leaves = [comp(k + 1, k % 3) for k in range(n)]
sink = comp(n + 1, 5, data=range(1, n + 1))
recvs = [p2p(n + 2 + k, schema.COMM_RECV_NODE, "comm_src", 0) for k in range(msgs)]
write_trace(prefix + ".1.et", md, leaves + [sink] + recvs)
system = SystemConfig.from_dict({"scheduling-policy": "LIFO", "endpoint-delay": 10, "active-chunks-per-dimension": 1,
    "preferred-dataset-splits": 1, "collective-optimization": "baseline", "local-mem-bw": 1600}, source="sys")
net = NetworkConfig.from_dict({"topology": ["Ring"], "npus_count": [2], "bandwidth": [50], "latency": [500]},
                              source="net")
res = simulate(TraceSet.load(prefix), HardwareConfig(system, net))
print(json.dumps({"finish": res.finish_ns, "compute": res.compute_ns,
                  "ends": [c.end_ns for c in res.collectives if c.kind in ("SEND", "RECV")]}))
"""


def test_wide_graphs_finish_with_exact_times(tmp_path: Path) -> None:
    """40,000 independent roots and a node with 40,000 data deps (minutes before: O(N^2) issue passes).

    Expected values from the semantics (spec §2.3, §2.4, §4.1): replayed durations, 0 µs -> 1 ns; one
    GPU and one CPU slot per rank, so each slot's nodes run back to back; the sink starts when its
    last parent ends; sends hold the comm slot until arrival, N = floor(500 + 2^20 / B') each.
    """
    msgs = 1000
    env = dict(os.environ, PYTHONPATH=str(SRC))
    done = subprocess.run(
        [sys.executable, "-c", WIDE_SCRIPT, str(WIDE), str(msgs), str(tmp_path / "w")],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    out = json.loads(done.stdout.splitlines()[-1])

    def ns(us: int) -> int:
        return us * 1000 or 1

    gpu0 = sum(ns(k % 5) for k in range(WIDE) if k % 2 == 0)
    cpu0 = sum(ns(k % 5) for k in range(WIDE) if k % 2 == 1)
    net = math.floor(500 + Fraction(1 << 20) / (Fraction(50 * 2**30) / 10**9))
    gpu1 = sum(ns(k % 3) for k in range(WIDE)) + ns(5)
    assert out["finish"] == [max(gpu0, cpu0, msgs * net), max(gpu1, msgs * net)]
    assert out["compute"] == [gpu0, gpu1]
    assert out["ends"] == [net * (k + 1) for k in range(msgs)] * 2  # sends of rank 0, then receives of rank 1


def _reference_pass(free: list[int], slot_of: list[int], slots: list[int], issue) -> None:
    """ASTRA-sim's issue pass as the spec states it: copy the free set, walk it in ascending id."""
    for i in sorted(free):
        s = slot_of[i]
        if s < 0 or slots[s] == 0:
            free.remove(i)
            issue(i, s)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.tuples(st.integers(-1, 2), st.booleans(), st.integers(0, 3)), min_size=1, max_size=40),
    st.lists(st.integers(0, 39), max_size=10),
    st.randoms(use_true_random=False),
)
def test_ready_set_issues_exactly_like_the_full_walk(nodes, initial, rnd) -> None:
    """Same nodes issued, in the same order, as walking a copy of the free set (synchronous finishes
    releasing their slot and freeing later nodes mid-pass included)."""
    n = len(nodes)
    slot_of = [s for s, _, _ in nodes]
    order = list(range(n))
    rnd.shuffle(order)  # node ids are not in file order
    pos = [0] * n
    for p, i in enumerate(order):
        pos[i] = p
    logs = []
    for use_ready_set in (False, True):
        slots, log = [0, 0, 0], []
        ready = ReadySet(pos, order, slot_of)
        ref: list[int] = []
        pending = sorted({i % n for i in initial} | {0})
        nxt = iter([i for i in range(n) if i not in pending])

        def add(i: int) -> None:
            (ready.add(i) if use_ready_set else ref.append(pos[i]))

        def issue(p_or_i: int, s: int) -> None:
            i = p_or_i if use_ready_set else order[p_or_i]
            log.append(i)
            if s >= 0:
                slots[s] += 1
            if nodes[i][1]:  # finishes synchronously: releases its slot and frees new nodes
                if s >= 0:
                    slots[s] -= 1
                for _ in range(nodes[i][2]):
                    j = next(nxt, None)
                    if j is not None:
                        add(j)

        for i in pending:
            add(i)
        for _ in range(2 * n + 2):  # passes, each after releasing every held slot
            if use_ready_set:
                ready.issue_pass(slots, issue)
            else:
                slot_pos = [slot_of[order[p]] for p in range(n)]
                _reference_pass(ref, slot_pos, slots, issue)
            slots[:] = [0, 0, 0]
        left = ready.indices() if use_ready_set else [order[p] for p in sorted(ref)]
        assert len(ready) == (len(left) if use_ready_set else 0)
        logs.append((log, left))
    assert logs[0] == logs[1]
