"""``chakra-pipe convert pytorch|text``: produce a Chakra rank set."""

from __future__ import annotations

import argparse
from pathlib import Path

from ..aliases import path_argument
from ..console import logger


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "convert",
        help="convert PyTorch or ASTRA-sim text workloads to Chakra",
        description="Convert to Chakra rank files PREFIX.<rank>.et plus PREFIX.comm_groups.json.",
    )
    kinds = p.add_subparsers(dest="source", metavar="SOURCE", required=True)

    pt = kinds.add_parser(
        "pytorch",
        help="host ET or linked ET+ JSON (one rank), or a whole capture folder",
        description="One rank: convert pytorch LINKED.json.gz --out PREFIX.RANK.et; "
        "a capture: convert pytorch --ranks-dir DIR --out PREFIX.",
    )
    path_argument(
        pt, "input", "INPUT", ("--input",), "host ET or linked ET+ (.json or .json.gz)", type=Path, required=False
    )
    pt.add_argument(
        "--ranks-dir",
        type=Path,
        help="folder of per-rank traces (instead of INPUT): rank{r}.host_et/kineto/linked.json[.gz] "
        "(capture, link), host.{r}.json + device.{r}.json (Chakra's collection recipe), "
        "pytorch_et_{r}.json + kineto_{r}.json (ASTRA-sim tutorials)",
    )
    pt.add_argument(
        "--host-pattern", metavar="NAME", help="with --ranks-dir: host trace file names, e.g. 'et_{rank}.json.gz'"
    )
    pt.add_argument(
        "--device-pattern",
        metavar="NAME",
        help="with --ranks-dir: Kineto trace file names, e.g. 'kineto_trace_{rank}.json'",
    )
    pt.add_argument("--out", "--output", required=True, help="PREFIX.RANK.et (one rank) or PREFIX (--ranks-dir)")
    pt.set_defaults(func=_pytorch)

    tx = kinds.add_parser("text", help="ASTRA-sim text workload")
    path_argument(tx, "input", "IN.txt", ("--input",), "ASTRA-sim text workload", type=Path)
    tx.add_argument("--npus", "--num-npus", required=True, type=int, help="number of NPUs (rank files)")
    tx.add_argument("--out", "--output", required=True, help="output PREFIX")
    tx.add_argument("--passes", "--num-passes", type=int, default=1, help="number of training passes")
    p.add_argument("--allow-large", action="store_true", help="lift the output-size limits (README: Output limits)")
    tx.add_argument(
        "--skip-none",
        action="store_true",
        help="drop NONE-type communication instead of emitting upstream's ALL_REDUCE placeholder",
    )
    tx.set_defaults(func=_text)


def _pytorch(args) -> int:
    from ..errors import InputError
    from .rankset import convert_capture, convert_file, pattern_regex

    if (args.input is None) == (args.ranks_dir is None):
        raise InputError("give exactly one of INPUT or --ranks-dir", where="convert pytorch")
    if (args.host_pattern or args.device_pattern) and not (args.ranks_dir and args.host_pattern):
        raise InputError(
            "--host-pattern is needed with --device-pattern, and both only with --ranks-dir", where="convert pytorch"
        )
    if args.ranks_dir:
        patterns = None
        if args.host_pattern:
            patterns = {"host_et": pattern_regex(args.host_pattern, "--host-pattern")}
            if args.device_pattern:
                patterns["kineto"] = pattern_regex(args.device_pattern, "--device-pattern")
        summary = convert_capture(args.ranks_dir, args.out, patterns)
    else:
        summary = convert_file(args.input, args.out)
    for stats in summary.links:
        logger(__name__).info("convert: link: %s", stats.line())
        for line in stats.result_lines():
            print(f"convert: link: {line}")
    print(f"convert: {summary.line()}; comm groups {summary.comm_groups}")
    return 0


def _text(args) -> int:
    from .text import convert_text

    paths = convert_text(
        args.input, args.npus, args.out, num_passes=args.passes, skip_none=args.skip_none, allow_large=args.allow_large
    )
    print(f"convert: wrote {len(paths)} rank file(s) for {args.out}")
    return 0
