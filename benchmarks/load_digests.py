"""Exactness check for loader changes: a digest of every column of every load, to diff between trees.

A loader change (chunking, dtypes, memory handling) must leave every column of every load as it
was: values, dtypes and shapes, the attribute positions and decoded attributes, the metadata, and
for a refused file the error's type and text. ``--inputs DIR`` builds the loads that issue #15's
sessions checked (the tests' traces and the shared fixtures alone and each folder as one batch,
generated rank sets batched and some of their ranks alone, generated files of 2k-200k nodes,
converted tiles of 100-200k nodes, and 300 damaged copies) and writes their list; the digest run
then prints one line per load. Run the digests under each tree and compare the outputs::

    python benchmarks/load_digests.py --inputs /tmp/loads > /tmp/loads.txt
    PYTHONPATH=/work/main/src python benchmarks/load_digests.py /tmp/loads.txt > old.txt
    PYTHONPATH=src python benchmarks/load_digests.py /tmp/loads.txt > new.txt
    cmp old.txt new.txt
"""

from __future__ import annotations

import argparse
import hashlib
import os
import random
import sys
from dataclasses import fields
from pathlib import Path
from typing import Any

import numpy as np

from chakra_pipe.et import load_graph
from chakra_pipe.et.graph import TraceGraph, load_graphs

COLUMNS = tuple(f.name for f in fields(TraceGraph) if f.type == "np.ndarray")  # every array column
REPO = Path(__file__).resolve().parents[1]


def _feed(value: Any, acc: Any) -> None:
    """Hash ``value`` with its structure: arrays by dtype, shape and bytes; containers and plain
    objects (the attribute parts) member by member."""
    if isinstance(value, np.ndarray):
        acc.update(repr((value.dtype.str, value.shape)).encode())
        acc.update(np.ascontiguousarray(value).tobytes())
    elif isinstance(value, dict):
        for key in sorted(value, key=repr):
            acc.update(repr(key).encode())
            _feed(value[key], acc)
    elif isinstance(value, (list, tuple)):
        acc.update(b"[%d" % len(value))
        for item in value:
            _feed(item, acc)
    elif hasattr(value, "__dict__"):
        for key in sorted(vars(value)):
            acc.update(key.encode())
            _feed(vars(value)[key], acc)
    else:
        acc.update(repr(value).encode())


def digest(g: TraceGraph) -> str:
    acc = hashlib.sha256()
    for name in COLUMNS:
        acc.update(name.encode())
        _feed(getattr(g, name), acc)
    _feed(g.attr_parts, acc)
    md = g.metadata
    acc.update(md.SerializeToString() if hasattr(md, "SerializeToString") else repr(md).encode())
    for decoded in (g.attr_value, g.attr_kind, dict(g.pg_name.items()), g.involved_dim):
        _feed(decoded, acc)
    _feed([g.name(i) for i in range(0, len(g), max(1, len(g) // 50))], acc)
    return acc.hexdigest()[:16]


def load_line(paths: list[str]) -> str:
    """One load (a batch when ``paths`` holds several files): the digest of its graphs, or the error."""
    try:
        graphs = [load_graph(paths[0])] if len(paths) == 1 else load_graphs(paths)
    except Exception as exc:  # the refusal is part of what must not change
        return f"error {type(exc).__name__}: {exc}"
    return hashlib.sha256(" ".join(digest(g) for g in graphs).encode()).hexdigest()[:16]


def build_inputs(folder: Path) -> list[list[str]]:
    """Write the traces into ``folder`` and return the loads (lists of files) to digest."""
    sys.path.insert(0, str(REPO / "benchmarks"))
    import trace_io

    from chakra_pipe.generate import Layout, TrainingSpec, generate_llm, resolve_model

    folder.mkdir(parents=True, exist_ok=True)
    loads: list[list[str]] = []
    for name, model, (dp, tp, pp), layers in (
        ("L8", "gpt3-175b", (16, 8, 8), 8),
        ("ll64", "llama3-8b", (8, 8, 1), None),
        ("g13", "gpt3-13b", (4, 4, 1), None),
    ):
        m = resolve_model(model, layers=layers) if layers else resolve_model(model)
        spec = TrainingSpec(Layout(dp=dp, tp=tp, pp=pp, moe=m.moe), microbatches=4, global_batch=4 * dp)
        generate_llm(m, spec, str(folder / name), allow_large=True)
        files = sorted((str(f) for f in folder.glob(f"{name}.*.et")), key=lambda f: int(f.split(".")[-2]))
        loads += [files] + [[f] for f in files[:: max(1, len(files) // 16)]]
    for n in (2_000, 10_000, 16_500, 33_000, 40_000, 200_000):
        sub = folder / f"g{n}"
        sub.mkdir(exist_ok=True)
        loads.append([trace_io.generated(n, str(sub))])
    if trace_io.FIXTURE.is_file():
        for n in (100, 5_000, 16_385, 40_000, 200_000):
            trace_io.converted_like(trace_io.FIXTURE, n, str(folder / f"c{n}.et"))
            loads.append([str(folder / f"c{n}.et")])
    given = sorted(str(f) for f in (REPO / "tests" / "data").rglob("*.et"))
    given += sorted(str(f) for f in Path(trace_io.FIXTURES).rglob("*.et"))
    loads += [[f] for f in given]
    by_folder: dict[str, list[str]] = {}
    for f in given:
        by_folder.setdefault(os.path.dirname(f), []).append(f)
    loads += [files for files in by_folder.values() if len(files) > 1]
    rnd = random.Random(37)
    for k in range(300):  # damaged copies: bytes changed, or cut short
        data = bytearray(Path(rnd.choice(given)).read_bytes())
        if not data:
            continue
        if k % 5 == 4:
            data = data[: rnd.randrange(len(data))]
        else:
            for _ in range(rnd.choice((1, 1, 2, 4))):
                data[rnd.randrange(len(data))] = rnd.randrange(256)
        damaged = folder / f"damaged{k}.et"
        damaged.write_bytes(data)
        loads.append([str(damaged)])
    return loads


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("loads", nargs="?", help="file of loads, one a line (files of a batch separated by spaces)")
    ap.add_argument("--inputs", metavar="DIR", help="write the traces into DIR and print the list of loads")
    args = ap.parse_args(argv)
    if args.inputs:
        for files in build_inputs(Path(args.inputs)):
            print(" ".join(files))
        return 0
    if not args.loads:
        ap.error("give a file of loads, or --inputs DIR")
    for line in Path(args.loads).read_text().splitlines():
        paths = line.split()
        print(f"{paths[0]} [{len(paths)}] {load_line(paths)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
