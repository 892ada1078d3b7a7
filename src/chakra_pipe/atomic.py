"""Atomic file output: write beside the target, then rename.

Every writer in chakra-pipe goes through here so an interrupted run (Ctrl-C, SIGKILL of a
Snakemake job, a full disk) never leaves a truncated file that a later stage would trust.
"""

from __future__ import annotations

import contextlib
import gzip
import io
import json
import os
import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any


def _create_temp(target: Path) -> tuple[int, str]:
    """Exclusively create ``.<name>.<random>.tmp`` beside ``target`` with mode 0666 minus the umask.

    ``tempfile.mkstemp`` would create it 0600, and the rename would carry that over: outputs a
    plain ``open()`` makes group-readable (shared campaign folders, cluster jobs under another
    user) would silently become private.
    """
    for _ in range(100):
        tmp = str(target.parent / f".{target.name}.{secrets.token_hex(6)}.tmp")
        try:
            return os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0), 0o666), tmp
        except FileExistsError:
            continue
    raise FileExistsError(f"no free temporary name beside {target}")


@contextlib.contextmanager
def atomic_open(path: str | os.PathLike, mode: str = "wb", *, gzip_output: bool | None = None) -> Iterator[IO]:
    """Open a temporary file next to ``path``; on success rename it over ``path``.

    ``mode`` is ``"wb"`` or ``"w"`` (UTF-8, ``\\n`` newlines). ``gzip_output`` defaults to "the
    name ends in ``.gz``"; gzip headers carry no name or time so output is byte-reproducible.
    On an exception the temporary file is removed and ``path`` is left untouched. (No fsync: the
    promise is "never a half-written file after a crash or kill", which rename gives; surviving
    power loss is the file system's job and would cost every small output a disk flush.)
    """
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    if gzip_output is None:
        gzip_output = target.name.endswith(".gz")
    fd, tmp = _create_temp(target)
    try:
        with os.fdopen(fd, "wb") as raw:
            stream: IO[bytes] = gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0) if gzip_output else raw  # type: ignore[assignment]
            if "b" in mode:
                yield stream
            else:
                text = io.TextIOWrapper(stream, encoding="utf-8", newline="\n")
                yield text
                text.flush()
                text.detach()
            if gzip_output:
                stream.close()
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def write_bytes(path: str | os.PathLike, data: bytes) -> None:
    with atomic_open(path, "wb", gzip_output=False) as f:
        f.write(data)


def write_text(path: str | os.PathLike, text: str) -> None:
    with atomic_open(path, "w", gzip_output=False) as f:
        f.write(text)


def write_json(path: str | os.PathLike, obj: Any, *, indent: int | None = 2) -> None:
    """JSON with a trailing newline; key order is the caller's (keep it stable)."""
    write_text(path, json.dumps(obj, indent=indent, ensure_ascii=False, allow_nan=False) + "\n")
