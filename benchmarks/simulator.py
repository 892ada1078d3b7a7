"""Simulator speed and memory: microbenchmarks and generated LLM training steps.

Microbenchmarks: one 1 MiB all-reduce (Ring_4chunks system) on 64/256/1,024 NPUs, wall time and peak
traced memory per (topology, backend, NPUs), plus the optional trace given on the command line.
Reference: ASTRA-sim takes ~12 s / 365 MB for the 1,024-NPU ring all-reduce; target <= 1 s / 200 MB.
Set ``SIM_BENCH_EVENT=1`` to also time the message-by-message path (slow at 1,024 NPUs).

Realistic cases (``--realistic``): ``chakra-pipe generate llm`` steps - llama3-8b t8d8 ZeRO-1,
gpt3-13b t8d4, mixtral-8x7b t2d8 ep4, gpt3-175b t8 d2/d8/d16 p8 (128/512/1,024 ranks, 8 of 96 layers
so the script stays within minutes on 2 cores) - on a 1-D switch (both backends), a 1-D
fully-connected network (aware; sub-group rings take the aware fast path on both 1-D networks,
pipeline send/recv going message by message beside them) and a 2-D / 3-D switch network (both
backends; aware: each dimension's ring phases on the aware fast path), ring and direct (aware
direct on the 1-D switch and fully-connected network: each window's hops evaluated at once over the
FIFO links, ``sim/system/direct_aware.py``).
Each case runs in a fresh process and prints wall and CPU seconds of ``simulate`` (trace columns
included, loading excluded), messages simulated, of them those a fast path evaluated as a recurrence
(``fast``) and those sent one by one (``one_by_one``), peak RSS of the process, the largest finish time,
with ``--event`` whether the message-level path (``fast=False``) gives every rank the same finish
time (run for cases up to ``--event-max`` ranks), whether an aware run met a link conflict and was
redone message by message (``rerun``: the full engine's run or the symmetric quotient's), whether
the set's symmetry was proven and one representative per class simulated (``sym``:
``sim/symmetric_files.py``; ``messages`` then counts the representatives'), and CPU over
ASTRA-sim's recorded wall where there is one (``vs_astra``).
ASTRA-sim's recorded figures on the same 2-core machine: 64-rank llama3-8b t8d8 on a 64-NPU switch,
congestion-aware, ~2.5 s; 1,024-rank gpt3-175b t8d16p8 (all 96 layers) on a 3-D switch ~24 s, 207 MB.

    python benchmarks/simulator.py [PREFIX SYS NET]
    python benchmarks/simulator.py --realistic [--max-ranks N] [--event] [--event-max N] [--algo ring|direct]
        [--aware-max N] [--backend aware|unaware] [--dims 1|md] [--compare-src DIR] [--active-chunks N]

``--compare-src DIR``: run every case also on another tree's ``src`` (e.g. a ``git worktree`` of
``main``), alternating the two in one script, and print its CPU and the ratio (``base_cpu``, ``speedup``).
``SIM_BENCH_FULL=1``: every case on the full engine (``simulate(symmetric=False)``, as for a set whose
symmetry is not proven), so the fast paths themselves are timed, not the representatives' run.
``--active-chunks N``: ``active-chunks-per-dimension`` of every case (default 1; with 4, every chunk of
a collective runs at once, which the aware ring fast path evaluates as one recurrence on 1-D networks).
    python benchmarks/simulator.py --collectives [--event-max N]
    python benchmarks/simulator.py --aware-trees [--event-max N] [--compare-src DIR]
    python benchmarks/simulator.py --quotient PREFIX SYS NET [--backend aware|unaware] [--repeat N]
        [--compare-src DIR]
    python benchmarks/simulator.py --pipeline-layouts N [--seed S]

``--collectives``: one 1 MiB all-reduce with ``direct`` and ``doubleBinaryTree`` on 64/256/1,024 NPUs
(switch, unaware), each in a fresh process: wall, CPU, messages, peak RSS, and (up to ``--event-max``
NPUs, default 256) the message-by-message wall (``fast=False``, what these phases cost before their
fast paths) with the speedup and whether every rank's finish time is the same.
``--aware-trees``: one 1 MiB and one 64 MiB ``doubleBinaryTree`` all-reduce (4 chunks) on a
64/256/1,024-NPU congestion-aware switch (``aware_trees``), optionally beside another tree's ``src``.

``--pipeline-layouts N [--seed S]``: ``N`` random small TP x DP x PP pipeline steps (the layouts,
models, microbatches and aware 1-D switch / fully-connected points of
``tests/test_sim_aware_pipeline_quotient.py``'s sweep), each simulated once on the symmetric quotient:
how many reran message by message (a ``LinkConflict``: a pipeline send reaching a link before a ring
message evaluated there, issue #15's open gap), each rerun with its reason, and the messages sent
one by one over all layouts (the pipeline sends alone when nothing reruns), and the CPU of the
simulations, all and the reruns' (the representatives' traces generated before the clock starts).

``--quotient``: the proven-symmetric run alone (``sim/symmetric.simulate_symmetric`` on the
representatives, its arguments taken from one ``simulate`` of the set, so loading, the rank-set
analysis and the symmetry proof are left out): median CPU of ``--repeat`` runs (default 5), the
representatives simulated, collectives and messages, a digest of every rank's times; with
``--compare-src`` the same on the other tree, alternating, with the speedup and whether the digests
agree (e.g. ``/work/bench/L96/g`` with ``sys3d.json`` / ``net3d.yml``: 8 of 1,024 ranks).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

from chakra_pipe.et import schema
from chakra_pipe.et.attrs import set_attr
from chakra_pipe.et.framing import write_trace
from chakra_pipe.et.traceset import TraceSet
from chakra_pipe.sim import HardwareConfig, NetworkConfig, SystemConfig, load_hardware, simulate

SYSTEM = {
    "scheduling-policy": "LIFO",
    "endpoint-delay": 10,
    "active-chunks-per-dimension": 1,
    "preferred-dataset-splits": 4,
    "collective-optimization": "localBWAware",
    "local-mem-bw": 1600,
    **{
        k: ["ring"]
        for k in (
            "all-reduce-implementation",
            "reduce-scatter-implementation",
            "all-gather-implementation",
            "all-to-all-implementation",
        )
    },
}


def all_reduce_set(folder: Path, npus: int, size: int = 1 << 20) -> TraceSet:
    prefix = folder / f"ar{npus}_{size}"
    for r in range(npus):
        n = schema.Node(id=0, name=f"all_reduce_{size}", type=schema.COMM_COLL_NODE)
        set_attr(n, "comm_type", schema.ALL_REDUCE)
        set_attr(n, "comm_size", size)
        write_trace(f"{prefix}.{r}.et", schema.GlobalMetadata(version="0.0.4"), [n])
    return TraceSet.load(prefix)


def measure(ts: TraceSet, hw: HardwareConfig, fast: bool = True) -> tuple[float, float, float, int]:
    """(first-call wall, repeat wall, peak traced MiB of a repeat, max finish ns).

    The first call on a TraceSet also builds the per-rank columns (cached for later calls, as in a
    sweep); memory is traced in a separate run because tracemalloc slows Python down severalfold.
    """
    t0 = time.perf_counter()
    res = simulate(ts, hw, fast=fast)
    first = time.perf_counter() - t0
    t0 = time.perf_counter()
    simulate(ts, hw, fast=fast)
    repeat = time.perf_counter() - t0
    tracemalloc.start()
    simulate(ts, hw, fast=fast)
    peak = tracemalloc.get_traced_memory()[1] / 2**20
    tracemalloc.stop()
    return first, repeat, peak, max(res.finish_ns)


# (label, generate llm flags, ranks, multi-dimensional switch sizes)
LLM_CASES = [
    ("llama3-8b t8d8 zero1", ["--model", "llama3-8b", "--tp", "8", "--dp", "8", "--zero", "1"], 64, [8, 8]),
    ("gpt3-13b t8d4", ["--model", "gpt3-13b", "--tp", "8", "--dp", "4"], 32, [8, 4]),
    ("mixtral t2d8e4", ["--model", "mixtral-8x7b", "--tp", "2", "--dp", "8", "--ep", "4"], 16, [2, 8]),
    (
        "gpt3-175b t8d2p8 L8",
        ["--model", "gpt3-175b", "--tp", "8", "--dp", "2", "--pp", "8", "--layers", "8"],
        128,
        [8, 2, 8],
    ),
    (
        "gpt3-175b t8d8p8 L8",
        ["--model", "gpt3-175b", "--tp", "8", "--dp", "8", "--pp", "8", "--layers", "8"],
        512,
        [8, 8, 8],
    ),
    (
        "gpt3-175b t8d16p8 L8",
        ["--model", "gpt3-175b", "--tp", "8", "--dp", "16", "--pp", "8", "--layers", "8"],
        1024,
        [8, 16, 8],
    ),
]
SRC = str(Path(__file__).resolve().parents[1] / "src")
AWARE_MAX_RANKS = 512  # aware 1-D switch cases up to this size (the 1,024-rank one: --aware-max N)
# ASTRA-sim's recorded wall on the shared 2-core machine, for the vs_astra column (case, network, backend)
ASTRA_SIM_WALL_S = {("llama3-8b t8d8 zero1", "switch 64", "aware"): 2.5}


def _llm_system(algo: str, dims: int) -> dict:
    impl = [algo] * dims
    return {
        **SYSTEM,
        "collective-optimization": "baseline",
        "local-mem-bw": 3350,
        **{
            k: impl
            for k in (
                "all-reduce-implementation",
                "reduce-scatter-implementation",
                "all-gather-implementation",
                "all-to-all-implementation",
            )
        },
    }


def _network(sizes: list[int], topology: str = "Switch") -> dict:
    bws, lats = [400, 200, 100][: len(sizes)], [936.25, 1000, 2000][: len(sizes)]
    return {"topology": [topology] * len(sizes), "npus_count": sizes, "bandwidth": bws, "latency": lats}


CASE_SCRIPT = """
import json, logging, os, resource, sys, time
from chakra_pipe.et.traceset import TraceSet
from chakra_pipe.sim import HardwareConfig, NetworkConfig, SystemConfig, simulate
prefix, backend, event = sys.argv[1], sys.argv[4], sys.argv[5]
system, network = json.loads(sys.argv[2]), json.loads(sys.argv[3])
ts = TraceSet.load(prefix)
hw = HardwareConfig(SystemConfig.from_dict(system, source="sys"), NetworkConfig.from_dict(network, source="net"),
                    backend=backend)
reruns = []  # simulate logs (INFO) when an aware fast-path run met a link conflict and was redone
handler = logging.Handler()
handler.emit = reruns.append
logging.getLogger("chakra_pipe.sim.simulate").addHandler(handler)
logging.getLogger("chakra_pipe.sim.simulate").setLevel(logging.INFO)
quotient_rerun = logging.Handler()  # the symmetric quotient's own rerun (its ring fast path met a link conflict)
quotient_rerun.emit = lambda r: "ring fast path declined" in r.getMessage() and reruns.append(r)
logging.getLogger("chakra_pipe.sim.symmetric").addHandler(quotient_rerun)
logging.getLogger("chakra_pipe.sim.symmetric").setLevel(logging.INFO)
quotient = []  # the set's symmetry proven: one representative per class simulated (INFO)
proof = logging.Handler()
proof.emit = lambda r: quotient.append(r.getMessage().startswith("symmetric run of"))
logging.getLogger("chakra_pipe.sim.symmetric_files").addHandler(proof)
logging.getLogger("chakra_pipe.sim.symmetric_files").setLevel(logging.INFO)
w0, c0 = time.perf_counter(), time.process_time()
symmetric = os.environ.get("SIM_BENCH_FULL") != "1"  # 1: every rank on the full engine (no quotient)
res = simulate(ts, hw, symmetric=symmetric)
wall, cpu = time.perf_counter() - w0, time.process_time() - c0
out = {"wall": wall, "cpu": cpu, "messages": res.messages, "fast_messages": res.fast_messages,
       "finish": max(res.finish_ns),
       "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, "rerun": bool(reruns),
       "symmetric": any(quotient)}
if event == "1":  # both timed with the trace columns already built (the first call builds them)
    w0 = time.perf_counter()
    simulate(ts, hw, symmetric=symmetric)
    out["repeat_wall"] = time.perf_counter() - w0
    w0 = time.perf_counter()
    out["equal"] = simulate(ts, hw, fast=False).finish_ns == res.finish_ns
    out["event_wall"] = time.perf_counter() - w0
print(json.dumps(out))
"""


def realistic(
    max_ranks: int,
    event: bool,
    event_max: int,
    algo_only: str | None = None,
    aware_max: int = AWARE_MAX_RANKS,
    backend_only: str | None = None,
    dims_only: str | None = None,
    compare_src: str | None = None,
    active_chunks: int = 1,
) -> None:
    env = dict(os.environ, PYTHONPATH=SRC)
    print(
        f"{'case':22s} {'ranks':>5s} {'network':12s} {'backend':8s} {'algo':6s} {'wall_s':>7s} {'cpu_s':>7s} "
        f"{'messages':>9s} {'fast':>9s} {'one_by_one':>10s} {'rss_MB':>7s} {'finish_ns':>12s} {'event=fast':>10s} "
        f"{'rerun':>5s} {'sym':>3s} {'vs_astra':>8s}"
        + (f" {'base_cpu':>8s} {'base_rss':>8s} {'speedup':>7s}" if compare_src else "")
    )
    with tempfile.TemporaryDirectory() as tmp:
        for label, flags, ranks, sizes in LLM_CASES:
            if ranks > max_ranks:
                continue
            prefix = str(Path(tmp) / label.split()[0])
            subprocess.run(
                [sys.executable, "-m", "chakra_pipe.cli", "generate", "llm", *flags, "--out", prefix],
                env=env,
                check=True,
                capture_output=True,
            )
            runs = [
                ([ranks], "aware", "ring", "Switch"),
                ([ranks], "aware", "ring", "FullyConnected"),  # sub-group rings on the aware fast path
                ([ranks], "unaware", "ring", "Switch"),
                ([ranks], "unaware", "direct", "Switch"),
                ([ranks], "aware", "direct", "Switch"),  # direct windows on the aware fast path (FIFO batches)
                ([ranks], "aware", "direct", "FullyConnected"),
                (sizes, "unaware", "ring", "Switch"),
                (sizes, "aware", "ring", "Switch"),  # per-dimension ring phases on the aware fast path
            ]
            for dims, backend, algo, topology in runs:
                if (backend == "aware" and ranks > aware_max) or algo_only not in (None, algo):
                    continue
                if backend_only not in (None, backend) or dims_only not in (None, "1" if len(dims) == 1 else "md"):
                    continue
                check = event and ranks <= event_max
                net = ("fc " if topology == "FullyConnected" else "switch ") + "x".join(map(str, dims))
                try:
                    system, network = _llm_system(algo, len(dims)), _network(dims, topology)
                    system["active-chunks-per-dimension"] = active_chunks
                    r = _run_case(prefix, system, network, f"congestion_{backend}", check)
                    base = None
                    if compare_src:  # the same case on the other tree, right after (same load)
                        base = _run_case(prefix, system, network, f"congestion_{backend}", False, compare_src)
                        if base["finish"] != r["finish"]:
                            raise RuntimeError(f"finish {r['finish']} ns here, {base['finish']} ns on {compare_src}")
                except RuntimeError as exc:
                    print(f"{label:22s} {ranks:5d} {net:12s} {backend:8s} {algo:6s} failed: {exc}", flush=True)
                    continue
                eq = ("yes" if r["equal"] else "NO") if "equal" in r else "-"
                astra = ASTRA_SIM_WALL_S.get((label, net, backend))
                vs = f"{r['cpu'] / astra:7.2f}x" if astra else "-"  # CPU: wall is 3-4x CPU on the loaded machine
                print(
                    f"{label:22s} {ranks:5d} {net:12s} {backend:8s} {algo:6s} {r['wall']:7.2f} {r['cpu']:7.2f} "
                    f"{r['messages']:9d} {r['fast_messages']:9d} {r['messages'] - r['fast_messages']:10d} "
                    f"{r['rss_mb']:7.0f} {r['finish']:12d} {eq:>10s} {'yes' if r['rerun'] else 'no':>5s} "
                    f"{'yes' if r['symmetric'] else 'no':>3s} {vs:>8s}"
                    + (f" {base['cpu']:8.2f} {base['rss_mb']:8.0f} {base['cpu'] / r['cpu']:6.1f}x" if base else ""),
                    flush=True,
                )


def _run_case(prefix: str, system: dict, network: dict, backend: str, event: bool, src: str = "") -> dict:
    """One simulation in a fresh process (peak RSS is per process) on the ``src`` tree (this one by
    default); raises with its last error line."""
    env = dict(os.environ, PYTHONPATH=src or SRC)
    args = [prefix, json.dumps(system), json.dumps(network), backend, "1" if event else "0"]
    done = subprocess.run([sys.executable, "-c", CASE_SCRIPT, *args], env=env, capture_output=True, text=True)
    if done.returncode:
        raise RuntimeError(done.stderr.strip().splitlines()[-1])
    return json.loads(done.stdout.splitlines()[-1])


QUOTIENT_SCRIPT = """
import hashlib, json, statistics, sys, time
from chakra_pipe.et.traceset import TraceSet
from chakra_pipe.sim import load_hardware, simulate
from chakra_pipe.sim import symmetric
prefix, sysf, netf, backend, repeat = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5])
run, calls = symmetric.simulate_symmetric, []
symmetric.simulate_symmetric = lambda *a, **k: calls.append((a, k)) or run(*a, **k)
simulate(TraceSet.load(prefix), load_hardware(sysf, netf, backend=backend))
if not calls:
    raise SystemExit("the set's symmetry is not proven: no quotient run to time")
args, kwargs = calls[0]
cpu = []
for _ in range(repeat):
    c0 = time.process_time()
    res = run(*args, **kwargs)
    cpu.append(time.process_time() - c0)
times = [getattr(res, k) for k in ("finish_ns", "compute_ns", "cpu_ns", "exposed_comm_ns", "comm_ns", "idle_ns")]
print(json.dumps({"cpu": statistics.median(cpu), "reps": len(args[0]), "ranks": len(res.finish_ns),
                  "collectives": len(res.collectives), "messages": res.messages,
                  "digest": hashlib.sha256(repr((times, res.collectives)).encode()).hexdigest()[:16]}))
"""


def quotient(prefix: str, system: str, network: str, backend: str, repeat: int, compare_src: str | None) -> None:
    """Time the quotient run alone on this tree (and ``compare_src``, alternating) in fresh processes."""
    print(f"{'tree':8s} {'cpu_s':>7s} {'reps':>5s} {'ranks':>6s} {'colls':>6s} {'messages':>9s} {'digest':16s}")
    trees = [("this", SRC)] + ([("base", str(Path(compare_src).resolve()))] if compare_src else [])
    cpu: dict[str, list[float]] = {name: [] for name, _ in trees}
    digests = set()
    for _ in range(3 if compare_src else 1):
        for name, src in trees:
            args = [prefix, system, network, f"congestion_{backend}", str(repeat)]
            env = dict(os.environ, PYTHONPATH=src)
            done = subprocess.run(
                [sys.executable, "-c", QUOTIENT_SCRIPT, *args], env=env, capture_output=True, text=True
            )
            if done.returncode:
                raise SystemExit(f"{name}: {done.stderr.strip().splitlines()[-1]}")
            r = json.loads(done.stdout.splitlines()[-1])
            cpu[name].append(r["cpu"])
            digests.add(r["digest"])
            print(
                f"{name:8s} {r['cpu']:7.3f} {r['reps']:5d} {r['ranks']:6d} {r['collectives']:6d} {r['messages']:9d} "
                f"{r['digest']}",
                flush=True,
            )
    if compare_src:
        this, base = min(cpu["this"]), min(cpu["base"])
        print(f"speedup {base / this:.2f}x (best CPU {base:.3f} -> {this:.3f} s); same results: {len(digests) == 1}")


def collectives(event_max: int) -> None:
    """One 1 MiB all-reduce, direct and doubleBinaryTree, on a 64/256/1,024-NPU switch (unaware).

    ``wall_s`` includes building the per-rank columns (first call); up to ``event_max`` NPUs a second
    fast call (``repeat_s``) and the message-by-message path (``event_s``, ``fast=False``: what these
    phases cost before their fast paths) are timed with the columns built; ``speedup`` = event_s / repeat_s.
    """
    print(
        f"{'algorithm':17s} {'npus':>5s} {'wall_s':>7s} {'cpu_s':>7s} {'messages':>9s} {'rss_MB':>7s} "
        f"{'finish_ns':>10s} {'repeat_s':>8s} {'event_s':>8s} {'speedup':>8s} {'event=fast':>10s}"
    )
    with tempfile.TemporaryDirectory() as tmp:
        for npus in (64, 256, 1024):
            prefix = str(all_reduce_set(Path(tmp), npus).prefix)
            net = {"topology": ["Switch"], "npus_count": [npus], "bandwidth": [50], "latency": [500]}
            for algo in ("direct", "doubleBinaryTree"):
                system = {**SYSTEM, **{k: [algo] for k in SYSTEM if k.endswith("-implementation")}}
                r = _run_case(prefix, system, net, "congestion_unaware", npus <= event_max)
                ev = f"{'-':>8s} {'-':>8s} {'-':>8s}"
                if "event_wall" in r:
                    rep, evw = r["repeat_wall"], r["event_wall"]
                    ev = f"{rep:8.3f} {evw:8.2f} {evw / rep:7.0f}x"
                eq = ("yes" if r["equal"] else "NO") if "equal" in r else "-"
                print(
                    f"{algo:17s} {npus:5d} {r['wall']:7.3f} {r['cpu']:7.3f} {r['messages']:9d} {r['rss_mb']:7.0f} "
                    f"{r['finish']:10d} {ev} {eq:>10s}",
                    flush=True,
                )


def aware_trees(event_max: int, compare_src: str | None) -> None:
    """One 1 MiB and one 64 MiB all-reduce on ``doubleBinaryTree`` (4 chunks, the two trees
    alternating), congestion-aware 64/256/1,024-NPU switch, each in a fresh process: wall, CPU,
    messages (of them evaluated by the tree recurrence, ``sim/system/tree_aware.py``), peak RSS,
    whether it was redone message by message; up to ``event_max`` NPUs whether ``fast=False`` gives
    every rank the same finish; with ``compare_src`` the same case on that tree's ``src`` right after."""
    print(
        f"{'size':>6s} {'npus':>5s} {'wall_s':>7s} {'cpu_s':>7s} {'messages':>9s} {'fast':>9s} {'rss_MB':>7s} "
        f"{'finish_ns':>12s} {'rerun':>5s} {'event=fast':>10s}"
        + (f" {'base_cpu':>8s} {'base_rss':>8s} {'speedup':>7s}" if compare_src else "")
    )
    system = {**SYSTEM, "collective-optimization": "baseline"}
    system.update({k: ["doubleBinaryTree"] for k in SYSTEM if k.endswith("-implementation")})
    with tempfile.TemporaryDirectory() as tmp:
        for size in (1 << 20, 64 << 20):
            for npus in (64, 256, 1024):
                prefix = str(all_reduce_set(Path(tmp), npus, size).prefix)
                net = {"topology": ["Switch"], "npus_count": [npus], "bandwidth": [50], "latency": [500]}
                r = _run_case(prefix, system, net, "congestion_aware", npus <= event_max)
                base = _run_case(prefix, system, net, "congestion_aware", False, compare_src) if compare_src else None
                if base is not None and base["finish"] != r["finish"]:
                    raise RuntimeError(f"finish {r['finish']} ns here, {base['finish']} ns on {compare_src}")
                eq = ("yes" if r["equal"] else "NO") if "equal" in r else "-"
                print(
                    f"{size >> 20:4d}Mi {npus:5d} {r['wall']:7.3f} {r['cpu']:7.3f} {r['messages']:9d} "
                    f"{r['fast_messages']:9d} {r['rss_mb']:7.0f} {r['finish']:12d} {'yes' if r['rerun'] else 'no':>5s} "
                    f"{eq:>10s}"
                    + (f" {base['cpu']:8.3f} {base['rss_mb']:8.0f} {base['cpu'] / r['cpu']:6.1f}x" if base else ""),
                    flush=True,
                )


PIPELINE_LAYOUTS = [(2, 2, 2), (4, 1, 2), (4, 2, 2), (8, 1, 2), (2, 4, 2), (2, 2, 4), (4, 1, 4), (8, 1, 4)]


def pipeline_layouts(count: int, seed: int) -> None:
    """``count`` random pipeline steps on the aware quotient (module docstring, ``--pipeline-layouts``),
    in this process: the layouts are small, and the quotient's rerun is logged on its module's logger."""
    import logging
    import random

    from chakra_pipe.generate.options import resolve_llm
    from chakra_pipe.sweep.generated_layout import GeneratedLayout

    declined: list[str] = []
    handler = logging.Handler()
    handler.emit = lambda r: declined.append(r.getMessage()) if "fast path declined" in r.getMessage() else None
    log = logging.getLogger("chakra_pipe.sim.symmetric")
    log.addHandler(handler)
    log.setLevel(logging.INFO)
    rng = random.Random(seed)
    reruns = messages = one_by_one = 0
    cpu = rerun_cpu = 0.0
    for i in range(count):
        tp, dp, pp = rng.choice(PIPELINE_LAYOUTS)
        model, layers, microbatches = rng.choice(["gpt3-13b", "gpt3-175b"]), rng.randint(1, 2) * pp, rng.randint(1, 4)
        topology = rng.choice(["Switch", "Switch", "FullyConnected"])
        bandwidth, latency = rng.choice([25.0, 100.0, 400.0, 900.0]), rng.choice([0.0, 500.0, 936.25, 3000.0])
        options = {"model": model, "layers": layers, "tp": tp, "dp": dp, "pp": pp}
        model_, spec = resolve_llm({**options, "microbatches": microbatches, "global_batch": dp * microbatches})
        network = {"topology": [topology], "npus_count": [tp * dp * pp], "bandwidth": [bandwidth], "latency": [latency]}
        hw = HardwareConfig(
            SystemConfig.from_dict(_llm_system("ring", 1), source="sys"),
            NetworkConfig.from_dict(network, source="net"),
            backend="congestion_aware",
        )
        layout = GeneratedLayout(model_, spec, "x")
        layout.representatives()  # generated before the clock starts: CPU is the simulation's
        declined.clear()
        c0 = time.process_time()
        res, _ = layout.simulate(hw)
        spent = time.process_time() - c0
        cpu += spent
        messages += res.messages
        one_by_one += res.messages - res.fast_messages
        if declined:
            reruns += 1
            rerun_cpu += spent
            print(
                f"{i:4d} t{tp}d{dp}p{pp} {model} L{layers} mb{microbatches} {topology} {bandwidth:g} GB/s "
                f"{latency:g} ns, {spent:.3f} s CPU: {declined[0]}",
                flush=True,
            )
    log.removeHandler(handler)
    print(
        f"reruns {reruns} of {count} (seed {seed}); messages {messages}, one by one {one_by_one}; "
        f"CPU {cpu:.2f} s, of it the rerun layouts' {rerun_cpu:.2f} s"
    )


def main(argv: list[str]) -> None:
    if argv and argv[0] == "--pipeline-layouts":
        seed = int(argv[argv.index("--seed") + 1]) if "--seed" in argv else 0
        pipeline_layouts(int(argv[1]), seed)
        return
    if argv and argv[0] == "--aware-trees":
        event_max = int(argv[argv.index("--event-max") + 1]) if "--event-max" in argv else 256
        compare = str(Path(argv[argv.index("--compare-src") + 1]).resolve()) if "--compare-src" in argv else None
        aware_trees(event_max, compare)
        return
    if argv and argv[0] == "--collectives":
        event_max = int(argv[argv.index("--event-max") + 1]) if "--event-max" in argv else 256
        collectives(event_max)
        return
    if argv and argv[0] == "--quotient":
        prefix, system, network, *rest = argv[1:]
        backend = rest[rest.index("--backend") + 1] if "--backend" in rest else "unaware"
        repeat = int(rest[rest.index("--repeat") + 1]) if "--repeat" in rest else 5
        compare = rest[rest.index("--compare-src") + 1] if "--compare-src" in rest else None
        quotient(prefix, system, network, backend, repeat, compare)
        return
    if argv and argv[0] == "--realistic":
        rest = argv[1:]
        max_ranks = int(rest[rest.index("--max-ranks") + 1]) if "--max-ranks" in rest else 1024
        event_max = int(rest[rest.index("--event-max") + 1]) if "--event-max" in rest else 64
        algo_only = rest[rest.index("--algo") + 1] if "--algo" in rest else None
        aware_max = int(rest[rest.index("--aware-max") + 1]) if "--aware-max" in rest else AWARE_MAX_RANKS
        backend_only = rest[rest.index("--backend") + 1] if "--backend" in rest else None
        dims_only = rest[rest.index("--dims") + 1] if "--dims" in rest else None
        compare = str(Path(rest[rest.index("--compare-src") + 1]).resolve()) if "--compare-src" in rest else None
        chunks = int(rest[rest.index("--active-chunks") + 1]) if "--active-chunks" in rest else 1
        realistic(
            max_ranks, "--event" in rest, event_max, algo_only, aware_max, backend_only, dims_only, compare, chunks
        )
        return
    event_too = os.environ.get("SIM_BENCH_EVENT") == "1"
    print(
        f"{'topology':15s} {'backend':19s} {'npus':>5s} {'path':6s} {'first_s':>8s} {'repeat_s':>8s} "
        f"{'peak_MiB':>9s} {'finish_ns':>10s}"
    )
    with tempfile.TemporaryDirectory() as tmp:
        for npus in (64, 256, 1024):
            ts = all_reduce_set(Path(tmp), npus)
            for topo in ("Ring", "Switch", "FullyConnected"):
                net = NetworkConfig.from_dict(
                    {"topology": [topo], "npus_count": [npus], "bandwidth": [50], "latency": [500]},
                    source=f"{topo}_{npus}",
                )
                for backend in ("congestion_unaware", "congestion_aware"):
                    hw = HardwareConfig(SystemConfig.from_dict(SYSTEM, source="Ring_4chunks"), net, backend=backend)
                    for fast in [True, False] if event_too else [True]:
                        first, repeat, peak, fin = measure(ts, hw, fast)
                        print(
                            f"{topo:15s} {backend:19s} {npus:5d} {'fast' if fast else 'event':6s} {first:8.3f} "
                            f"{repeat:8.3f} {peak:9.1f} {fin:10d}",
                            flush=True,
                        )
    if len(argv) >= 3:
        ts = TraceSet.load(argv[0])
        for backend in ("congestion_unaware", "congestion_aware"):
            hw = load_hardware(argv[1], argv[2], backend=backend)
            first, repeat, peak, fin = measure(ts, hw)
            print(
                f"{Path(argv[0]).name}: {backend} {len(ts.ranks)} ranks first {first:.3f} s repeat {repeat:.3f} s "
                f"peak {peak:.1f} MiB finish {fin} ns"
            )


if __name__ == "__main__":
    main(sys.argv[1:])
