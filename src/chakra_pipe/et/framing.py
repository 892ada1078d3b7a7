"""``.et`` framing: ``varint32(length)`` + message, GlobalMetadata first, then Nodes.

Readers detect gzip by its magic bytes; writers gzip only when the file name ends in ``.gz``
(ASTRA-sim cannot read gzip). Every decoding error names the file and the byte offset of the
record, so a corrupt trace never surfaces as a traceback or a silent partial read.
"""

from __future__ import annotations

import os
import zlib
from collections.abc import Generator, Iterable, Iterator
from dataclasses import dataclass
from typing import IO

from ..decompress import BoundedGzip, open_input
from ..errors import InputError, TraceFormatError
from . import schema

MAX_LENGTH_BYTES = 5  # ASTRA-sim's reader accepts at most a 5-byte varint32 length prefix
_CHUNK = 1 << 20


def open_binary(path: str | os.PathLike) -> IO[bytes] | BoundedGzip:
    """Open a trace for reading, transparently decompressing gzip (detected by magic bytes) within
    the bounds of :mod:`chakra_pipe.decompress`."""
    return open_input(path, TraceFormatError)


def read_padded(path: str | os.PathLike, pad: int, alloc=None):
    """``(array, size)``: the decompressed file in a uint8 numpy array with ``pad`` zero bytes after.

    Plain files are read straight into the array (no intermediate ``bytes`` copy); the padding
    lets vectorised decoders read a few bytes past any position without bounds checks. ``alloc(n)``
    supplies the zeroed array of ``n`` bytes (default ``np.zeros``): the batched loader hands out
    consecutive slices of one block, so a batch of files is already one array.
    """
    import numpy as np

    if alloc is None:
        alloc = lambda n: np.zeros(n, dtype=np.uint8)  # noqa: E731
    with open_binary(path) as f:
        if isinstance(f, BoundedGzip):
            data = f.read()
            arr = alloc(len(data) + pad)
            arr[: len(data)] = np.frombuffer(data, dtype=np.uint8)
            return arr, len(data)
        size = os.fstat(f.fileno()).st_size
        arr = alloc(size + pad)
        try:
            got = f.readinto(memoryview(arr)[:size])  # type: ignore[attr-defined]
        except OSError as exc:
            raise TraceFormatError(f"cannot read: {exc.strerror or exc}", file=str(path)) from None
        return arr, got


_SMALL_VARINTS = [bytes((i,)) for i in range(128)]


def encode_varint(value: int) -> bytes:
    if value < 128:
        return _SMALL_VARINTS[value]
    out = bytearray()
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


@dataclass(frozen=True)
class Record:
    """One framed message: ``offset`` of its length prefix, payload ``start`` and ``length``."""

    offset: int
    start: int
    length: int


def _first_record_hint(head: bytes) -> str:
    """Why a file whose very first record is broken is probably not a Chakra trace at all."""
    head = bytes(head[:8])
    if head[:1] in (b"{", b"["):
        return " (not a Chakra trace: the file starts like JSON text)"
    if head[:4] == b"\x89PNG" or head[:4] == b"%PDF" or head[:2] == b"PK":
        return " (not a Chakra trace: the file is an image/document/archive)"
    return " (not a Chakra trace?)"


def scan_records(buf: bytes, file: str = "<bytes>") -> tuple[list[int], list[int]]:
    """Payload starts and lengths of every record in ``buf`` (metadata first); see :func:`walk_records`."""
    try:
        starts, lengths, _ = walk_records(buf, file)
        return starts, lengths
    except TraceFormatError as exc:
        if exc.where == "byte 0":
            raise TraceFormatError(exc.what + _first_record_hint(buf), file=file, where="byte 0") from None
        raise


def walk_records(buf: bytes, file: str = "<bytes>", count: int | None = None) -> tuple[list[int], list[int], int]:
    """Payload starts and lengths of the first ``count`` records in ``buf`` (all when None;
    metadata first), and the position after the last one: the one sequential reader of the
    framing, shared by :func:`scan_records` and the vectorised framing's head (``et.scan``).

    Refuses a length prefix longer than 5 bytes, a length beyond the end of the data and a
    zero-length *node* record (Chakra's Python reader stops there while its C++ reader invents an
    all-default node; the two disagree, so neither reading is safe). A zero-length first record is
    an empty GlobalMetadata and reads fine.
    """
    starts: list[int] = []
    lengths: list[int] = []
    pos, n = 0, len(buf)
    left = n + 1 if count is None else count  # no file holds more records than bytes
    while pos < n and left:
        left -= 1
        offset = pos
        b = buf[pos]
        if b < 0x80:
            length = b
            pos += 1
        elif pos + 1 < n and buf[pos + 1] < 0x80:  # the common 2-byte prefix, without a loop
            length = (b & 0x7F) | (buf[pos + 1] << 7)
            pos += 2
        else:
            pos += 1
            length, shift = b & 0x7F, 7
            while True:
                if pos >= n:
                    raise TraceFormatError("truncated length prefix", file=file, where=f"byte {offset}")
                if pos - offset >= MAX_LENGTH_BYTES:
                    raise TraceFormatError(
                        "length prefix longer than 5 bytes (not a Chakra trace?)", file=file, where=f"byte {offset}"
                    )
                b = buf[pos]
                pos += 1
                length |= (b & 0x7F) << shift
                shift += 7
                if b < 0x80:
                    break
        if length > n - pos:
            raise TraceFormatError(
                f"record length {length} exceeds the {n - pos} bytes left (truncated file?)",
                file=file,
                where=f"byte {offset}",
            )
        if length == 0 and starts:
            raise TraceFormatError(
                "zero-length node record (Chakra's Python and C++ readers disagree on it)",
                file=file,
                where=f"byte {offset}",
            )
        starts.append(pos)
        lengths.append(length)
        pos += length
    if not starts:
        raise TraceFormatError("empty file: no GlobalMetadata record", file=file, where="byte 0")
    return starts, lengths, pos


_PROTOBUF: tuple = ()


def _protobuf() -> tuple:
    """``(DecodeError, UnknownFieldSet)``, imported on the first decoded message and kept: a small
    simulate never imports protobuf, and an import statement per call doubled a node's decode."""
    global _PROTOBUF
    if not _PROTOBUF:  # after the first call: one global read
        from google.protobuf.message import DecodeError
        from google.protobuf.unknown_fields import UnknownFieldSet

        _PROTOBUF = (DecodeError, UnknownFieldSet)
    return _PROTOBUF


def _check_known(msg, file: str, offset: int, what: str) -> None:
    """Reject unknown fields: Chakra never writes them, so they mean a foreign or legacy file."""
    unknown = _protobuf()[1](msg)
    if len(unknown):
        raise TraceFormatError(
            f"{what} has unknown field {unknown[0].field_number} (not a Chakra trace, or a pre-2023 proto2 trace)",
            file=file,
            where=f"byte {offset}",
        )


def parse_metadata(payload: bytes, file: str = "<bytes>", offset: int = 0):
    decode_error = _protobuf()[0]
    try:
        md = schema.GlobalMetadata.FromString(payload)
    except decode_error as exc:
        raise TraceFormatError(
            f"GlobalMetadata does not parse: {exc} (not a Chakra trace?)", file=file, where=f"byte {offset}"
        ) from None
    _check_known(md, file, offset, "GlobalMetadata")
    for attr in md.attr:
        _check_known(attr, file, offset, "GlobalMetadata attribute")
    return md


def parse_node(payload: bytes, file: str = "<bytes>", offset: int = 0):
    """Decode one Node record strictly (protobuf errors and unknown fields are format errors)."""
    decode_error = _protobuf()[0]
    try:
        node = schema.Node.FromString(payload)
    except decode_error as exc:
        raise TraceFormatError(f"node record does not parse: {exc}", file=file, where=f"byte {offset}") from None
    _check_known(node, file, offset, "node")
    for attr in node.attr:
        _check_known(attr, file, offset, f"node {node.id} attribute")
    return node


class _Stream:
    """Buffered reader of framed records from a (possibly gzip) binary stream, in bounded memory."""

    def __init__(self, f: IO[bytes] | BoundedGzip, file: str):
        self.f, self.file = f, file
        self.buf = b""
        self.pos = 0  # position inside buf
        self.base = 0  # file offset of buf[0]
        self.eof = False

    def _fill(self, need: int) -> bool:
        """Make ``need`` bytes available after ``pos``; False at end of data.

        Reads at most ``_CHUNK`` bytes per call and joins once: ``need`` comes from a length prefix
        the file itself claims, and a corrupt one (up to 32 GiB) must cost the bytes actually
        present, not an allocation of the claimed size.
        """
        have = len(self.buf) - self.pos
        if have >= need or self.eof:
            return have >= need
        parts: list[bytes | bytearray] = [self.buf[self.pos :]]
        while have < need:
            try:
                chunk = self.f.read(_CHUNK)
            except (OSError, EOFError, zlib.error) as exc:
                raise TraceFormatError(f"corrupt gzip stream: {exc}", file=self.file) from None
            if not chunk:
                self.eof = True
                break
            parts.append(chunk)
            have += len(chunk)
        self.base += self.pos
        self.buf = b"".join(parts)
        self.pos = 0
        return have >= need

    def records(self) -> Iterator[tuple[int, bytes]]:
        first = True
        while self._fill(1):
            offset = self.base + self.pos
            length, shift, nbytes = 0, 0, 0
            while True:
                if not self._fill(1):
                    raise TraceFormatError("truncated length prefix", file=self.file, where=f"byte {offset}")
                b = self.buf[self.pos]
                self.pos += 1
                nbytes += 1
                length |= (b & 0x7F) << shift
                shift += 7
                if b < 0x80:
                    break
                if nbytes >= MAX_LENGTH_BYTES:
                    raise TraceFormatError(
                        "length prefix longer than 5 bytes (not a Chakra trace?)",
                        file=self.file,
                        where=f"byte {offset}",
                    )
            if length == 0 and not first:
                raise TraceFormatError(
                    "zero-length node record (Chakra's Python and C++ readers disagree on it)",
                    file=self.file,
                    where=f"byte {offset}",
                )
            if not self._fill(length):
                left = len(self.buf) - self.pos
                raise TraceFormatError(
                    f"record length {length} exceeds the {left} bytes left (truncated file?)",
                    file=self.file,
                    where=f"byte {offset}",
                )
            payload = self.buf[self.pos : self.pos + length]
            self.pos += length
            first = False
            yield offset, payload
        if first:
            raise TraceFormatError("empty file: no GlobalMetadata record", file=self.file, where="byte 0")


class TraceReader:
    """Streaming reader: ``metadata`` first, then ``for offset, node in reader`` in bounded memory."""

    def __init__(self, path: str | os.PathLike):
        self.path = str(path)
        self._f = open_binary(path)
        try:
            stream = _Stream(self._f, self.path)
            stream._fill(8)
            self._head = stream.buf[:8]
            self._records = stream.records()
            offset, payload = self._first()
            self.metadata = parse_metadata(payload, self.path, offset)
        except BaseException:
            self._f.close()
            raise

    def _first(self):
        try:
            return next(self._records)
        except TraceFormatError as exc:
            if exc.where == "byte 0":
                raise TraceFormatError(
                    exc.what + _first_record_hint(self._head), file=self.path, where="byte 0"
                ) from None
            raise

    def __iter__(self) -> Iterator[tuple[int, object]]:
        for offset, payload in self._records:
            yield offset, parse_node(payload, self.path, offset)

    def close(self) -> None:
        self._f.close()

    def __enter__(self) -> TraceReader:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def iter_nodes(path: str | os.PathLike) -> Iterator[object]:
    """Nodes of a trace one at a time (GlobalMetadata is read and skipped)."""
    with TraceReader(path) as reader:
        for _, node in reader:
            yield node


def read_trace(path: str | os.PathLike):
    """``(metadata, [nodes])`` with every record decoded strictly."""
    with TraceReader(path) as reader:
        return reader.metadata, [node for _, node in reader]


def frame(message_bytes: bytes) -> bytes:
    return encode_varint(len(message_bytes)) + message_bytes


def encode_trace(metadata, nodes: Iterable, file: str = "<bytes>") -> Generator[bytes, None, int]:
    """The framed records of a trace, in blocks; returns (as ``StopIteration.value``) the node count.

    The one serializer of :func:`write_trace` and of rank sets kept in memory (``b"".join`` of the
    blocks), so a set simulated without files has the bytes its files would have.
    Serialization is the protobuf runtime's canonical form, which is byte-identical to
    Chakra's Python writer (ascending field numbers, packed repeats, explicit oneof values).
    """
    yield frame(metadata.SerializeToString())
    count = 0
    pending: list[bytes] = []
    append, varint = pending.append, encode_varint
    for node in nodes:
        data = node.SerializeToString()
        if not data:
            raise InputError(
                "refusing to write an all-default node: it would be a zero-length record "
                "that Chakra's readers disagree on",
                file=file,
                where=f"node #{count}",
            )
        append(varint(len(data)))
        append(data)
        count += 1
        if len(pending) >= 16384:
            yield b"".join(pending)
            pending.clear()
    yield b"".join(pending)
    return count


def write_trace(path: str | os.PathLike, metadata, nodes: Iterable) -> int:
    """Write GlobalMetadata and Nodes atomically; gzip when the name ends in ``.gz``.

    Returns the number of nodes written.
    """
    blocks = encode_trace(metadata, nodes, str(path))
    from ..atomic import atomic_open  # here: reading a trace (every simulate) writes nothing

    with atomic_open(path, "wb") as out:
        while True:
            try:
                out.write(next(blocks))
            except StopIteration as done:
                return done.value
