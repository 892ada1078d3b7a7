"""``jsonize`` / ``dejsonize``: the lossless JSON view of a trace, for reading, diffing and editing."""

from __future__ import annotations

import argparse


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("jsonize", help="write a .et trace as one lossless JSON document",
                       description="Write IN.et as {\"metadata\": ..., \"nodes\": [...]}; "
                                   "dejsonize reverses it byte for byte.")
    p.add_argument("input", metavar="IN.et")
    p.add_argument("output", metavar="OUT.json")
    p.add_argument("--indent", type=int, default=None, help="pretty-print each node with this indent")
    p.set_defaults(func=_jsonize)

    p = sub.add_parser("dejsonize", help="write a chakra-pipe JSON trace back as .et",
                       description="Inverse of jsonize; OUT ending in .gz is gzip-compressed.")
    p.add_argument("input", metavar="IN.json")
    p.add_argument("output", metavar="OUT.et")
    p.set_defaults(func=_dejsonize)


def _jsonize(args) -> int:
    from .jsonio import jsonize

    n = jsonize(args.input, args.output, indent=args.indent)
    print(f"{args.output}: {n} nodes")
    return 0


def _dejsonize(args) -> int:
    from .jsonio import dejsonize

    n = dejsonize(args.input, args.output)
    print(f"{args.output}: {n} nodes")
    return 0
