"""``validate``, ``info`` and ``visualize`` verbs (heavy imports happen inside the handlers)."""

from __future__ import annotations

import argparse
import json
import sys

from ..aliases import comm_groups_option, path_argument
from ..errors import EXIT_FINDINGS, EXIT_OK


def register(sub) -> None:
    p = sub.add_parser(
        "validate",
        help="check a trace or rank set against the Chakra/ASTRA-sim rules",
        description="Check one .et file (per-file rules) or a rank set PREFIX.<r>.et (per-file "
        "and cross-rank rules). Exit 0 without errors, 1 with errors, 2 when the "
        "input cannot be read.",
    )
    p.add_argument("trace", metavar="TRACE_OR_PREFIX")
    comm_groups_option(p)
    p.add_argument(
        "--strict",
        action="store_true",
        help="accepted for old scripts; no effect (dangling ctrl_deps are always errors: ASTRA-sim refuses them)",
    )
    p.add_argument(
        "--system-configuration",
        metavar="SYS.json",
        help="ASTRA-sim system JSON the trace is meant for: also check the rules that depend on it "
        "(an all-gather smaller than preferred-dataset-splits), as simulate would",
    )
    p.add_argument("--json", metavar="OUT", help="write every finding to this JSON file")
    p.set_defaults(func=_validate)

    p = sub.add_parser("info", help="node, dependency, communication and critical-path statistics")
    p.add_argument("trace", metavar="TRACE_OR_PREFIX")
    p.add_argument("--json", action="store_true", help="print JSON instead of text")
    p.set_defaults(func=_info)

    p = sub.add_parser("visualize", help="export the dependency graph as Graphviz dot or GraphML")
    path_argument(p, "trace", "IN.et", ("--input_filename", "--input-filename", "--input"), "trace to draw")
    path_argument(
        p,
        "out",
        "OUT.{dot,graphml,pdf}",
        ("--output_filename", "--output-filename", "--output"),
        "graph file; .pdf needs Graphviz's dot on PATH",
    )
    p.set_defaults(func=_visualize)


def _validate(args: argparse.Namespace) -> int:
    from ..atomic import write_json
    from .validator import validate_set

    splits = 1
    if args.system_configuration:
        from ..sim.config import SystemConfig

        splits = SystemConfig.from_file(args.system_configuration).preferred_dataset_splits
    report = validate_set(args.trace, comm_groups=args.comm_groups, dataset_splits=splits)
    if args.json:
        write_json(args.json, report.to_json())
    for line in report.lines():
        print(line)
    return EXIT_OK if report.ok else EXIT_FINDINGS


def _info(args: argparse.Namespace) -> int:
    from .info import format_info, trace_info

    infos = trace_info(args.trace)
    if args.json:
        json.dump({"files": infos}, sys.stdout, indent=2)
        print()
    else:
        print("\n".join(format_info(i) for i in infos))
    return EXIT_OK


def _visualize(args: argparse.Namespace) -> int:
    from .visualize import visualize

    visualize(args.trace, args.out)
    return EXIT_OK
