"""``chakra-pipe convert pytorch|text``: produce a Chakra rank set."""

from __future__ import annotations

import argparse
import logging
from pathlib import Path


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("convert", help="convert PyTorch or ASTRA-sim text workloads to Chakra",
                       description="Convert to Chakra rank files PREFIX.<rank>.et plus PREFIX.comm_groups.json.")
    kinds = p.add_subparsers(dest="source", metavar="SOURCE", required=True)

    pt = kinds.add_parser("pytorch", help="host ET or linked ET+ JSON (one rank), or a whole capture folder",
                          description="One rank: convert pytorch LINKED.json.gz --out PREFIX.RANK.et; "
                                      "a capture: convert pytorch --ranks-dir DIR --out PREFIX.")
    pt.add_argument("input", nargs="?", type=Path, help="host ET or linked ET+ (.json or .json.gz)")
    pt.add_argument("--ranks-dir", type=Path, help="capture folder with rank{r}.* traces (instead of INPUT)")
    pt.add_argument("--out", required=True, help="PREFIX.RANK.et (one rank) or PREFIX (--ranks-dir)")
    pt.set_defaults(func=_pytorch)

    tx = kinds.add_parser("text", help="ASTRA-sim text workload")
    tx.add_argument("input", type=Path, help="IN.txt")
    tx.add_argument("--npus", required=True, type=int, help="number of NPUs (rank files)")
    tx.add_argument("--out", required=True, help="output PREFIX")
    tx.add_argument("--passes", type=int, default=1, help="number of training passes")
    tx.add_argument("--skip-none", action="store_true",
                    help="drop NONE-type communication instead of emitting upstream's ALL_REDUCE placeholder")
    tx.set_defaults(func=_text)


def _pytorch(args) -> int:
    from ..errors import InputError
    from .rankset import convert_capture, convert_file

    if (args.input is None) == (args.ranks_dir is None):
        raise InputError("give exactly one of INPUT or --ranks-dir", where="convert pytorch")
    summary = convert_capture(args.ranks_dir, args.out) if args.ranks_dir else convert_file(args.input, args.out)
    for stats in summary.links:
        logging.getLogger(__name__).info("convert: link: %s", stats.line())
    print(f"convert: {summary.line()}; comm groups {summary.comm_groups}")
    return 0


def _text(args) -> int:
    from .text import convert_text

    paths = convert_text(args.input, args.npus, args.out, num_passes=args.passes, skip_none=args.skip_none)
    print(f"convert: wrote {len(paths)} rank file(s) for {args.out}")
    return 0
