"""``chakra-pipe compare``: captured, replayed and simulated step time of one trace, with ratios.

Each number is per *training step*. A capture folder's trace spans ``capture.json["steps"]``
profiled steps, so the replayed iteration and the simulated finish time of that trace are divided
by that count. The captured figure is the *untraced* median step time: tracing inflates steps
about 4× on CPU, and replay must be judged against untraced timings (pytorch-traces.md §10.4).
Missing inputs are produced on the spot when possible — the capture is converted, the rank set is
replayed, the simulator runs when ``--system`` and ``--network`` are given — and a source that
cannot be had is reported as absent rather than guessed.
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..atomic import write_json
from ..errors import InputError
from ..results.documents import read_capture, read_replay, read_sim

SCHEMA = "chakra-pipe/compare/1"


@dataclass
class StepTimes:
    """Per-step times in ns (None = not available) and where each came from."""

    captured_ns: float | None
    replayed_ns: float | None
    simulated_ns: float | None
    trace_steps: int
    sources: dict[str, str | None]

    def ratios(self) -> dict[str, float | None]:
        def ratio(a, b):
            return None if a is None or not b else a / b

        return {
            "replayed/captured": ratio(self.replayed_ns, self.captured_ns),
            "simulated/captured": ratio(self.simulated_ns, self.captured_ns),
            "simulated/replayed": ratio(self.simulated_ns, self.replayed_ns),
        }

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema": SCHEMA,
            "trace_steps": self.trace_steps,
            "captured_step_ns": _round(self.captured_ns),
            "replayed_step_ns": _round(self.replayed_ns),
            "simulated_step_ns": _round(self.simulated_ns),
            "ratios": {k: None if v is None else float(f"{v:.6g}") for k, v in self.ratios().items()},
            "sources": self.sources,
        }


def _round(x: float | None) -> float | None:
    return None if x is None else round(x, 1)


def compare(
    source: str,
    *,
    prefix: str | None = None,
    replay: Path | None = None,
    sim: Path | None = None,
    system: str | None = None,
    network: str | None = None,
    iterations: int = 3,
    timeout_s: float = 300.0,
    work_dir: Path,
) -> StepTimes:
    """Collect the three step times for ``source`` (capture folder or rank-set prefix)."""
    if bool(system) != bool(network):
        raise InputError("give both --system and --network to simulate", where="--system/--network")
    src = Path(source)
    captured, steps = (None, 1)
    trace_label = None  # temporary paths stay out of the output (byte-identical reruns)
    if src.is_dir():
        captured, steps = read_capture(src)
        if prefix is None and (replay is None or (sim is None and system)):
            from ..convert.rankset import convert_capture

            prefix = str(work_dir / "trace")
            convert_capture(src, prefix)
            trace_label = f"converted now from {src}"
    else:
        prefix = prefix or source
    sources: dict[str, str | None] = {
        "captured": str(src / "capture.json") if captured is not None else None,
        "trace": trace_label or prefix,
    }
    if replay is not None:
        replayed = read_replay(replay)
        sources["replayed"] = str(replay)
    else:
        from .launcher import ReplayConfig, replay_here

        out = work_dir / "replay.json"
        assert prefix is not None  # a capture folder was converted above when nothing was given to replay
        replayed = float(
            replay_here(
                ReplayConfig(
                    prefix=prefix,
                    out=out,
                    iterations=iterations,
                    timeout_s=timeout_s,
                )
            )["step_time_ns"]["median"]
        )
        sources["replayed"] = f"replayed now ({iterations} iterations)"
    simulated = None
    if sim is not None:
        simulated = read_sim(sim)
        sources["simulated"] = str(sim)
    elif system and network:
        from ..et.traceset import TraceSet
        from ..sim import load_hardware, simulate

        res = simulate(TraceSet.load(prefix), load_hardware(system, network))  # type: ignore[arg-type]
        simulated = float(max(res.finish_ns, default=0))
        sources["simulated"] = f"simulated now ({Path(system).name}, {Path(network).name})"
    else:
        sources["simulated"] = None

    def per_step(x: float | None) -> float | None:
        return None if x is None else x / steps

    return StepTimes(captured, per_step(replayed), per_step(simulated), steps, sources)


def render(times: StepTimes) -> str:
    """A small aligned table: one row per source, step time in ms and ratio to captured/replayed."""
    ratios = times.ratios()
    rows = [
        ("captured (untraced)", times.captured_ns, 1.0 if times.captured_ns else None, None),
        ("replayed", times.replayed_ns, ratios["replayed/captured"], 1.0 if times.replayed_ns else None),
        ("simulated", times.simulated_ns, ratios["simulated/captured"], ratios["simulated/replayed"]),
    ]
    fmt = "{:<20} {:>14} {:>12} {:>12}"
    lines = [fmt.format("source", "step (ms)", "/captured", "/replayed")]
    for name, ns, vs_cap, vs_rep in rows:
        lines.append(
            fmt.format(
                name,
                "-" if ns is None else f"{ns / 1e6:.4f}",
                "-" if vs_cap is None else f"{vs_cap:.3f}",
                "-" if vs_rep is None else f"{vs_rep:.3f}",
            )
        )
    if times.trace_steps != 1:
        lines.append(f"(the trace spans {times.trace_steps} steps; replayed and simulated times are per step)")
    return "\n".join(lines)


def compare_main(args) -> int:
    with tempfile.TemporaryDirectory(prefix="chakra-compare-") as tmp:
        times = compare(
            args.source,
            prefix=args.prefix,
            replay=args.replay,
            sim=args.sim,
            system=args.system,
            network=args.network,
            iterations=args.iterations,
            timeout_s=args.timeout,
            work_dir=Path(tmp),
        )
    print(render(times))
    if args.out:
        write_json(args.out, times.to_dict())
    return 0
