"""The ``chakra-pipe`` command: one sub-command per verb, no logic of its own.

Each stage package exposes ``register(subparsers)`` in its ``cli`` module; handlers import their
heavy dependencies lazily so ``chakra-pipe --help`` and Snakemake ``shell:`` jobs start fast. When
the verb is known from the command line, only that verb's module is imported and registered: every
sweep point and Snakemake job is its own process, and the other twelve stage packages (and what
their flag definitions import) are start-up time that run never uses (issue #15).
Errors derived from :class:`chakra_pipe.errors.ChakraPipeError` print one line and set the exit code.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys

from . import __version__
from .aliases import resolve as resolve_aliases
from .console import configure
from .errors import EXIT_INPUT, ChakraPipeError
from .lifecycle import collector_paused, pipe_safe_stdout, terminate_as_exit

# Each verb and the stage command module that registers it, in the order verbs appear in ``--help``
# (tests/test_cli_startup.py checks this table against what the modules register).
VERBS = {
    "jsonize": "chakra_pipe.et.cli",
    "dejsonize": "chakra_pipe.et.cli",
    "validate": "chakra_pipe.validate.cli",
    "info": "chakra_pipe.validate.cli",
    "visualize": "chakra_pipe.validate.cli",
    "generate": "chakra_pipe.generate.cli",
    "capture": "chakra_pipe.capture.cli",
    "link": "chakra_pipe.link.cli",
    "convert": "chakra_pipe.convert.cli",
    "simulate": "chakra_pipe.sim.cli",
    "transform": "chakra_pipe.transform.cli",
    "replay": "chakra_pipe.replay.cli",
    "compare": "chakra_pipe.replay.cli",
    "calibrate": "chakra_pipe.calibrate.cli",
    "sweep": "chakra_pipe.sweep.cli",
    "search": "chakra_pipe.search.cli",
    "report": "chakra_pipe.report.cli",
}
COMMAND_MODULES = tuple(dict.fromkeys(VERBS.values()))
# Verbs whose numpy work is element-wise (simulator, validators, sweep and search points): OpenBLAS
# starts a thread pool per core when numpy is imported, ~30-60 ms of every such process's start-up
# for no linear algebra (issue #15). Set before numpy's first import; a value the user set wins.
SINGLE_THREADED_BLAS = frozenset({"simulate", "validate", "info", "sweep", "search"})
_GLOBAL_FLAGS = frozenset({"-q", "--quiet", "--verbose"})  # and -v, -vv, ... (counted)


def _verb(argv: list[str]) -> str | None:
    """The verb of ``argv`` when it follows only global flags; None otherwise (``--help``, a typo)."""
    for arg in argv:
        if arg in _GLOBAL_FLAGS or (len(arg) > 1 and arg.strip("v") == "-"):
            continue
        return arg if arg in VERBS else None
    return None


def build_parser(verb: str | None = None) -> argparse.ArgumentParser:
    """The command's parser: with ``verb``, only that verb's module registers its sub-commands."""
    parser = argparse.ArgumentParser(
        prog="chakra-pipe",
        description="Chakra execution traces: generate, capture, link, convert, validate, simulate, replay, report.",
    )
    parser.add_argument("--version", action="version", version=f"chakra-pipe {__version__}")
    parser.add_argument("-v", "--verbose", action="count", default=0, help="more diagnostics on stderr (-vv: debug)")
    parser.add_argument("-q", "--quiet", action="store_true", help="errors only on stderr, no progress")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name in (VERBS[verb],) if verb else COMMAND_MODULES:
        importlib.import_module(name).register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    verb = _verb(argv)
    if verb in SINGLE_THREADED_BLAS and "numpy" not in sys.modules:  # imported already: too late, leave it
        os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    with collector_paused():
        parser = build_parser(verb)
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
