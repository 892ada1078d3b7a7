"""``chakra-pipe calibrate``: measure collectives here, fit the simulator's network model to them."""

from __future__ import annotations

import argparse
from pathlib import Path


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "calibrate",
        help="fit an ASTRA-sim network.yml + system.json to collectives measured here",
        description="Run all-reduce, all-gather, reduce-scatter and all-to-all microbenchmarks "
        "and a send/recv ping-pong between ranks 0 and 1 through the replay engine, fit latency to the "
        "ping-pong and bandwidth, endpoint-delay, local-mem-bw, "
        "topology and each collective's implementation by minimising the relative error "
        "of our simulator, and write DIR/network.yml, DIR/system.json and the fit report "
        "DIR/fit.json, fit.csv, fit.png. Needs the optional torch extra.",
    )
    p.add_argument("--ranks", type=int, required=True, help="number of ranks (processes / GPUs)")
    p.add_argument("--backend", choices=("auto", "gloo", "nccl"), default="auto")
    p.add_argument("--out", type=Path, required=True, help="output folder")
    p.add_argument("--min-size", default="4KiB", help="smallest message (default 4KiB)")
    p.add_argument("--max-size", default="64MiB", help="largest message (default 64MiB); sizes step by 4x")
    p.add_argument(
        "--fit-min-size",
        default="256KiB",
        help="fit only sizes >= this (default 256KiB; smaller ones are reported, not fitted)",
    )
    p.add_argument("--iterations", type=int, default=7, help="timed repeats of every call (median kept)")
    p.add_argument("--warmup", type=int, default=1, help="untimed passes over every call first")
    p.add_argument(
        "--load",
        choices=("none", "gemm"),
        default="none",
        help="gemm: time every collective while its rank's compute slot runs a GEMM sized to outlast it, "
        "as DDP's backward runs beside its bucketed all-reduce (a second, loaded pass; see README)",
    )
    p.add_argument(
        "--p2p-sizes",
        default="256,4KiB,64KiB,1MiB",
        help="ping-pong sizes between ranks 0 and 1, comma-separated (default 256,4KiB,64KiB,1MiB); they fix "
        "the latency, the collectives then endpoint-delay (see README); 'none' to fit latency from collectives",
    )
    p.add_argument("--timeout", type=float, default=600.0, metavar="S", help="give up after S seconds")
    p.set_defaults(func=_calibrate)


def _calibrate(args) -> int:
    from ..errors import InputError
    from ..generate.sizes import parse_size
    from .run import CalibrateConfig, calibrate

    lo, hi = parse_size(args.min_size, "--min-size"), parse_size(args.max_size, "--max-size")
    fit_min = parse_size(args.fit_min_size, "--fit-min-size")
    p2p = () if args.p2p_sizes == "none" else tuple(parse_size(v, "--p2p-sizes") for v in args.p2p_sizes.split(","))
    if any(v <= 0 for v in p2p):
        raise InputError(f"--p2p-sizes must be positive, got {args.p2p_sizes!r}", where="--p2p-sizes")
    if args.ranks < 2:
        raise InputError("calibration needs at least 2 ranks", where="--ranks")
    if not 0 < lo <= hi:
        raise InputError(f"need 0 < --min-size <= --max-size, got {lo} and {hi}", where="--min-size")
    if args.iterations < 1 or args.warmup < 0:
        raise InputError("--iterations must be >= 1 and --warmup >= 0", where="--iterations")
    doc = calibrate(
        CalibrateConfig(
            args.ranks,
            args.backend,
            args.out,
            lo,
            hi,
            fit_min,
            args.iterations,
            args.warmup,
            args.timeout,
            args.load,
            p2p,
        )
    )
    p = doc["platform"]
    err = doc["median_rel_error_fitted_sizes"]
    print(
        f"calibrate: {args.out}: {p['topology']} x{p['npus']}, {p['bandwidth_gbps']} GB/s, latency "
        f"{p['latency_ns']} ns, endpoint-delay {p['endpoint_delay_ns']} ns, local-mem-bw {p['local_mem_bw_gbps']} "
        f"GB/s, {p['implementations']}; median |error| {100 * err:.1f}% for sizes >= {fit_min} B, "
        f"{100 * doc['median_rel_error_all_sizes']:.1f}% over all sizes"
        + (
            f", {100 * doc['median_rel_error_from_256KiB']:.1f}% for sizes >= 256 KiB"
            if doc["median_rel_error_from_256KiB"] is not None and fit_min != 256 << 10
            else ""
        )
        + (
            f"; latency from send/recv ping-pong (median |error| {100 * doc['median_rel_error_send_recv']:.1f}%)"
            if doc["median_rel_error_send_recv"] is not None
            else ""
        )
        + (f"; timed under GEMM load (covered {100 * doc['load_covered_share']:.0f}%)" if args.load == "gemm" else "")
    )
    return 0
