"""Trace I/O throughput: chakra-pipe's compact loader and writer vs what a Chakra user does today.

Baseline load (the Chakra Python tools' way): read the file, walk the varint32 framing, decode every
record with the protobuf runtime's generated classes, then collect ids, types, durations and both
dependency lists into Python lists. Baseline write: ``SerializeToString`` per node plus the varint
prefix (protobuf's ``_VarintBytes``, as Chakra's ``encodeMessage``) into one file.

Two kinds of trace are measured, because they stress different parts of the decoder:

* *converted*: a PyTorch trace converted by Chakra (``chakra.0.et``: ~50 data deps, input/output
  strings and a dozen attributes per node, ~810 bytes a node), tiled to the wanted node count with
  the ids renumbered;
* *generated*: one rank of ``generate llm`` (gpt3-175b, DP 2, many microbatches: a few deps and
  the collective attributes per node, ~90 bytes a node).

A third case is a whole *rank set*: ``generate llm`` gpt3-175b t8d16p8 with 8 layers, 1,024 files
of ~97 nodes (~10 KB each, 10.8 MB in all), where the cost is per file, not per byte. It prints
``TraceSet.load`` (files decoded in batches) beside ``load_graph`` file by file and the protobuf
baseline file by file.

For each it prints best-of-N CPU times (``--wall``: wall-clock), MB/s, the ratio to the protobuf
baseline (> 1 = we are faster), the time of ``RankTrace.build`` (the simulator's columns) on the
loaded graph, and the peak memory a fresh process adds while loading (as a multiple of the file
size; target <= 2x). Each load is timed in a fresh process, as a command loads its trace: with
``OPENBLAS_NUM_THREADS=1``, as the CLI sets it for the verbs that load traces to simulate or check
them (``cli.SINGLE_THREADED_BLAS``). With numpy's default pool, OpenBLAS's worker thread spins on
the other core for ~0.1 s after numpy's import, and a process's CPU time of a load in that window
counted it: a 40k-node generated load read 55-65 ms of CPU for ~30 ms of its own.
The default run is short (~40k nodes each); ``--full`` measures the 1 M-node traces of issue 15
(several minutes, ~1 GB of temporary files; the baseline is then timed once).

    python benchmarks/trace_io.py [--nodes N | --full] [--repeat N] [--wall] [--trace FILE.et | --rank-set]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from google.protobuf.internal.decoder import _DecodeVarint32
from google.protobuf.internal.encoder import _VarintBytes

from chakra_pipe.et import TraceSet, iter_nodes, load_graph, read_trace, schema, write_trace
from chakra_pipe.et.framing import walk_records

FIXTURES = os.environ.get("CHAKRA_PIPE_FIXTURES") or Path(__file__).resolve().parents[2] / "shared" / "fixtures"
FIXTURE = Path(FIXTURES) / "chakra" / "chakra.0.et"
FULL_NODES = 1_000_000

# Run in a fresh interpreter: peak RSS added by one load, beyond what the imports and a first
# load of a 60-node trace already hold (~1 MB of one-off numpy/protobuf state that is no part of
# any file's cost: it was a third of a 40k-node generated trace's figure).
_MEMORY_PROBE = """\
import sys
from chakra_pipe.et import graph_from_bytes, load_graph
def status_kib(key):  # VmHWM, unlike ru_maxrss, is not inherited from the parent across exec
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith(key))
with open(sys.argv[1], "rb") as f:
    graph_from_bytes(f.read(int(sys.argv[2])))  # metadata and the first 60 nodes (warm-up)
before = status_kib("VmRSS:")
g = load_graph(sys.argv[1])
print(status_kib("VmHWM:") - before)
"""


def baseline_load(path: str) -> int:
    with open(path, "rb") as f:
        buf = f.read()
    pos, _ = 0, None
    length, pos = _DecodeVarint32(buf, 0)
    md = schema.GlobalMetadata()
    md.ParseFromString(buf[pos : pos + length])
    pos += length
    ids, types, durations, data_deps, ctrl_deps = [], [], [], [], []
    while pos < len(buf):
        length, pos = _DecodeVarint32(buf, pos)
        node = schema.Node()
        node.ParseFromString(buf[pos : pos + length])
        pos += length
        ids.append(node.id)
        types.append(node.type)
        durations.append(node.duration_micros)
        data_deps.append(list(node.data_deps))
        ctrl_deps.append(list(node.ctrl_deps))
    return len(ids)


def baseline_write(path: str, metadata, nodes) -> None:
    with open(path, "wb") as f:
        data = metadata.SerializeToString()
        f.write(_VarintBytes(len(data)) + data)
        for node in nodes:
            data = node.SerializeToString()
            f.write(_VarintBytes(len(data)) + data)


CLOCK = time.process_time  # CPU seconds by default: wall on the shared 2-core machine is 2-4x that


def best_pair(a, b, repeat: int) -> tuple[float, float]:
    """Best-of-N times of ``a`` and ``b``, run alternately so that drift in the machine's speed
    (shared or throttled cores) affects both sides alike."""
    ta, tb = [], []
    for _ in range(repeat):
        for fn, times in ((a, ta), (b, tb)):
            t = CLOCK()
            fn()
            times.append(CLOCK() - t)
    return min(ta), min(tb)


def converted_like(template: Path, nodes: int, out: str) -> None:
    """Tile the converted trace ``template`` to ``nodes`` records, shifting ids and deps per copy.

    Dependencies on ids the template does not hold (the converter leaves a few) are dropped, so
    that the simulator's columns can be built from the result.
    """
    md, base = read_trace(template)
    step = max(n.id for n in base) + 1
    present = {n.id for n in base}

    def tiled():
        for k in range(-(-nodes // len(base))):
            for node in base[: nodes - k * len(base)]:
                copy = schema.Node()
                copy.CopyFrom(node)
                copy.id += k * step
                copy.data_deps[:] = [d + k * step for d in node.data_deps if d in present]
                copy.ctrl_deps[:] = [d + k * step for d in node.ctrl_deps if d in present]
                yield copy

    write_trace(out, md, tiled())


def generated(nodes: int, folder: str) -> str:
    """One rank of a generated gpt3-175b step (DP 2) with about ``nodes`` nodes."""
    from chakra_pipe.generate import Layout, TrainingSpec, generate_llm, resolve_model

    model = resolve_model("gpt3-175b")
    mbs = max(1, round(nodes / 388))  # ~388 nodes per microbatch on one rank of this layout
    spec = TrainingSpec(Layout(dp=2, tp=1, pp=1, moe=model.moe), microbatches=mbs, global_batch=2 * mbs)
    generate_llm(model, spec, os.path.join(folder, "gen"), allow_large=True)
    return os.path.join(folder, "gen.0.et")


def fresh_env(**extra: str) -> dict[str, str]:
    """The environment of a fresh measuring process: single-threaded OpenBLAS as the trace-loading
    verbs run (see the module docstring; a value the user set wins)."""
    return {"OPENBLAS_NUM_THREADS": "1", **os.environ, **extra}


def load_memory_kib(path: str) -> int:
    env = fresh_env(PYTHONPATH=str(Path(__file__).resolve().parents[1] / "src"))
    with open(path, "rb") as f:
        head = f.read(1 << 20)
    _, _, warm = walk_records(head, path, 61)
    probe = [sys.executable, "-c", _MEMORY_PROBE, path, str(warm)]
    done = subprocess.run(probe, env=env, capture_output=True, text=True)
    return int(done.stdout.strip()) if done.returncode == 0 else -1


LOADERS = {"baseline": baseline_load, "ours": load_graph}


def time_one_load(which: str, path: str) -> float:
    """CPU (or wall) seconds of one load of ``path`` by ``which`` in this process, after a warm-up
    load of a small file of the same kind (imports, one-off numpy/protobuf state)."""
    with open(path, "rb") as f:
        head = f.read(1 << 20)
    _, _, warm = walk_records(head, path, 61)
    with tempfile.NamedTemporaryFile(suffix=".et") as small:
        small.write(head[:warm])
        small.flush()
        LOADERS[which](small.name)
    t = CLOCK()
    LOADERS[which](path)
    return CLOCK() - t


def fresh_load_pair(path: str, repeat: int) -> tuple[float, float]:
    """Best-of-N load times of the baseline and ours, each in a fresh process, alternated.

    Why fresh processes: a load is the first big allocation of a ``chakra-pipe`` command, and timing
    ours right after the baseline in one process made it pay for the baseline's heap (a converted
    200k-node load ~1.6x slower, mostly page faults on memory the baseline's objects had freed)."""
    ta, tb = [], []
    for _ in range(repeat):
        for which, times in (("baseline", ta), ("ours", tb)):
            cmd = [sys.executable, __file__, "--time-one", which, path]
            if CLOCK is time.perf_counter:
                cmd.append("--wall")
            done = subprocess.run(cmd, env=fresh_env(), capture_output=True, text=True, check=True)
            times.append(float(done.stdout))
    return min(ta), min(tb)


def measure(label: str, path: str, repeat: int, write: bool) -> None:
    from chakra_pipe.sim.workload import RankTrace

    size_mb = os.path.getsize(path) / 1e6
    t_base, t_ours = fresh_load_pair(path, repeat)
    graph = load_graph(path)
    n = len(graph)
    _, t_build = best_pair(lambda: None, lambda: RankTrace.build(graph), repeat)

    def row(what: str, t: float) -> None:
        print(f"  {what:<36} {t * 1e3:10.1f} ms {n / t:12,.0f} nodes/s {size_mb / t:8.1f} MB/s")

    clock = "CPU" if CLOCK is time.process_time else "wall"
    print(f"{label}: {path}: {n:,} nodes, {size_mb:.1f} MB (best of {repeat}, {clock} time, loads in fresh processes)")
    row("load, baseline (protobuf + lists)", t_base)
    row("load, chakra-pipe TraceGraph", t_ours)
    row("RankTrace.build (simulator columns)", t_build)
    if write:
        _, t_stream = best_pair(lambda: None, lambda: sum(1 for _ in iter_nodes(path)), max(1, repeat // 3))
        row("stream, chakra-pipe TraceReader", t_stream)
        md, nodes = read_trace(path)
        with tempfile.TemporaryDirectory() as tmp:
            out = os.path.join(tmp, "out.et")
            t_wbase, t_wours = best_pair(
                lambda: baseline_write(out, md, nodes), lambda: write_trace(out, md, nodes), repeat
            )
        row("write, baseline (serialize loop)", t_wbase)
        row("write, chakra-pipe write_trace", t_wours)
        print(f"  write speed-up vs baseline:  {t_wbase / t_wours:5.2f}x  (target >= 1x)")
    mem = load_memory_kib(path) / 1e3
    print(f"  load speed-up vs baseline:   {t_base / t_ours:5.2f}x  (target >= 3x, and >= 200 MB/s)")
    print(f"  build / load:                {t_build / t_ours:5.2f}   (target <= 1)")
    print(f"  load peak memory:            {mem:7.1f} MB = {mem / size_mb:4.2f}x the file (target <= 2x)")


def rank_set(folder: str) -> str:
    """The prefix of a generated 1,024-rank gpt3-175b t8d16p8 step with 8 layers (1,024 small files)."""
    from chakra_pipe.generate import Layout, TrainingSpec, generate_llm, resolve_model

    model = resolve_model("gpt3-175b", layers=8)
    layout = Layout(dp=16, tp=8, pp=8, moe=model.moe)
    generate_llm(model, TrainingSpec(layout, microbatches=8, global_batch=128), os.path.join(folder, "set"))
    return os.path.join(folder, "set")


def measure_set(prefix: str, repeat: int) -> None:
    files = TraceSet.load(prefix).files
    size_mb = sum(f.stat().st_size for f in files) / 1e6
    t_base, t_alone = best_pair(
        lambda: [baseline_load(str(f)) for f in files], lambda: [load_graph(f) for f in files], repeat
    )
    _, t_set = best_pair(lambda: None, lambda: TraceSet.load(prefix), repeat)
    clock = "CPU" if CLOCK is time.process_time else "wall"
    print(f"rank set: {prefix}: {len(files):,} files, {size_mb:.1f} MB (best of {repeat}, {clock} time)")
    for what, t in (
        ("load, baseline file by file", t_base),
        ("load, load_graph file by file", t_alone),
        ("load, TraceSet.load (batched)", t_set),
    ):
        print(f"  {what:<36} {t * 1e3:10.1f} ms {t / len(files) * 1e3:8.3f} ms/file {size_mb / t:8.1f} MB/s")
    print(f"  batched speed-up vs file by file: {t_alone / t_set:5.2f}x, vs baseline: {t_base / t_set:5.2f}x")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trace", help="measure this .et file only (instead of the two built traces)")
    ap.add_argument("--nodes", type=int, default=40_000, help="nodes of each built trace (default 40,000)")
    ap.add_argument("--full", action="store_true", help=f"{FULL_NODES:,} nodes each, baseline timed once")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--wall", action="store_true", help="time wall-clock seconds instead of CPU seconds")
    ap.add_argument("--rank-set", action="store_true", help="measure the 1,024-file rank set only")
    ap.add_argument("--time-one", nargs=2, metavar=("LOADER", "FILE"), help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    global CLOCK
    CLOCK = time.perf_counter if args.wall else time.process_time
    if args.time_one:  # one timed load in this fresh process (fresh_load_pair)
        print(time_one_load(*args.time_one))
        return 0
    if args.trace:
        if not Path(args.trace).is_file():
            print(f"trace not found: {args.trace}", file=sys.stderr)
            return 2
        measure("given", args.trace, args.repeat, write=True)
        return 0
    nodes, repeat = (FULL_NODES, 1) if args.full else (args.nodes, args.repeat)
    with tempfile.TemporaryDirectory(prefix="chakra-traceio-") as tmp:
        measure_set(rank_set(tmp), min(repeat, 3))
        if args.rank_set:
            return 0
        if FIXTURE.is_file():
            conv = os.path.join(tmp, "converted.et")
            converted_like(FIXTURE, nodes, conv)
            measure("converted", conv, repeat, write=not args.full)
            os.unlink(conv)
        else:
            print(f"skipping the converted trace: fixture {FIXTURE} not found", file=sys.stderr)
        measure("generated", generated(nodes, tmp), repeat, write=not args.full)
    return 0


if __name__ == "__main__":
    sys.exit(main())
