"""Fidelity of captured traces: simulated-on-calibrated step vs the step that was measured.

For each built-in model at ``--ranks`` (default 2): calibrate this machine once (``chakra-pipe
calibrate``, gloo), capture the model, convert it, simulate the set on the calibrated
``network.yml`` + ``system.json``, and print the simulated step against

* the **traced** step (the capture's ``ProfilerStep`` on the slowest rank: the run whose op
  durations the trace holds), and
* the **untraced** median step from ``capture.json`` (tracing inflates CPU steps),

with the relative error of each; also the step with an effectively infinite network, so the
part the network model contributes is visible. Also the calibration's own median error. The
issue-14 target is |simulated / measured - 1| <= 15 % at 2 ranks. Needs torch.

    python benchmarks/fidelity.py [--ranks 2] [--models mlp,resnet-tiny,gpt-tiny] [--cal DIR]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

from chakra_pipe.et import TraceSet
from chakra_pipe.link.kineto import load_kineto
from chakra_pipe.sim import HardwareConfig, NetworkConfig, load_hardware, simulate

CLI = [sys.executable, "-m", "chakra_pipe.cli"]


def _run(args: list[str]) -> str:
    r = subprocess.run(CLI + args, capture_output=True, text=True, check=False)
    if r.returncode:
        raise SystemExit(f"{' '.join(args[:2])} failed: {r.stderr.strip().splitlines()[-1:]}")
    return r.stdout


def _traced_step_ns(cap: Path, ranks: int) -> float:
    steps = []
    for r in range(ranks):
        evs = load_kineto(cap / f"rank{r}.kineto.json.gz").cpu
        steps.append(max(e.dur for e in evs if e.name.startswith("ProfilerStep#")) * 1e3)
    return max(steps)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ranks", type=int, default=2)
    ap.add_argument("--models", default="mlp,resnet-tiny,gpt-tiny")
    ap.add_argument("--cal", type=Path, help="reuse a calibrate output folder instead of calibrating")
    ap.add_argument("--max-size", default="16MiB", help="calibration's largest message")
    args = ap.parse_args()
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
                    "--out",
                    str(cal),
                ]
            )
        fit = json.loads((cal / "fit.json").read_text())
        print(
            f"calibration: {fit['platform']['topology']} {fit['platform']['bandwidth_gbps']} GB/s, median |error| "
            f"{100 * fit['median_rel_error_fitted_sizes']:.1f}% (sizes >= {fit['fit_min_size_bytes']} B)"
        )
        hw = load_hardware(cal / "system.json", cal / "network.yml")
        net = json.loads(json.dumps(hw.network.__dict__))
        infinite = HardwareConfig(
            system=hw.system,
            network=NetworkConfig.from_dict(
                {
                    **{k: net[k] for k in ("topology", "npus_count", "latency")},
                    "bandwidth": [1e9] * len(net["topology"]),
                }
            ),
        )
        print(f"{'model':<12} {'simulated':>10} {'infinite':>10} {'traced':>10} {'err':>7} {'untraced':>10} {'err':>7}")
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
                    "1",
                    "--backend",
                    "gloo",
                    "--out",
                    str(cap),
                ]
            )
            _run(["convert", "pytorch", "--ranks-dir", str(cap), "--out", prefix])
            ts = TraceSet.load(prefix)
            sim = max(simulate(ts, hw).finish_ns)
            inf = max(simulate(ts, infinite).finish_ns)
            traced = _traced_step_ns(cap, args.ranks)
            untraced = json.loads((cap / "capture.json").read_text())["median_step_time_ms_untraced"] * 1e6
            print(
                f"{model:<12} {sim / 1e6:>8.2f}ms {inf / 1e6:>8.2f}ms {traced / 1e6:>8.2f}ms "
                f"{100 * (sim / traced - 1):>+6.1f}% {untraced / 1e6:>8.2f}ms {100 * (sim / untraced - 1):>+6.1f}%"
            )


if __name__ == "__main__":
    main()
