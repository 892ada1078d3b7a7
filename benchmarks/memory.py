"""Peak memory of one ``chakra-pipe simulate`` call, phase by phase (issue #15: peak RSS ≤ ASTRA-sim's).

The command's work is split where its caches allow — load (``TraceSet.load``), rank-set analysis
(``rankset.analyze``), symmetric proof (``symmetric_files.find_symmetry`` + ``_proof``), simulation
(``simulate``, which reuses both cached results), output (the ``finished`` lines) — and after each
phase the resident set (``VmRSS``) and that phase's peak (``VmHWM``, reset before it through
``/proc/self/clear_refs``) are printed in MB. Each run is a fresh process, as a command is;
``--old SRC`` measures another source tree too (a ``git worktree add --detach`` snapshot of main)
and checks that both print the same lines. ``--trace N`` adds tracemalloc's N largest live
allocation sites (file:line) after each phase (several times slower, and its peaks include
tracemalloc's own tables: read the sites, not the MB, of such a run).

    python benchmarks/memory.py /work/bench/L96/g /work/bench/sys3d.json /work/bench/net3d.yml
    python benchmarks/memory.py PREFIX SYSTEM NETWORK [--old /tmp/base/src] [--trace 15]
"""

from __future__ import annotations

import argparse
import io
import json
import os
import subprocess
import sys
import tracemalloc
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

SRC = str(Path(__file__).resolve().parent.parent / "src")


def _status() -> tuple[float, float]:
    """(VmHWM, VmRSS) of this process in MB."""
    with open("/proc/self/status") as f:
        fields = dict(line.split(":", 1) for line in f)
    return int(fields["VmHWM"].split()[0]) / 1024, int(fields["VmRSS"].split()[0]) / 1024


def _reset_peak() -> None:
    """Start a new VmHWM at the current RSS (Linux ``clear_refs`` 5); a kernel without it keeps the
    process's peak, which then only ever grows from phase to phase."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
    except OSError:
        pass


def phases(prefix: str, system: str, network: str, top: int) -> dict[str, Any]:
    """Run the command phase by phase in this process (the child of :func:`measure`)."""
    if top:
        tracemalloc.start()
    from chakra_pipe.et.traceset import TraceSet
    from chakra_pipe.rankset import analyze
    from chakra_pipe.sim import load_hardware, simulate
    from chakra_pipe.sim import symmetric_files as sf
    from chakra_pipe.sim.result import finished_line

    rows = [("imports", *_status())]
    sites: dict[str, list[tuple[str, float]]] = {}

    def phase(name: str, run: Callable[[], Any]) -> Any:
        _reset_peak()
        out = run()
        rows.append((name, *_status()))
        if top:
            stats = tracemalloc.take_snapshot().statistics("lineno")[:top]
            sites[name] = [(str(s.traceback[0]), s.size / 2**20) for s in stats]
        return out

    hw = load_hardware(system, network, None)
    ts = phase("load", lambda: TraceSet.load(prefix))

    def analysis():
        found = analyze(ts, None, None, hw.system.preferred_dataset_splits)
        found.refuse_input()
        return found

    table = phase("analysis", analysis).groups

    def proof():
        sym, why = sf.find_symmetry(table, len(ts.ranks), hw)
        return why if sym is None else sf._proof(ts, table, sym)[0]

    phase("proof", proof)
    res = phase("simulation", lambda: simulate(ts, hw))
    out = io.StringIO()
    lines = zip(res.finish_ns, res.exposed_comm_ns)
    phase("output", lambda: [print(finished_line(r, t, x), file=out) for r, (t, x) in enumerate(lines)])
    return {
        "rows": rows,
        "sites": sites,
        "ranks": len(ts.ranks),
        "nodes": sum(len(g) for g in ts.ranks),
        "simulated": getattr(res, "simulated_ranks", len(ts.ranks)),
        "output_crc": zlib.crc32(out.getvalue().encode()),
    }


def measure(src: str, prefix: str, system: str, network: str, top: int) -> dict[str, Any]:
    """:func:`phases` in a fresh process importing ``chakra_pipe`` from ``src``."""
    env = {**os.environ, "PYTHONPATH": src}
    cmd = [sys.executable, __file__, "--child", prefix, system, network, "--trace", str(top)]
    done = subprocess.run(cmd, check=True, capture_output=True, text=True, env=env)
    return json.loads(done.stdout.splitlines()[-1])


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("prefix")
    p.add_argument("system")
    p.add_argument("network")
    p.add_argument("--trace", type=int, default=0, metavar="N", help="tracemalloc's N largest sites per phase")
    p.add_argument("--old", metavar="SRC", help="also measure this source tree (e.g. a snapshot of main)")
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child:
        print(json.dumps(phases(args.prefix, args.system, args.network, args.trace)))
        return
    trees = {"new": SRC, **({"old": args.old} if args.old else {})}
    got = {label: measure(src, args.prefix, args.system, args.network, args.trace) for label, src in trees.items()}
    m = got["new"]
    load = os.getloadavg()[0]
    print(f"{args.prefix}: {m['ranks']} ranks, {m['nodes']:,} nodes, {m['simulated']} simulated; load {load:.2f}")
    print(f"{'phase':<12}" + "".join(f"{label + ' peak':>11}{label + ' RSS':>10}" for label in got))
    for k, row in enumerate(m["rows"]):
        print(f"{row[0]:<12}" + "".join(f"{g['rows'][k][1]:>11.1f}{g['rows'][k][2]:>10.1f}" for g in got.values()))
    peaks = {label: max(r[1] for r in g["rows"]) for label, g in got.items()}
    print(f"{'command':<12}" + "".join(f"{peak:>11.1f}{'':>10}" for peak in peaks.values()))
    if "old" in got:
        same = got["old"]["output_crc"] == m["output_crc"]
        print(f"peak new/old {peaks['new'] / peaks['old']:.2f}; output lines {'identical' if same else 'DIFFER'}")
    for name, top in m["sites"].items():
        print(f"-- largest live allocations after {name}:")
        for where, mb in top:
            print(f"   {mb:8.1f} MB  {where}")


if __name__ == "__main__":
    main()
