"""One-GPU fidelity: the simulated step of a captured trace against the step it was captured from.

For each model (built-in ones and ``transformer_step.py`` beside this file): capture it on one GPU
(``capture --ranks 1 --backend nccl``), link, convert, simulate on a one-NPU network (collectives of
a one-member group cost nothing there) and print, per profiled step:

* **traced** — the ``ProfilerStep`` span the trace holds (the profiler's per-op cost included),
* **simulated** — the converted set simulated (CPU ops serial on one CPU slot, kernels on the
  GPU slot),
* **expected** — the ``ProfilerStep`` ranges' own time (not the profiler's step transitions between
  them, in no op) less the COMM nodes' time: their device work (NCCL's copies for a one-member
  group), which one NPU takes away; their launch is host time and stays (``convert/pytorch.py``),
* **GPU busy** — kernels + copies per step, and the **untraced** step from ``capture.json``
  (GPU-bound models: near GPU busy; the profiler slows the host, not the device).

The conversion is faithful when simulated ~= expected. Needs torch and a CUDA GPU (``--backend gloo``
runs the same on CPU).

    python benchmarks/gpu_fidelity.py [--models mlp,resnet-tiny,gpt-tiny,transformer] [--steps 3]
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

from fidelity import _conditions, _run, _traced_pass_ns

from chakra_pipe.et import TraceSet, read_trace, schema
from chakra_pipe.link.kineto import load_kineto
from chakra_pipe.sim import HardwareConfig, NetworkConfig, SystemConfig, simulate

HERE = Path(__file__).resolve().parent
SYSTEM = HERE.parent / "tests" / "data" / "capture" / "system_ring.json"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", default="mlp,resnet-tiny,gpt-tiny,transformer")
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument(
        "--backend", default="nccl", help="gloo: a CPU try of the script (BIG_D=128 shrinks the transformer)"
    )
    args = ap.parse_args()
    print(f"conditions at start: {_conditions()}")
    hw = HardwareConfig(
        system=SystemConfig.from_file(SYSTEM),
        network=NetworkConfig.from_dict(
            {"topology": ["Switch"], "npus_count": [1], "bandwidth": [50.0], "latency": [0]}
        ),
    )
    print(
        f"{'model':<12} {'traced':>9} {'simulated':>9} {'expected':>9} {'err':>7} {'GPU busy':>9} {'untraced':>9}"
        "  (ms per step)"
    )
    with tempfile.TemporaryDirectory(prefix="gpu-fidelity-") as tmp:
        for model in args.models.split(","):
            source = str(HERE / "transformer_step.py") if model == "transformer" else model
            cap, prefix = Path(tmp) / model, str(Path(tmp) / "set" / model)
            _run(
                [
                    "capture",
                    "--model",
                    source,
                    "--ranks",
                    "1",
                    "--steps",
                    str(args.steps),
                    "--backend",
                    args.backend,
                    "--out",
                    str(cap),
                ]
            )
            _run(["convert", "pytorch", "--ranks-dir", str(cap), "--out", prefix])
            kineto = load_kineto(cap / "rank0.kineto.json.gz")
            steps = [e.dur for e in kineto.cpu if e.name.startswith("ProfilerStep#")]
            n = len(steps)
            traced = _traced_pass_ns(cap, 0) / 1e3
            gpu = sum(e.dur for e in kineto.gpu)  # kernels, copies and memsets
            comm = sum(n.duration_micros for n in read_trace(prefix + ".0.et")[1] if n.type == schema.COMM_COLL_NODE)
            sim = simulate(TraceSet.load(prefix), hw).finish_ns[0] / 1e3
            untraced = json.loads((cap / "capture.json").read_text())["median_step_time_ms_untraced"]
            expected = sum(steps) - comm
            print(
                f"{model:<12} {traced / n / 1e3:9.2f} {sim / n / 1e3:9.2f} {expected / n / 1e3:9.2f} "
                f"{100 * (sim / expected - 1):+6.1f}% {gpu / n / 1e3:9.2f} {untraced:9.2f}"
            )
    print(f"conditions at end: {_conditions()}")


if __name__ == "__main__":
    main()
