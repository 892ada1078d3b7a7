"""What the ``chakra-pipe`` command says besides its results: diagnostics and progress, both on stderr.

Diagnostics go through stdlib :mod:`logging` (logger ``chakra_pipe.<module>``, obtained with
:func:`logger`), shown from WARNING by default, from INFO with ``-v`` and DEBUG with ``-vv``, and only
errors with ``-q``. :mod:`logging` itself is imported only by a run that logs a message its level
shows (:class:`Logger`): it costs ~4-10 ms of start-up, paid by every sweep point and Snakemake job
otherwise (issue #15). Progress is a single self-overwriting line on stderr for the verbs that can run
for minutes; it appears only when stderr is a terminal and ``-q`` was not given, so logs, pipes and
Snakemake jobs never see it. A few lines of our own instead of tqdm or rich: the counters need no
more, and the CLI keeps starting fast.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Iterable, Iterator
from typing import Any, TypeVar

T = TypeVar("T")

# "command": configure() ran (the CLI); a library user's program keeps its own logging set-up untouched
_state = {"progress": False, "level": 30, "logging": False, "command": False}  # 30: logging.WARNING
_LEVELS = (30, 20, 10)  # logging.WARNING, INFO, DEBUG for 0, 1, 2+ times -v; ERROR (40) with -q
_MIN_INTERVAL_S = 0.1  # redraws per second are capped: a tight loop must not be slowed by its counter


def configure(verbosity: int, quiet: bool) -> None:
    """Set up logging and progress for one command run (``verbosity`` counts ``-v``)."""
    _state["level"] = 40 if quiet else _LEVELS[min(verbosity, 2)]
    _state["progress"] = not quiet and sys.stderr.isatty()
    _state["logging"], _state["command"] = False, True
    if "logging" in sys.modules:  # a logger may already exist (an embedding program, a test)
        _set_up_logging()


def logger(name: str) -> Logger:
    """The logger ``name`` (``logging.getLogger(name)`` on first use), with the handler and level
    :func:`configure` chose in place when the command line configured them (a program embedding the
    package keeps its own set-up)."""
    return Logger(name)


def _logging_logger(name: str):
    import logging

    if _state["command"] and not _state["logging"]:
        _set_up_logging()
    return logging.getLogger(name)


class Logger:
    """A :class:`logging.Logger` that imports :mod:`logging` only for a message the command would show.

    Why: the simulator reports at INFO which path it took (symmetric run, fast paths declined), and a
    command without ``-v`` drops those; importing :mod:`logging` to drop them is ~4 ms of every such
    run's start-up (issue #15). A message is dropped here only when the command line configured the
    level and :mod:`logging` is not imported yet, so nothing (a test's ``caplog``, an embedding program)
    can have changed a level since; otherwise it goes to the real logger, as does every other attribute.
    """

    def __init__(self, name: str) -> None:
        self.name = name

    def log(self, level: int, msg: object, *args: object, **kwargs: Any) -> None:
        self._emit(level, msg, args, kwargs)

    def debug(self, msg: object, *args: object, **kwargs: Any) -> None:
        self._emit(10, msg, args, kwargs)  # logging.DEBUG

    def info(self, msg: object, *args: object, **kwargs: Any) -> None:
        self._emit(20, msg, args, kwargs)  # logging.INFO

    def warning(self, msg: object, *args: object, **kwargs: Any) -> None:
        self._emit(30, msg, args, kwargs)  # logging.WARNING

    def error(self, msg: object, *args: object, **kwargs: Any) -> None:
        self._emit(40, msg, args, kwargs)  # logging.ERROR

    def _emit(self, level: int, msg: object, args: tuple[object, ...], kwargs: dict[str, Any]) -> None:
        if _state["command"] and level < _state["level"] and "logging" not in sys.modules:
            return
        kwargs["stacklevel"] = kwargs.get("stacklevel", 1) + 2  # the caller's line, not these two frames'
        _logging_logger(self.name).log(level, msg, *args, **kwargs)

    def __getattr__(self, attr: str) -> Any:  # isEnabledFor, handlers, exception, ...: the real logger's
        return getattr(_logging_logger(self.name), attr)


def _set_up_logging() -> None:
    import logging

    root = logging.getLogger("chakra_pipe")
    root.handlers.clear()
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("chakra-pipe: %(levelname)s: %(message)s"))
    root.addHandler(handler)
    root.setLevel(_state["level"])
    root.propagate = False
    _state["logging"] = True


class Ticker:
    """One status line redrawn in place on stderr, for work measured in something other than a count of
    items (ranks still running, the iteration they reached). Off unless :func:`configure` enabled progress."""

    def __init__(self, label: str) -> None:
        self.label, self.last, self.drawn = label, 0.0, False

    def update(self, text: Callable[[], str]) -> None:
        """Redraw with ``text()`` at most every 0.1 s (``text`` is only called when a redraw is due)."""
        if not _state["progress"] or (now := time.monotonic()) - self.last < _MIN_INTERVAL_S:
            return
        self.last, self.drawn = now, True
        sys.stderr.write(f"\r{self.label}: {text()}\x1b[K")
        sys.stderr.flush()

    def close(self) -> None:
        if self.drawn:
            sys.stderr.write("\n")
            sys.stderr.flush()


def track(items: Iterable[T], label: str, total: int, unit: str = "") -> Iterator[T]:
    """Yield ``items`` unchanged while drawing ``label: done/total unit (pct%)`` in place on stderr.

    A pass-through unless :func:`configure` enabled progress; redraws at most every 0.1 s, and ends its
    line when the loop ends, however it ends.
    """
    if not _state["progress"]:
        yield from items
        return
    done, last = 0, 0.0

    def draw() -> None:
        pct = f" ({100 * done // total}%)" if total else ""
        sys.stderr.write(f"\r{label}: {done}/{total} {unit}{pct}\x1b[K")
        sys.stderr.flush()

    try:
        for item in items:
            yield item
            done += 1
            if (now := time.monotonic()) - last >= _MIN_INTERVAL_S:
                last = now
                draw()
    finally:
        if last:
            draw()
            sys.stderr.write("\n")
            sys.stderr.flush()
