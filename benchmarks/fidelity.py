"""Fidelity of captured traces: simulated-on-calibrated step vs the step that was measured.

For each built-in model at ``--ranks`` (default 2): calibrate this machine once (``chakra-pipe
calibrate``, gloo), capture the model, convert it, simulate the set on the calibrated
``network.yml`` + ``system.json``, and print the simulated step against

* the **traced** step (the capture's ``ProfilerStep`` on the slowest rank: the run whose op
  durations the trace holds), and
* the **untraced** median step from ``capture.json`` (tracing inflates CPU steps),

with the relative error of each; also the step with an effectively infinite network (no
bandwidth limit, latency or endpoint delay), so the part the network model contributes is
visible. Also the calibration's own median error. The issue-14 target is
|simulated / measured - 1| <= 15 % at 2 ranks. Needs torch.

With ``--steps N`` the set holds N profiled steps: the traced figure is the slowest rank's span from
its first ``ProfilerStep`` start to its last one's end, the untraced one N x the median untraced
step (the campaign's ``captured`` figure). ``traced-wait`` is the traced span minus the
communication wait ``link`` measured on that rank (idle while a collective ran, plus time in
collective calls): what each rank's simulated work (CPU ops + compute) should equal if conversion
is faithful. The infinite-network step also holds each rank's waits for its slower peer, so it is
compared with the traced span minus only the *network* part of the wait
(``commwait.network_wait_us``: the wait after the last rank reached each collective).
The conditions (CPUs, load average before and after) are printed: on a shared machine every
figure moves with the load, so compare runs made under similar load only.

    python benchmarks/fidelity.py [--ranks 2] [--models mlp,resnet-tiny,gpt-tiny] [--cal DIR]
        [--steps 3] [--fit-min-size 4KiB] [--load none|gemm]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from chakra_pipe.et import TraceSet, schema
from chakra_pipe.link.commwait import network_wait_us
from chakra_pipe.link.kineto import load_kineto
from chakra_pipe.sim import HardwareConfig, NetworkConfig, SystemConfig, load_hardware, simulate

CLI = [sys.executable, "-m", "chakra_pipe.cli"]


def _run(args: list[str]) -> str:
    r = subprocess.run(CLI + args, capture_output=True, text=True, check=False)
    if r.returncode:
        raise SystemExit(f"{' '.join(args[:2])} failed: {r.stderr.strip().splitlines()[-1:]}")
    return r.stdout


def _traced_pass_ns(cap: Path, rank: int) -> float:
    """One rank's span over its profiled steps (first ProfilerStep start to last one's end), ns."""
    steps = [e for e in load_kineto(cap / f"rank{rank}.kineto.json.gz").cpu if e.name.startswith("ProfilerStep#")]
    return (max(e.ts + e.dur for e in steps) - min(e.ts for e in steps)) * 1e3


def _collective_table(ts: TraceSet, result, fit: dict) -> list[str]:
    """Per (kind, size): the in-step collective time captured vs simulated, and what calibrate measured.

    A collective's time, captured or simulated, is from the last rank's start to the last rank's end
    of the k-th collective on every rank (captured: the backend's work range, the COMM node's start
    and duration), so a rank waiting for a late peer is not counted on either side. "calibrate" is the
    calibration's median at the nearest calibrated size of that kind (``fit.json``, the times it fitted);
    for a SEND or RECV, half its ping-pong round trip.
    """
    comm = (schema.COMM_COLL_NODE, schema.COMM_SEND_NODE, schema.COMM_RECV_NODE)
    captured: list[list[tuple[int, float, float]]] = []
    for g in ts.ranks:
        idx = [i for i in range(len(g.ids)) if int(g.types[i]) in comm]
        idx.sort(key=lambda i: (g.start_time_micros[i], g.ids[i]))
        start, dur = g.start_time_micros, g.duration_micros
        captured.append([(int(g.ids[i]), float(start[i]) * 1e3, float(dur[i]) * 1e3) for i in idx])
    sim: dict[tuple[int, int], tuple[str, int, int, int]] = {
        (c.rank, c.node_id): (c.kind, c.bytes, c.start_ns, c.end_ns) for c in result.collectives
    }
    cal: dict[str, list[tuple[int, float]]] = {}
    for row in fit["rows"]:
        size, t = int(row["size_bytes"]), float(row["measured_ns"])
        if row["collective"] == "send_recv":  # calibrate's ping-pong is a round trip: one way is half
            for kind in ("SEND", "RECV"):
                cal.setdefault(kind, []).append((size, t / 2))
        else:
            cal.setdefault(row["collective"].upper(), []).append((size, t))
    groups: dict[tuple[str, int], list[tuple[float, float]]] = {}
    for k in range(min(len(c) for c in captured)):
        nodes = [c[k] for c in captured]
        recs = [sim.get((r, n[0])) for r, n in enumerate(nodes)]
        if any(x is None for x in recs):
            continue
        meas = max(s + d for _, s, d in nodes) - max(s for _, s, _ in nodes)
        simd = max(x[3] for x in recs) - max(x[2] for x in recs)  # type: ignore[index]
        groups.setdefault((recs[0][0], recs[0][1]), []).append((meas, simd))  # type: ignore[index]
    lines = []
    for (kind, size), pairs in sorted(groups.items()):
        near = min(cal.get(kind, []), key=lambda x: abs(x[0] - size), default=None)
        m, p = [a for a, _ in pairs], [b for _, b in pairs]
        lines.append(
            f"{kind:<15} {size:>9} B x{len(pairs)}: captured median {statistics.median(m) / 1e6:6.2f} ms "
            f"(sum {sum(m) / 1e6:6.2f}), simulated median {statistics.median(p) / 1e6:6.2f} ms "
            f"(sum {sum(p) / 1e6:6.2f})" + (f", calibrate {near[1] / 1e6:.2f} ms at {near[0]} B" if near else "")
        )
    return lines


def _conditions() -> str:
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    return f"{os.cpu_count()} CPUs, load average {load}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ranks", type=int, default=2)
    ap.add_argument("--models", default="mlp,resnet-tiny,gpt-tiny")
    ap.add_argument("--cal", type=Path, help="reuse a calibrate output folder instead of calibrating")
    ap.add_argument("--max-size", default="16MiB", help="calibration's largest message")
    ap.add_argument(
        "--fit-min-size",
        default="4KiB",
        help="calibration's smallest fitted message (default 4KiB: the in-step calls are 256 B-70 KB, so their "
        "per-call cost is measured, not extrapolated from >= 256 KiB)",
    )
    ap.add_argument("--steps", type=int, default=3, help="profiled steps per capture")
    ap.add_argument("--load", default="none", choices=("none", "gemm"), help="calibrate --load (see README)")
    args = ap.parse_args()
    print(f"conditions at start: {_conditions()}")
    with tempfile.TemporaryDirectory(prefix="fidelity-") as tmp:
        work = Path(tmp)
        cal = args.cal or work / "cal"
        if args.cal is None:
            _run(
                [
                    "calibrate",
                    "--ranks",
                    str(args.ranks),
                    "--backend",
                    "gloo",
                    "--max-size",
                    args.max_size,
                    "--fit-min-size",
                    args.fit_min_size,
                    "--load",
                    args.load,
                    "--out",
                    str(cal),
                ]
            )
        fit = json.loads((cal / "fit.json").read_text())
        print(
            f"calibration: {fit['platform']['topology']} {fit['platform']['bandwidth_gbps']} GB/s, latency "
            f"{fit['platform']['latency_ns']} ns, endpoint-delay {fit['platform']['endpoint_delay_ns']} ns; median "
            f"|error| {100 * fit['median_rel_error_fitted_sizes']:.1f}% (sizes >= {fit['fit_min_size_bytes']} B), "
            f"{100 * fit['median_rel_error_all_sizes']:.1f}% (all sizes), "
            f"{100 * (fit.get('median_rel_error_from_256KiB') or 0):.1f}% (sizes >= 256 KiB); latency from "
            f"{fit.get('latency_from', 'collectives')}"
            + (
                f" (send/recv median |error| {100 * fit['median_rel_error_send_recv']:.1f}%)"
                if fit.get("median_rel_error_send_recv") is not None
                else ""
            )
        )
        hw = load_hardware(cal / "system.json", cal / "network.yml")
        net = json.loads(json.dumps(hw.network.__dict__))
        # An effectively infinite network: no latency and no endpoint delay either, or the fitted
        # latency (ms on a loaded gloo machine) alone would add ms per collective.
        system = {**json.loads((cal / "system.json").read_text()), "endpoint-delay": 0}
        infinite = HardwareConfig(
            system=SystemConfig.from_dict(system, source="infinite"),
            network=NetworkConfig.from_dict(
                {
                    **{k: net[k] for k in ("topology", "npus_count")},
                    "bandwidth": [1e9] * len(net["topology"]),
                    "latency": [0.0] * len(net["topology"]),
                }
            ),
        )
        print(
            f"{'model':<12} {'simulated':>10} {'infinite':>10} {'traced-wait':>11} {'traced':>10} {'err':>7} "
            f"{'untraced':>10} {'err':>7}"
        )
        for model in args.models.split(","):
            cap, prefix = work / f"cap_{model}", str(work / "set" / model)
            _run(
                [
                    "capture",
                    "--model",
                    model,
                    "--ranks",
                    str(args.ranks),
                    "--steps",
                    str(args.steps),
                    "--backend",
                    "gloo",
                    "--out",
                    str(cap),
                ]
            )
            log = _run(["convert", "pytorch", "--ranks-dir", str(cap), "--out", prefix])
            # one "communication wait X ms" line per rank, in rank order
            waits = [float(ms) * 1e6 for ms in re.findall(r"communication wait ([\d.]+) ms", log)]
            ts = TraceSet.load(prefix)
            sim_result = simulate(ts, hw)
            sim_r = sim_result.finish_ns
            inf_result = simulate(ts, infinite)
            inf_r = inf_result.finish_ns
            busy_r = [c + g for c, g in zip(inf_result.cpu_ns, inf_result.compute_ns)]
            sim, inf = max(sim_r), max(inf_r)
            traced_r = [_traced_pass_ns(cap, r) for r in range(args.ranks)]
            traced = max(traced_r)
            no_wait = max(t - w for t, w in zip(traced_r, waits + [0.0] * args.ranks))
            kinetos = [load_kineto(cap / f"rank{r}.kineto.json.gz") for r in range(args.ranks)]
            net_waits = network_wait_us([k.events() for k in kinetos])  # NCCL: syncs and kernels too
            no_net = max(t - 1e3 * w for t, w in zip(traced_r, net_waits))
            untraced = json.loads((cap / "capture.json").read_text())["median_step_time_ms_untraced"] * 1e6 * args.steps
            print(
                f"{model:<12} {sim / 1e6:>8.2f}ms {inf / 1e6:>8.2f}ms {no_wait / 1e6:>9.2f}ms {traced / 1e6:>8.2f}ms "
                f"{100 * (sim / traced - 1):>+6.1f}% {untraced / 1e6:>8.2f}ms {100 * (sim / untraced - 1):>+6.1f}%"
            )
            print(
                f"{'':<12} infinite vs traced - network part of the wait ({no_net / 1e6:.2f} ms): "
                f"{100 * (inf / no_net - 1):+.1f}%"
            )
            # The network's share of the step: what the calibrated model adds over an infinite network,
            # against what the capture spent in communication after the last rank arrived.
            n_coll = sum(1 for c in inf_result.collectives if c.rank == 0)
            sim_net, real_net = sim - inf, traced - no_net
            print(
                f"{'':<12} network part: simulated {sim_net / 1e6:.2f} ms, measured {real_net / 1e6:.2f} ms "
                f"(over {n_coll} collectives per rank, p2p in the totals: {sim_net / max(n_coll, 1) / 1e3:.0f} vs "
                f"{real_net / max(n_coll, 1) / 1e3:.0f} us each)"
            )
            for line in _collective_table(ts, sim_result, fit):
                print(f"{'':<12} {line}")
            print(
                f"{'':<12} per rank: infinite {[round(x / 1e6, 2) for x in inf_r]} ms, of which work (CPU ops + "
                f"compute) {[round(x / 1e6, 2) for x in busy_r]} ms; traced-wait "
                f"{[round((t - w) / 1e6, 2) for t, w in zip(traced_r, waits)]} ms"
            )
    print(f"conditions at end: {_conditions()}")


if __name__ == "__main__":
    main()
