"""Campaign plots (matplotlib, Agg): bandwidth sweep, time breakdown, cost Pareto front, fidelity.

Every plot is always written, as PNG and SVG, with a short explanation inside the figure when the
campaign has no data for it (the fidelity plot names the real reason: PyTorch missing, or capture and
replay disabled), so the workflow's outputs (and ``snakemake --report``) are the same for every
campaign. Readable at their default size: no text under 9 pt, legends beside the axes, nothing
clipped (tight bounding box), every number axis named with its unit. Neither format carries software
or date metadata, and SVG ids are salted with a constant, so equal inputs give equal bytes.
"""

from __future__ import annotations

import io
import math
from pathlib import Path

from ..atomic import write_bytes
from ..results.pareto import pareto_front

PLOTS = {
    "step_time_vs_bandwidth.png": "step time vs bottleneck link bandwidth, per workload",
    "breakdown.png": "compute / exposed communication / idle time of the slowest rank, per grid point",
    "pareto_cost_time.png": "cost vs step time with the Pareto front, per workload",
    "fidelity.png": "captured vs replayed vs simulated (on the calibrated platform, if any) step time",
}
US = 1e-3  # ns -> µs
STYLE = {
    "font.size": 10,
    "axes.titlesize": 11,
    "axes.labelsize": 10,
    "xtick.labelsize": 9,
    "ytick.labelsize": 9,
    "legend.fontsize": 9,
    "svg.hashsalt": "chakra-pipe",
    "svg.fonttype": "path",
}
SMALL = 9  # pt: the smallest text in any plot
MAX_SERIES = 8  # more lines than this become a best / median / worst envelope
MAX_BARS = 30  # the breakdown shows at most this many points per workload (the fastest ones)


def _figure(n: int, width: float = 6.0, height: float = 3.6):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    plt.rcParams.update(STYLE)  # type: ignore[arg-type]
    cols = 1 if n <= 1 else 2
    rows = max(1, math.ceil(n / cols))
    fig, axes = plt.subplots(rows, cols, figsize=(width * cols, height * rows), squeeze=False)
    flat = list(axes.flat)
    for ax in flat[n:]:
        ax.set_visible(False)
    return fig, flat[: max(n, 1)]


def _save(fig, path: Path, top: float = 1.0, bottom: float = 0.0) -> None:
    """``path`` (PNG) and the same figure as SVG beside it; the tight box keeps outside legends whole."""
    import matplotlib.pyplot as plt

    fig.tight_layout(rect=(0, bottom, 1, top))
    for fmt, meta in (("png", {"Software": None}), ("svg", {"Date": None, "Creator": None})):
        buf = io.BytesIO()
        fig.savefig(buf, format=fmt, dpi=100, metadata=meta, bbox_inches="tight", pad_inches=0.1)
        write_bytes(path.with_suffix("." + fmt), buf.getvalue())
    plt.close(fig)


def _legend_outside(ax) -> None:
    ax.legend(loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0.0, fontsize=SMALL)


def _shared_legend(fig, axes) -> float:
    """One key under all panels (labels merged across them); returns the bottom margin to keep for it."""
    seen: dict[str, object] = {}
    for ax in axes:
        for h, label in zip(*ax.get_legend_handles_labels()):
            seen.setdefault(label, h)
    if not seen:
        return 0.0
    ncol = 1 if max(len(label) for label in seen) > 45 else 2
    fig.legend(list(seen.values()), list(seen), loc="lower center", ncol=ncol, fontsize=SMALL, frameon=False)
    rows = math.ceil(len(seen) / ncol)
    return min(0.6, (0.22 * rows + 0.15) / fig.get_figheight())


def _empty(path: Path, text: str) -> None:
    fig, (ax,) = _figure(1, height=2.0)
    ax.axis("off")
    ax.text(0.5, 0.5, text, ha="center", va="center", wrap=True, fontsize=11)
    _save(fig, path)


def _settings(s: str) -> dict[str, str]:
    return dict(item.split("=", 1) for item in s.split(";") if "=" in item) if s else {}


def _series_key(platform: str, settings: str, bandwidth_axes: set[str]) -> str:
    rest = {k: v for k, v in _settings(settings).items() if k not in bandwidth_axes}
    return platform + ("" if not rest else " " + ", ".join(f"{k}={v}" for k, v in rest.items()))


def _bandwidth_axes(g) -> set[str]:
    """Axes whose value determines the bandwidth: the x axis, so they must not split the series."""
    axes: set[str] = set()
    parsed = [(_settings(s), b) for s, b in zip(g["settings"], g["bandwidth_gbps"])]
    names = {k for d, _ in parsed for k in d}
    for name in names:
        by_value: dict[str, set[str]] = {}
        for d, b in parsed:
            if name in d:
                by_value.setdefault(d[name], set()).add(b)
        if (
            len(by_value) > 1
            and all(len(v) == 1 for v in by_value.values())
            and len({next(iter(v)) for v in by_value.values()}) == len(by_value)
        ):
            axes.add(name)
    return axes


def plot_bandwidth(ok, path: Path) -> None:
    workloads = list(dict.fromkeys(ok["workload"]))
    if not workloads:
        return _empty(path, "no successful simulations")
    fig, axes = _figure(len(workloads))
    colors: dict[str, str] = {}
    for ax, w in zip(axes, workloads):
        g = ok[ok["workload"] == w]
        bw_axes = _bandwidth_axes(g)
        # the two columns a key reads, not ``itertuples`` over all ~40: that walk was ~0.1 s of a
        # 4,096-point campaign's report job (arrow-backed text cells iterated one by one)
        keys = [_series_key(p, s, bw_axes) for p, s in zip(g["platform"], g["settings"])]
        g = g.assign(_series=keys, _t=g["step_time_ns"].astype(float) * US)
        if len(set(keys)) <= MAX_SERIES:
            for key, s in g.groupby("_series", sort=False):
                s = s.sort_values("bottleneck_bandwidth_gbps", kind="stable")
                color = colors.setdefault(key, f"C{len(colors) % 10}")  # one colour per series in every panel
                ax.plot(s["bottleneck_bandwidth_gbps"], s["_t"], marker="o", label=key, color=color)
        else:  # a legend of 100 lines helps nobody: summarise the other axes at each bandwidth
            by_bw = g.groupby("bottleneck_bandwidth_gbps")["_t"]
            for stat, style in (("min", "-o"), ("median", "--"), ("max", ":")):
                agg = getattr(by_bw, stat)()
                ax.plot(agg.index, agg.values, style, label=f"{stat} over {len(set(keys))} settings of the other axes")
        ax.set_xscale("log", base=2)
        ticks = sorted(set(g["bottleneck_bandwidth_gbps"].dropna()))
        ax.set_xticks(ticks)
        ax.set_xticklabels([f"{t:g}" for t in ticks])
        ax.minorticks_off()
        ax.set_title(w)
        ax.set_xlabel("bottleneck link bandwidth (GB/s, GB = 2^30 B)")
        ax.set_ylabel("simulated step time (µs)")
        ax.grid(True, alpha=0.3)
    _save(fig, path, bottom=_shared_legend(fig, axes))


def plot_breakdown(ok, path: Path) -> None:
    workloads = list(dict.fromkeys(ok["workload"]))
    if not workloads:
        return _empty(path, "no successful simulations")
    heights = [max(2.5, 0.28 * min(MAX_BARS, (ok["workload"] == w).sum()) + 1.2) for w in workloads]
    fig, axes = _figure(len(workloads), width=6.5, height=max(heights))
    for ax, w in zip(axes, workloads):
        g = ok[ok["workload"] == w]
        total = len(g)
        if total > MAX_BARS:
            g = g.sort_values("step_time_ns", kind="stable").head(MAX_BARS)
        y = range(len(g))
        compute = g["compute_ns"].astype("float64").fillna(0) * US
        idle = g["idle_ns"].astype("float64").fillna(0) * US
        cpu = g["cpu_ns"].astype("float64").fillna(0) * US
        exposed = (g["exposed_comm_ns"].astype("float64").fillna(0) * US).clip(lower=0)
        left = [0.0] * len(g)
        for vals, label, color in (
            (compute, "compute", "#4c72b0"),
            (cpu, "CPU ops", "#55a868"),
            (exposed, "exposed communication", "#dd8452"),
            (idle, "idle (nothing running)", "#bbbbbb"),
        ):
            ax.barh(list(y), list(vals), left=left, label=label, color=color)
            left = [a + b for a, b in zip(left, vals)]
        ax.set_yticks(list(y))
        ax.set_yticklabels(g["point_id"], fontsize=SMALL)
        ax.invert_yaxis()
        ax.set_title(w if total <= MAX_BARS else f"{w} ({MAX_BARS} fastest of {total} points)")
        ax.set_xlabel("time of the slowest rank (µs)")
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="upper center", ncol=3, fontsize=SMALL)
    _save(fig, path, top=1 - 0.35 / fig.get_figheight())


def plot_pareto(ok, path: Path) -> None:
    costed = ok[ok["cost"].notna()]
    workloads = list(dict.fromkeys(costed["workload"]))
    if not workloads:
        return _empty(path, "no grid point declares a cost, so there is no cost / time trade-off to plot")
    fig, axes = _figure(len(workloads))
    for ax, w in zip(axes, workloads):
        g = costed[costed["workload"] == w]
        pts = list(zip(g["cost"].astype(float), g["step_time_ns"].astype(float) * US))
        ax.scatter([p[0] for p in pts], [p[1] for p in pts], s=14, color="#999999", label="grid point")
        front = pareto_front(pts)
        ax.plot(
            [pts[i][0] for i in front], [pts[i][1] for i in front], marker="o", color="#c44e52", label="Pareto front"
        )
        labels = [",".join(_settings(st).values()) or pid for st, pid in zip(g["settings"], g["point_id"])]
        for i in front:
            ax.annotate(labels[i], pts[i], fontsize=SMALL, xytext=(3, 3), textcoords="offset points")
        ax.set_title(w)
        ax.set_xlabel("cost (units declared in the config)")
        ax.set_ylabel("simulated step time (µs)")
        ax.grid(True, alpha=0.3)
    _save(fig, path, bottom=_shared_legend(fig, axes))


def plot_fidelity(fidelity: dict[str, dict], path: Path, why_empty: str) -> None:
    """Captured, replayed and simulated step per workload (``report.fidelity``), errors over the bars."""
    if not fidelity:
        return _empty(path, f"no captured or replayed step times to compare:\n{why_empty}")
    measured = list(fidelity)
    fig, (ax,) = _figure(1, width=max(7.0, 1.6 * len(measured)))
    width = 0.27
    any_calibrated = any(f["calibrated"] for f in fidelity.values())
    sim_label = "simulated (calibrated)" if any_calibrated else "simulated"
    for j, (source, color) in enumerate((("captured", "#55a868"), ("replayed", "#8172b2"), ("simulated", "#4c72b0"))):
        xs, vals = [], []
        for i, w in enumerate(measured):
            value = fidelity[w][f"{source}_ns"]
            if value is not None:  # a missing source gets no bar rather than a misleading zero
                xs.append(i + (j - 1) * width)
                vals.append(value * US)
        ax.bar(xs, vals, width, label=sim_label if source == "simulated" else source, color=color)
    for i, w in enumerate(measured):
        f = fidelity[w]
        errs = [
            f"{100 * f[f'rel_error_vs_{s}']:+.0f}% vs {s}"
            for s in ("captured", "replayed")
            if f[f"rel_error_vs_{s}"] is not None
        ]
        if errs and f["simulated_ns"] is not None:
            ax.annotate(
                "\n".join(errs),
                (i + width, f["simulated_ns"] * US),
                fontsize=SMALL,
                ha="center",
                va="bottom",
                xytext=(0, 2),
                textcoords="offset points",
            )
    ax.set_xticks(range(len(measured)))
    ax.set_xticklabels(measured, fontsize=SMALL)
    ax.set_xlim(-0.7, len(measured) - 0.3)
    ax.margins(y=0.25)
    ax.set_ylabel("one pass over the trace (µs)")
    where = "on the calibrated platform" if any_calibrated else "at the baseline point"
    ax.set_title(f"step time: captured, replayed, simulated {where}")
    ax.set_xlabel("workload")
    _legend_outside(ax)
    _save(fig, path)


def write_plots(
    results,
    out_dir: str | Path,
    fidelity: dict[str, dict],
    why_no_fidelity: str = "this campaign captured and replayed nothing",
) -> list[Path]:
    """Every plot as PNG (the names in :data:`PLOTS`) and SVG beside it."""
    out = Path(out_dir) / "plots"
    ok = results[(results["source"] == "simulated") & (results["status"] == "ok")]
    plot_bandwidth(ok, out / "step_time_vs_bandwidth.png")
    plot_breakdown(ok, out / "breakdown.png")
    plot_pareto(ok, out / "pareto_cost_time.png")
    plot_fidelity(fidelity, out / "fidelity.png", why_no_fidelity)
    return [out / name for name in PLOTS] + [out / name.replace(".png", ".svg") for name in PLOTS]
