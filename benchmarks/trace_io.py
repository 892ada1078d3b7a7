"""Trace I/O throughput: chakra-pipe's compact loader and writer vs what a Chakra user does today.

Baseline load (the Chakra Python tools' way): read the file, walk the varint32 framing, decode every
record with the protobuf runtime's generated classes, then collect ids, types, durations and both
dependency lists into Python lists. Baseline write: ``SerializeToString`` per node plus the varint
prefix (protobuf's ``_VarintBytes``, as Chakra's ``encodeMessage``) into one file. Prints best-of-N wall
times, nodes/s, MB/s and the ratios (> 1 = we are faster).

    python benchmarks/trace_io.py [TRACE.et] [--repeat N]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

from google.protobuf.internal.decoder import _DecodeVarint32
from google.protobuf.internal.encoder import _VarintBytes

from chakra_pipe.et import iter_nodes, load_graph, read_trace, schema, write_trace

DEFAULT = Path(__file__).resolve().parents[2] / "shared" / "fixtures" / "chakra" / "chakra.0.et"


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


def best_pair(a, b, repeat: int) -> tuple[float, float]:
    """Best-of-N wall times of ``a`` and ``b``, run alternately so that drift in the machine's speed
    (shared or throttled cores) affects both sides alike."""
    ta, tb = [], []
    for _ in range(repeat):
        for fn, times in ((a, ta), (b, tb)):
            t = time.perf_counter()
            fn()
            times.append(time.perf_counter() - t)
    return min(ta), min(tb)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("trace", nargs="?", default=str(DEFAULT))
    ap.add_argument("--repeat", type=int, default=15)
    args = ap.parse_args(argv)
    if not Path(args.trace).is_file():
        print(f"trace not found: {args.trace} (pass a .et file)", file=sys.stderr)
        return 2
    size_mb = os.path.getsize(args.trace) / 1e6
    n = baseline_load(args.trace)
    t_base, t_ours = best_pair(lambda: baseline_load(args.trace), lambda: load_graph(args.trace), args.repeat)
    _, t_stream = best_pair(lambda: None, lambda: sum(1 for _ in iter_nodes(args.trace)), max(3, args.repeat // 3))
    md, nodes = read_trace(args.trace)
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "out.et")
        t_wbase, t_wours = best_pair(
            lambda: baseline_write(out, md, nodes), lambda: write_trace(out, md, nodes), args.repeat
        )

    def row(label: str, t: float) -> None:
        print(f"  {label:<34} {t * 1e3:9.2f} ms {n / t:14,.0f} nodes/s {size_mb / t:9.1f} MB/s")

    print(f"{args.trace}: {n:,} nodes, {size_mb:.2f} MB (best of {args.repeat})")
    row("load, baseline (protobuf + lists)", t_base)
    row("load, chakra-pipe compact graph", t_ours)
    row("stream, chakra-pipe TraceReader", t_stream)
    row("write, baseline (serialize loop)", t_wbase)
    row("write, chakra-pipe write_trace", t_wours)
    print(f"  load speed-up vs baseline:  {t_base / t_ours:5.2f}x  (target >= 2x)")
    print(f"  write speed-up vs baseline: {t_wbase / t_wours:5.2f}x  (target >= 1x)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
