"""Search: enumerate layouts, check memory, simulate the survivors, rank them, write the tables and plot.

Verdicts (one per layout and grid point, every layout listed):

* ``ok`` — fits and simulated; ranked by step time (``rank`` 1 is the fastest on that point).
* ``pruned: …`` — needs more than the point's ``hbm_gib``; the figure it needs is in the row.
* ``dominated: …`` — a memory-saving option (recomputation, ZeRO-1) on a layout that already fits
  without it: it only adds work (a re-run forward; a parameter all-gather after the step), so it is
  not simulated unless ``exhaustive`` asks for it.
* ``failed: …`` — the simulator refused it (the message says why).
* ``fits`` — fits and is not dominated, but ``memory_only`` asked for no simulation.
"""

from __future__ import annotations

import io
import math
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..atomic import write_bytes, write_json, write_text
from ..errors import ChakraPipeError, ConfigError
from ..generate.options import resolve_llm
from ..results.csvtext import frame_csv
from ..sweep.grid import Point
from .layouts import Candidate, enumerate_layouts
from .memory import GIB, memory_per_gpu

COLUMNS = (
    "platform",
    "point_id",
    "layout",
    "dp",
    "tp",
    "pp",
    "ep",
    "microbatches",
    "micro_batch",
    "zero",
    "recompute",
    "mem_weights_gib",
    "mem_gradients_gib",
    "mem_optimizer_gib",
    "mem_activations_gib",
    "mem_total_gib",
    "hbm_gib",
    "verdict",
    "rank",
    "step_time_ns",
    "tokens_per_s",
    "mfu",
    "cost",
    "time_x_cost",
)


@dataclass
class SearchSpec:
    """What to search: a model (preset + overrides), a GPU count and the base ``generate llm`` options."""

    model: str
    gpus: int
    global_batch: int
    micro_batches: list[int] = field(default_factory=lambda: [1])
    options: dict[str, Any] = field(default_factory=dict)  # seq, layers, dtype, peak_tflops, mem_bw, …
    exhaustive: bool = False
    memory_only: bool = False  # list layouts with memory and verdict, simulate none ("fits")


def _dominator(c: Candidate, fits: dict[Candidate, bool]) -> Candidate | None:
    """The same layout without recomputation / ZeRO-1, if that one fits."""
    for simpler in (
        Candidate(**{**c.__dict__, "recompute": False}),
        Candidate(**{**c.__dict__, "zero": 0}),
        Candidate(**{**c.__dict__, "recompute": False, "zero": 0}),
    ):
        if simpler != c and fits.get(simpler):
            return simpler
    return None


def search(spec: SearchSpec, points: list[Point], log=sys.stderr) -> list[dict[str, Any]]:
    """Rows for every (layout, point), ranked per point; see the module docstring for verdicts."""
    base = {"model": spec.model, **spec.options}
    model, _ = resolve_llm(base)
    layouts = enumerate_layouts(model, spec.gpus, spec.global_batch, spec.micro_batches)
    if not layouts:
        raise ConfigError(
            f"no valid layout of {model.name} on {spec.gpus} GPUs with global batch "
            f"{spec.global_batch} and microbatch sizes {spec.micro_batches}",
            where="--gpus",
        )
    rows: list[dict[str, Any]] = []
    resolved = {c: resolve_llm(c.options(base)) for c in layouts}
    memory = {c: memory_per_gpu(*resolved[c]) for c in layouts}
    for p in points:
        if p.hbm_gib is None:
            raise ConfigError(f"point {p.id} has no hbm_gib (per-GPU memory) to check layouts against")
    fits = {p.id: {c: memory[c].total <= float(p.hbm_gib or 0) * GIB for c in layouts} for p in points}
    for c in layouts:  # layouts outermost: a layout's rank set is generated and decoded once for all points
        generated = None
        for point in points:
            m = memory[c]
            row: dict[str, Any] = {
                "platform": point.platform,
                "point_id": point.id,
                "layout": c.label,
                "dp": c.dp,
                "tp": c.tp,
                "pp": c.pp,
                "ep": c.ep,
                "microbatches": c.microbatches,
                "micro_batch": c.micro_batch,
                "zero": c.zero,
                "recompute": c.recompute,
                "mem_weights_gib": m.weights / GIB,
                "mem_gradients_gib": m.gradients / GIB,
                "mem_optimizer_gib": m.optimizer / GIB,
                "mem_activations_gib": m.activations / GIB,
                "mem_total_gib": m.total_gib,
                "hbm_gib": point.hbm_gib,
                "cost": point.cost,
            }
            dom = None if spec.exhaustive else _dominator(c, fits[point.id])
            if not fits[point.id][c]:
                row["verdict"] = f"pruned: needs {m.total_gib:.2f} GiB on stage {m.stage} > {point.hbm_gib:g} GiB"
            elif dom is not None:
                row["verdict"] = f"dominated: {dom.label} fits and does less work"
            elif spec.memory_only:
                row["verdict"] = "fits"
            else:
                from ..sweep.generated_layout import GeneratedLayout

                try:
                    generated = generated or GeneratedLayout(*resolved[c], c.label)
                    measured, how = generated.evaluate(point)
                    step = measured["step_time_ns"]
                    print(f"search: {point.id}: simulated {c.label} ({how})", file=log, flush=True)
                except ChakraPipeError as exc:
                    row["verdict"] = f"failed: {exc.line()}"
                else:
                    row.update(_rates(step, resolved[c], spec.gpus, point.cost))
                    row["verdict"] = "ok"
            rows.append(row)
    _rank(rows)
    return rows


def _rates(step_ns: int, pair: tuple[Any, Any], gpus: int, cost: float | None) -> dict[str, Any]:
    """Tokens/s, model FLOP utilisation (model FLOPs only: recomputation is not useful work) and time × cost."""
    model, training = pair
    seconds = step_ns / 1e9
    flops = model.step_flops(training.global_batch)
    return {
        "step_time_ns": step_ns,
        "tokens_per_s": training.global_batch * model.seq / seconds,
        "mfu": flops / (seconds * gpus * training.peak_tflops * 1e12),
        "time_x_cost": None if cost is None else seconds * cost,
    }


def _rank(rows: list[dict[str, Any]]) -> None:
    """Per point: ok rows by step time (then layout), numbered from 1, first; the others after, in order."""
    by_point: dict[str, list[dict[str, Any]]] = {}
    for r in rows:
        by_point.setdefault(r["point_id"], []).append(r)
    rows.clear()
    for group in by_point.values():
        ok = sorted((r for r in group if r["verdict"] == "ok"), key=lambda r: (r["step_time_ns"], r["layout"]))
        for i, r in enumerate(ok, 1):
            r["rank"] = i
        rows += ok + [r for r in group if r["verdict"] != "ok"]


# ---- outputs ----------------------------------------------------------------------------------------------


def _frame(rows: list[dict[str, Any]]):
    import pandas as pd

    df = pd.DataFrame([{c: r.get(c) for c in COLUMNS} for r in rows], columns=list(COLUMNS))
    for c in ("rank", "step_time_ns"):
        df[c] = df[c].astype("Int64")
    return df


def markdown(rows: list[dict[str, Any]]) -> str:
    """One table per point: rank, layout, memory, verdict, step time, tokens/s, MFU, time × cost."""
    out = []
    for point in dict.fromkeys(r["point_id"] for r in rows):
        group = [r for r in rows if r["point_id"] == point]
        out += [
            f"## {point} ({group[0]['hbm_gib']:g} GiB per GPU)",
            "",
            "| rank | layout | memory/GPU (GiB) | verdict | step time (ms) | tokens/s | MFU | time × cost |",
            "|---:|---|---:|---|---:|---:|---:|---:|",
        ]
        for r in group:
            ok = r["verdict"] == "ok"
            out.append(
                "| "
                + " | ".join(
                    [
                        str(r.get("rank") or ""),
                        f"`{r['layout']}`",
                        f"{r['mem_total_gib']:.2f}",
                        r["verdict"].replace("|", "/"),
                        f"{r['step_time_ns'] / 1e6:.3f}" if ok else "",
                        f"{r['tokens_per_s']:.0f}" if ok else "",
                        f"{r['mfu']:.3f}" if ok else "",
                        f"{r['time_x_cost']:.4g}" if ok and r.get("time_x_cost") is not None else "",
                    ]
                )
                + " |"
            )
        out.append("")
    return "\n".join(out)


def best(rows: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """The rank-1 layout of each point (absent when nothing fits)."""
    return {r["point_id"]: {c: r.get(c) for c in COLUMNS} for r in rows if r.get("rank") == 1}


def plot_pareto(rows: list[dict[str, Any]], path: Path) -> None:
    """Step time against memory per GPU for every simulated layout; each point's Pareto front joined."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from ..results.pareto import pareto_front

    fig, ax = plt.subplots(figsize=(7, 4.2))
    for point in dict.fromkeys(r["point_id"] for r in rows):
        ok = [r for r in rows if r["point_id"] == point and r["verdict"] == "ok"]
        if not ok:
            continue
        pts = [(r["mem_total_gib"], r["step_time_ns"] / 1e6) for r in ok]
        dots = ax.scatter([p[0] for p in pts], [p[1] for p in pts], s=14, alpha=0.6, label=point)
        front = pareto_front(pts)
        ax.plot([pts[i][0] for i in front], [pts[i][1] for i in front], color=dots.get_facecolor()[0], alpha=0.9)
        for i in front:
            ax.annotate(ok[i]["layout"], pts[i], fontsize=5, xytext=(3, 3), textcoords="offset points")
    ax.set_xlabel("memory per GPU (GiB)")
    ax.set_ylabel("simulated step time (ms)")
    ax.set_title("layouts: step time vs memory (lines: Pareto fronts)")
    ax.grid(True, alpha=0.3)
    if ax.collections:
        ax.legend(fontsize=7)
    buf = io.BytesIO()
    fig.tight_layout()
    fig.savefig(buf, format="png", dpi=100, metadata={"Software": None})
    plt.close(fig)
    write_bytes(path, buf.getvalue())


def write_outputs(rows: list[dict[str, Any]], out: str | Path) -> list[Path]:
    """``layouts.parquet``/``.csv``/``.md``, ``best.json`` and ``pareto.png`` under ``out`` (atomic each)."""
    out = Path(out)
    df = _frame(rows)
    buf = io.BytesIO()
    df.to_parquet(buf, index=False, engine="pyarrow", compression="zstd")
    write_bytes(out / "layouts.parquet", buf.getvalue())
    write_text(out / "layouts.csv", frame_csv(df, float_format="%.6g"))
    write_text(out / "layouts.md", markdown(rows))
    write_json(out / "best.json", _finite(best(rows)))
    plot_pareto(rows, out / "pareto.png")
    return [out / n for n in ("layouts.parquet", "layouts.csv", "layouts.md", "best.json", "pareto.png")]


def _finite(obj: Any) -> Any:
    if isinstance(obj, dict):
        return {k: _finite(v) for k, v in obj.items()}
    return None if isinstance(obj, float) and not math.isfinite(obj) else obj
