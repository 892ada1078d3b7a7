"""Bounded gzip decompression, shared by the trace framing and the JSON/YAML reader.

Every input may be gzip-compressed (detected by its magic bytes): traces, Kineto and host traces,
comm-group and config files. A "gzip bomb" — a few MB that expand to gigabytes — must be refused
after a bounded amount of memory, not after allocating what it expands to. So decompression
streams in 1 MiB chunks and stops at the first of two limits on the decompressed size:

* an ABSOLUTE limit, ``DEFAULT_LIMIT`` (512 MiB), whatever the input;
* a ratio guard: more than ``MAX_RATIO`` (100) times the compressed size, once past
  ``RATIO_FLOOR`` (64 MiB). Real traces and JSON compress 5-30x; whitespace or zeros 1000x.

The environment variable ``CHAKRA_PIPE_MAX_DECOMPRESSED`` (bytes, or with a K/M/G/T suffix, e.g.
``4G``) replaces both with one absolute limit: the escape hatch for a huge, legitimate input.
Plain files are not limited: their size is what the user gave us.
"""

from __future__ import annotations

import os
import re
import zlib
from typing import IO

from .errors import ChakraPipeError, ConfigError

GZIP_MAGIC = b"\x1f\x8b"
ENV = "CHAKRA_PIPE_MAX_DECOMPRESSED"
DEFAULT_LIMIT = 512 << 20
MAX_RATIO = 100
RATIO_FLOOR = 64 << 20
CHUNK = 1 << 20
_SUFFIX = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}


def limit_for(compressed_size: int) -> int:
    """Bytes a gzip file of ``compressed_size`` bytes may expand to (see the module docstring)."""
    text = os.environ.get(ENV, "").strip()
    if not text:
        return min(DEFAULT_LIMIT, max(RATIO_FLOOR, MAX_RATIO * compressed_size))
    m = re.fullmatch(r"([0-9]{1,15})\s*([KMGT]?)i?B?", text, re.IGNORECASE)
    if not m or int(m.group(1)) == 0:
        raise ConfigError(f"expected a positive byte count such as 2147483648 or 2G, got {text[:40]!r}", where=ENV)
    return int(m.group(1)) * _SUFFIX[m.group(2).upper()]


class BoundedGzip:
    """A read-only stream of the decompressed bytes of a gzip file that raises ``error`` (naming
    the file and the decompressed offset) past the limit, and on a corrupt stream."""

    def __init__(self, raw: IO[bytes], file: str, error: type[ChakraPipeError]):
        self.file, self.error = file, error
        self.limit = limit_for(os.fstat(raw.fileno()).st_size)
        self.total = 0
        import gzip  # here: ~1 ms of every start-up, and most inputs are not compressed

        self._raw, self._gz = raw, gzip.GzipFile(fileobj=raw, mode="rb")

    def read(self, size: int = -1) -> bytes | bytearray:
        """Up to ``size`` bytes (all that is left when negative: a bytearray grown in place, so
        the peak is the data once, not chunks plus their join)."""
        if size is None or size < 0:
            out = bytearray()
            while chunk := self.read(CHUNK):
                out += chunk
            return out
        try:
            chunk = self._gz.read(min(size, CHUNK))
        except (OSError, EOFError, zlib.error) as exc:
            raise self.error(
                f"corrupt gzip stream: {exc}", file=self.file, where=f"byte {self.total}"
            ) from None  # decompressed offset, as for traces
        self.total += len(chunk)
        if self.total > self.limit:
            raise self.error(
                f"gzip data expands past {self.limit:,} bytes (a gzip bomb? the limit is "
                f"{MAX_RATIO}x the compressed size, at most 512 MiB; set {ENV} to raise it)",
                file=self.file,
                where=f"byte {self.total - len(chunk)}",
            )
        return chunk

    def close(self) -> None:
        self._gz.close()  # leaves the file it was given open
        self._raw.close()

    def __enter__(self) -> BoundedGzip:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def open_input(path: str | os.PathLike, error: type[ChakraPipeError]) -> IO[bytes] | BoundedGzip:
    """Open ``path`` for reading: the plain file, or a :class:`BoundedGzip` over it."""
    try:
        f = open(path, "rb")
    except OSError as exc:
        raise error(f"cannot read: {exc.strerror or exc}", file=str(path)) from None
    try:
        gz = f.peek(2)[:2] == GZIP_MAGIC
    except OSError as exc:
        f.close()
        raise error(f"cannot read: {exc.strerror or exc}", file=str(path)) from None
    return BoundedGzip(f, str(path), error) if gz else f


def read_input(path: str | os.PathLike, error: type[ChakraPipeError]) -> bytes | bytearray:
    """The whole (decompressed, bounded) content of ``path``."""
    with open_input(path, error) as f:
        try:
            return f.read()
        except OSError as exc:
            raise error(f"cannot read: {exc.strerror or exc}", file=str(path)) from None
