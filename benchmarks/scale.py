"""Cluster-scale simulation: a gpt3-175b training step at 1,024 … 131,072 GPUs, and the search's end-to-end time.

Step: DP×TP×PP with TP = 8 inside a node and PP = 8, one microbatch per DP replica and pipeline slot
(8 microbatches), on a 3-D network ``Switch × Switch × Switch`` — an 8-GPU NVLink-like node (400 GB/s),
a 16-node rail switch (50 GB/s) and a spine (25 GB/s). Each size runs in its own process so the peak
RSS printed is that size's; generation is the in-memory generation of the ranks that are simulated (the
representatives on the symmetric path, every rank on the full engine), nothing is written to disk.
Wall and CPU seconds are both printed: on a shared machine the wall time includes waiting for a core.

    python benchmarks/scale.py                       # 1,024 and 4,096 ranks
    python benchmarks/scale.py --ranks 16384 131072  # the big sizes
    python benchmarks/scale.py --full 1024           # the same step on the full engine, per-rank equal?
    python benchmarks/scale.py --backend congestion_aware --ranks 16384 131072  # FIFO links (aware)
    python benchmarks/scale.py --search 1024 16384   # gpt3-175b layout search on two platforms
    python benchmarks/scale.py --search 1024 --save-top top.json  # keep each platform's best layout
    python benchmarks/scale.py --check-top top.json   # those layouts as campaign points
    python benchmarks/scale.py --digest 1024 16384    # an in-memory campaign shard's trace_sha256

``--check-top`` writes each saved top layout's rank files with ``generate llm``'s own writer, loads them
and simulates them on the full engine as a campaign shard does, and compares the step time with the
search's (a separate step: the full engine at 1,024 ranks takes minutes per layout here).
"""

from __future__ import annotations

import argparse
import io
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
BANDWIDTH = [400.0, 50.0, 25.0]
LATENCY = [936.25, 2500.0, 5000.0]


def network(ranks: int) -> dict:
    return {"topology": ["Switch"] * 3, "npus_count": [8, 16, ranks // 128], "bandwidth": BANDWIDTH, "latency": LATENCY}


def system() -> dict:
    return json.loads((REPO / "config/hardware/scaleout_2d/system.json").read_text()) | {
        f"{k}-implementation": ["ring"] * 3 for k in ("all-reduce", "all-gather", "reduce-scatter", "all-to-all")
    }


def step(ranks: int, full: bool, backend: str) -> dict:
    """Generate and simulate one step in this process; the figures as a dict."""
    from chakra_pipe.generate.options import resolve_llm
    from chakra_pipe.sim import HardwareConfig, NetworkConfig, SystemConfig
    from chakra_pipe.sim.symmetric import fit
    from chakra_pipe.sweep.generated_layout import GeneratedLayout

    dp = ranks // 64
    hw = HardwareConfig(
        system=SystemConfig.from_dict(system(), source="system"),
        network=NetworkConfig.from_dict(network(ranks), source="network"),
        backend=backend,
    )
    wall, cpu = time.perf_counter(), time.process_time()
    model, spec = resolve_llm(
        {"model": "gpt3-175b", "tp": 8, "pp": 8, "dp": dp, "microbatches": 8, "global_batch": 8 * dp}
    )
    layout = GeneratedLayout(model, spec, "gpt3-175b")
    generated = len(layout.traces().ranks) if full else len(layout.representatives(fit(layout.symmetry, hw)))
    gen = (time.perf_counter() - wall, time.process_time() - cpu)
    wall, cpu = time.perf_counter(), time.process_time()
    result, how = layout.simulate(hw, symmetric=not full)
    sim = (time.perf_counter() - wall, time.process_time() - cpu)
    return {
        "ranks": ranks,
        "backend": backend,
        "how": how,
        "generated_ranks": generated,
        "generate_s": gen,
        "simulate_s": sim,
        "step_ms": max(result.finish_ns) / 1e6,
        "finish_ns": result.finish_ns,
        "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }


def run_step(ranks: int, full: bool, backend: str) -> dict:
    cmd = [sys.executable, __file__, "--one", str(ranks), "--backend", backend] + (["--full-one"] if full else [])
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return json.loads(out)


def print_step(r: dict) -> None:
    print(
        f"{r['ranks']:>7} ranks  {r['backend'].split('_')[1]:<7}  {r['how']:<48}  "
        f"generate {r['generate_s'][0]:7.2f} s wall "
        f"({r['generate_s'][1]:6.2f} CPU)  simulate {r['simulate_s'][0]:7.2f} s wall ({r['simulate_s'][1]:6.2f} CPU)  "
        f"peak RSS {r['peak_rss_mib']:7.0f} MiB  step {r['step_ms']:.3f} ms",
        flush=True,
    )


def platforms(gpus: int) -> dict:
    """Two platforms of the same 3-D shape: the network above and one with half the scale-out bandwidth."""
    base = {"backend": "congestion_unaware", "hbm_gib": 80, "axes": {"network.npus_count": [[8, 16, gpus // 128]]}}
    return {
        "fast": {**base, "network": "net.yml", "system": "sys.json", "cost": 8.0},
        "slim": {
            **base,
            "network": "net.yml",
            "system": "sys.json",
            "cost": 5.0,
            "axes": {**base["axes"], "network.bandwidth": [[400.0, 25.0, 12.5]]},
        },
    }


def search(gpus: int, save_top: Path | None) -> None:
    from chakra_pipe.search.run import SearchSpec
    from chakra_pipe.search.run import search as run_search
    from chakra_pipe.sweep.grid import expand, select_points

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "net.yml").write_text(json.dumps(network(gpus)))
        (root / "sys.json").write_text(json.dumps(system()))
        points = select_points(expand(platforms(gpus), root), ["fast", "slim"], gpus, None)
        spec = SearchSpec("gpt3-175b", gpus, 1536, [1], {})
        log = io.StringIO()
        wall, cpu = time.perf_counter(), time.process_time()
        rows = run_search(spec, points, log=log)
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        simulated = [r for r in rows if r["verdict"] == "ok"]
        symmetric = log.getvalue().count("(symmetric:")
        print(
            f"search gpt3-175b on {gpus} GPUs, 2 platforms, global batch 1536: {len(rows)} rows, "
            f"{len(simulated)} simulated ({symmetric} symmetric) in {wall:.1f} s wall ({cpu:.1f} s CPU)",
            flush=True,
        )
        tops = []
        for point in points:
            top = next(r for r in rows if r["point_id"] == point.id and r.get("rank") == 1)
            print(f"  best on {point.id}: {top['layout']} {top['step_time_ns'] / 1e6:.3f} ms, MFU {top['mfu']:.3f}")
            tops.append({"gpus": gpus, "platform": point.platform, "row": top})
        if save_top is not None:
            save_top.write_text(json.dumps(tops, default=str))


def check_tops(path: Path) -> None:
    """Each saved top layout as a campaign point: rank files written by ``generate llm``, full engine."""
    from chakra_pipe.et.traceset import TraceSet
    from chakra_pipe.generate.llm import generate_llm
    from chakra_pipe.generate.options import resolve_llm
    from chakra_pipe.sim import simulate
    from chakra_pipe.sweep.grid import expand
    from chakra_pipe.sweep.shard import hardware_config, metrics

    keys = ("dp", "tp", "pp", "ep", "microbatches", "zero", "recompute")
    for saved in json.loads(path.read_text()):
        gpus, top = saved["gpus"], saved["row"]
        with tempfile.TemporaryDirectory() as tmp:
            root = Path(tmp)
            (root / "net.yml").write_text(json.dumps(network(gpus)))
            (root / "sys.json").write_text(json.dumps(system()))
            point = next(p for p in expand(platforms(gpus), root) if p.id == top["point_id"])
            opts = {"model": "gpt3-175b", **{k: top[k] for k in keys}, "global_batch": 1536}
            prefix = root / "rank"
            wall = time.perf_counter()
            generate_llm(*resolve_llm(opts), prefix, allow_large=True)
            step = metrics(simulate(TraceSet.load(prefix), hardware_config(point, point.id)))["step_time_ns"]
        verdict = "equal" if step == top["step_time_ns"] else f"DIFFERENT ({step})"
        print(
            f"{top['point_id']}: campaign point of {top['layout']}: {step} ns, search {top['step_time_ns']} ns, "
            f"{verdict} ({time.perf_counter() - wall:.0f} s)",
            flush=True,
        )


def digest(ranks: int) -> None:
    """CPU time of the step's ``trace_sha256`` computed in memory, as an in-memory campaign shard does
    (every rank's bytes hashed, so the digest equals the one of the files ``generate llm`` would write)."""
    from chakra_pipe.generate.options import resolve_llm
    from chakra_pipe.sweep.generated_layout import GeneratedLayout

    dp = ranks // 64
    opts = {"model": "gpt3-175b", "tp": 8, "pp": 8, "dp": dp, "microbatches": 8, "global_batch": 8 * dp}
    layout = GeneratedLayout(*resolve_llm(opts), "gpt3-175b")
    cpu = time.process_time()
    layout.sha256()
    cpu = time.process_time() - cpu
    print(
        f"{ranks:>7} ranks  trace_sha256 in memory {cpu:7.2f} s CPU ({cpu / ranks * 1e3:.2f} ms per rank)", flush=True
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ranks", type=int, nargs="*", default=[1024, 4096])
    ap.add_argument("--full", type=int, nargs="*", default=[], help="sizes to run on the full engine too")
    ap.add_argument("--search", type=int, nargs="*", default=[], help="GPU counts to search gpt3-175b on")
    ap.add_argument("--save-top", type=Path, help="write each platform's best layout (JSON) for --check-top")
    ap.add_argument("--check-top", type=Path, help="simulate the saved best layouts as campaign points")
    ap.add_argument("--backend", nargs="*", default=["congestion_unaware"], help="congestion_unaware, congestion_aware")
    ap.add_argument("--digest", type=int, nargs="*", default=[], help="sizes to time the in-memory trace digest at")
    ap.add_argument("--one", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--full-one", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.one:
        print(json.dumps(step(args.one, args.full_one, args.backend[0])))
        return
    symmetric = {}
    for backend in args.backend:
        for n in args.ranks:
            symmetric[n, backend] = run_step(n, False, backend)
            print_step(symmetric[n, backend])
        for n in args.full:
            r = run_step(n, True, backend)
            print_step(r)
            sym = symmetric.get((n, backend)) or run_step(n, False, backend)
            print(f"        per-rank finish times {'identical' if sym['finish_ns'] == r['finish_ns'] else 'DIFFERENT'}")
    for n in args.digest:
        digest(n)
    for gpus in args.search:
        search(gpus, args.save_top)
    if args.check_top:
        check_tops(args.check_top)


if __name__ == "__main__":
    main()
