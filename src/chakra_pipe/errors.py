"""Error classes and the exit codes every ``chakra-pipe`` verb shares.

Exit codes (documented in the README): 0 ok; 1 findings or failed checks; 2 unreadable or invalid
input or configuration; 3 a trace that cannot finish (deadlock, unmatched communication).
A message is one line, ``file: where: what``, so users can grep logs and editors can jump to it.
"""

from __future__ import annotations

EXIT_OK = 0
EXIT_FINDINGS = 1
EXIT_INPUT = 2
EXIT_STUCK = 3


class ChakraPipeError(Exception):
    """Base class; ``exit_code`` is what the CLI returns."""

    exit_code = EXIT_INPUT

    MAX_WHAT = 1000  # characters of the message kept: an error never echoes a whole huge value
    details: tuple[str, ...] = ()  # lines the CLI prints after the error line (a refused set's problems)

    def __init__(self, what: str, file: str | None = None, where: str | None = None):
        if len(what) > self.MAX_WHAT:
            what = f"{what[: self.MAX_WHAT]}... ({len(what):,} characters)"
        if where is not None and len(where) > self.MAX_WHAT // 4:
            where = f"{where[: self.MAX_WHAT // 4]}..."
        self.file, self.where, self.what = file, where, what
        super().__init__(self.line())

    def line(self) -> str:
        parts = [p for p in (self.file, self.where) if p]
        return ": ".join([*map(str, parts), self.what])


class TraceFormatError(ChakraPipeError):
    """An ``.et`` file that cannot be decoded (``where`` is the byte offset)."""


class ConfigError(ChakraPipeError):
    """A configuration file or value that is missing, malformed or out of range."""


class InputError(ChakraPipeError):
    """Any other unusable input (missing file, wrong JSON shape, bad argument value)."""


class StuckError(ChakraPipeError):
    """A simulation or replay that cannot finish; ``stuck`` maps rank to the blocked node ids.

    ``finished`` maps each rank of a stopped simulation that did finish to ``(finish_ns,
    exposed_comm_ns)``, in the order the ranks finished: ASTRA-sim prints a rank's ``finished`` line
    when the rank finishes, so the lines of a run that then stops come in that order, and ``simulate``
    prints them so.
    """

    exit_code = EXIT_STUCK

    def __init__(
        self,
        what: str,
        stuck: dict[int, list[int]] | None = None,
        file: str | None = None,
        where: str | None = None,
        finished: dict[int, tuple[int, int]] | None = None,
    ):
        self.stuck = stuck or {}
        self.finished = finished or {}
        super().__init__(what, file=file, where=where)
