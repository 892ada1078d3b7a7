"""The ``chakra-pipe`` command: one sub-command per verb, no logic of its own.

Each stage package exposes ``register(subparsers)`` in its ``cli`` module; handlers import their
heavy dependencies lazily so ``chakra-pipe --help`` and Snakemake ``shell:`` jobs start fast.
Errors derived from :class:`chakra_pipe.errors.ChakraPipeError` print one line and set the exit code.
"""

from __future__ import annotations

import argparse
import importlib
import sys

from . import __version__
from .aliases import resolve as resolve_aliases
from .console import configure
from .errors import EXIT_INPUT, ChakraPipeError
from .lifecycle import pipe_safe_stdout, terminate_as_exit

# Stage command modules, in the order their verbs appear in ``--help``.
COMMAND_MODULES = (
    "chakra_pipe.et.cli",
    "chakra_pipe.validate.cli",
    "chakra_pipe.generate.cli",
    "chakra_pipe.capture.cli",
    "chakra_pipe.link.cli",
    "chakra_pipe.convert.cli",
    "chakra_pipe.sim.cli",
    "chakra_pipe.transform.cli",
    "chakra_pipe.replay.cli",
    "chakra_pipe.calibrate.cli",
    "chakra_pipe.sweep.cli",
    "chakra_pipe.search.cli",
    "chakra_pipe.report.cli",
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="chakra-pipe",
        description="Chakra execution traces: generate, capture, link, convert, validate, simulate, replay, report.",
    )
    parser.add_argument("--version", action="version", version=f"chakra-pipe {__version__}")
    parser.add_argument("-v", "--verbose", action="count", default=0, help="more diagnostics on stderr (-vv: debug)")
    parser.add_argument("-q", "--quiet", action="store_true", help="errors only on stderr, no progress")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name in COMMAND_MODULES:
        importlib.import_module(name).register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    configure(args.verbose, args.quiet)
    try:
        # A closed stdout (`| head -1`) must not skip an output file or change the exit code; SIGTERM
        # must unwind (removing temporaries) like Ctrl-C does.
        with pipe_safe_stdout(), terminate_as_exit():
            resolve_aliases(args)
            return int(args.func(args) or 0)
    except ChakraPipeError as exc:
        print(f"chakra-pipe {args.command}: error: {exc.line()}", file=sys.stderr)
        for line in exc.details:  # a refused rank set: one problem line each, as validate prints them
            print(line, file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print(f"chakra-pipe {args.command}: interrupted", file=sys.stderr)
        return 130
    except (OSError, ValueError, RecursionError, MemoryError) as exc:
        # Last line of defence: an environment or input problem we did not classify (a decoder
        # recursing on absurdly nested input, an allocation the input asked for) still gets one
        # readable line and the input exit code instead of a traceback.
        what = str(exc) or type(exc).__name__
        print(f"chakra-pipe {args.command}: error: {what}", file=sys.stderr)
        return EXIT_INPUT


if __name__ == "__main__":
    sys.exit(main())
