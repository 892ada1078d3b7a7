"""``jsonize`` / ``dejsonize``: the lossless JSON view of a trace, for reading, diffing and editing."""

from __future__ import annotations

import argparse
import sys

from ..aliases import path_argument


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "jsonize",
        help="write a .et trace as one lossless JSON document",
        description='Write IN.et as {"metadata": ..., "nodes": [...]}; dejsonize reverses it byte for byte.',
    )
    path_argument(p, "input", "IN.et", ("--input_filename", "--input-filename", "--input"), "trace to read")
    path_argument(p, "output", "OUT.json", ("--output_filename", "--output-filename", "--output"), "JSON to write")
    p.add_argument("--indent", type=int, default=None, help="pretty-print each node with this indent")
    p.set_defaults(func=_jsonize)

    p = sub.add_parser(
        "dejsonize",
        help="write a chakra-pipe JSON trace back as .et",
        description="Inverse of jsonize; OUT ending in .gz is gzip-compressed.",
    )
    path_argument(p, "input", "IN.json", ("--input_filename", "--input-filename", "--input"), "JSON to read")
    path_argument(p, "output", "OUT.et", ("--output_filename", "--output-filename", "--output"), "trace to write")
    p.set_defaults(func=_dejsonize)


def _jsonize(args) -> int:
    from .jsonio import jsonize

    n = jsonize(args.input, args.output, indent=args.indent)
    _summary(args.output, n)
    return 0


def _dejsonize(args) -> int:
    from .jsonio import dejsonize

    n = dejsonize(args.input, args.output)
    _summary(args.output, n)
    return 0


def _summary(output: str, nodes: int) -> None:
    """``OUT: N nodes``, on stderr when the output itself went to stdout (``-``), so it stays parseable."""
    print(f"{output}: {nodes} nodes", file=sys.stderr if output == "-" else sys.stdout)
