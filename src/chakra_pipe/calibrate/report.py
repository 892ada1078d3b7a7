"""What ``calibrate`` writes: the ASTRA-sim platform files and the fit report.

``network.yml`` and ``system.json`` use only keys ASTRA-sim's analytical backend reads (and our
simulator's parser checks them on the way out). ``fit.json`` / ``fit.csv`` hold, per collective
and size, the measured and predicted times, the relative error and nccl-tests' algbw/busbw, and
the ping-pong rows (``send_recv``: round trip of ``size_bytes`` each way, one-way bandwidths) the
same way; ``fit.png`` plots measured against predicted. The collectives' median errors leave the
ping-pong rows out (they are reported on their own), so they compare with earlier calibrations.
All written atomically; the numbers are rounded so the files read well, and their order is fixed
(kind, then size).
"""

from __future__ import annotations

import csv
import io
import statistics
from dataclasses import asdict
from pathlib import Path

from ..atomic import atomic_open, write_json
from .bench import KINDS, P2P, Measurement
from .fit import FitResult

SCHEMA = "chakra-pipe/calibrate/1"
LARGE = 256 << 10  # the error is also always reported over sizes >= this, whatever range was fitted
ORDER = (*KINDS, P2P)


def rows(measurements: list[Measurement], result: FitResult) -> list[dict]:
    out = []
    for m in sorted(measurements, key=lambda m: (ORDER.index(m.kind), m.size)):
        pred = result.predicted_ns[(m.kind, m.size)]
        out.append(
            {
                "collective": m.kind,
                "size_bytes": m.size,
                "measured_ns": m.time_ns,
                "predicted_ns": pred,
                "rel_error": round((pred - m.time_ns) / m.time_ns, 4) if m.time_ns else None,
                "algbw_GBps": float(f"{m.algbw_GBps:.4g}"),
                "busbw_GBps": float(f"{m.busbw_GBps:.4g}"),
                "samples": m.samples,
                "fitted": (m.kind, m.size) in result.fitted,
            }
        )
    return out


def median_error(table: list[dict], min_size: int, kinds: tuple[str, ...] = KINDS) -> float | None:
    errs = [
        abs(r["rel_error"])
        for r in table
        if r["collective"] in kinds and r["size_bytes"] >= min_size and r["rel_error"] is not None
    ]
    return round(statistics.median(errs), 4) if errs else None


def _yaml(network: dict) -> str:
    def seq(values) -> str:
        return "[ " + ", ".join(str(v) for v in values) + " ]"

    return (
        "# Fitted by chakra-pipe calibrate. bandwidth: GB/s per link and direction (GB = 2^30 B);\n"
        "# latency: ns per hop.\n" + "".join(f"{k}: {seq(v)}\n" for k, v in network.items())
    )


def write_outputs(out: Path, measurements: list[Measurement], result: FitResult, meta: dict, min_size: int) -> dict:
    """Write every file under ``out``; returns the fit.json document."""
    from ..sim import NetworkConfig, SystemConfig

    out.mkdir(parents=True, exist_ok=True)
    network, system = result.platform.network(), result.platform.system()
    NetworkConfig.from_dict(network, source=str(out / "network.yml"))  # what we write, we can read
    SystemConfig.from_dict(system, source=str(out / "system.json"))
    with atomic_open(out / "network.yml", "w") as f:
        f.write(_yaml(network))
    write_json(out / "system.json", system)
    table = rows(measurements, result)
    doc = {
        "schema": SCHEMA,
        **meta,
        "platform": asdict(result.platform),
        "fit_min_size_bytes": min_size,
        "median_rel_error_fitted_sizes": median_error(table, min_size),
        "median_rel_error_all_sizes": median_error(table, 0),
        "median_rel_error_from_256KiB": median_error(table, LARGE),
        "median_rel_error_send_recv": median_error(table, 0, (P2P,)),
        "latency_from": result.latency_from,
        "rows": table,
    }
    write_json(out / "fit.json", doc)
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=list(table[0]), lineterminator="\n")
    writer.writeheader()
    writer.writerows(table)
    with atomic_open(out / "fit.csv", "w") as f:
        f.write(buf.getvalue())
    _plot(table, out / "fit.png", doc)
    return doc


def _plot(table: list[dict], path: Path, doc: dict) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.5))
    for i, kind in enumerate(ORDER):
        sel = [r for r in table if r["collective"] == kind]
        if not sel:
            continue
        color = f"C{i}"
        x = [r["size_bytes"] for r in sel]
        ax.plot(x, [r["measured_ns"] / 1e3 for r in sel], "o", color=color, label=f"{kind} measured")
        ax.plot(x, [r["predicted_ns"] / 1e3 for r in sel], "-", color=color, label=f"{kind} simulated")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("comm_size (bytes)")
    ax.set_ylabel("time (µs)")
    p = doc["platform"]
    ax.set_title(
        f"{p['npus']} ranks, {doc.get('backend', '?')}: {p['topology']} {p['bandwidth_gbps']} GB/s, "
        f"median |error| {100 * (doc['median_rel_error_fitted_sizes'] or 0):.1f}% (sizes >= the fit's smallest)",
        fontsize=9,
    )
    ax.legend(fontsize=7, ncol=2)
    fig.tight_layout()
    with atomic_open(path, "wb") as f:
        fig.savefig(f, format="png", dpi=100, metadata={"Software": None})
    plt.close(fig)
