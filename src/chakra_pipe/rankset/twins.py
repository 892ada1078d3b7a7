"""Rank files with the same bytes: what the set-up derives from one serves all its twins.

A collective benchmark's ranks, and the data-parallel replicas of many workloads, are byte-identical
files. Every column a ``TraceGraph`` has is decoded from its bytes, so the per-file rules, the comm
specs and the simulator's columns of one are those of every twin, up to the file name a finding
names. Only the rank itself enters a per-file result besides the bytes, as the default and the
expected value of a send's ``comm_src`` and a receive's ``comm_dst``: files with sends or receives
are never twins. At 4,096 one-node ranks the per-rank cost was ~2 ms of fixed numpy overhead;
with twins it is one hash of the file.
"""

from __future__ import annotations

import zlib
from collections.abc import Hashable
from dataclasses import fields
from typing import Any, Generic, TypeVar

import numpy as np

from ..et import schema

T = TypeVar("T")
Key = tuple[tuple[int, ...], tuple[str, ...], int]


class SameArrays(Generic[T]):
    """A memo of one value per distinct tuple of arrays (lengths, dtypes and a CRC-32 of their bytes),
    for one pass over a set's ranks. A hit is confirmed by comparing the arrays, so a collision can
    only cost a recomputation; hashing reads the arrays in place (no copy). CRC-32 rather than a
    cryptographic hash: nothing here is adversarial, and ``hashlib`` costs a small run's start-up
    its OpenSSL import (``tests/test_cli_startup.py``)."""

    def __init__(self) -> None:
        self._seen: dict[Key, tuple[tuple[np.ndarray, ...], T]] = {}

    def get(self, arrays: tuple[np.ndarray, ...]) -> tuple[Key, T | None]:
        """``(key, value)``: the value kept for equal arrays (None when there is none) and the key to
        :meth:`put` a value for these arrays under."""
        crc = 0
        for a in arrays:
            crc = zlib.crc32(np.ascontiguousarray(a).view(np.uint8).data, crc)
        key = (tuple(len(a) for a in arrays), tuple(a.dtype.str for a in arrays), crc)
        hit = self._seen.get(key)
        if hit is not None and all(np.array_equal(a, b) for a, b in zip(hit[0], arrays)):
            return key, hit[1]
        return key, None

    def put(self, key: Key, arrays: tuple[np.ndarray, ...], value: T) -> None:
        self._seen.setdefault(key, (arrays, value))


class SameInputs:
    """A memo of one rule's result per distinct inputs, for one pass over a set's ranks, where
    "distinct" is identity: after :meth:`SharedColumns.share`, ranks whose column is equal hold the
    very same array, so an O(1) ``is`` per input stands in for comparing or hashing it. The key names
    the rule and its hashable parameters (the rank where a rule reads it, dataset splits, validate's
    mode, ...); the memo keeps
    the input arrays alive, so an ``id`` it was stored under cannot be reused by another array.
    A miss costs a recomputation only, never a wrong result: every input a rule reads is in its key.
    """

    def __init__(self) -> None:
        self._seen: dict[tuple, tuple[tuple[object, ...], Any]] = {}

    def get(self, rule: str, inputs: tuple[object, ...], params: Hashable = ()) -> tuple[tuple, Any]:
        """``(key, value)``: the value kept for these very inputs and parameters (None when there
        is none) and the key to :meth:`put` this rule's value under."""
        key = (rule, tuple(map(id, inputs)), params)
        hit = self._seen.get(key)  # the memo keeps the inputs alive: an id in a key is that object's
        return key, None if hit is None else hit[1]

    def put(self, key: tuple, inputs: tuple[object, ...], value: Any) -> None:
        self._seen[key] = (inputs, value)


def has_p2p(graph) -> bool:
    """Whether ``graph`` has sends or receives, whose checks depend on its rank."""
    types = graph.types
    return bool(((types == schema.COMM_SEND_NODE) | (types == schema.COMM_RECV_NODE)).any())


class Twins(Generic[T]):
    """A memo of one value per distinct file content (graphs with sends or receives never match)."""

    def __init__(self) -> None:
        self._same: SameArrays[T] = SameArrays()

    def get(self, graph) -> tuple[Key | None, T | None]:
        """``(key, value)``: the value kept for a twin of ``graph`` (None when there is none) and the
        key to :meth:`put` this graph's own value under (None: it has no twins)."""
        if has_p2p(graph):
            return None, None
        return self._same.get(_content(graph))

    def put(self, key: Key | None, graph, value: T) -> None:
        if key is not None:
            self._same.put(key, _content(graph), value)


class SharedColumns:
    """Equal columns of consecutive ranks kept once, for the life of their graphs.

    A training step's ranks differ in a few columns (peers, group names, record offsets) and repeat
    the rest: the ranks of one pipeline stage, numbered consecutively (Megatron's ``t + tp·(d +
    dp·p)``), have the same ids, types, durations and dependency lists, the same attribute kinds and
    sizes, and an attribute absent from a rank is a column of zeros. Those copies were ~95 MB of a
    1,024-rank 96-layer step's peak. :meth:`share` points each of a graph's columns that equals the
    previous graph's column of that name at that array (made read-only, so a writer fails loudly
    instead of editing every rank), and its ``pg_name`` strings at one string per name. Values are
    unchanged, only their copies go. Comparing with the previous rank alone (bytes, exact) costs a
    copy and a ``memcmp`` per column, a third of hashing every column into a pool."""

    def __init__(self) -> None:
        # per column name: what _Kept holds of the previous rank's column
        self._last: dict[tuple[str, str], _Kept] = {}
        self._public: list[str] | None = None  # TraceGraph's public field names

    def _kept(self, name: tuple[str, str], column: np.ndarray, compact: bool = False) -> np.ndarray:
        prev = self._last.get(name)
        if prev is not None and prev.equals(column):
            prev.given = column  # the next ranks of its decode group may hold this very array
            return prev.shared()
        given, base = column, column.base
        if compact and isinstance(base, np.ndarray) and column.strides != (0,) and base.nbytes > column.nbytes:
            # a slice of the batch decode's one array per attribute (et.graph._decode_group): the
            # other files' slices are mostly shared away, but one kept slice held all of it (3.7 MB
            # of a 1,024-rank 96-layer step). Not the load's columns: their block stays anyway.
            column = column.copy()
        self._last[name] = _Kept(column, given)
        return column

    def share(self, graph) -> None:
        """Share ``graph``'s public array columns and decoded attributes with the previous graph's."""
        if self._public is None:
            self._public = [f.name for f in fields(graph) if not f.name.startswith("_")]
        for name in self._public:
            column = getattr(graph, name)
            if isinstance(column, np.ndarray):
                setattr(graph, name, self._kept(("column", name), column))
        for which, columns in (("value", graph.attr_value), ("kind", graph.attr_kind)):
            for name, column in columns.items():
                columns[name] = self._kept((which, name), column, compact=True)
        graph.pg_name.intern()


class _Kept:
    """The previous rank's column of one name, with what comparing against it needs taken once
    (dtype, shape, whether it is a single-value view, its bytes): ~35 columns a rank are compared,
    and each numpy attribute read (``dtype``, ``shape``, ``strides``, ``flags``) builds an object,
    a third of :meth:`SharedColumns.share`'s time at 1,024 ranks."""

    __slots__ = ("column", "given", "dtype", "shape", "single", "_bytes", "_frozen")

    def __init__(self, column: np.ndarray, given: np.ndarray):
        # given: the graph's own column, which ``column`` copies when compacted; the decode hands
        # the next ranks that very array when their column is equal (et.graph._Reuse)
        self.column, self.given, self.dtype, self.shape = column, given, column.dtype, column.shape
        self.single = column.strides == (0,)
        self._bytes: bytes | None = None  # taken on the first comparison that needs them
        self._frozen = False

    def equals(self, column: np.ndarray) -> bool:
        """Whether ``column`` has this column's dtype, shape and bytes. Two single-value views (an
        attribute absent from both files, ``et.graph._zeros``) compare by their one value: no copy
        of a column of zeros per rank and name; the very array it was given is equal at no cost."""
        if column is self.given:
            return True
        dtype = column.dtype
        if not (dtype is self.dtype or dtype == self.dtype) or column.shape != self.shape:
            return False
        if self.single and column.strides == (0,):
            return self.column[:1].tobytes() == column[:1].tobytes()
        if self._bytes is None:
            self._bytes = self.column.tobytes()
        return self._bytes == column.tobytes()

    def shared(self) -> np.ndarray:
        """The column, made read-only (once) now that another rank holds it too."""
        if not self._frozen:
            self.column.flags.writeable = False
            self._frozen = True
        return self.column


def _content(graph) -> tuple[np.ndarray, ...]:
    return (np.frombuffer(graph.buf, dtype=np.uint8),)
