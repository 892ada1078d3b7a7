"""How a verb's process meets the world around it: a reader that goes away, a signal to stop.

* ``... | head -1`` closes stdout early. Printing is the *last* thing a verb does and the least
  important: a closed stdout must neither skip a file output nor change the exit status, so stdout
  becomes a stream that stops writing (to ``/dev/null``) at the first ``BrokenPipeError``.
* SIGTERM (Snakemake cancelling a job, ``scancel``, ``kill``) becomes ``SystemExit(143)``, so every
  ``finally`` and ``except BaseException`` on the way out runs: atomic writers delete their
  temporaries, replays kill their ranks and remove their scratch folders.
* What SIGKILL leaves behind cannot be cleaned by the killed process; scratch folders carry their
  owner's pid so the next run removes those whose owner is dead (:func:`sweep_dead_scratch`).
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import gc
import os
import re
import signal
import sys
from collections.abc import Iterator
from typing import IO, TYPE_CHECKING

if TYPE_CHECKING:  # pathlib (with urllib.parse) is ~5 ms of every command's start-up; only scratch uses it
    from pathlib import Path


class ClosedPipeSafe:
    """A text stream proxy that turns the first ``BrokenPipeError`` into "discard from now on"."""

    def __init__(self, stream: IO[str] | None):
        self._stream = stream
        self.pipe_closed = stream is None  # started with stdout closed (`>&-`): Python sets it to None

    def _discard(self) -> None:
        self.pipe_closed = True
        with contextlib.suppress(OSError, ValueError, AttributeError):
            # Python flushes stdout again at exit: point the descriptor at /dev/null so that flush
            # succeeds instead of printing "Exception ignored" and exiting 120.
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, self._stream.fileno())  # type: ignore[union-attr]  # None: fileno fails, suppressed
            os.close(devnull)

    def write(self, text: str) -> int:
        if self._stream is not None and not self.pipe_closed:
            try:
                return self._stream.write(text)
            except BrokenPipeError:
                self._discard()
        return len(text)

    def flush(self) -> None:
        if self._stream is not None and not self.pipe_closed:
            try:
                self._stream.flush()
            except BrokenPipeError:
                self._discard()

    def __getattr__(self, name: str):
        return getattr(self._stream, name)


@contextlib.contextmanager
def pipe_safe_stdout() -> Iterator[None]:
    """Run the body with a :class:`ClosedPipeSafe` stdout; flush it before restoring the original."""
    original = sys.stdout
    safe = ClosedPipeSafe(original)
    sys.stdout = safe
    try:
        yield
    finally:
        safe.flush()
        sys.stdout = original


@contextlib.contextmanager
def terminate_as_exit() -> Iterator[None]:
    """Turn SIGTERM into ``SystemExit(128 + SIGTERM)`` for the body (main thread only), so clean-up runs."""

    def handler(signum, frame):
        raise SystemExit(128 + signum)

    try:
        previous = signal.signal(signal.SIGTERM, handler)
    except ValueError:  # not the main thread: leave signals alone
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def pid_alive(pid: int) -> bool:
    """Whether process ``pid`` exists on this machine (another user's counts)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def make_scratch(prefix: str, parent: str | os.PathLike | None = None) -> Path:
    """A private folder ``<parent or tmp>/<prefix><pid>-<random>`` after removing those of dead owners."""
    import tempfile  # here, as in sweep_dead_scratch: every command imports this module, few make scratch
    from pathlib import Path

    sweep_dead_scratch(prefix, None if parent is None else str(parent))
    return Path(tempfile.mkdtemp(prefix=f"{prefix}{os.getpid()}-", dir=parent))


def sweep_dead_scratch(prefix: str, parent: str | None = None) -> list[Path]:
    """Remove ``<prefix><pid>-*`` folders in the temp folder whose owning process no longer exists."""
    import shutil
    import tempfile
    from pathlib import Path

    pattern = re.compile(rf"^{re.escape(prefix)}([0-9]+)-[^/]+$")
    removed = []
    root = Path(parent or tempfile.gettempdir())
    with contextlib.suppress(OSError):
        for entry in os.scandir(root):
            m = pattern.match(entry.name)
            if m and entry.is_dir(follow_symlinks=False) and not pid_alive(int(m.group(1))):
                try:
                    if entry.stat(follow_symlinks=False).st_uid != os.getuid():
                        continue
                except OSError:
                    continue
                shutil.rmtree(entry.path, ignore_errors=True)
                removed.append(Path(entry.path))
    return removed


@contextlib.contextmanager
def collector_paused(lasting: bool = False) -> Iterator[None]:
    """Run the body (a verb's imports) with the cyclic garbage collector off; restore it after.

    Why: loading the simulator's modules allocates tens of thousands of objects that live as long
    as the process (functions, classes, numpy's tables), so the ~60 collector passes a small
    ``simulate`` used to make during its start-up freed nothing and cost ~5 % of it (issue #15).
    ``lasting``: what the body made lives until the process ends (a one-shot verb's whole run), so
    it is moved to the oldest generation unexamined (:func:`promote_tracked`); otherwise the first
    allocation after the body examined every one of them (~9 ms of a 64-rank ``simulate`` for its
    imports, ~5 ms for its run, freeing nothing). A program calling such a verb again and again in
    one process has the garbage of one call freed by the next full collection instead.
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            if lasting:
                promote_tracked()
            gc.enable()


def promote_tracked() -> None:
    """Move every object the collector tracks into its oldest generation without examining any.

    ``gc.freeze()`` moves them all to the permanent generation and ``gc.unfreeze()`` back into the
    oldest one: two list splices. Nothing becomes uncollectable (a full collection still examines
    them); only the young collections, which would find them alive, skip them. Skipped while the
    program holds frozen objects of its own (a pre-fork server's), which must stay frozen.
    """
    if gc.get_freeze_count() == 0:
        gc.freeze()
        gc.unfreeze()


@functools.cache  # once per process
def exit_uncollected() -> None:
    """At interpreter exit, leave the objects still alive to the operating system instead of to the
    collector (``gc.freeze`` as the last ``atexit`` hook but those registered later; once per process).

    Why: CPython's shutdown runs full collections that examine every live object (~10 ms of a
    64-rank ``simulate``, ~40 ms of the 1,024-rank one) to free memory the process hands back
    anyway. Objects alive at exit are not promised their finalizers (language reference,
    ``object.__del__``); what is not in a reference cycle is still freed, and its finalizer run, when
    the modules are cleared. For verbs whose outputs are closed before they return (``simulate``).
    """
    atexit.register(gc.freeze)


@contextlib.contextmanager
def one_shot() -> Iterator[None]:
    """Run a one-shot verb's whole run (``simulate``, the ASTRA-sim drop-in programs): everything it
    builds lives until the process ends, so the collector stays off through it
    (:func:`collector_paused` with ``lasting``) and leaves what is alive at exit alone
    (:func:`exit_uncollected`)."""
    exit_uncollected()
    with collector_paused(lasting=True):
        yield
