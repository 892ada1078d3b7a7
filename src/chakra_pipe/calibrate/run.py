"""One calibration: sizes -> measurements (replay engine) -> fit (simulator) -> files."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ..errors import InputError
from .bench import DEFAULT_P2P_SIZES, KINDS, measure
from .fit import fit
from .report import write_outputs


@dataclass(frozen=True)
class CalibrateConfig:
    ranks: int
    backend: str
    out: Path
    min_size: int
    max_size: int
    fit_min_size: int
    iterations: int = 7
    warmup: int = 1
    timeout_s: float = 600.0
    load: str = "none"  # or "gemm": collectives timed beside a GEMM (bench.measure)
    p2p_sizes: tuple[int, ...] = DEFAULT_P2P_SIZES  # ping-pong sizes (rank 0 <-> 1); () for none

    def sizes(self) -> tuple[int, ...]:
        """min_size, 4x min_size, ... up to max_size; each rounded to a multiple of 4 x ranks bytes
        so reduce-scatter and all-to-all split evenly into float32 elements."""
        unit = 4 * self.ranks
        out, s = [], self.min_size
        while s <= self.max_size:
            out.append(max(unit, s // unit * unit))
            s *= 4
        return tuple(dict.fromkeys(out))


def calibrate(cfg: CalibrateConfig) -> dict:
    sizes = cfg.sizes()
    if not any(s >= cfg.fit_min_size for s in sizes):
        raise InputError(f"no size >= --fit-min-size {cfg.fit_min_size} B among {list(sizes)}", where="--fit-min-size")
    measurements, meta, load = measure(
        cfg.ranks, sizes, cfg.backend, cfg.iterations, cfg.warmup, cfg.timeout_s, cfg.load, cfg.p2p_sizes
    )
    result = fit(measurements, cfg.ranks, cfg.fit_min_size)
    meta = {
        "backend": meta["backend"],
        "ranks": cfg.ranks,
        "collectives": list(KINDS),
        "sizes_bytes": list(sizes),
        "p2p_sizes_bytes": list(cfg.p2p_sizes),
        "iterations": cfg.iterations,
        "warmup": cfg.warmup,
        "load": cfg.load,
        "environment": meta["environment"],
    }
    if load is not None:
        meta["load_gemm_gflops"] = load.gemm_gflops
        meta["load_covered_share"] = load.covered_share
        meta["unloaded_ns"] = [
            {"collective": k, "size_bytes": s, "measured_ns": t} for (k, s), t in load.unloaded_ns.items()
        ]
    return write_outputs(cfg.out, measurements, result, meta, cfg.fit_min_size)
