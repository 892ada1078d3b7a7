"""Atomic file output: write beside the target, then rename.

Every writer in chakra-pipe goes through here so an interrupted run (Ctrl-C, SIGKILL of a
Snakemake job, a full disk) never leaves a truncated file that a later stage would trust.

The target is what the path *means*, not the name itself: a symbolic link is followed and the real
file is replaced (the link stays a link, pointing at the new content); a FIFO or a character device
(``/dev/null``, ``/dev/stdout``) cannot be renamed over, so it is written straight; ``-`` is
standard output. A folder or a read-only file is refused with a one-line error instead of being
replaced behind the user's back.
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import io
import json
import os
import re
import stat
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

from .errors import InputError
from .lifecycle import pid_alive

STDOUT = "-"
# Temporaries older than this are swept even when their writer's host cannot be checked (a cluster
# node sharing the folder): no single output takes a day to write.
STALE_AFTER_S = 24 * 3600
# Temporaries being written. A SIGTERM's SystemExit can surface where no ``except`` here sees it (inside
# ``_create_temp`` right after the file appeared, or after this generator yielded but before the
# caller's ``with`` body began), so the exit handler removes whatever is still listed.
_PENDING: set[str] = set()


@functools.cache
def _host() -> str:
    """This machine's tag in temporary names (computed on first write: hashlib and socket cost start-up)."""
    import hashlib
    import socket

    return hashlib.sha256(socket.gethostname().encode()).hexdigest()[:8]


@atexit.register
def _remove_pending() -> None:
    for tmp in list(_PENDING):
        with contextlib.suppress(OSError):
            os.unlink(tmp)


# ``.<target>.<pid>-<host>.<random>.tmp``: the writer's pid and host let a later write tell a temporary
# whose writer was SIGKILLed from one still being written.
_TEMP_NAME = re.compile(r"^\..+\.([0-9]+)-([0-9a-f]{8})\.[0-9a-f]{12}\.tmp$")
_SWEPT: set[str] = set()  # folders already swept by this process


def sweep_stale_temporaries(folder: Path) -> list[Path]:
    """Remove our temporaries in ``folder`` left by dead writers (a SIGKILL gives no chance to clean
    up); returns what was removed. Once per folder and process: a folder of 100,000 rank files must not
    be listed again for every file written into it."""
    removed: list[Path] = []
    if str(folder) in _SWEPT:
        return removed
    _SWEPT.add(str(folder))
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return removed
    now = time.time()
    for entry in entries:
        m = _TEMP_NAME.match(entry.name)
        if not m or entry.path in _PENDING:
            continue
        try:
            old = now - entry.stat(follow_symlinks=False).st_mtime > STALE_AFTER_S
            if old or (m.group(2) == _host() and not pid_alive(int(m.group(1)))):
                os.unlink(entry.path)
                removed.append(Path(entry.path))
        except OSError:
            continue
    return removed


def _create_temp(target: Path) -> tuple[int, str]:
    """Exclusively create ``.<name>.<pid>-<host>.<random>.tmp`` beside ``target`` with mode 0666 minus
    the umask.

    ``tempfile.mkstemp`` would create it 0600, and the rename would carry that over: outputs a
    plain ``open()`` makes group-readable (shared campaign folders, cluster jobs under another
    user) would silently become private.
    """
    for _ in range(100):
        tmp = str(target.parent / f".{target.name}.{os.getpid()}-{_host()}.{os.urandom(6).hex()}.tmp")
        _PENDING.add(tmp)  # recorded before it exists: a signal right after creating it cannot orphan it
        try:
            return os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0), 0o666), tmp
        except FileExistsError:
            _PENDING.discard(tmp)  # someone else's file
            continue
        except PermissionError:
            _PENDING.discard(tmp)
            raise InputError(
                f"cannot create a file in folder {target.parent} (permission denied)", file=str(target)
            ) from None
    raise FileExistsError(f"no free temporary name beside {target}")


def resolve_target(path: str | os.PathLike) -> tuple[Path, os.stat_result | None]:
    """The real file behind ``path`` (links followed, even dangling ones) and its status (None if absent)."""
    target = Path(os.path.realpath(path))
    try:
        return target, os.stat(path)
    except FileNotFoundError:
        return target, None
    except OSError as exc:
        raise InputError(f"cannot write: {exc.strerror or exc}", file=str(path)) from None


def _written_straight(target: Path, st: os.stat_result | None) -> bool:
    """FIFOs and devices, and anything behind ``/proc/*/fd`` (``/dev/stdout`` is such a link, and its
    "real path" may name a pipe that no rename can reach): streams, not files to replace."""
    return (
        st is not None and (stat.S_ISFIFO(st.st_mode) or stat.S_ISCHR(st.st_mode)) or target.parts[:2] == ("/", "proc")
    )


@contextlib.contextmanager
def _streamed(raw: IO[bytes], mode: str, gzip_output: bool) -> Iterator[IO]:
    """``raw`` as the caller's stream: optionally gzip (no name, no time: reproducible), optionally text."""
    import gzip  # here: ~1 ms of every start-up, for the few outputs written compressed

    # GzipFile is a binary file object in all but name (typeshed does not say it is an IO[bytes])
    stream: IO[bytes] = gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0) if gzip_output else raw  # type: ignore[assignment]
    if "b" in mode:
        yield stream
    else:
        text = io.TextIOWrapper(stream, encoding="utf-8", newline="\n")
        try:
            yield text
            text.flush()
        finally:  # never let the wrapper close ``raw`` (it may be the process's stdout)
            with contextlib.suppress(OSError, ValueError):
                text.detach()
    if gzip_output:
        stream.close()
    raw.flush()


@contextlib.contextmanager
def _stdout_open(mode: str, gzip_output: bool) -> Iterator[IO]:
    if getattr(sys.stdout, "pipe_closed", False):
        raise InputError("standard output is closed", file=STDOUT)
    sys.stdout.flush()
    raw = getattr(sys.stdout, "buffer", None)
    try:
        if raw is None:  # a text-only stdout (a test's or a notebook's): hand it the text when complete
            collected = io.BytesIO()
            with _streamed(collected, mode, gzip_output) as stream:
                yield stream
            sys.stdout.write(collected.getvalue().decode("utf-8", "replace"))
            return
        with _streamed(raw, mode, gzip_output) as stream:
            yield stream
    except BrokenPipeError:
        raise InputError("standard output closed before the output was complete", file=STDOUT) from None


@contextlib.contextmanager
def atomic_open(path: str | os.PathLike, mode: str = "wb", *, gzip_output: bool | None = None) -> Iterator[IO]:
    """Open a temporary file next to the real ``path``; on success rename it over that file.

    ``mode`` is ``"wb"`` or ``"w"`` (UTF-8, ``\\n`` newlines). ``gzip_output`` defaults to "the
    name ends in ``.gz``"; gzip headers carry no name or time so output is byte-reproducible.
    On an exception the temporary file is removed and ``path`` is left untouched. (No fsync: the
    promise is "never a half-written file after a crash or kill", which rename gives; surviving
    power loss is the file system's job and would cost every small output a disk flush.)
    FIFOs, character devices and ``-`` (stdout) are written straight: they hold no file to protect.
    """
    if gzip_output is None:
        gzip_output = str(path).endswith(".gz")
    if str(path) == STDOUT:
        with _stdout_open(mode, gzip_output) as stream:
            yield stream
        return
    target, st = resolve_target(path)
    if st is not None and stat.S_ISDIR(st.st_mode):
        raise InputError("is a folder, not a file: name a file to write", file=str(path))
    if _written_straight(target, st):
        try:
            with open(path, "wb") as raw, _streamed(raw, mode, gzip_output) as stream:
                yield stream
        except BrokenPipeError:
            raise InputError("the reader closed the pipe before the output was complete", file=str(path)) from None
        return
    if st is not None and not stat.S_ISREG(st.st_mode):
        raise InputError("is neither a file, a FIFO nor a character device: cannot write to it", file=str(path))
    if st is not None and (st.st_mode & 0o222 == 0 or not os.access(target, os.W_OK)):
        raise InputError("read-only file: not replacing it (make it writable, or write elsewhere)", file=str(path))
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise InputError(f"cannot create folder {target.parent}: {exc.strerror or exc}", file=str(path)) from None
    sweep_stale_temporaries(target.parent)
    tmp = ""
    try:
        fd, tmp = _create_temp(target)
        with os.fdopen(fd, "wb") as raw, _streamed(raw, mode, gzip_output) as stream:
            yield stream
        os.replace(tmp, target)
    except BaseException:
        if tmp:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)
        raise
    finally:
        _PENDING.discard(tmp)


def write_bytes(path: str | os.PathLike, data: bytes) -> None:
    with atomic_open(path, "wb", gzip_output=False) as f:
        f.write(data)


def write_text(path: str | os.PathLike, text: str) -> None:
    with atomic_open(path, "w", gzip_output=False) as f:
        f.write(text)


def write_json(path: str | os.PathLike, obj: Any, *, indent: int | None = 2) -> None:
    """JSON with a trailing newline; key order is the caller's (keep it stable)."""
    write_text(path, json.dumps(obj, indent=indent, ensure_ascii=False, allow_nan=False) + "\n")
