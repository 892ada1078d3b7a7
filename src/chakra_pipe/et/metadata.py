"""A file's ``GlobalMetadata`` for the column loader, decoded by protobuf only when something needs the message.

Why: loading a trace's columns needs nothing from protobuf but this one record, and the rank-set checks
read only its ``version`` and attribute names; importing protobuf and building the message classes
is ~60 ms of every ``chakra-pipe simulate`` start-up (issue #15). So a plain record — the version
string and attributes holding one scalar, string or bytes value, the layout every Chakra writer
produces — is walked here without protobuf: the walk proves the protobuf decoding would succeed with
no unknown field, and keeps the version and the attribute names. Anything else (list values, odd
wire types, unknown fields, bad UTF-8, truncation) is decoded by :func:`framing.parse_metadata`
at once, so its errors are exactly the strict reader's. The rank-set rules read a METADATA node's
``inputs.values`` the same way (:func:`plain_node_inputs`).
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache
from typing import Any

from .framing import parse_metadata

_VARINT, _I64, _LEN, _I32 = 0, 1, 2, 5
# Wire type of each GlobalMetadata / AttributeProto field the walk accepts; the list members of the
# value oneof (even numbers from 4) are left to protobuf.
_METADATA_FIELDS = {1: _LEN, 2: _LEN}  # version, attr
_ATTRIBUTE_FIELDS = {
    1: _LEN,  # name
    2: _LEN,  # doc_string
    3: _I64,  # double_val
    5: _I32,  # float_val
    **dict.fromkeys((7, 9, 11, 13, 15, 17, 27), _VARINT),  # the varint integers and bool_val
    19: _I32,  # fixed32_val
    21: _I64,  # fixed64_val
    23: _I32,  # sfixed32_val
    25: _I64,  # sfixed64_val
    29: _LEN,  # string_val
    31: _LEN,  # bytes_val
}
# Node fields the walk accepts (not the dependency lists, 4 and 5): id, name, type, start, duration,
# inputs, outputs, attr; IOInfo's three strings.
_NODE_FIELDS = {1: _VARINT, 2: _LEN, 3: _VARINT, 6: _VARINT, 7: _VARINT, 8: _LEN, 9: _LEN, 10: _LEN}
_IO_FIELDS = frozenset({8, 9})
_IO_INFO_FIELDS = {1: _LEN, 2: _LEN, 3: _LEN}
_TEXT = frozenset({1, 2, 29})  # AttributeProto's string fields: protobuf refuses invalid UTF-8 in them
_MAX_VARINT = 10  # bytes; a 10th byte must be 1, as in a negative integer's encoding (else protobuf decides)


def _varint(buf: bytes, pos: int, end: int) -> tuple[int, int] | None:
    value, shift = 0, 0
    for i in range(pos, min(end, pos + _MAX_VARINT)):
        b = buf[i]
        value |= (b & 0x7F) << shift
        if b < 0x80:
            return (value, i + 1) if i - pos < _MAX_VARINT - 1 or b == 1 else None
        shift += 7
    return None


def _fields(buf: bytes, pos: int, end: int, wire: dict[int, int]) -> list[tuple[int, int, int]] | None:
    """``(number, start, end)`` of each field in ``buf[pos:end]``, payload bounds for length-delimited
    ones; None unless every field is one of ``wire``'s, in its wire type, and inside the bounds.
    (One-byte tags and lengths, the common case, are read inline: a rank set has a record per file.)"""
    out = []
    while pos < end:
        key = buf[pos]
        if key < 0x80:
            pos += 1
        else:
            tag = _varint(buf, pos, end)
            if tag is None or tag[1] - pos > 2 or buf[tag[1] - 1] == 0:  # field numbers < 32, minimal encoding
                return None
            key, pos = tag
        number, kind = key >> 3, key & 7
        if wire.get(number) != kind:
            return None
        if kind == _LEN:
            if pos < end and buf[pos] < 0x80:
                size, pos = buf[pos], pos + 1
            else:
                step = _varint(buf, pos, end)
                if step is None:
                    return None
                size, pos = step
            if size > end - pos:
                return None
            start, pos = pos, pos + size
        elif kind == _VARINT:
            step = _varint(buf, pos, end)
            if step is None:
                return None
            start, pos = pos, step[1]
        else:
            start, pos = pos, pos + (8 if kind == _I64 else 4)
            if pos > end:
                return None
        out.append((number, start, pos))
    return out


def _text(buf: bytes, start: int, end: int) -> str | None:
    try:
        return buf[start:end].decode("utf-8")
    except UnicodeDecodeError:
        return None


def _plain(payload: bytes) -> tuple[str, list[str]] | None:
    """``(version, attribute names)`` of a plain GlobalMetadata record (see the module docstring), else None."""
    fields = _fields(payload, 0, len(payload), _METADATA_FIELDS)
    if fields is None:
        return None
    version, names = "", []
    for number, start, end in fields:
        if number == 1:
            text = _text(payload, start, end)
            if text is None:
                return None
            version = text  # proto3: the last occurrence wins
            continue
        name = _attribute_name(payload, start, end)
        if name is None:
            return None
        names.append(name)
    return version, names


def _attribute_name(buf: bytes, start: int, end: int) -> str | None:
    """The name of the plain AttributeProto ``buf[start:end]`` ("" when unset), else None."""
    attr = _fields(buf, start, end, _ATTRIBUTE_FIELDS)
    if attr is None:
        return None
    name = ""
    for number, a_start, a_end in attr:
        if number in _TEXT:
            text = _text(buf, a_start, a_end)
            if text is None:
                return None
            if number == 1:
                name = text
    return name


def plain_node_inputs(record: bytes) -> str | None:
    """``inputs.values`` ("" without ``inputs``) of a plain Node record, else None: then protobuf
    must decide (:func:`framing.parse_node`, whose errors a caller must raise).

    Why: the rank-set rules read only this string of a METADATA node (its process-group table), and
    a rank set has one such record per file, with different bytes on every rank (its own groups);
    the strict protobuf decode and unknown-field checks were ~50 µs a record, a third of a 1,024-rank
    set's METADATA work. Plain, as for GlobalMetadata above: the scalar fields, a UTF-8 ``name``,
    at most one ``inputs`` and one ``outputs`` of UTF-8 strings, attributes holding one scalar,
    string or bytes value. Dependency lists (packed or not), a repeated ``inputs`` (protobuf merges
    the two) and anything the GlobalMetadata walk refuses are left to protobuf."""
    fields = _fields(record, 0, len(record), _NODE_FIELDS)
    if fields is None:
        return None
    values, seen = "", set()
    for number, start, end in fields:
        if number == 2:
            if _text(record, start, end) is None:
                return None
        elif number in _IO_FIELDS:
            if number in seen:
                return None
            seen.add(number)
            io = _fields(record, start, end, _IO_INFO_FIELDS)
            if io is None:
                return None
            for io_number, io_start, io_end in io:
                text = _text(record, io_start, io_end)
                if text is None:
                    return None
                if number == 8 and io_number == 1:
                    values = text  # proto3: the last occurrence wins
        elif number == 10 and _attribute_name(record, start, end) is None:
            return None
    return values


class _Attribute:
    """One attribute of a :class:`LazyMetadata`: its ``name`` at hand, anything else from the message."""

    __slots__ = ("name", "_owner", "_index")

    def __init__(self, name: str, owner: LazyMetadata, index: int):
        self.name, self._owner, self._index = name, owner, index

    def __getattr__(self, key: str) -> Any:
        if key.startswith("_"):  # an unset slot or a copy/pickle probe: never the message's
            raise AttributeError(key)
        return getattr(self._owner.message.attr[self._index], key)


class LazyMetadata:
    """A plain GlobalMetadata record: ``version`` and ``attr`` names read without protobuf; any other
    attribute is the decoded message's (decoded on first use; :attr:`message` is that message)."""

    __slots__ = ("version", "attr", "_payload", "_message")

    def __init__(self, payload: bytes, version: str, names: Sequence[str]):
        self.version, self._payload, self._message = version, payload, None
        self.attr = [_Attribute(name, self, i) for i, name in enumerate(names)]

    @property
    def message(self) -> Any:
        """The protobuf ``GlobalMetadata`` (the walk proved it decodes with no unknown field)."""
        if self._message is None:
            from . import schema

            self._message = schema.GlobalMetadata.FromString(self._payload)
        return self._message

    def __getattr__(self, key: str) -> Any:
        if key.startswith("_"):  # an unset slot or a copy/pickle probe: never the message's
            raise AttributeError(key)
        return getattr(self.message, key)

    def __eq__(self, other: object) -> bool:
        return self.message == (other.message if isinstance(other, LazyMetadata) else other)

    __hash__ = None  # type: ignore[assignment]  # as the message: mutable, so unhashable

    def __str__(self) -> str:
        return str(self.message)

    def __repr__(self) -> str:
        return repr(self.message)


def read_metadata(payload: bytes, file: str = "<bytes>", offset: int = 0) -> Any:
    """The GlobalMetadata record ``payload``: a :class:`LazyMetadata` when plain, else the strict
    protobuf decoding of :func:`framing.parse_metadata` (errors naming ``file`` and ``offset``)."""
    payload = bytes(payload)
    plain = _plain_shared(payload) if len(payload) <= _SHARED_MAX else _plain(payload)
    if plain is None:
        return parse_metadata(payload, file, offset)
    return LazyMetadata(payload, *plain)


# The files of a rank set carry one GlobalMetadata record byte for byte (L96: 1,024 copies of one
# 435-byte record), and its walk is ~20 us a file: a walk's result depends on the bytes alone, so
# each distinct small record is walked once. Larger ones are walked every time: the memo must not
# keep big payloads alive.
_SHARED_MAX = 1 << 12
_SHARED_RECORDS = 8


@lru_cache(maxsize=_SHARED_RECORDS)
def _plain_shared(payload: bytes) -> tuple[str, tuple[str, ...]] | None:
    """:func:`_plain` of ``payload``, remembered for the next file with the same record (the names
    as a tuple: every file's :class:`LazyMetadata` builds its own attribute list from them)."""
    plain = _plain(payload)
    return None if plain is None else (plain[0], tuple(plain[1]))
