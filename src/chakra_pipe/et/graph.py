"""``TraceGraph``: one rank's trace as numpy columns, decoded without a Python object per node.

Every later stage (validate, simulate, report) wants the same few columns — ids, types, durations,
a handful of attributes and the two dependency lists — for traces of up to millions of nodes. The
bulk loader walks the protobuf wire format with vectorised numpy steps over thousands of records
at once (one step per field, not per node; a chunk at a time, so the temporaries stay small),
decodes the packed dependency varints in bulk, keeps the columns in the narrowest dtypes that hold
them, and keeps the raw bytes so any full ``Node`` can still be decoded on demand. Records that stray from the
layout Chakra writers produce (fields repeated or out of place, unpacked repeats) fall back to the
protobuf runtime, so the result is always the protobuf reading of the file.
"""

from __future__ import annotations

import itertools
import os
import sys
import weakref
from collections.abc import Callable, ItemsView, Iterable, Iterator, KeysView, Mapping, ValuesView
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..errors import TraceFormatError
from ..heap import keep_freed_heap, release_free_heap
from . import attrs as _attrs
from . import schema
from .dedupe import Groups, group_records
from .framing import encode_varint, parse_node, read_padded
from .metadata import read_metadata
from .scan import scan_array, scan_arrays

# Integer-valued attributes kept as columns: value (int64) + kind (oneof field number, 0 = absent).
INT_ATTRS = (
    "is_cpu_op",
    "num_ops",
    "tensor_size",
    "tensor_loc",
    "comm_type",
    "comm_size",
    "comm_src",
    "comm_dst",
    "comm_tag",
    "comm_priority",
)
STR_ATTRS = ("pg_name",)
LIST_ATTRS = ("involved_dim",)
_KNOWN = INT_ATTRS + STR_ATTRS + LIST_ATTRS
_PAD = 16  # bytes of zero padding after the buffer so vectorised reads never go out of range
_SMALL = 48  # files with at most this many nodes are decoded record by record
# A chunk's temporaries are ~25 int64 a record plus ~100 bytes an attribute the tails do not
# cover (~290 bytes a generated record at the peak): 2^13 generated records (~0.75 MB) still
# amortise the ~500 numpy calls a chunk. Since a chunk's decoder is freed before the next one is
# built, 2^13 loads as fast as 2^14 within 1-5 % (40k and 200k generated nodes, the 1,024-file
# sets; 2^12 was 10 % slower) and peaks lower: a 40k-node generated file at 2.3-2.7x its size
# instead of 3.1-3.25x, 200k nodes 2.05-2.25x instead of 2.34-2.37x (resident peaks move with the
# allocation history). Converted records (~810 bytes, a dozen distinct attributes each) are held
# to ~8 MiB a chunk, as before.
_CHUNK_BYTES = 1 << 23
_CHUNK_RECORDS = 1 << 13  # records decoded at a time: bounds the decoding temporaries, amortises numpy calls
_BATCH_BYTES = 1 << 23  # files decoded together up to this many bytes (a larger file is decoded alone, uncopied)
# From a batch of this many bytes on, a load keeps freed heap memory below _BATCH_BYTES for reuse
# until it ends (heap.keep_freed_heap; a batch's block is still mapped whole, with huge pages): the
# 1,024-file rank set's load faulted ~21k pages instead of ~61k, a 34 MB trace's ~5.3k instead of
# ~11.8k. A 3.7 MB trace saved ~3.5 ms of ~33 but its peak grew by 0.13x the file (the ctypes
# import, and the freed pages kept).
_KEEP_HEAP_BYTES = _BATCH_BYTES // 2
_ATTR_GROUP = 1 << 14  # attributes checked at a time within a chunk
_VECTOR_STEPS = 64  # non-attribute field steps walked in bulk before falling back per record

_U64 = np.uint64
_DENSE_SPAN = 4  # an id lookup table may hold up to this many slots per record


@dataclass
class TraceGraph:
    """Columns of one ``.et`` file. Index ``i`` is the i-th node record in file order."""

    path: str
    metadata: Any  # the GlobalMetadata (et.metadata: decoded by protobuf on first use when plain)
    buf: memoryview = field(repr=False)
    rec_start: np.ndarray = field(repr=False)
    rec_len: np.ndarray = field(repr=False)
    ids: np.ndarray
    types: np.ndarray
    duration_micros: np.ndarray
    start_time_micros: np.ndarray
    name_start: np.ndarray = field(repr=False)
    name_len: np.ndarray = field(repr=False)
    ctrl_ptr: np.ndarray = field(repr=False)
    # dependency ids: uint32 when every id in the file's dependency lists is below 2^28, else uint64
    ctrl_ids: np.ndarray = field(repr=False)
    data_ptr: np.ndarray = field(repr=False)
    data_ids: np.ndarray = field(repr=False)
    attr_parts: _KnownAttrs = field(repr=False)
    slow: np.ndarray = field(repr=False)
    _order: np.ndarray | None = field(default=None, repr=False)
    _attrs: _AttrColumns | None = field(default=None, repr=False)
    _attr_batch: _AttrBatch | None = field(default=None, repr=False)  # graphs loaded with it (see _AttrBatch)
    _dense: np.ndarray | bool | None = field(default=None, repr=False)

    def __len__(self) -> int:
        return len(self.ids)

    # -- attributes (decoded on first use: loading ids, types and deps does not pay for them) --
    @property
    def attr_value(self) -> dict[str, np.ndarray]:
        """Integer value of each well-known attribute (int64; 0 where absent)."""
        return self._attr_columns().value

    @property
    def attr_kind(self) -> dict[str, np.ndarray]:
        """Oneof field number each well-known attribute was stored as (0 = absent)."""
        return self._attr_columns().kind

    @property
    def pg_name(self) -> PgNames:
        """``pg_name`` string by record index (only records that carry one as ``string_val``), as a
        read-only mapping (:class:`PgNames`)."""
        return self._attr_columns().pg_name

    @property
    def involved_dim(self) -> dict[int, list[bool]]:
        """``involved_dim`` by record index (only records that carry one as ``bool_list``)."""
        return self._attr_columns().involved_dim

    def stored_kinds(self, name: str) -> frozenset[int]:
        """Oneof field numbers well-known attribute ``name`` is stored as on some record: a rule
        asking "any non-canonical kind?" of a 1,024-file set reads a dozen small sets a file
        instead of comparing a dozen columns."""
        return self._attr_columns().stored.get(name, frozenset())

    def _attr_columns(self) -> _AttrColumns:
        if self._attrs is None and self._attr_batch is not None:
            self._attr_batch.decode()  # this graph's and its batch-mates' (a rank set wants them all)
        if self._attrs is None:  # loaded alone, or a copy of a batch's graph
            self._attrs = _decode_attrs(self)
        return self._attrs

    # -- per-node access -------------------------------------------------------------------
    def name(self, i: int) -> str:
        s = int(self.name_start[i])
        return bytes(self.buf[s : s + int(self.name_len[i])]).decode("utf-8")

    def node(self, i: int):
        """The full protobuf ``Node`` of record ``i`` (decoded on demand)."""
        return _parse_record(self.buf, self.path, int(self.rec_start[i]), int(self.rec_len[i]))

    def nodes(self):
        for i in range(len(self)):
            yield self.node(i)

    def has(self, name: str) -> np.ndarray:
        return self.attr_kind[name] != 0

    def int_attr(self, name: str, default: int = 0) -> np.ndarray:
        """Column of an integer attribute, ``default`` where absent or not an integer kind.

        uint64/fixed64 values of 2^63 and more saturate at 2^63-1 rather than wrap negative: a
        huge size must stay huge for every check (see :meth:`exact_ints` for exact values).
        """
        kind = self.attr_kind[name]
        ok = self.has_int(name)
        values = self.attr_value[name]
        values = np.where(_kind_table(_UNSIGNED64)[kind] & (values < 0), _INT64_MAX, values)
        return np.where(ok, values, default)

    def has_int(self, name: str) -> np.ndarray:
        """Mask of the records that store attribute ``name`` as one of the integer kinds."""
        return _kind_table(_INT_KIND_NUMBERS)[self.attr_kind[name]]

    def exact_ints(self, name: str) -> list[int]:
        """Python ints of integer attribute ``name`` (0 where absent or not an integer kind).

        ``uint64_val``/``fixed64_val`` values of 2^63 and more read unsigned, as ASTRA-sim's feeder
        reads them: the int64 column wraps them negative, which made a huge ``tensor_size`` a
        negative roofline time. Consumers that compute with sizes and counts use this.
        """
        kind = self.attr_kind[name]
        values = np.where(self.has_int(name), self.attr_value[name], 0)
        out = values.tolist()
        for i in np.flatnonzero(_kind_table(_UNSIGNED64)[kind] & (values < 0)).tolist():
            out[i] += 1 << 64
        return out

    @property
    def is_cpu_op(self) -> np.ndarray:
        return self.int_attr("is_cpu_op", 0) != 0

    # -- dependencies ----------------------------------------------------------------------
    def data_deps(self, i: int) -> np.ndarray:
        return self.data_ids[self.data_ptr[i] : self.data_ptr[i + 1]]

    def ctrl_deps(self, i: int) -> np.ndarray:
        return self.ctrl_ids[self.ctrl_ptr[i] : self.ctrl_ptr[i + 1]]

    def index_of(self, ids: np.ndarray | int) -> np.ndarray:
        """Record index of each id (-1 where the id is not in the file); first record wins."""
        q = np.asarray(ids, dtype=_U64)
        table = self._dense_index()
        if table is not None:  # ids ascending and dense: one gather instead of a binary search
            rel = q.reshape(-1) - self.ids[0]  # an array: ids below the first wrap far past the table
            return table[np.minimum(rel, _U64(len(table) - 1)).astype(np.int64)].reshape(q.shape)
        if self._order is None:
            self._order = np.argsort(self.ids, kind="stable")
        order = self._order
        sorted_ids = self.ids[order]
        pos = np.searchsorted(sorted_ids, q)
        pos_c = np.minimum(pos, max(len(order) - 1, 0))
        if len(order) == 0:
            return np.full(q.shape, -1, dtype=np.int64)
        found = sorted_ids[pos_c] == q
        return np.where(found, order[pos_c], -1).astype(np.int64)

    def _dense_index(self) -> np.ndarray | None:
        """Record index by ``id - ids[0]`` (-1 for absent ids, last entry always -1) when the ids
        ascend and span at most ``_DENSE_SPAN`` times the record count, as every converted and
        generated trace's do; else None (``index_of`` then binary-searches)."""
        if self._dense is None:
            ids, n = self.ids, len(self.ids)
            span = int(ids[-1]) - int(ids[0]) + 1 if n else 0
            self._dense = False
            if n and span <= _DENSE_SPAN * n + 1024 and bool((ids[1:] > ids[:-1]).all()):
                table = np.full(span + 1, -1, dtype=np.int64)
                table[(ids - ids[0]).astype(np.int64)] = np.arange(n, dtype=np.int64)
                self._dense = table
        return self._dense if isinstance(self._dense, np.ndarray) else None

    def dep_indices(self, which: str = "data") -> tuple[np.ndarray, np.ndarray]:
        """CSR ``(ptr, parent_index)`` of one dependency list; -1 marks a dangling id."""
        ptr, ids = (self.data_ptr, self.data_ids) if which == "data" else (self.ctrl_ptr, self.ctrl_ids)
        return ptr, self.index_of(ids)


# Oneof field numbers (attr_kind values, uint8), looked up through _kind_table rather than np.isin.
_UNSIGNED64 = (_attrs.KIND_NUMBER["uint64_val"], _attrs.KIND_NUMBER["fixed64_val"])
_INT_KIND_NUMBERS = tuple(sorted(_attrs.KIND_NUMBER[k] for k in _attrs.INT_KINDS))
_INT64_MAX = (1 << 63) - 1  # a constant: np.iinfo() builds an object per call (~20 us, 14 calls a rank)


def load_graph(path: str | os.PathLike) -> TraceGraph:
    """Bulk-load one ``.et`` (or ``.et.gz``) file into a :class:`TraceGraph`."""
    return load_graphs([path])[0]


def load_graphs(paths: Iterable[str | os.PathLike]) -> list[TraceGraph]:
    """:func:`load_graph` of each file, decoded in batches of files.

    A rank set is often a thousand files of ~100 records, and the record decoding costs ~150 numpy
    calls whatever the record count (~5 ms a 10 KB file, against ~0.2 ms for its bytes). The files
    of a batch are read into one array (each followed by its zero padding, so every file's bytes
    and padding read as when alone), framed together (:func:`scan_arrays`; a file it cannot prove
    is framed alone), their metadata read one by one, and each decoding pass runs once over the
    records of all of them; the columns are then split back by record counts. Every record
    the passes cannot prove valid is decoded again by protobuf within its own file, so errors
    name the file and offset they would alone, and the first bad file in order is the one reported.
    """
    graphs: list[TraceGraph] = []
    batch: list[tuple[str, np.ndarray, int]] = []
    block = _Block()
    loaded = 0
    kept = False

    def decode(batch: list[tuple[str, np.ndarray, int]]) -> list[TraceGraph]:
        nonlocal kept
        arr = block.used(batch)
        if not kept and len(arr) >= _KEEP_HEAP_BYTES:  # its temporaries' pages reused, not faulted in again
            keep_freed_heap(_BATCH_BYTES)
            kept = True
        return _graphs(batch, arr)

    try:
        for path in paths:
            try:
                arr, size = read_padded(str(path), _PAD, block.alloc)
            except Exception:
                if batch:  # an error in an earlier file comes first, as when loaded file by file
                    decode(batch)
                raise
            if batch and not block.holds(batch[0][1], arr):  # the file opened a new block
                graphs += decode(batch)
                batch = []
            batch.append((str(path), arr, size))
            loaded += size
        return graphs + decode(batch) if batch else graphs
    finally:  # also ends the keeping; a small load frees little, and a per-file loop would fault it back in
        if kept or loaded >= _BATCH_BYTES:
            release_free_heap()


class _Block:
    """Hands out the zeroed arrays files are read into as consecutive slices of one block of
    ``_BATCH_BYTES`` (a large file gets a block of its own): a batch's files then lie in one
    array as :func:`_graphs` decodes them, and the copy that joined them (~4 % of a rank set's
    load, and a second resident copy of the batch meanwhile) is gone. Pages of a block that no
    file reaches are never touched, so never resident."""

    def __init__(self) -> None:
        self.block = np.zeros(0, dtype=np.uint8)
        self.at = 0

    def alloc(self, n: int) -> np.ndarray:
        if self.at + n > len(self.block):
            # A file of more than an eighth of a block gets one of its own, its exact size: a 3.7 MB
            # trace alone peaked 1-2 MB higher in an 8 MiB block (whose untouched tail should cost
            # nothing; numpy's huge-page advice on arrays of 4 MiB and more is the likely cause).
            size = n if n > _BATCH_BYTES // 8 else _BATCH_BYTES
            self.block, self.at = np.zeros(size, dtype=np.uint8), 0
        self.at += n
        return self.block[self.at - n : self.at]

    @staticmethod
    def holds(first: np.ndarray, arr: np.ndarray) -> bool:
        """Whether ``arr`` lies in the block of a batch's ``first`` file."""
        return first.base is arr.base

    @staticmethod
    def used(batch: list[tuple[str, np.ndarray, int]]) -> np.ndarray:
        """The files of ``batch`` as one array: a block's files are consecutive from its start."""
        block = batch[0][1].base
        assert block is not None  # every array alloc hands out is a slice of a block
        return block[: sum(len(arr) for _, arr, _ in batch)]


def graph_from_bytes(buf: bytes, path: str = "<bytes>") -> TraceGraph:
    arr = np.zeros(len(buf) + _PAD, dtype=np.uint8)
    arr[: len(buf)] = np.frombuffer(buf, dtype=np.uint8)
    return _graphs([(path, arr, len(buf))], arr)[0]


def _graphs(files: list[tuple[str, np.ndarray, int]], arr: np.ndarray) -> list[TraceGraph]:
    """The graphs of ``(path, padded array, size)`` files, laid out one after the other in ``arr``,
    decoded as one batch (see :func:`load_graphs`)."""
    bases = np.cumsum([0] + [len(a) for _, a, _ in files[:-1]]).tolist()
    tables: list[_Table] = []
    failure: TraceFormatError | None = None
    framed = scan_arrays(arr, [(base, size, path) for (path, _, size), base in zip(files, bases)])
    for (path, own, size), base, frames in zip(files, bases, framed):
        view = arr[base : base + len(own)]
        try:
            tables.append(_table(view, size, path, frames))
        except TraceFormatError as exc:
            # the files before it are decoded first: one of them may hold the earlier error
            failure = exc
            break
    shared = _decode(arr, tables, bases[: len(tables)])
    graphs = [t.finish() for t in tables]
    _AttrBatch.attach(graphs, arr, bases, shared)
    if failure is not None:
        raise failure
    return graphs


def _table(arr: np.ndarray, size: int, path: str, frames: tuple[np.ndarray, np.ndarray] | None = None) -> _Table:
    """Frame one file (unless the batch framed it: ``frames``) and read its metadata: the decoding
    of its node records is left to :func:`_decode`."""
    buf = memoryview(arr)[:size]  # type: ignore[arg-type]
    starts, lengths = frames if frames is not None else scan_array(arr, size, path)
    md_start, md_len = int(starts[0]), int(lengths[0])
    metadata = read_metadata(buf[md_start : md_start + md_len], path, 0)  # type: ignore[arg-type]
    # the table keeps narrow copies: int64 offsets were 16 bytes a record
    return _Table(buf, arr, path, metadata, starts[1:], lengths[1:])


def _varints(arr: np.ndarray, pos: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Decode one varint at each position: (value as uint64, byte count; 0 if over 10 bytes).

    Varints of up to 8 bytes (every id, length, time and size below 2^56) come from one unaligned
    8-byte gather each: the first byte without the continuation bit is the lowest set bit of
    ``~w & 0x80...80``, the bytes after it are masked off and the 7-bit groups packed with shifts.
    Longer ones (negative int64 values) are decoded byte by byte. Steps of short varints take
    the way of :func:`_short_step` (tried when the last one is short: ascending ids and offsets
    make it the likeliest long one).
    """
    if len(pos) and (int(arr[pos[-1]]) < 0x80 or int(arr[pos[-1] + 1]) < 0x80):
        short = _short_step(arr, pos)
        if short is not None:
            return short
    w = _words(arr)[pos]
    term = ~w & _U64(0x8080808080808080)
    lowest = term & (_U64(0) - term)
    keep = (lowest << _U64(1)) - _U64(1)  # wraps to all ones for a terminator in the 8th byte
    nbytes = (np.bitwise_count(keep) >> 3).astype(np.int64)  # 0 where no byte terminates
    w &= keep
    val = w & _U64(0x7F)
    long = np.flatnonzero(term == 0)
    # Only as many 7-bit groups as the longest varint has: a walk step's fields (ids, lengths,
    # types, durations) are mostly 1-3 bytes, and each group costs three passes.
    longest = 8 if len(long) or not len(nbytes) else int(nbytes.max())
    for k in range(1, longest):
        val |= (w >> _U64(k)) & _U64(0x7F << (7 * k))
    if len(long):
        val[long], nbytes[long] = _long_varints(arr, pos[long])
    return val, nbytes


def _short_step(arr: np.ndarray, pos: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """:func:`_varints` of a walk step whose varints are all one or two bytes (types, lengths:
    half the steps of a generated trace, most of a converted one's), from one or two byte gathers
    instead of the strided 8-byte one (~3x the cost of a byte gather); None for any other step."""
    b = arr[pos]
    cont = b >= 0x80
    if not cont.any():
        return b.astype(_U64), np.ones(len(pos), dtype=np.int64)
    b1 = arr[pos + 1]
    if (b1[cont] >= 0x80).any():
        return None
    val = (b & 0x7F).astype(_U64)
    val |= ((b1 & 0x7F) * cont).astype(_U64) << _U64(7)
    return val, cont.astype(np.int64) + 1


def _long_varints(arr: np.ndarray, pos: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """:func:`_varints` byte by byte (for the varints over 8 bytes)."""
    b = arr[pos]
    val = (b & 0x7F).astype(_U64)
    nbytes = np.ones(len(pos), dtype=np.int64)
    more = np.nonzero(b >= 0x80)[0]
    for k in range(1, 10):
        if not len(more):
            break
        bk = arr[pos[more] + k]
        val[more] |= (bk & 0x7F).astype(_U64) << _U64(7 * k)
        nbytes[more] += 1
        more = more[bk >= 0x80]
    nbytes[more] = 0
    return val, nbytes


def _packed_varints(arr: np.ndarray, starts: np.ndarray, lens: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Decode packed varint regions: (values, count per region, ok-mask per region).

    Values are uint32 when every one is below 2^28 (no varint over 4 bytes), else uint64.

    A region is ok when it ends exactly on a varint boundary and holds no varint over 10 bytes.
    Regions are decoded in groups of about ``_PACKED_GROUP`` bytes: the temporaries (an index and
    a copy per byte) then stay in cache, and a trace whose deps are hundreds of MB does not need
    several times that in scratch memory.
    """
    cut = np.searchsorted(np.cumsum(lens), np.arange(_PACKED_GROUP, int(lens.sum()), _PACKED_GROUP))
    bounds = sorted({0, len(starts), *np.minimum(cut + 1, len(starts)).tolist()})
    # Values are written straight into one array sized by the regions' bytes (a bound on their
    # count): its pages become resident only as groups fill them and the unused tail is given back
    # by ``resize``, so the groups' pieces and the result never coexist (they did: +0.25x a
    # converted trace's file at the peak). Groups come as uint32 when they fit (ids below 2^28:
    # every practical trace) and stay so: ~50 dependencies a node are 0.25x the file, not 0.5x.
    out = np.empty(int(lens.sum()), dtype=np.uint32)
    wide: list[np.ndarray] | None = None  # the pieces, once a group needs uint64
    counts, oks, at = [], [], 0
    for a, b in zip(bounds, bounds[1:]):
        if b == a:
            continue
        values, count, ok = _packed_group(arr, starts[a:b], lens[a:b])
        counts.append(count)
        oks.append(ok)
        if not len(values):  # a group of empty lists says nothing about the width
            continue
        if wide is None and values.dtype == np.uint32:
            out[at : at + len(values)] = values
            at += len(values)
            continue
        if wide is None:
            wide = [out[:at]]
        wide.append(values)
    if not counts:
        return np.zeros(0, dtype=_U64), np.zeros(0, dtype=np.int64), np.ones(0, dtype=bool)
    result: np.ndarray
    if wide is not None:
        result = np.concatenate(wide, dtype=_U64)
    else:
        out.resize(at, refcheck=False)  # in place: ``out`` has no other reference
        result = out
    return result, np.concatenate(counts), np.concatenate(oks)


_PACKED_GROUP = 1 << 18


def _packed_group(arr: np.ndarray, starts: np.ndarray, lens: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """:func:`_packed_varints` of one group of regions: the regions :func:`_uniform_regions`
    decodes value by value, the rest (mixed widths, long varints, bad regions) byte by byte."""
    fast = _uniform_regions(arr, starts, lens)
    if fast is None:
        return _bytewise_group(arr, starts, lens)
    values, counts, done = fast
    rest = np.flatnonzero(~done)
    if not len(rest):
        return values, counts, np.ones(len(starts), dtype=bool)
    rest_values, counts[rest], ok = _bytewise_group(arr, starts[rest], lens[rest])
    oks = np.ones(len(starts), dtype=bool)
    oks[rest] = ok
    # both parts are in region order: a region's values go where its counts put them
    if not len(rest_values):  # bad regions only: nothing to merge, and no reason to widen
        return values, counts, oks
    out = np.empty(len(values) + len(rest_values), dtype=np.result_type(values, rest_values))
    slow_value = np.repeat(~done, counts)
    out[slow_value] = rest_values
    out[~slow_value] = values
    return out, counts, oks


# Mean bytes per non-empty list below which the byte-wise decoder is used unless every list is one
# varint (_single_varints): its cost is per byte, this one's partly per list (a generated trace's
# one-id lists decoded 8 % slower this way, a converted trace's ~80-byte ones 1.6x faster).
_UNIFORM_BYTES = 8


def _uniform_regions(
    arr: np.ndarray, starts: np.ndarray, lens: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """``(values, counts, done)``: the regions whose varints all have the width of their first
    one (1-4 bytes), decoded with one 4-byte gather per value; ``done`` marks them, and the
    values (uint32) are theirs alone, in region order. None when none qualifies.

    Dependency lists are ~50 ids of nearby nodes, so a list's ids almost always have one width
    (2-3 bytes): their positions follow from the region's start and width alone, where the
    byte-wise decoder gathers every byte into a copy (an int64 index and a byte each) to find
    the varint boundaries (~60 % of a converted trace's dependency time). Every value's
    continuation bits are checked, so a region is taken only if it really is that uniform.
    """
    words = np.ndarray((len(arr) - 3,), dtype="<u4", buffer=arr.data, strides=(1,))
    nz = np.flatnonzero(lens)
    s, ln = starts[nz], lens[nz]
    w = words[s]
    term = ~w & np.uint32(0x80808080)
    lowest = term & (np.uint32(0) - term)  # the first varint's last byte's bit: 0x80 << 8 * (width - 1)
    width = (np.bitwise_count(lowest - np.uint32(1)) + 1).astype(np.int64) >> 3
    if int(ln.sum()) < _UNIFORM_BYTES * len(nz):
        return _single_varints(nz, w, lowest, width, ln, lens)
    cand = np.flatnonzero((lowest != 0) & (ln % np.maximum(width, 1) == 0))
    if not len(cand):
        return None
    nz, s, ln, width, lowest = nz[cand], s[cand], ln[cand], width[cand], lowest[cand]
    count = ln // width
    first = np.cumsum(count) - count
    # positions by a running sum of steps: the width within a region, a jump between regions
    step = np.repeat(width, count)
    step[first[1:]] = s[1:] - (s[:-1] + ln[:-1] - width[:-1])
    step[0] = s[0]
    w = words[np.cumsum(step, out=step)]
    term = ~w & np.uint32(0x80808080)
    term &= np.uint32(0) - term
    bad = term != np.repeat(lowest, count)  # this value is not exactly its region's width
    w &= (term << np.uint32(1)) - np.uint32(1)
    v = w & np.uint32(0x7F)
    # Only as many 7-bit groups as the widest region has (ids below 2^21: three, not four): a
    # value of another width is dropped with its region, and a good one's later bytes are masked.
    for k, mask in ((1, 0x3F80), (2, 0x1FC000), (3, 0xFE00000))[: int(width.max()) - 1]:
        v |= (w >> np.uint32(k)) & np.uint32(mask)
    good = np.ones(len(nz), dtype=bool)
    if bad.any():
        good[np.searchsorted(first, np.flatnonzero(bad), side="right") - 1] = False
        v = v[np.repeat(good, count)]
    done = np.zeros(len(starts), dtype=bool)
    done[nz[good]] = True
    done[lens == 0] = True
    counts = np.zeros(len(starts), dtype=np.int64)
    counts[nz[good]] = count[good]
    return v, counts, done


def _single_varints(
    nz: np.ndarray, w: np.ndarray, lowest: np.ndarray, width: np.ndarray, ln: np.ndarray, lens: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """:func:`_uniform_regions` of short lists: those that are exactly one varint of 1-4 bytes
    (``nz``: the non-empty lists, ``w``: their first 4 bytes, ``lowest``/``width``: the first
    varint's terminator bit and width, ``ln``: their lengths) and the empty ones are done; None when
    no non-empty list is one varint.

    A generated trace's data dependencies are one id a node: the first gather already holds the
    whole value, where the byte-wise decoder gathers every byte into a copy to find varint ends.
    The few lists of two ids or more are left to it."""
    single = (lowest != 0) & (width == ln)
    if not single.any():
        return None
    if not single.all():
        nz, w, lowest = nz[single], w[single], lowest[single]
    w &= (lowest << np.uint32(1)) - np.uint32(1)  # wraps to all ones for a 4-byte varint
    v = w & np.uint32(0x7F)
    for k, mask in ((1, 0x3F80), (2, 0x1FC000), (3, 0xFE00000)):
        v |= (w >> np.uint32(k)) & np.uint32(mask)
    done = lens == 0
    done[nz] = True
    counts = np.zeros(len(lens), dtype=np.int64)
    counts[nz] = 1
    return v, counts, done


def _bytewise_group(arr: np.ndarray, starts: np.ndarray, lens: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """:func:`_packed_varints` of one group of regions, varint boundaries found byte by byte."""
    n = len(starts)
    counts = np.zeros(n, dtype=np.int64)
    ok = np.ones(n, dtype=bool)
    nz = np.flatnonzero(lens)
    if not len(nz):
        return np.zeros(0, dtype=_U64), counts, ok
    s, l = starts[nz], lens[nz]  # noqa: E741
    offs = np.cumsum(l) - l
    total = int(offs[-1] + l[-1])
    # intp offsets: np.take converts any other index type first (int32 measured 1.5x slower);
    # the groups keep this temporary small.
    idx = np.repeat(s - offs, l)
    idx += np.arange(total, dtype=np.intp)
    b = np.zeros(total + 10, dtype=np.uint8)  # 10 zero bytes: byte k of the last varint is in range
    np.take(arr, idx, out=b[:total], mode="clip")  # "clip" avoids the buffered copy "raise" makes
    term = b[:total] < 0x80
    ends = np.flatnonzero(term)
    ok[nz] = term[offs + l - 1]
    counts[nz] = np.searchsorted(ends, offs + l) - np.searchsorted(ends, offs)
    if not len(ends):
        return np.zeros(0, dtype=_U64), np.zeros(n, dtype=np.int64), ok & (lens == 0)
    vstarts = np.empty_like(ends)
    vstarts[0] = 0
    vstarts[1:] = ends[:-1] + 1
    short = _short_varints(b, vstarts)
    if short is not None:
        return short, counts, ok
    vlen = (ends - vstarts + 1).astype(np.uint8) if len(ends) else ends
    longest = int(vlen.max())
    if longest > 10:  # varints longer than 10 bytes: flag their regions
        region = np.searchsorted(offs, vstarts[vlen > 10], side="right") - 1
        ok[nz[region]] = False
    # Byte k of every varint at once, zeroed where the varint is shorter: no per-byte indexing.
    # Values below 2^28 (varints up to 4 bytes, i.e. all practical node ids) stay in uint32.
    wide = longest > 4
    acc = np.uint64 if wide else np.uint32
    values = (b[vstarts] & 0x7F).astype(acc)
    for k in range(1, min(longest, 10)):
        byte = b[vstarts + k] & 0x7F
        byte[vlen <= k] = 0
        values |= byte.astype(acc) << acc(7 * k)  # type: ignore[misc, operator]
    return values, counts, ok


def _short_varints(b: np.ndarray, vstarts: np.ndarray) -> np.ndarray | None:
    """Values (uint32) of varints at ``vstarts`` in ``b`` when every one is at most 4 bytes long
    (ids below 2^28: every practical trace), else None.

    One unaligned 4-byte gather per varint instead of one gather per byte: the first byte without
    the continuation bit is found with bit tricks (lowest set bit of ``~w & 0x80808080``), the
    bytes after it are masked off and the four 7-bit groups are packed with shifts.
    """
    words = np.ndarray((len(b) - 3,), dtype="<u4", buffer=b.data, strides=(1,))
    w = words[vstarts]
    term = ~w & np.uint32(0x80808080)
    if not term.all():
        return None
    lowest = term & (np.uint32(0) - term)
    w &= (lowest << np.uint32(1)) - np.uint32(1)  # wraps to all ones for a 4-byte varint
    v = w & np.uint32(0x7F)
    for k, mask in ((1, 0x3F80), (2, 0x1FC000), (3, 0xFE00000)):
        v |= (w >> np.uint32(k)) & np.uint32(mask)
    return v


def _decode(arr: np.ndarray, tables: list[_Table], bases: list[int]) -> _SharedEntries | None:
    """Bulk-decode the node records of ``tables`` (files laid out in ``arr`` at ``bases``) into
    their columns, up to ``_CHUNK_RECORDS`` records (and about ``_CHUNK_BYTES``) at a time whichever
    files they belong to; where only the distinct records were decoded, their well-known attribute
    entries and which one each entry of the batch is a copy of."""
    first = np.cumsum([0] + [t.n for t in tables]).tolist()  # batch index of each file's first record
    total = first[-1]
    if total == 0 or (total <= _SMALL and schema.built()):
        # A handful of records costs less through the protobuf runtime than the fixed overhead
        # of ~100 numpy calls (a lone one-node file of a microbenchmark set, say), once the
        # runtime is loaded: importing it costs more (issue #15).
        cols = _Columns(total, len(arr))
        cols.slow[:] = True
        cols.split(tables, first, bases)
        return None
    if len(tables) == 1:  # its table's narrow offsets (a file's base is 0), widened a chunk at a time
        starts, lens = tables[0].rec_start, tables[0].rec_len
    else:
        starts = np.concatenate([t.rec_start.astype(np.int64) + base for t, base in zip(tables, bases)])
        lens = np.concatenate([t.rec_len.astype(np.int64) for t in tables])
    # equal shares (so no tiny last chunk) of at most _CHUNK_RECORDS records and about _CHUNK_BYTES
    k = max(-(-total // _CHUNK_RECORDS), -(-int(lens.sum()) // _CHUNK_BYTES))
    bounds = [total * j // k for j in range(k + 1)]
    memo: dict[bytes, tuple[bool, int, int]] = {}  # attribute checks by record bytes (see _memo_check)
    # Records repeat across the files of a rank set (a file's records carry their own ids): each
    # distinct one is decoded once (see .dedupe), unless the batch is one file.
    groups = group_records(arr, starts, lens) if len(tables) > 1 else None
    distinct = _decode_distinct(arr, starts, lens, groups, bounds, memo) if groups is not None else None
    if groups is not None and distinct is not None:  # each record's columns are its representative's
        cols, shared = distinct.expand(groups.rep, starts - starts[groups.distinct][groups.rep])
        cols.split(tables, first, bases)
        return shared
    cols = _Columns(total, len(arr))
    for lo, hi in zip(bounds, bounds[1:]):
        chunk = _Decoder(
            arr, starts[lo:hi].astype(np.int64, copy=False), lens[lo:hi].astype(np.int64, copy=False), memo
        )
        chunk.decode()
        cols.take(lo, chunk)
        del chunk  # its temporaries freed before the next chunk allocates its own
    cols.split(tables, first, bases)
    return None


def _decode_distinct(
    arr: np.ndarray,
    starts: np.ndarray,
    lens: np.ndarray,
    groups: Groups,
    bounds: list[int],
    memo: dict[bytes, tuple[bool, int, int]],
) -> _Columns | None:
    """The columns of the distinct records of a batch (see :mod:`.dedupe`), decoded in chunks as
    :func:`_decode` decodes all of them; None where the decoding of all of them in ``bounds``
    chunks would differ (so the caller decodes them all):

    * a chunk whose dependency ids need uint64 makes its files' ids uint64, and which files that
      is depends on the chunks;
    * a chunk holding 1 to ``_SMALL`` attributes (in records not slow) leaves them to protobuf:
      the records' held attributes are summed by each chunk of the batch as it lies.
    """
    d = groups.distinct
    ds, dl = starts[d], lens[d]
    cols = _Columns(len(d), len(arr))
    held = np.zeros(len(d), dtype=np.int64)
    k = max(-(-len(d) // _CHUNK_RECORDS), -(-int(dl.sum()) // _CHUNK_BYTES))
    dbounds = [len(d) * j // k for j in range(k + 1)]
    for lo, hi in zip(dbounds, dbounds[1:]):
        chunk = _Decoder(arr, ds[lo:hi], dl[lo:hi], memo, held[lo:hi])
        chunk.decode()
        cols.take(lo, chunk)
        del chunk  # as in _decode
    if cols.wide[4] or cols.wide[5]:
        return None
    if schema.built():
        per_chunk = np.add.reduceat(held[groups.rep], bounds[:-1])
        if ((per_chunk > 0) & (per_chunk <= _SMALL)).any():
            return None
    return cols


class _Columns:
    """The columns of a whole batch, decoded chunk by chunk and kept in the narrowest dtypes that
    hold them; :meth:`split` then hands each file its own.

    A chunk of ``_CHUNK_RECORDS`` records is walked and checked at a time (a :class:`_Decoder`
    each), so the ~25 int64 temporaries a record costs while decoding are bounded by the chunk, not
    by the file. The kept columns are unsigned and as narrow as the values allow (checked, and
    widened when a later chunk needs more): ~90-byte generated records cost ~190 bytes each in
    int64 columns, more than the file itself. The columns are the batch's, not each file's: a rank
    set's ~100-record files paid ~60 numpy calls a file to be filled part by part, and a file
    alone (a large trace) gets the batch's arrays themselves, uncopied.
    """

    def __init__(self, n: int, size: int):
        pos = np.uint32 if size < 1 << 32 else np.int64  # every offset and length is below the buffer's size
        self.ids = np.zeros(n, dtype=np.uint32)
        self.types = np.zeros(n, dtype=np.int8)
        self.dur = np.zeros(n, dtype=np.uint8)
        self.start = np.zeros(n, dtype=np.uint8)
        self.name_start = np.zeros(n, dtype=pos)
        self.name_len = np.zeros(n, dtype=np.uint8)
        self.counts = {f: np.zeros(n, dtype=pos) for f in (4, 5)}
        self.values = {f: _Column(n, np.uint32) for f in (4, 5)}  # dependency ids of the fast records
        self.wide: dict[int, list[tuple[int, int]]] = {4: [], 5: []}  # record ranges of chunks with uint64 ids
        self.slow = np.zeros(n, dtype=bool)
        idx = np.int32 if n < 1 << 31 else np.int64
        self.known = (_Column(3 * n, idx), _Column(3 * n, pos), _Column(3 * n, np.uint8))

    def take(self, lo: int, chunk: _Decoder) -> None:
        """Copy one decoded chunk (records ``lo`` on) into the columns (a slow record's fields are
        filled later, by its file)."""
        hi = lo + chunk.n
        for name in ("ids", "dur", "start", "name_len"):
            _put(self, name, lo, getattr(chunk, name))
        self.name_start[lo:hi] = chunk.name_start
        self.types[lo:hi] = chunk.types
        self.slow[lo:hi] = chunk.slow
        for f, (counts, values) in chunk.deps.items():
            self.counts[f][lo:hi] = counts
            self.values[f].add(values, hi, len(self.ids))
            if values.dtype != np.uint32:
                self.wide[f].append((lo, hi))
        node, tag, code = chunk.known
        for column, values in zip(self.known, (node + lo, tag, code)):
            column.add(values.astype(column.out.dtype), hi, len(self.ids))  # positions, indices and name codes fit

    def expand(self, rep: np.ndarray, shift: np.ndarray) -> tuple[_Columns, _SharedEntries]:
        """The columns of records that are each a copy of one of these (the distinct records of a
        batch): record ``i`` is record ``rep[i]`` of these, ``shift[i]`` bytes further in the
        batch's array (positions move with it, values are the same); and these records' well-known
        attribute entries with, for each entry of the copies, the one it copies."""
        n = len(rep)
        out = _Columns(0, 0)
        out.ids, out.types, out.dur, out.start = self.ids[rep], self.types[rep], self.dur[rep], self.start[rep]
        out.name_len, out.slow = self.name_len[rep], self.slow[rep]
        out.name_start = (self.name_start[rep] + shift).astype(self.name_start.dtype)
        for f in (4, 5):
            counts = self.counts[f]
            out.counts[f] = counts[rep]
            out.values[f] = _Column.of(self.values[f].result()[_range_indices(_ptr(counts)[rep], out.counts[f])])
        node, tag, code = (column.result() for column in self.known)
        per = np.bincount(node, minlength=len(self.ids))
        c = per[rep]
        idx = _range_indices((np.cumsum(per) - per)[rep], c)
        index = np.int32 if n < 1 << 31 else np.int64
        out.known = (
            _Column.of(np.repeat(np.arange(n, dtype=index), c)),
            _Column.of((tag[idx] + np.repeat(shift, c)).astype(tag.dtype)),
            _Column.of(code[idx]),
        )
        return out, _SharedEntries(tag, _narrow(idx))  # held until the attributes are decoded: 2 bytes an entry, not 8

    def split(self, tables: list[_Table], first: list[int], bases: list[int]) -> None:
        """Give each file its records' columns, in the dtypes it would have had decoded alone: its
        own narrowest (at least the initial ones), positions relative to its own buffer (the
        known attributes' tag offsets relative to their record, as the batch keeps them), and
        dependency ids uint64 only where a chunk holding its records needed them.

        A file alone gets the batch's arrays themselves; in a batch of several, every column a
        file gets narrowed or shifted is its own copy (one file's view kept the batch's whole
        column alive beside the others' copies: +21 MB peak on a 1,024-file 84 MB set), and the
        rest are views of disjoint parts."""
        alone = len(tables) == 1
        deps = {f: (self.counts[f], self.values[f].result()) for f in (4, 5)}
        ptr = {f: _ptr(counts) for f, (counts, _) in deps.items()}
        at = {f: dict(zip(first, p[first].tolist())) for f, p in ptr.items()}  # not all n + 1: Python ints
        node, tag, code = (column.result() for column in self.known)
        cut = np.searchsorted(node, first).tolist()
        sized = [i for i, t in enumerate(tables) if t.n]
        starts = [first[i] for i in sized]
        # Per file, from one reduceat a column: the largest value (its dtype) and whether any
        # record is slow (a file without one takes its list offsets from the batch's).
        tops = {
            name: dict(zip(sized, np.maximum.reduceat(getattr(self, name), starts).tolist()))
            for name in ("ids", "dur", "start", "name_len", "slow")
            if sized
        }
        for i, (t, base) in enumerate(zip(tables, bases)):
            a, b = first[i], first[i + 1]
            for name, floor in (("ids", 1 << 32), ("dur", 1 << 8), ("start", 1 << 8), ("name_len", 1 << 8)):
                fit = _unsigned_for(max(tops[name][i] if t.n else 0, floor - 1))
                setattr(t, name, getattr(self, name)[a:b].astype(fit, copy=not alone))
            t.types, t.slow = self.types[a:b], self.slow[a:b]
            t.name_start = _shifted(self.name_start[a:b], base, t.pos, alone)
            t.deps, t.ptr = {}, None if t.n and tops["slow"][i] else {}
            for f, (counts, values) in deps.items():
                lo, hi = at[f][a], at[f][b]
                wide = any(c_lo < b and a < c_hi for c_lo, c_hi in self.wide[f])
                t.deps[f] = (
                    counts[a:b].astype(t.pos, copy=False),
                    values[lo:hi].astype(_U64 if wide else np.uint32, copy=False),
                )
                if t.ptr is not None:  # _ptr of the file's counts: the same offsets, less the file's first
                    t.ptr[f] = _shifted(ptr[f][a : b + 1], lo, np.uint32 if hi - lo < 1 << 32 else np.int64, alone)
            ka, kb = cut[i], cut[i + 1]
            local = _shifted(node[ka:kb], a, _record_index_dtype(t.n), alone)
            t.known = _KnownAttrs(local, _narrow(tag[ka:kb] - (t.rec_start[local] + base)), code[ka:kb])


def _record_index_dtype(n: int) -> type[np.integer]:
    """The dtype of a file's record indices: uint16 for files of up to 2^16 records (a rank set's
    ~800-record files: 2 bytes an attribute less, 6 MB of a 1,024-rank step's 3 M attributes)."""
    return np.uint16 if n <= 1 << 16 else np.int32 if n < 1 << 31 else np.int64


def _put(owner: _Columns | _Table, name: str, lo: int, values: np.ndarray) -> None:
    """Write ``values`` into column ``name`` of ``owner`` at ``lo``, widening the column first if
    one of them does not fit its dtype."""
    col = getattr(owner, name)
    if len(values):
        top = int(values.max())
        if top > _UNSIGNED_MAX[col.dtype]:
            col = col.astype(_unsigned_for(top))
            setattr(owner, name, col)
    col[lo : lo + len(values)] = values


def _shifted(values: np.ndarray, by: int, dtype, alone: bool) -> np.ndarray:
    """``values - by`` in ``dtype``, a copy unless the file is ``alone`` in its batch and nothing changes."""
    return values.astype(dtype, copy=not alone) if by == 0 else (values - by).astype(dtype)


class _Table:
    """One file of a batch: its framing and metadata, then (from :meth:`_Columns.split`) its
    columns; :meth:`finish` decodes its unusual records with protobuf and makes the graph."""

    ids: np.ndarray
    types: np.ndarray
    dur: np.ndarray
    start: np.ndarray
    name_start: np.ndarray
    name_len: np.ndarray
    slow: np.ndarray
    deps: dict[int, tuple[np.ndarray, np.ndarray]]
    ptr: dict[int, np.ndarray] | None  # each dependency list's offsets; None while slow records are to decode
    known: _KnownAttrs

    def __init__(self, buf, arr, path, metadata, rec_start, rec_len):
        self.buf, self.arr, self.path, self.metadata = buf, arr, path, metadata
        self.n = len(rec_start)
        self.pos = np.uint32 if len(arr) < 1 << 32 else np.int64  # every offset and length is below len(arr)
        self.rec_start, self.rec_len = rec_start.astype(self.pos), _narrow(rec_len)

    def finish(self) -> TraceGraph:
        """The graph, once :func:`_decode` has filled the bulk-decoded records' columns."""
        if self.ptr is None:
            deps = self._finish_slow(np.flatnonzero(self.slow), self.deps)
        else:
            deps = {f: (self.ptr[f], values) for f, (_, values) in self.deps.items()}
        return TraceGraph(
            path=self.path,
            metadata=self.metadata,
            buf=self.buf,
            rec_start=self.rec_start,
            rec_len=self.rec_len,
            ids=self.ids,
            types=self.types,
            duration_micros=self.dur,
            start_time_micros=self.start,
            name_start=self.name_start,
            name_len=self.name_len,
            ctrl_ptr=deps[4][0],
            ctrl_ids=deps[4][1],
            data_ptr=deps[5][0],
            data_ids=deps[5][1],
            attr_parts=self.known,
            slow=self.slow,
        )

    def _finish_slow(self, slow: np.ndarray, deps):
        """Decode the unusual records with the protobuf runtime and splice them in."""
        lists: dict[int, dict[int, list[int]]] = {4: {}, 5: {}}
        for i in map(int, slow):
            node = self.node_message(i)
            for name, value in (("ids", node.id), ("dur", node.duration_micros), ("start", node.start_time_micros)):
                _put(self, name, i, np.array([value], dtype=_U64))
            self.types[i] = min(max(node.type, -1), 127)
            self._name_span(i, node)
            lists[4][i] = list(node.ctrl_deps)
            lists[5][i] = list(node.data_deps)
        out = {}
        for fnum in (4, 5):
            fast_counts, fast_vals = deps[fnum]
            counts = fast_counts.copy()
            for i, lst in lists[fnum].items():
                counts[i] = len(lst)
            ptr = _ptr(counts)
            # the width rule of the fast path (ids below 2^28 stay uint32) holds for the spliced lists too
            narrow = fast_vals.dtype == np.uint32 and all(max(v, default=0) < 1 << 28 for v in lists[fnum].values())
            ids = np.zeros(int(ptr[-1]), dtype=np.uint32 if narrow else _U64)
            fast = np.flatnonzero(fast_counts)
            if len(fast):
                ids[_range_indices(ptr[fast], fast_counts[fast])] = fast_vals
            for i, lst in lists[fnum].items():
                ids[ptr[i] : ptr[i + 1]] = lst
            out[fnum] = (ptr, ids)
        return out

    def node_message(self, i: int):
        return _parse_record(self.buf, self.path, int(self.rec_start[i]), int(self.rec_len[i]))

    def _name_span(self, i: int, node) -> None:
        """Locate the name bytes of a slow node inside the buffer (names are kept as spans)."""
        raw = node.name.encode("utf-8")
        s = int(self.rec_start[i])
        pos = bytes(self.buf[s : s + int(self.rec_len[i])]).find(raw) if raw else 0
        self.name_start[i] = s + max(pos, 0)
        _put(self, "name_len", i, np.array([len(raw)], dtype=np.int64))


class _Decoder:
    """One bulk decode of a chunk of node records (see module docstring); indices are chunk-local."""

    def __init__(
        self,
        arr: np.ndarray,
        rec_start: np.ndarray,
        rec_len: np.ndarray,
        memo: dict[bytes, tuple[bool, int, int]],
        held: np.ndarray | None = None,
    ):
        """``held`` (a chunk of distinct records, see :func:`_decode_distinct`): the attributes each
        record holds into the attribute check are added into it, and the check's few-attributes
        rule is left to the caller, which applies it to the chunks of the records as they lie."""
        self.arr, self.memo, self.held = arr, memo, held
        self.rec_start, self.rec_len = rec_start, rec_len
        n = len(rec_start)
        self.n = n
        self.ids = np.zeros(n, dtype=_U64)
        self.types = np.zeros(n, dtype=np.int64)
        self.dur = np.zeros(n, dtype=_U64)
        self.start = np.zeros(n, dtype=_U64)
        self.name_start = np.zeros(n, dtype=np.int64)
        self.name_len = np.zeros(n, dtype=np.int64)
        self.dep_span = {f: (np.zeros(n, dtype=np.int64), np.zeros(n, dtype=np.int64)) for f in (4, 5)}
        self.slow = np.zeros(n, dtype=bool)
        self.lead_attr = np.zeros(n, dtype=bool)  # records with an attribute before another field
        self.tail = (_EMPTY, _EMPTY, _EMPTY)  # (record, start, length) of attribute tails checked whole
        self.attr_node: list[np.ndarray] = []
        self.attr_s: list[np.ndarray] = []
        self.attr_l: list[np.ndarray] = []
        self.io_node: list[np.ndarray] = []
        self.io_s: list[np.ndarray] = []
        self.io_l: list[np.ndarray] = []
        self.known: tuple[np.ndarray, np.ndarray, np.ndarray] = (_EMPTY, _EMPTY, _EMPTY)
        self.deps: dict[int, tuple[np.ndarray, np.ndarray]] = {}

    def decode(self) -> None:
        self._walk_nodes()
        self._check_strings(np.arange(self.n), self.name_start, self.name_len)
        self._check_io()
        self.known = self._check_attrs()
        self.deps = self._deps()
        self._settle()

    def _settle(self) -> None:
        """Put the columns in the form the files keep, once a chunk rather than once a file: a slow
        record's fields (filled by protobuf later) must not widen a column, its name span stays
        inside its record (a file's positions are the chunk's less the file's base), and types are
        clipped to int8."""
        slow = np.flatnonzero(self.slow)
        for column in (self.ids, self.dur, self.start, self.name_len):
            column[slow] = 0
        self.name_start[slow] = self.rec_start[slow]
        self.types = np.clip(self.types, -1, 127)

    # -- node fields -----------------------------------------------------------------------
    def _walk_nodes(self) -> None:
        """Walk the top-level fields of every record at once, one field per vectorised step.

        Writers emit a node's fields in one order, so a step's records usually all hold the same
        field, one no record held before: such a step needs no per-record table lookups and no
        duplicate-field mask (~a third of a step's passes). The mask (``seen``) is built from the
        steps so far at the first step that is not such, and kept from there on."""
        arr = self.arr
        p = self.rec_start.copy()
        end = self.rec_start + self.rec_len
        seen: np.ndarray | None = None
        fresh: list[tuple[np.ndarray, int]] = []  # (records, field bit) of the steps before ``seen``
        held = 0  # the field bits of those steps
        active = np.flatnonzero(p < end)
        attr_phase: list[np.ndarray] = [np.zeros(0, dtype=np.int64)]
        steps = 0
        while len(active):
            if steps >= _VECTOR_STEPS:
                self.slow[active] = True
                break
            steps += 1
            pa = p[active]
            tag = arr[pa]  # the first tag byte: field number and wire type through _TAG_* tables
            val, nb = _varints(arr, pa + 1)
            s = pa + 1 + nb
            ea = end[active]
            one = int(tag[0])
            if seen is None and _TAG_OK[one] and not held & int(_TAG_BIT[one]) and (tag == one).all():
                # A length of 2^40 or more (no buffer is that long) is clamped to 2^40, which the end
                # test refuses: one pass instead of a separate test of the length.
                newp = s + np.minimum(val, _U64(1 << 40)).view(np.int64) if _TAG_LEN[one] else s
                valid = (nb > 0) & (newp <= ea)
                a, v = active, val
                if not valid.all():
                    self.slow[active[~valid]] = True
                    a, v, s, newp, ea = active[valid], val[valid], s[valid], newp[valid], ea[valid]
                held |= int(_TAG_BIT[one])
                fresh.append((a, int(_TAG_BIT[one])))
                self._store_field(one >> 3, a, v, s)
            else:
                if seen is None:
                    seen = np.zeros(self.n, dtype=np.int64)
                    for rows, bit in fresh:
                        seen[rows] |= bit
                newp = s + np.where(_TAG_LEN[tag], np.minimum(val, _U64(1 << 40)).view(np.int64), 0)
                bits, known = _TAG_BIT[tag], seen[active]
                valid = _TAG_OK[tag] & (nb > 0) & (newp <= ea) & ((known & bits) == 0)
                if valid.all():  # the common case: no compressing copies
                    a, f, v = active, tag >> 3, val
                    seen[a] = known | bits
                else:
                    self.slow[active[~valid]] = True
                    a, f, v, s, newp, ea = active[valid], tag[valid] >> 3, val[valid], s[valid], newp[valid], ea[valid]
                    seen[a] = known[valid] | bits[valid]
                self._store_fields(a, f, v, s)
            p[a] = newp
            more = newp < ea
            a, newp = a[more], newp[more]
            # Canonical writers put attributes last: a record whose next field is an attribute
            # finishes in the lean attribute loop below.
            to_attrs = arr[newp] == 0x52
            attr_phase.append(a[to_attrs])
            active = a[~to_attrs]
        tails = np.sort(np.concatenate(attr_phase))  # by record: _Tails keeps its records in file order
        span = end[tails] - p[tails]
        whole = (span <= _TAIL_MAX) & ~self.lead_attr[tails]
        self.tail = (tails[whole], p[tails[whole]], span[whole])
        self._walk_attr_fields(p, end, tails[~whole])

    def _store_fields(self, a: np.ndarray, f: np.ndarray, v: np.ndarray, s: np.ndarray) -> None:
        """Store one walk step's fields (record ``a``, field number ``f``, varint ``v``, payload
        start ``s``), visiting only the field numbers present and without a mask where every
        record of the step has the same field."""
        count = np.bincount(f, minlength=32)
        for num in np.flatnonzero(count).tolist():
            sel = slice(None) if count[num] == len(f) else f == num
            self._store_field(num, a[sel], v[sel], s[sel])

    def _store_field(self, num: int, rows: np.ndarray, value: np.ndarray, start: np.ndarray) -> None:
        """Store field ``num`` of records ``rows`` (varint ``value``, payload ``start``)."""
        if num == 1:
            self.ids[rows] = value
        elif num == 6:
            self.start[rows] = value
        elif num == 7:
            self.dur[rows] = value
        elif num == 3:
            self.types[rows] = value.astype(np.int64)
        elif num == 2:
            self.name_start[rows] = start
            self.name_len[rows] = value.astype(np.int64)
        elif num in (4, 5):
            self.dep_span[num][0][rows] = start
            self.dep_span[num][1][rows] = value.astype(np.int64)
        elif num == 10:
            self.lead_attr[rows] = True
            self._add_attrs(rows, start, value.astype(np.int64))
        else:  # 8, 9: inputs, outputs (the walk accepts no other field number)
            self.io_node.append(rows)
            self.io_s.append(start)
            self.io_l.append(value.astype(np.int64))

    def _add_attrs(
        self, nodes: np.ndarray, starts: np.ndarray, lens: np.ndarray, sink: tuple[list, list, list] | None = None
    ) -> None:
        # Collected for every attribute of every record (a dozen a node in converted traces): half
        # the memory as int32 wherever the buffer allows it.
        itype = np.int32 if len(self.arr) < 2**31 else np.int64
        attr_node, attr_s, attr_l = sink or (self.attr_node, self.attr_s, self.attr_l)
        attr_node.append(nodes.astype(itype))
        attr_s.append(starts.astype(itype))
        attr_l.append(lens.astype(itype))

    def _walk_attr_fields(
        self,
        p: np.ndarray,
        end: np.ndarray,
        active: np.ndarray,
        sink: tuple[list, list, list] | None = None,
        slow: np.ndarray | None = None,
    ) -> None:
        """Step over trailing ``attr`` fields (tag 0x52, length < 16 KiB) of many records at once,
        collecting their spans (into ``sink``: the attribute lists by default) and marking the
        records whose tail is not such fields up to the record's end in ``slow`` (default:
        :attr:`slow`)."""
        arr = self.arr
        slow = self.slow if slow is None else slow
        while len(active):
            pa, ea = p[active], end[active]
            l0 = arr[pa + 1].astype(np.int64)
            l1 = arr[pa + 2].astype(np.int64)
            one = l0 < 0x80
            length = np.where(one, l0, (l0 & 0x7F) | (l1 << 7))
            start = pa + np.where(one, 2, 3)
            newp = start + length
            ok = (arr[pa] == 0x52) & (one | (l1 < 0x80)) & (newp <= ea)
            a = active
            if not ok.all():  # the common case needs no compressing copies
                slow[active[~ok]] = True
                a, start, length, newp, ea = a[ok], start[ok], length[ok], newp[ok], ea[ok]
            self._add_attrs(a, start, length, sink)
            p[a] = newp
            active = a[newp < ea]

    # -- strict checks ---------------------------------------------------------------------
    # The protobuf runtime refuses a record for reasons the field walk does not see: bad UTF-8 in a
    # proto3 string, a malformed nested message. Every file must be accepted or refused exactly as
    # the protobuf runtime does (and so as ``read_trace`` and ``validate`` do), so each check below
    # only *proves* records valid; a record it cannot prove so is decoded by protobuf at load time,
    # which either reads it or raises the framing reader's ``TraceFormatError``.
    def _check_strings(self, nodes: np.ndarray, starts: np.ndarray, lens: np.ndarray) -> None:
        """ASCII strings are valid UTF-8; any other byte sends the record to protobuf's check."""
        self.slow[nodes[~_ascii(self.arr, starts, lens)]] = True

    def _check_io(self) -> None:
        """``inputs``/``outputs`` (IOInfo): up to three ASCII string fields 1-3, in any order."""
        if not self.io_node:
            return
        arr, node = self.arr, np.concatenate(self.io_node)
        p = np.concatenate(self.io_s)
        end = p + np.concatenate(self.io_l)
        self.io_node, self.io_s, self.io_l = [], [], []  # concatenated: the pieces are a second copy
        # An IOInfo whose bytes are all ASCII holds only ASCII strings (its tags are too): one span
        # checked instead of three strings. The spans of the long strings cost ~30 ns each in the
        # check's reduceat, whatever their length; ~85 % of a converted trace's IOInfos (those
        # without a string of 128 bytes or more, whose length has a high byte) are clean.
        clean = _ascii(arr, p, end - p)
        active = np.flatnonzero(p < end)
        spans: list[tuple[np.ndarray, ...]] = []
        for _ in range(3):
            if not len(active):
                break
            pa = p[active]
            tag = arr[pa]
            ln, nb = _varints(arr, pa + 1)
            ln = np.minimum(ln, _U64(1 << 40)).astype(np.int64)
            newp = pa + 1 + nb + ln
            ok = (tag >= 0x0A) & (tag <= 0x1A) & (tag % 8 == 2) & (nb > 0) & (newp <= end[active])
            self.slow[node[active[~ok]]] = True
            a = active[ok]
            dirty = ~clean[a]
            spans.append((node[a][dirty], (pa + 1 + nb)[ok][dirty], ln[ok][dirty]))
            p[a] = newp[ok]
            active = a[p[a] < end[a]]
        self.slow[node[active]] = True
        # One check for the three fields' strings: a check of long strings is a pass over the
        # bytes from the first to the last (~the chunk), once per call. A chunk's string columns
        # (three int64 a string, ~1 MB) are small beside that pass.
        if spans:
            self._check_strings(*(np.concatenate(column) for column in zip(*spans)))

    def _check_attrs(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Decode every attribute of the walked records in the canonical layout (name, then one
        value) and check its strings and list payloads; ``(record index, value tag position, name
        code)`` in file order of the well-known attributes only. The rest are checked and dropped
        (a converted PyTorch trace has a dozen attributes a node and only ids/sizes/groups are ever
        read as columns), and the kept ones are re-read from the buffer on first use: their
        decoded parts (~27 bytes each, three a node) cost more than a generated record's bytes."""
        tails = self._tails()
        if not self.attr_node and tails is None:
            return _EMPTY, _EMPTY, _EMPTY
        if self.attr_node:
            node, s = np.concatenate(self.attr_node), np.concatenate(self.attr_s).astype(np.int64)
            end = s + np.concatenate(self.attr_l)
        else:
            node, s, end = _EMPTY, _EMPTY, _EMPTY
        self.attr_node, self.attr_s, self.attr_l = [], [], []
        keep = ~self.slow[node]
        node, s, end = node[keep], s[keep], end[keep]
        held = len(node) + (tails.count_unless(self.slow, self.held) if tails is not None else 0)
        if self.held is not None:
            self.held += np.bincount(node, minlength=self.n)
        elif held <= _SMALL and schema.built():  # see _decode(): a few decode faster one record at a time
            self.slow[node] = True
            if tails is not None:
                tails.mark_all(self.slow)
            return _EMPTY, _EMPTY, _EMPTY
        # Spans were collected field step by field step; ascending offset restores file order, so a
        # repeated name's first entry is found first (the one _decode_group keeps).
        order = np.argsort(s, kind="stable")
        node, s, end = node[order], s[order], end[order]
        ok, tag, code = _check_distinct(self.arr, s, end - s, self._check_attr_group, self.memo)
        known = np.flatnonzero(code >= 0)
        out = node[known].astype(np.int64), tag[known], code[known]
        if tails is not None:  # entries of the records not slow before this check, as above
            whole = tails.entries(self.slow)
            if len(known):  # records of both kinds: back in file order
                by_pos = np.argsort(np.concatenate([out[1], whole[1]]), kind="stable")
                out = tuple(np.concatenate([a, b])[by_pos] for a, b in zip(out, whole))  # type: ignore[assignment]
            else:
                out = whole
            tails.mark_bad(self.slow)
        self.slow[node[~ok]] = True
        return out

    def _tails(self) -> _Tails | None:
        """Check the attribute tails of the walk once per distinct byte string (see :class:`_Tails`);
        tails that share a hash slot with a different one, and every tail where distinct ones are
        many (a converted trace's ids and times differ on every record), go the attribute way."""
        rec, ts, tl = self.tail
        self.tail = (_EMPTY, _EMPTY, _EMPTY)
        if not len(rec):
            return None
        first, inv, same = _group_strings(self.arr, ts, tl, _TAIL_SLOT_BITS)
        p, end = np.zeros(self.n, dtype=np.int64), self.rec_start + self.rec_len
        if len(first) * _TAIL_SHARE > len(rec):
            p[rec] = ts
            self._walk_attr_fields(p, end, rec)
            return None
        other = rec[~same]
        p[other] = ts[~same]
        self._walk_attr_fields(p, end, other)
        rep = rec[first]
        p[rep] = ts[first]
        sink: tuple[list[np.ndarray], list[np.ndarray], list[np.ndarray]] = ([], [], [])
        failed = np.zeros(self.n, dtype=bool)
        self._walk_attr_fields(p, end, rep, sink, failed)
        node, s, length = (np.concatenate(part).astype(np.int64) for part in sink)
        order = np.argsort(s, kind="stable")
        node, s, length = node[order], s[order], length[order]
        # the distinct tails' attributes (~400 a chunk) are mostly the previous chunks' again
        ok, tag, code = _memo_check(self.arr, s, length, self._check_attr_group, self.memo, 4 * _MEMO_REPS)
        group = np.zeros(self.n, dtype=np.int64)
        group[rep] = np.arange(len(rep))
        g = group[node]
        known = np.flatnonzero(code >= 0)
        by_group = known[np.argsort(g[known], kind="stable")]  # each group's entries in file order
        return _Tails(
            rec[same],
            ts[same],
            inv[same],
            failed[rep],
            np.bincount(g[~ok], minlength=len(rep)) > 0,
            np.bincount(g, minlength=len(rep)),
            _ptr(np.bincount(g[by_group], minlength=len(rep))).astype(np.int64),
            tag[by_group] - ts[first][g[by_group]],
            code[by_group],
        )

    def _check_attr_group(self, s: np.ndarray, end: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(ok, value tag position, name code or -1)`` of each attribute record ``[s, end)``,
        in groups of ``_ATTR_GROUP`` (~20 temporaries an attribute)."""
        out = [(np.zeros(0, dtype=bool), _EMPTY, _EMPTY)]
        for a in range(0, len(s), _ATTR_GROUP):
            parts = _AttrParts.canonical(self.arr, s[a : a + _ATTR_GROUP], end[a : a + _ATTR_GROUP])
            ok = parts.ok
            rows = np.flatnonzero(ok)
            ok[rows] = _ascii(self.arr, parts.name_s[rows], parts.name_l[rows]) & _payload_ok(self.arr, parts, rows)
            out.append((ok, parts.tag_s, _name_codes(self.arr, parts.name_s, parts.name_l, ok)))
        return tuple(np.concatenate([g[k] for g in out]) for k in range(3))  # type: ignore[return-value]

    # -- dependencies ----------------------------------------------------------------------
    def _deps(self) -> dict[int, tuple[np.ndarray, np.ndarray]]:
        """Per dep field: (count per node, values of fast nodes in node order), decoded in one pass.

        A region that does not end on a varint boundary turns its node slow.
        """
        starts = np.concatenate([self.dep_span[4][0], self.dep_span[5][0]])
        lens = np.concatenate([self.dep_span[4][1], self.dep_span[5][1]])
        slow2 = np.concatenate([self.slow, self.slow])
        values, counts, ok = _packed_varints(self.arr, starts, np.where(slow2, 0, lens))
        if not ok.all():
            bad = ~ok
            self.slow[bad[: self.n] | bad[self.n :]] = True
            slow2 = np.concatenate([self.slow, self.slow])
            values, counts, ok = _packed_varints(self.arr, starts, np.where(slow2, 0, lens))
        n_ctrl = int(counts[: self.n].sum())
        return {4: (counts[: self.n], values[:n_ctrl]), 5: (counts[self.n :], values[n_ctrl:])}


_TAIL_MAX = 96  # attribute tails up to this many bytes are checked once per distinct byte string
_TAIL_SHARE = 4  # ... when a chunk's tails have at most a quarter as many distinct ones
# Hash slots for the tails: a 1,024-rank step's chunk has ~100 distinct tails, and in 2^12 slots
# one or two of them shared a slot with another, sending its hundreds of records the attribute way.
_TAIL_SLOT_BITS = 16


@dataclass
class _Tails:
    """A chunk's attribute tails (the bytes from a record's first ``attr`` field to its end, when
    every field from there on is one) checked once per distinct byte string, and what that says
    of each record holding one.

    A generated record's tail is a few well-known attributes (``is_cpu_op``, ``comm_type``,
    ``comm_size``, ``pg_name``...) whose bytes repeat on hundreds of records: walking and checking
    each attribute (~70 array passes each, 3 M attributes in a 1,024-rank step) was most of the
    load. Each distinct tail is walked and checked as before, its records take its results: the
    walk's verdict (a tail that is not attribute fields up to the end makes its records slow, and
    their attributes count for nothing), the check's (a bad attribute makes them slow after their
    entries are kept, as in the attribute way), and its well-known entries at the same offsets.
    """

    rec: np.ndarray  # records whose tail equals its group's representative, ascending
    start: np.ndarray  # position of each one's tail
    group: np.ndarray  # its distinct tail
    failed: np.ndarray  # by distinct tail: its walk failed
    bad: np.ndarray  # by distinct tail: an attribute the check cannot prove
    counts: np.ndarray  # by distinct tail: attributes walked
    ptr: np.ndarray  # by distinct tail: its well-known entries' range in off / code
    off: np.ndarray  # each entry's value tag position less its tail's start
    code: np.ndarray

    def count_unless(self, slow: np.ndarray, per_record: np.ndarray | None = None) -> int:
        """Mark the records of failed walks ``slow`` (in place), then count the attributes of the
        records not ``slow`` (the count the attribute way compares with ``_SMALL``), also added
        into ``per_record`` by record when given."""
        slow[self.rec[self.failed[self.group]]] = True
        live = np.flatnonzero(~slow[self.rec])
        counts = self.counts[self.group[live]]
        if per_record is not None:
            per_record[self.rec[live]] += counts
        return int(counts.sum())

    def mark_all(self, slow: np.ndarray) -> None:
        slow[self.rec] = True

    def mark_bad(self, slow: np.ndarray) -> None:
        slow[self.rec[self.bad[self.group]]] = True

    def entries(self, slow: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(record, value tag position, name code)`` of the well-known attributes of the records
        not ``slow``, in file order."""
        live = ~slow[self.rec]
        rec, start, group = self.rec[live], self.start[live], self.group[live]
        c = (self.ptr[1:] - self.ptr[:-1])[group]
        idx = _range_indices(self.ptr[:-1][group], c)
        return np.repeat(rec, c), np.repeat(start, c) + self.off[idx], self.code[idx]


def _parse_record(buf, path: str, start: int, length: int):
    """Strictly decode one node record; errors name the offset of its length prefix, as the
    framing reader does, so a bad record has one address whichever path finds it."""
    return parse_node(buf[start : start + length], path, start - len(encode_varint(length)))


_EMPTY = np.zeros(0, dtype=np.int64)

# Node fields by first tag byte (a uint8 gather each, instead of shifts, masks and compares per
# step): the tag is one of the Node message's fields with its wire type; the field is
# length-delimited; the field's bit in the walk's seen-mask (0 for the repeated ``attr``, 10).
_NODE_FIELDS = {1: 0, 2: 2, 3: 0, 4: 2, 5: 2, 6: 0, 7: 0, 8: 2, 9: 2, 10: 2}
_TAG_OK = np.zeros(256, dtype=bool)
_TAG_OK[[(num << 3) | wt for num, wt in _NODE_FIELDS.items()]] = True
_TAG_LEN = (np.arange(256) & 7) == 2
_TAG_BIT = np.where(_TAG_OK & (np.arange(256) >> 3 != 10), 1 << (np.arange(256) >> 3), 0)


# np.iinfo() builds an object per call: ~10 us, twice per column and file of a rank set
_UNSIGNED_MAX = {np.dtype(t): int(np.iinfo(t).max) for t in (np.uint8, np.uint16, np.uint32, _U64)}


def _unsigned_for(top: int) -> type[np.unsignedinteger]:
    """The narrowest unsigned dtype that holds ``0..top``."""
    for dtype in (np.uint8, np.uint16, np.uint32):
        if top <= _UNSIGNED_MAX[np.dtype(dtype)]:
            return dtype
    return _U64


def _narrow(values: np.ndarray) -> np.ndarray:
    """Non-negative ``values`` in the narrowest unsigned dtype that holds them."""
    return values.astype(_unsigned_for(int(values.max()) if len(values) else 0))


class _Column:
    """An array filled piece by piece (one piece a chunk) without a final concatenation.

    Capacity grows through ``ndarray.resize`` (``realloc``: large blocks are remapped, not
    copied, and old and new never coexist) to what the rest of the batch will need at the rate
    so far (see :meth:`add`), and the result is cut to the length used. Growing by half again
    (each growth zero-filled by ``resize``) grew a converted trace's dependency column five times
    a load: ``_Columns.take`` of a 40k-node converted load 11-13 ms, ~6 now. A fresh ``np.empty``
    at a growth (no zero fill: ~3.5 ms) raised a 200k-node converted load's peak from 1.35x to
    1.50x the file. Pieces kept in a list sat on the heap between the chunks' freed temporaries
    and held them resident (a generated trace's load kept ~1.3x its file size of freed memory).
    A piece of a wider dtype (dependency ids of 2^28 and more) widens the column.
    """

    def __init__(self, capacity: int, dtype: type[np.integer]):
        self.out = np.empty(max(capacity, 16), dtype=dtype)
        self.at = 0

    @classmethod
    def of(cls, values: np.ndarray) -> _Column:
        """A column already filled with ``values``."""
        column = cls(0, values.dtype.type)
        column.out, column.at = values, len(values)
        return column

    def add(self, values: np.ndarray, done: int, total: int) -> None:
        """Append ``values``, which bring the batch's records in to ``done`` of ``total``: a growth
        reserves ``total / done`` times the length so far, and 1/16 more while records remain."""
        end = self.at + len(values)
        if values.dtype.itemsize > self.out.dtype.itemsize:
            self.out = self.out.astype(values.dtype)
        if end > len(self.out):
            want = -(-end * total // max(done, 1))
            self.out.resize(max(end, want + (want >> 4) if done < total else want), refcheck=False)
        self.out[self.at : end] = values
        self.at = end

    def result(self) -> np.ndarray:
        self.out.resize(self.at, refcheck=False)
        return self.out


def _range_indices(starts: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """The int64 indices ``starts[0] … starts[0] + counts[0] − 1``, then ``starts[1] …``, and so on:
    the positions of several lists' elements, gathered without a Python loop."""
    counts = counts.astype(np.int64)
    first = np.cumsum(counts) - counts  # each list's place in the result
    return np.arange(int(counts.sum()), dtype=np.int64) + np.repeat(starts.astype(np.int64) - first, counts)


def _ptr(counts: np.ndarray) -> np.ndarray:
    """Offsets of each list from its count: uint32 while the lists hold fewer than 2^32 ids."""
    ptr = np.zeros(len(counts) + 1, dtype=np.uint32 if int(counts.sum()) < 1 << 32 else np.int64)
    np.cumsum(counts, out=ptr[1:])
    return ptr


_HIGH_BITS = np.array([int("80" * k or "0", 16) for k in range(9)], dtype=_U64)  # 0x80 in the low k bytes


def _ascii(arr: np.ndarray, starts: np.ndarray, lens: np.ndarray) -> np.ndarray:
    """Whether each span ``[start, start + len)`` of ``arr`` holds only bytes below 0x80.

    Spans of up to 16 bytes (names, most strings) are tested as two unaligned 8-byte words each,
    read through a byte-strided uint64 view (the buffer's zero padding covers the overhang);
    longer ones by one ``maximum.reduceat`` over the spans sorted by start, within the bytes from
    the first span to the last (so the segments between spans, which reduceat also reduces, add up
    to one pass over one chunk's records, not over the rest of the file).
    """
    out = np.ones(len(starts), dtype=bool)
    words = _words(arr)
    for k in (0, 8):
        sel = np.flatnonzero((lens > k) & (lens <= 16))
        nbytes = np.minimum(lens[sel] - k, 8)
        out[sel] &= (words[starts[sel] + k] & _HIGH_BITS[nbytes]) == 0
    long = np.flatnonzero(lens > 16)
    if len(long):
        order = long[np.argsort(starts[long], kind="stable")]
        lo = int(starts[order[0]])
        idx = np.empty(2 * len(order), dtype=np.int64)
        idx[0::2] = starts[order] - lo
        idx[1::2] = starts[order] + lens[order] - lo
        # one byte past the last end (the zero padding): reduceat wants every index inside its input
        out[order] = np.maximum.reduceat(arr[lo : lo + int(idx.max()) + 1], idx)[0::2] < 0x80
    return out


# Element width of the packed list kinds of AttributeProto (0: varint elements); string and bytes
# lists are left to protobuf.
_LIST_WIDTH = {4: 8, 6: 4, 8: 0, 10: 0, 12: 0, 14: 0, 16: 0, 18: 0, 20: 4, 22: 8, 24: 4, 26: 8, 28: 0}
_WIDTH_BY_KIND = np.full(33, -1, dtype=np.int64)  # -1: not a numeric list kind
_WIDTH_BY_KIND[list(_LIST_WIDTH)] = list(_LIST_WIDTH.values())


def _payload_ok(arr: np.ndarray, parts: _AttrParts, rows: np.ndarray) -> np.ndarray:
    """Whether the length-delimited value of each attribute row is provably what protobuf reads:
    an ASCII ``string_val``, any ``bytes_val``, or a numeric list packed in one field whose length
    fits one byte, of whole fixed-width elements or of one-byte varints."""
    kind, ss, sl = parts.kind[rows], parts.span_s[rows], parts.span_l[rows]
    good = ~np.isin(kind, (30, 32))
    is_str = kind == 29
    good[is_str] = _ascii(arr, ss[is_str], sl[is_str])
    lst = np.flatnonzero((_WIDTH_BY_KIND[np.minimum(kind, 32)] >= 0) & (sl > 0))
    if len(lst):
        width = _WIDTH_BY_KIND[kind[lst]]
        inner = arr[ss[lst] + 1].astype(np.int64)
        shape = (arr[ss[lst]] == 0x0A) & (inner < 0x80) & (sl[lst] == inner + 2)
        shape &= (width == 0) | (inner % np.maximum(width, 1) == 0)
        varint = np.flatnonzero(shape & (width == 0))
        shape[varint] = _ascii(arr, ss[lst][varint] + 2, inner[varint])
        good[lst] = shape
    return good


# Expected wire type per field number (-1: not a field of the message).
_ATTR_WT = np.full(33, 2, dtype=np.int64)  # name, doc_string, lists, string, bytes
_ATTR_WT[0] = -1
for _num, _wt in {3: 1, 5: 5, 7: 0, 9: 0, 11: 0, 13: 0, 15: 0, 17: 0, 19: 5, 21: 1, 23: 5, 25: 1, 27: 0}.items():
    _ATTR_WT[_num] = _wt


def _words(arr: np.ndarray) -> np.ndarray:
    """A uint64 view of ``arr`` at every byte offset (byte-strided, unaligned): ``words[p]`` is the
    little-endian 8 bytes at ``p`` in one gather. Callers stay within the zero padding."""
    return np.ndarray((len(arr) - 7,), dtype="<u8", buffer=arr.data, strides=(1,))


_LOW_BYTES = np.array([(1 << (8 * k)) - 1 for k in range(8)] + [(1 << 64) - 1], dtype=_U64)  # low k bytes


def _fixed(arr: np.ndarray, pos: np.ndarray, width: np.ndarray) -> np.ndarray:
    """Little-endian unsigned integer of ``width`` (up to 8) bytes at each position."""
    return _words(arr)[pos] & _LOW_BYTES[width]


def _s32(raw: np.ndarray) -> np.ndarray:
    return (raw & _U64(0xFFFFFFFF)).astype(np.uint32).view(np.int32).astype(np.int64)


def _u32(raw: np.ndarray) -> np.ndarray:
    return (raw & _U64(0xFFFFFFFF)).astype(np.int64)


def _zigzag32(raw: np.ndarray) -> np.ndarray:
    low = _u32(raw)
    return (low >> 1) ^ -(low & 1)


def _zigzag64(raw: np.ndarray) -> np.ndarray:
    return ((raw >> _U64(1)) ^ (_U64(0) - (raw & _U64(1)))).view(np.int64)


# How each integer oneof member's raw wire value reads as int64, by group of field numbers.
_INT_READS: tuple[tuple[tuple[int, ...], Callable[[np.ndarray], np.ndarray]], ...] = (
    ((7, 23), _s32),  # int32, sfixed32
    ((9, 13, 21, 25), lambda raw: raw.view(np.int64)),  # int64, uint64, fixed64, sfixed64
    ((11, 19), _u32),  # uint32, fixed32
    ((15,), _zigzag32),  # sint32
    ((17,), _zigzag64),  # sint64
    ((27,), lambda raw: (raw != 0).astype(np.int64)),  # bool
)
_INT_READ_OF = np.zeros(256, dtype=np.uint8)  # 1 + index into _INT_READS by field number (0: not an integer)
for _g, (_nums, _) in enumerate(_INT_READS):
    _INT_READ_OF[list(_nums)] = _g + 1


def _int_value(kind: np.ndarray, raw: np.ndarray) -> np.ndarray:
    """Interpret raw wire values as int64 according to the oneof member (lenient integer read);
    0 for the other members. Each reading runs on its own members only: a rank set's 3 M
    attributes are nearly all of one or two members."""
    read = _INT_READ_OF[kind]
    out = np.zeros(len(kind), dtype=np.int64)
    for g, (_, convert) in enumerate(_INT_READS):
        m = np.flatnonzero(read == g + 1)
        if len(m):
            out[m] = convert(raw[m])
    return out


_KIND_TABLES: dict[tuple[int, ...], np.ndarray] = {}


def _kind_table(nums: tuple[int, ...]) -> np.ndarray:
    """Membership table over oneof field numbers: one gather instead of ``np.isin`` (~20 µs a call,
    paid per attribute and rank set member: ~1 s of a 1,024-rank simulation's set-up)."""
    table = _KIND_TABLES.get(nums)
    if table is None:
        table = _KIND_TABLES[nums] = np.zeros(256, dtype=bool)
        table[list(nums)] = True
    return table


def _ascii_str(payload: bytes) -> str:
    return payload.decode("ascii")  # the load checked that every bulk-decoded string_val is ASCII


def _bool_list(payload: bytes) -> list[bool]:
    return list(schema.CLASSES["BoolList"].FromString(payload).values)


@dataclass
class _AttrParts:
    """Decoded pieces of AttributeProto records: name span, oneof member, raw value or span."""

    ok: np.ndarray
    name_s: np.ndarray
    name_l: np.ndarray
    kind: np.ndarray
    raw: np.ndarray
    span_s: np.ndarray
    span_l: np.ndarray
    tag_s: np.ndarray  # position of the value's tag

    @classmethod
    def empty(cls, m: int) -> _AttrParts:
        z = lambda dt=np.int64: np.zeros(m, dtype=dt)  # noqa: E731
        return cls(np.ones(m, dtype=bool), z(), z(), z(), z(_U64), z(), z(), z())

    @classmethod
    def at_value_tags(cls, arr: np.ndarray, vt: np.ndarray) -> _AttrParts:
        """The values (kind, raw value, span) of attributes already checked at load time, from the
        positions of their value tags (names are not decoded again)."""
        parts = cls.empty(len(vt))
        fnum, wt, two = _value_tag(arr, vt)
        parts._value(arr, np.arange(len(vt)), vt + 1 + two, fnum, wt, vt + len(arr))
        return parts

    def _value(
        self, arr: np.ndarray, rows: np.ndarray, q: np.ndarray, fnum: np.ndarray, wt: np.ndarray, end: np.ndarray
    ) -> np.ndarray:
        """Decode the oneof value starting at ``q``; returns the position after it."""
        val, nb = _varints(arr, q)
        is_len = wt == 2
        width = np.where(wt == 1, 8, 4)
        fixed = (wt == 1) | (wt == 5)
        newp = np.where(fixed, q + width, q + nb + np.where(is_len, val.astype(np.int64), 0))
        self.ok[rows] &= (fixed | (nb > 0)) & (newp <= end) & (~is_len | (val < _U64(1 << 40)))
        raw = val.copy()
        if fixed.any():
            f = np.flatnonzero(fixed)
            raw[f] = _fixed(arr, q[f], width[f])
        self.kind[rows] = fnum
        self.raw[rows] = raw
        self.span_s[rows] = q + nb
        self.span_l[rows] = np.where(is_len, val.astype(np.int64), 0)
        return newp

    @classmethod
    def canonical(cls, arr: np.ndarray, s: np.ndarray, end: np.ndarray) -> _AttrParts:
        """Fast path for the layout every Chakra writer produces: name (< 128 bytes), then the value."""
        m = len(s)
        parts = cls.empty(m)
        nl = arr[s + 1].astype(np.int64)
        # A corrupt name length can point far past the record (and the padding): clamp to the end,
        # which the ``vt < end`` test below rejects, so no read leaves the buffer.
        vt = np.minimum(s + 2 + nl, end)
        fnum, wt, two = _value_tag(arr, vt)
        fclip = np.minimum(fnum, 32)
        parts.ok = (
            (arr[s] == 0x0A)
            & (nl < 0x80)
            & (vt < end)
            & (fnum >= 3)
            & (fnum <= 32)
            & (_ATTR_WT[fclip] == wt)
            & (~two | (arr[vt + 1] < 0x80))
        )
        parts.name_s, parts.name_l, parts.tag_s = s + 2, nl, vt
        rows = np.arange(m)
        newp = parts._value(arr, rows, vt + 1 + two, fnum, wt, end)
        parts.ok &= newp == end
        return parts


_DISTINCT_MAX = 24  # attribute records up to this long are checked once per distinct byte string
_SLOT_BITS = 12  # hash slots of the distinct-record grouping: more than the distinct attributes of a generated chunk
_MIX = tuple(
    _U64(k)
    for k in (
        0x9E3779B97F4A7C15,
        0xC2B2AE3D27D4EB4F,
        0x165667B19E3779F9,
        0x85EBCA77C2B2AE63,
        0x27D4EB2F165667C5,
        0xFF51AFD7ED558CCD,
        0xC4CEB9FE1A85EC53,
        0x94D049BB133111EB,
        0xBF58476D1CE4E5B9,
        0xD6E8FEB86659FD93,
        0xA0761D6478BD642F,
        0xE7037ED1A0B428DB,
    )
)


def _check_distinct(
    arr: np.ndarray, s: np.ndarray, length: np.ndarray, check, memo: dict[bytes, tuple[bool, int, int]]
) -> tuple[np.ndarray, ...]:
    """``check(s, s + length)`` (per-record results whose positions are offsets into the record
    plus ``s``) computed once per distinct short byte string.

    A record's check depends only on its own bytes, and the attributes of generated traces are a
    handful of byte strings repeated on every node (``is_cpu_op`` false, a few ``num_ops`` and
    ``tensor_size`` values): ~700 ns an attribute of vectorised decoding becomes a hash and a
    few gathers. Records of up to ``_DISTINCT_MAX`` bytes are keyed by their (masked)
    little-endian words; each is compared with its group's representative word by word, so a hash
    collision only sends that record on, to :func:`_check_by_prefix`. The representatives' results
    come through ``memo`` (see :func:`_memo_check`), shared by the chunks of a load.
    """
    ok = np.zeros(len(s), dtype=bool)
    tag = np.zeros(len(s), dtype=np.int64)
    code = np.full(len(s), -1, dtype=np.int64)
    short = np.flatnonzero((length > 0) & (length <= _DISTINCT_MAX))
    first, inv, same = _group_strings(arr, s[short], length[short])
    rep = short[first]
    rep_ok, rep_tag, rep_code = _memo_check(arr, s[rep], length[rep], check, memo)
    done = short[same]
    g = inv[same]
    ok[done], tag[done], code[done] = rep_ok[g], s[done] + (rep_tag - s[rep])[g], rep_code[g]
    pending = np.ones(len(s), dtype=bool)
    pending[done] = False
    rest = np.flatnonzero(pending)
    if len(rest):
        ok[rest], tag[rest], code[rest] = _check_by_prefix(arr, s[rest], s[rest] + length[rest], check)
    return ok, tag, code


# _WORD_MASK[k][n]: the bytes of word k (bytes 8k to 8k + 7) that lie within a string of n bytes
_WORD_MASK = _LOW_BYTES[np.clip(np.arange(_TAIL_MAX + 1)[None, :] - 8 * np.arange(-(-_TAIL_MAX // 8))[:, None], 0, 8)]
# _ROW_MASK[w][n]: the first w words' masks of a string of n bytes, one row each (see _string_words)
_ROW_MASK = [np.ascontiguousarray(_WORD_MASK[:w].T) for w in range(len(_WORD_MASK) + 1)]
_MEMO_REPS = 256  # representatives a chunk may look up in the memo (more: checked in bulk, as before)
_MEMO_SIZE = 4096  # byte strings a memo holds at most


def _memo_check(
    arr: np.ndarray,
    s: np.ndarray,
    length: np.ndarray,
    check,
    memo: dict[bytes, tuple[bool, int, int]],
    most: int = _MEMO_REPS,
) -> tuple[np.ndarray, ...]:
    """``check(s, s + length)`` of distinct short records, each byte string checked once per
    ``memo`` (a load's chunks of generated records hold the same hundred-odd strings: their ~60
    numpy calls a chunk were a sixth of the attribute check of a 1,024-rank set). A result depends
    only on the record's bytes (see :func:`_check_distinct`), so a memo hit is the check's own
    answer. More than ``most`` records (distinct values of a converted trace) skip the memo: a
    Python step each would cost more than the bulk check."""
    if len(s) > most:
        return check(s, s + length)
    keys = [arr[a : a + k].tobytes() for a, k in zip(s.tolist(), length.tolist())]
    miss = [i for i, key in enumerate(keys) if key not in memo]
    found = {}
    if miss:
        m = np.array(miss, dtype=np.intp)
        ok, tag, code = check(s[m], s[m] + length[m])
        for i, o, t, c in zip(miss, ok.tolist(), (tag - s[m]).tolist(), code.tolist()):
            found[keys[i]] = (o, t, c)
        if len(memo) + len(found) <= _MEMO_SIZE:
            memo.update(found)
    got = [found.get(key) or memo[key] for key in keys]
    ok_, tag_, code_ = zip(*got) if got else ((), (), ())
    return (
        np.array(ok_, dtype=bool),
        s + np.array(tag_, dtype=np.int64),
        np.array(code_, dtype=np.int64),
    )


def _group_strings(
    arr: np.ndarray, s: np.ndarray, length: np.ndarray, bits: int = _SLOT_BITS
) -> tuple[np.ndarray, ...]:
    """``(first, inv, same)`` for byte strings ``[s, s + length)`` of 1 to 96 bytes: the
    representatives (indices into ``s``), each string's group and whether it equals its group's
    representative byte for byte (keyed by three words, or as many as the longest needs).

    Strings are grouped by hash slot, not sorted (a sort of the hashes was half of a generated
    trace's attribute time): any one string of a slot represents it, and strings that differ from
    it (other strings in the same slot) have ``same`` False.
    """
    nwords = max(3, -(-int(length.max()) // 8) if len(length) else 0)
    key = _string_words(arr, s, length, nwords)
    h = length.astype(_U64)
    for k in range(nwords):
        h = (h ^ key[:, k]) * _MIX[k]
    slot = (h >> _U64(64 - bits)).astype(np.intp)
    rep_of_slot = np.full(1 << bits, -1, dtype=np.intp)
    rep_of_slot[slot] = np.arange(len(s), dtype=np.intp)  # whichever write wins is a member
    used = np.flatnonzero(rep_of_slot >= 0)
    group = np.zeros(1 << bits, dtype=np.intp)
    group[used] = np.arange(len(used), dtype=np.intp)
    first = rep_of_slot[used]
    inv = group[slot]
    rep_i = first[inv]
    same = length == length[rep_i]
    block = _row_block(nwords)
    for lo in range(0, len(s), block):  # the rare words that differ are looked up, not every row reduced
        diff = key[lo : lo + block] ^ _rows(key, rep_i[lo : lo + block])
        same[lo + np.flatnonzero(diff) // nwords] = False
    return first, inv, same


def _string_words(arr: np.ndarray, s: np.ndarray, length: np.ndarray, nwords: int) -> np.ndarray:
    """The first ``nwords`` little-endian words of each string ``[s, s + length)``, masked to its
    bytes (zero past its end): one row of ``nwords`` words per string.

    A row is one gather of an ``8 * nwords``-byte void element (a ``memcpy``, ~10 ns), where a
    word at a time through the byte-strided view cost ~7 ns a word (a generated trace's 56-byte
    attribute tails: 7 gathers a record, a tenth of its load). A string whose row would run past
    the buffer (near its end, beyond the zero padding) is read word by word, each word's
    position clamped into the buffer (such words lie past the string: masked to zero)."""
    width = 8 * nwords
    key = np.empty((len(s), nwords), dtype=_U64)  # every row is written below
    last = len(arr) - width  # the last start whose row lies in the buffer
    if last >= 0:
        rows = np.ndarray((last + 1,), dtype=f"V{width}", buffer=arr.data, strides=(1,))
        flat = key.view(f"V{width}").ravel()
        masked = len(s) and int(length.min()) < width
        block = _row_block(nwords)
        for lo in range(0, len(s), block):  # temporaries of a block, not of every string
            flat[lo : lo + block] = rows[np.minimum(s[lo : lo + block], last)]
            if masked:
                key[lo : lo + block] &= _rows(_ROW_MASK[nwords], length[lo : lo + block])
    far = np.flatnonzero(s > last)
    if len(far):
        words = _words(arr)
        for k in range(nwords):
            key[far, k] = words[np.minimum(s[far] + 8 * k, len(words) - 1)] & _WORD_MASK[k][length[far]]
    return key


def _row_block(nwords: int) -> int:
    """Rows of ``nwords`` words a temporary of :func:`_string_words` and :func:`_group_strings`
    holds: 64 KiB, below the word-at-a-time temporaries they replace (a copy of all the rows, a
    chunk's 13k generated tails, raised a 40k-node load's peak by 0.14x its file)."""
    return max(1, (1 << 16) // (8 * nwords))


def _rows(table: np.ndarray, idx: np.ndarray) -> np.ndarray:
    """``table[idx]`` for a C-contiguous 2-D ``table``: each row gathered as one void element (a
    ``memcpy``; numpy's row indexing of a 2-D array copied it element by element, ~3x slower)."""
    flat = table.view(f"V{table.shape[1] * table.itemsize}").ravel()
    return flat[idx].view(table.dtype).reshape(len(idx), table.shape[1])


def _check_by_prefix(arr: np.ndarray, s: np.ndarray, end: np.ndarray, check) -> tuple[np.ndarray, ...]:
    """``check(s, end)`` of attribute records, computed once per distinct *prefix* (name and value
    tag) for the records whose value is a varint or fixed-width number.

    Converted traces' attributes are mostly distinct records (``rf_id``, ``seq_id``, ``tid``
    values) but a dozen distinct prefixes. Everything ``check`` decides about such a record
    except its value (layout, name, name code, tag position, wire type) lies in the prefix;
    the value is then valid exactly when it is one varint ending at the record's end (wire type
    0) or has the fixed width (1, 5). A record whose prefix group or value is anything else,
    including any length-delimited value, goes through ``check`` itself.
    """
    n = len(s)
    ok = np.zeros(n, dtype=bool)
    tag = np.zeros(n, dtype=np.int64)
    code = np.full(n, -1, dtype=np.int64)
    nl = arr[s + 1].astype(np.int64)
    vt = np.minimum(s + 2 + nl, end)  # a corrupt name length must not read past the record
    q = vt + 1 + (arr[vt] >= 0x80)  # where the value starts (one- or two-byte tag)
    lv = end - q
    cand = np.flatnonzero((arr[s] == 0x0A) & (nl < 0x80) & (lv >= 1) & (lv <= 8) & (q - s <= _DISTINCT_MAX))
    done = np.zeros(0, dtype=np.intp)
    if len(cand):
        first, inv, same = _group_strings(arr, s[cand], (q - s)[cand])
        rep = cand[first]
        rep_ok, rep_tag, rep_code = check(s[rep], end[rep])
        c_lv, wt = lv[cand], arr[vt[cand]] & 7
        w = _words(arr)[q[cand]] & _LOW_BYTES[c_lv]
        cont = _HIGH_BITS[c_lv - 1]  # every byte but the last carries the continuation bit
        varint = (wt == 0) & ((w & cont) == cont) & (((w >> (8 * (c_lv - 1)).astype(_U64)) & _U64(0x80)) == 0)
        fixed = ((wt == 1) & (c_lv == 8)) | ((wt == 5) & (c_lv == 4))
        good = same & rep_ok[inv] & (varint | fixed)
        done, g = cand[good], inv[good]
        ok[done], tag[done], code[done] = True, s[done] + (rep_tag - s[rep])[g], rep_code[g]
    pending = np.ones(n, dtype=bool)
    pending[done] = False
    rest = np.flatnonzero(pending)
    if len(rest):
        ok[rest], tag[rest], code[rest] = check(s[rest], end[rest])
    return ok, tag, code


def _value_tag(arr: np.ndarray, vt: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(field number, wire type, second byte?)`` of the one- or two-byte tag at each position."""
    tb = arr[vt].astype(np.int64)
    two = tb >= 0x80
    tag = np.where(two, (tb & 0x7F) | (arr[vt + 1].astype(np.int64) << 7), tb)
    return tag >> 3, tag & 7, two


@dataclass
class _KnownAttrs:
    """Where the well-known attributes of the bulk-decoded records are: record index, offset of
    the value's tag within its record and name (index into ``_KNOWN``), in file order. Each in
    the narrowest dtype its values allow: 4 bytes an attribute of a rank set's files (9 when the
    index was int32 and the tag's file position uint32: 27 MB held by a 1,024-rank step's load)."""

    node: np.ndarray
    tag: np.ndarray
    code: np.ndarray


def _name_codes(arr: np.ndarray, name_s: np.ndarray, name_l: np.ndarray, usable: np.ndarray) -> np.ndarray:
    """Index into ``_KNOWN`` of each attribute name (-1 for other names), by length and bytes.

    Every well-known name is 7–16 bytes long, so its first and last (up to) 8 bytes identify it.
    """
    code = np.full(len(name_s), -1, dtype=np.int64)
    for length, entries in _KNOWN_BY_LEN.items():
        idx = np.flatnonzero(usable & (name_l == length))
        if not len(idx):
            continue
        width = np.full(len(idx), min(length, 8))
        head = _fixed(arr, name_s[idx], width)
        tail = _fixed(arr, name_s[idx] + max(length - 8, 0), width)
        for code_i, h, t in entries:
            code[idx[(head == h) & (tail == t)]] = code_i
    return code


def _known_by_len() -> dict[int, list[tuple[int, np.uint64, np.uint64]]]:
    table: dict[int, list[tuple[int, np.uint64, np.uint64]]] = {}
    for i, name in enumerate(_KNOWN):
        raw = name.encode()
        table.setdefault(len(raw), []).append(
            (i, _U64(int.from_bytes(raw[:8], "little")), _U64(int.from_bytes(raw[-8:], "little")))
        )
    return table


_KNOWN_BY_LEN = _known_by_len()


class _Positions(dict):
    """Record index -> position of its value, one table for every :class:`PgNames` with the same
    records in the same order (weakly cached: a table lives while a mapping uses it)."""

    __slots__ = ("__weakref__",)


_POSITIONS: weakref.WeakValueDictionary[bytes, _Positions] = weakref.WeakValueDictionary()


class PgNames(Mapping[int, str]):
    """A graph's ``pg_name`` strings by record index: a read-only mapping that reads, iterates,
    compares and prints as the dict ``{record: name}`` did; ``copy()`` gives that dict where one is
    needed (JSON, ``|``, writing).

    Why: a 1,024-rank 96-layer step held 1,024 dicts of ~410 entries (18 MB, the rank-set analysis'
    largest item) although only 3 distinct sets of records carry a ``pg_name`` (the names differ by
    rank). The record -> position table is shared by every mapping with the same records (keyed by
    their bytes); each graph keeps only a tuple of its names. ``copy()`` gives a real dict.
    """

    __slots__ = ("_pos", "_values")

    def __init__(self, records: Iterable[int], names: Iterable[str], key: bytes):
        """``records`` (their ``np.intp`` bytes must be ``key``: :meth:`of` computes it, the decoder
        has it at hand) carrying ``names``, in iteration order."""
        pos = _POSITIONS.get(key)
        if pos is None:
            pos = _POSITIONS[key] = _Positions(zip(records, itertools.count()))
        self._pos: dict[int, int] = pos
        self._values: tuple[str, ...] = tuple(names)

    @classmethod
    def of(cls, names: dict[int, str]) -> PgNames:
        """The mapping of a ``{record: name}`` dict (same order)."""
        return cls(names, names.values(), np.fromiter(names, dtype=np.intp, count=len(names)).tobytes())

    def __getitem__(self, record: int) -> str:
        return self._values[self._pos[record]]

    def get(self, record: int, default: Any = None) -> Any:
        at = self._pos.get(record)
        return default if at is None else self._values[at]

    def __contains__(self, record: object) -> bool:
        return record in self._pos

    def __iter__(self) -> Iterator[int]:
        return iter(self._pos)

    def __len__(self) -> int:
        return len(self._values)

    def keys(self) -> KeysView[int]:  # the shared table's own view: compares at C speed
        return self._pos.keys()

    def values(self) -> ValuesView[str]:
        return _Names(self)

    def items(self) -> ItemsView[int, str]:
        return _Pairs(self)

    def copy(self) -> dict[int, str]:
        """A dict of the same entries, in the same order (for a caller that needs a real dict)."""
        return dict(zip(self._pos, self._values))

    def __eq__(self, other: object) -> bool:
        if isinstance(other, PgNames) and other._pos is self._pos:
            return self._values == other._values
        if isinstance(other, Mapping):
            return self.copy() == dict(other.items())
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]  # unhashable, as the dict was

    def __repr__(self) -> str:
        return repr(self.copy())

    def intern(self) -> None:
        """Point equal names at one string (``sys.intern``): a rank set decoded in groups holds a
        copy of each name per group otherwise. The values stay equal, so the mapping is unchanged."""
        one = {name: sys.intern(name) for name in set(self._values)}  # a few distinct names a file
        if any(name is not kept for name, kept in one.items()):
            self._values = tuple(map(one.__getitem__, self._values))


class _Names(ValuesView[str]):
    _mapping: PgNames

    def __iter__(self) -> Iterator[str]:
        return iter(self._mapping._values)


class _Pairs(ItemsView[int, str]):
    _mapping: PgNames

    def __iter__(self) -> Iterator[tuple[int, str]]:
        return zip(self._mapping._pos, self._mapping._values)


_NO_NAMES = PgNames((), (), b"")


@dataclass
class _AttrColumns:
    value: dict[str, np.ndarray]
    kind: dict[str, np.ndarray]
    pg_name: PgNames
    involved_dim: dict[int, list[bool]]
    stored: dict[str, frozenset[int]] = field(default_factory=dict)  # see TraceGraph.stored_kinds


def _zeros(n: int, dtype: type) -> np.ndarray:
    """A read-only all-zero column of ``n`` records that holds one element (a stride-0 view).

    Most well-known attributes are absent from most files, or 0 wherever present (``is_cpu_op``
    false on generated traces): dense zeros cost 8 bytes a record and name, ~70 MB held for the
    whole run of a 1,024-rank step, in columns that nobody writes.
    """
    return np.broadcast_to(np.zeros(1, dtype=dtype), (n,))


_KEYS = np.arange(1 << 14, dtype=np.intp).astype(object)  # record-index dict keys shared across files (0.6 MB)


def _keys(idx: np.ndarray) -> list[int]:
    """``idx.tolist()`` with int objects shared below 2^14: a fresh one per entry was 32 bytes
    each (13 MB for the 418k ``pg_name`` entries of a 1,024-rank 96-layer step)."""
    if not len(idx) or int(idx.max()) < len(_KEYS):
        return _KEYS[idx].tolist()
    return idx.tolist()


def _payloads(arr: np.ndarray, s: np.ndarray, length: np.ndarray, convert: Callable[[bytes], Any]) -> np.ndarray:
    """``convert(bytes)`` of each span ``[s, s + length)``, computed once per distinct byte string.

    The same few ``pg_name`` strings sit on every communication node (418k of them in a 1,024-rank
    96-layer step): one decode and one object per distinct string instead of one per node. Spans
    of 1 to 24 bytes are grouped by :func:`_group_strings`; the others, and those that differ from
    their group's representative, are converted one by one.
    """
    out = np.empty(len(s), dtype=object)
    short = np.flatnonzero((length > 0) & (length <= _DISTINCT_MAX))
    single = np.ones(len(s), dtype=bool)
    if len(short):
        first, inv, same = _group_strings(arr, s[short], length[short])
        rep = short[first]
        reps = np.empty(len(rep), dtype=object)
        for j, (a, k) in enumerate(zip(s[rep].tolist(), length[rep].tolist())):
            reps[j] = convert(arr[a : a + k].tobytes())  # one by one: a list value must stay one element
        out[short[same]] = reps[inv[same]]
        single[short[same]] = False
    for i in np.flatnonzero(single).tolist():
        out[i] = convert(arr[int(s[i]) : int(s[i]) + int(length[i])].tobytes())
    return out


class _AttrBatch:
    """The graphs of one :func:`load_graphs` batch, whose attributes are decoded together when the
    first of them is asked for its attributes.

    Every rule of a rank-set analysis reads every file's attributes; decoded file by file, the
    ~40 numpy calls per file were 1.5 ms a file whatever its size (1.6 s of a 1,024-rank step).
    Decoded over the batch's files at once (the bytes already lie in one array), each call runs
    once per group of files. Graphs are held weakly: a batch keeps no graph alive.
    """

    def __init__(self, graphs: list[TraceGraph], arr: np.ndarray, offsets: list[int], shared: _SharedEntries | None):
        self.refs = [weakref.ref(g) for g in graphs]
        self.arr, self.offsets, self.shared = arr, offsets, shared
        self.entry_at = np.cumsum([0] + [len(g.attr_parts.node) for g in graphs]).tolist()  # each graph's first entry

    @classmethod
    def attach(
        cls, graphs: list[TraceGraph], arr: np.ndarray, offsets: list[int], shared: _SharedEntries | None = None
    ) -> None:
        if len(graphs) > 1:
            batch = cls(graphs, arr, offsets, shared)
            for g in graphs:
                g._attr_batch = batch

    def decode(self) -> None:
        """Decode every live graph of the batch not yet decoded, in equal shares of at most about
        ``_ATTR_DECODE_GROUP`` attributes (bounding the temporaries).

        Equal shares, not full groups and a remainder: a group pays ~25 numpy calls a name whatever
        its size, and the ~273k-attribute batches of a 1,024-rank 96-layer step were 4 full groups
        and a small one. The columns of a file are the same whichever group decodes it."""
        live: list[tuple[TraceGraph, int, int]] = []
        for ref, offset, entry in zip(self.refs, self.offsets, self.entry_at):
            g = ref()
            if g is not None and g._attrs is None and g._attr_batch is self:
                live.append((g, offset, entry))
        upto = np.cumsum([len(g.attr_parts.node) for g, _, _ in live]).tolist()  # attributes so far
        total = upto[-1] if live else 0
        k = max(-(-total // _ATTR_DECODE_GROUP), 1)  # groups
        group: list[tuple[TraceGraph, int]] = []
        sources: list[np.ndarray] = []  # with shared entries: which one each of the group's entries is
        done = 0  # groups decoded
        for (g, offset, entry), held in zip(live, upto):
            group.append((g, offset))
            if self.shared is not None:
                sources.append(self.shared.source[entry : entry + len(g.attr_parts.node)])
            if done + 1 < k and held * k >= total * (done + 1):  # this group's share is reached
                self._decode(group, sources)
                group, sources, done = [], [], done + 1
        if group:
            self._decode(group, sources)

    def _decode(self, group: list[tuple[TraceGraph, int]], sources: list[np.ndarray]) -> None:
        if self.shared is None:
            _decode_group(group, self.arr)
        else:
            _decode_group(group, self.arr, (*self.shared.values(self.arr), sources))


@dataclass
class _SharedEntries:
    """The well-known attribute entries of a batch's distinct records (see ``.dedupe``): their
    value tags' positions and, for each entry of the batch's files, the one it is a copy of. The
    values are decoded once, on first use: a rank set's ~3 M entries are ~90 k distinct ones."""

    tag: np.ndarray
    source: np.ndarray
    decoded: tuple[_AttrParts, np.ndarray] | None = None

    def values(self, arr: np.ndarray) -> tuple[_AttrParts, np.ndarray]:
        """The entries' decoded parts and integer values (:func:`_int_value`)."""
        if self.decoded is None:
            parts = _AttrParts.at_value_tags(arr, self.tag.astype(np.int64))
            self.decoded = parts, _int_value(parts.kind, parts.raw)
        return self.decoded


_ATTR_DECODE_GROUP = 1 << 18  # attributes decoded at a time at most (about): ~100 bytes of temporaries each


def _decode_attrs(g: TraceGraph) -> _AttrColumns:
    """The attribute columns of one graph (a group of one, see :func:`_decode_group`)."""
    _decode_group([(g, 0)], g.buf.obj)  # type: ignore[arg-type]
    assert g._attrs is not None
    return g._attrs


def _decode_group(
    group: list[tuple[TraceGraph, int]],
    arr: np.ndarray,
    shared: tuple[_AttrParts, np.ndarray, list[np.ndarray]] | None = None,
) -> None:
    """Keep the well-known attributes (decoded and checked at load time) of each ``(graph, offset
    of its bytes in arr)`` as columns, set as the graph's ``_attrs``.

    One vectorised pass over all of the group's attribute values (not one per file and name);
    each name's columns of the files that need one are slices of one array, and files where a
    column would be all zero get a :func:`_zeros` view; ``pg_name`` strings and ``involved_dim``
    lists are made once per distinct value. Records the load flagged as unusual (``slow``) are
    read through the protobuf runtime instead (their files' columns are then all dense, as that
    loop writes them). With ``shared`` (decoded parts and values of distinct entries, and which
    one each of the group's entries copies), values are gathered rather than decoded: a copy's
    value and its bytes are its original's, only its position differs (and no reader of the parts
    uses that but to read those bytes).
    """
    graphs = [g for g, _ in group]
    sizes = np.array([len(g) for g in graphs], dtype=np.int64)
    node_base = np.cumsum(sizes) - sizes
    dense = np.array([bool(g.slow.any()) for g in graphs])
    reuse = _Reuse.every_own(len(graphs)) if shared is None else _Reuse.of(graphs, *shared, dense)
    known = [g.attr_parts for g in graphs]
    # per file and entry: where its tag is in its record, or (shared) which distinct entry it copies
    tags = [a.tag for a in known] if shared is None else shared[2]
    parts_of = [
        (a.node, a.code, s) if t is None else (a.node[t], a.code[t], s[t]) for a, s, t in zip(known, tags, reuse.take)
    ]
    node = np.concatenate([p[0].astype(np.intp) + int(b) for p, b in zip(parts_of, node_base)])
    # each entry's value: where its tag is, or (shared) which decoded distinct entry it copies
    where = (
        np.concatenate([g.rec_start[p[0]].astype(np.int64) + p[2] + off for (g, off), p in zip(group, parts_of)])
        if shared is None
        else np.concatenate([p[2] for p in parts_of])
    )
    code = np.concatenate([p[1] for p in parts_of])
    file_of = np.repeat(np.arange(len(graphs)), [len(p[0]) for p in parts_of])
    if dense.any():  # records turned slow after their attributes were checked
        use = np.flatnonzero(~np.concatenate([g.slow for g in graphs])[node])
        node, where, code, file_of = node[use], where[use], code[use], file_of[use]
    src: np.ndarray | None = None  # the row of parts of each entry (None: the entry's own)
    if shared is None:
        parts = _AttrParts.at_value_tags(arr, where)
        kind8, values = parts.kind.astype(np.uint8), _int_value(parts.kind, parts.raw)
    else:
        parts, src = shared[0], where
        kind8, values = parts.kind.astype(np.uint8)[src], shared[1][src]
    order = np.argsort(code, kind="stable")  # by name, each name's entries in file order
    bounds = np.searchsorted(code[order], np.arange(len(_KNOWN) + 1)).tolist()
    cols = [_AttrColumns({}, {}, _NO_NAMES, {}) for _ in graphs]
    layout = _Layout(sizes, node_base, dense)
    for c, name in enumerate(_KNOWN):
        sel, rep = order[bounds[c] : bounds[c + 1]], reuse.rep[c]
        at = node[sel]
        if len(at) >= 2 and not bool((at[1:] > at[:-1]).all()):
            # A name repeated on a record: its first entry is the attribute, as ASTRA-sim's feeder
            # (ETFeederNode::get_attr_msg) stops at the first match; the later ones are not read.
            sel = sel[np.sort(np.unique(at, return_index=True)[1])]
            at = node[sel]
        f = file_of[sel]
        for col, kind in zip(cols, layout.columns(np.uint8, at, f, kind8[sel], rep)):
            col.kind[name] = kind
        for key in _distinct(f.astype(np.int64) << 8 | kind8[sel]).tolist():  # (file, kind) pairs
            cols[key >> 8].stored[name] = cols[key >> 8].stored.get(name, frozenset()) | {key & 0xFF}
        if name in INT_ATTRS:
            for col, value in zip(cols, layout.columns(np.int64, at, f, values[sel], rep)):
                col.value[name] = value
        elif len(sel):
            for i, found in _strings(
                arr, parts, sel if src is None else src[sel], at, f, node_base, name, src is not None
            ):
                if name == "pg_name":
                    cols[i].pg_name = found
                else:
                    cols[i].involved_dim = found
    for c, i, r in reuse.copies():
        stored = cols[r].stored.get(_KNOWN[c])
        if stored is not None:
            cols[i].stored[_KNOWN[c]] = stored
    for g, col, has_slow in zip(graphs, cols, dense.tolist()):
        g._attrs, g._attr_batch = col, None
        if has_slow:  # the protobuf reading may have changed any kind
            names = col.pg_name.copy()
            for i in np.flatnonzero(g.slow).tolist():
                _slow_record(g, col, names, i)
            col.pg_name = PgNames.of(names)
            col.stored = {name: frozenset(_distinct(k[k != 0]).tolist()) for name, k in col.kind.items()}


@dataclass
class _Reuse:
    """Which files of a decode group have the same kind and value columns of a name as the file
    before them: ``rep[c, i]`` is the first file of such a run for name ``c`` (``i`` when file
    ``i`` has its own), and ``take[i]`` the entries of file ``i`` decoded (those of the names it
    has its own columns of; None: all).

    Why: the ranks of a pipeline stage repeat most columns (a 1,024-rank 96-layer step has 3 to 8
    distinct ones a name: its ranks differ in their peers), and gathering and scattering every
    file's entries into its columns was most of the attribute decode; :class:`~chakra_pipe.rankset.
    twins.SharedColumns` then compared each copy byte by byte to find it equal again. The load
    already knows which entries are byte-identical (the distinct entry each copies, see
    ``.dedupe``): a file whose records and names of entries are its predecessor's, entry by entry,
    has a name's columns when each of its entries of that name copies the same distinct entry, or
    one of equal kind and integer value. Strings are read for every file; files with slow records
    (whose columns ``_slow_record`` writes) are never compared.
    """

    rep: np.ndarray  # (names, files)
    take: list[np.ndarray | None]  # per file: its entries decoded (None: all)

    @classmethod
    def every_own(cls, n: int) -> _Reuse:
        """``n`` files that each decode all their entries."""
        return cls(np.tile(np.arange(n), (len(_KNOWN), 1)), [None] * n)

    @classmethod
    def of(
        cls,
        graphs: list[TraceGraph],
        parts: _AttrParts,
        values: np.ndarray,
        sources: list[np.ndarray],
        dense: np.ndarray,
    ) -> _Reuse:
        """From the decoded parts and integer values of the distinct entries and, per file, which
        one each of its entries copies."""
        n = len(graphs)
        differ = np.ones((n, len(_KNOWN)), dtype=bool)  # by file and name code: has its own columns
        take: list[np.ndarray | None] = [None] * n
        for i in range(1, n):
            if dense[i] or dense[i - 1] or not _same_entries(graphs[i - 1], graphs[i]):
                continue
            code = graphs[i].attr_parts.code
            x, y = sources[i], sources[i - 1]
            d = np.flatnonzero(x != y)  # entries of records whose bytes differ: their values may not
            x, y = x[d], y[d]
            row = differ[i]
            row[:] = _READ_ALWAYS
            row[code[d[(parts.kind[x] != parts.kind[y]) | (values[x] != values[y])]]] = True
            take[i] = np.flatnonzero(row[code])
        own = np.where(differ.T, np.arange(n), 0)
        return cls(np.maximum.accumulate(own, axis=1), take)  # the last file at or before with its own

    def copies(self) -> Iterable[tuple[int, int, int]]:
        """``(name code, file, its representative)`` of each column that is another file's."""
        c, f = np.nonzero(self.rep != np.arange(self.rep.shape[1]))
        return zip(c.tolist(), f.tolist(), self.rep[c, f].tolist())


# names whose values are strings or lists: not compared, read for every file
_READ_ALWAYS = np.array([name not in INT_ATTRS for name in _KNOWN])


def _same_entries(before: TraceGraph, g: TraceGraph) -> bool:
    """Whether ``g``'s records and its entries' records and names are ``before``'s."""
    a, b = before.attr_parts, g.attr_parts
    return (
        len(before) == len(g)
        and a.node.dtype == b.node.dtype
        and a.code.dtype == b.code.dtype
        and a.node.tobytes() == b.node.tobytes()
        and a.code.tobytes() == b.code.tobytes()
    )


def _once(rows: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """``(distinct, inverse)`` of ``rows`` (indices below ``n``): the distinct rows ascending, and
    each row's index among them; by a mark table of ``n`` rather than a sort."""
    seen = np.zeros(n, dtype=bool)
    seen[rows] = True
    index = np.cumsum(seen) - 1
    return np.flatnonzero(seen), index[rows]


def _distinct(values: np.ndarray) -> np.ndarray:
    """Sorted distinct values (``np.unique`` imports ``numpy.ma``: start-up time)."""
    values = np.sort(values)
    return values[np.concatenate(([True], values[1:] != values[:-1]))] if len(values) else values


@dataclass
class _Layout:
    """Where a group's files (``sizes`` records each, from ``node_base`` in the group's record
    numbering) lie in the one array a name's columns are slices of."""

    sizes: np.ndarray
    node_base: np.ndarray
    dense: np.ndarray  # files whose columns must be writable arrays (they have slow records)

    def columns(
        self, dtype: type, at: np.ndarray, f: np.ndarray, values: np.ndarray, rep: np.ndarray
    ) -> list[np.ndarray]:
        """Each file's column holding ``values`` at group records ``at`` of files ``f`` (one entry a
        record: ``_decode_group`` keeps a repeated name's first): only files with a non-zero value, or
        ``dense``, take space in the shared array; the others get a :func:`_zeros` view. A file
        ``i`` whose ``rep[i]`` is another (an earlier file, see :class:`_Reuse`; it has no entries
        here) gets that file's very column, made read-only: one array for the files, none writes it."""
        need = self.dense.copy()
        need[f[values != 0]] = True
        sizes = np.where(need, self.sizes, 0)
        base = np.cumsum(sizes) - sizes
        shared: np.ndarray = np.zeros(int(sizes.sum()), dtype=dtype)
        m = need[f]
        shared[at[m] - self.node_base[f[m]] + base[f[m]]] = values[m]
        zeros: dict[int, np.ndarray] = {}
        out: list[np.ndarray] = []
        for i, (n, b, dense, r) in enumerate(zip(self.sizes.tolist(), base.tolist(), need.tolist(), rep.tolist())):
            if r != i:
                column = out[r]
                if r == i - 1:  # its first copy (a file's copies follow it)
                    column.flags.writeable = False
                out.append(column)
            elif dense:
                out.append(shared[b : b + n])
            else:
                if n not in zeros:
                    zeros[n] = _zeros(n, dtype)
                out.append(zeros[n])
        return out


def _slow_record(g: TraceGraph, cols: _AttrColumns, names: dict[int, str], i: int) -> None:
    """Record ``i``'s well-known attributes read through the protobuf runtime (its ``pg_name`` into
    ``names``, the file's as a dict while its slow records are read)."""
    for name in _KNOWN:
        cols.kind[name][i] = 0
    names.pop(i, None)
    cols.involved_dim.pop(i, None)
    seen: set[str] = set()  # a repeated name's first entry is the attribute (see _decode_group)
    for attr in g.node(i).attr:
        if attr.name not in cols.kind or attr.name in seen:
            continue
        seen.add(attr.name)
        kname = attr.WhichOneof("value")
        cols.kind[attr.name][i] = _attrs.KIND_NUMBER[kname] if kname else 0
        if attr.name in cols.value:
            value = int(getattr(attr, kname)) if kname in _attrs.INT_KINDS else 0
            # uint64/fixed64 values of 2^63 and more wrap into the int64 column, as the bulk path's view does
            cols.value[attr.name][i] = value - (1 << 64) if value >= 1 << 63 else value
        elif attr.name == "pg_name":  # another kind leaves the record without a name (its kind is reported)
            if kname == "string_val":
                names[i] = attr.string_val
        elif kname == "bool_list":
            cols.involved_dim[i] = list(attr.bool_list.values)


def _strings(
    arr: np.ndarray,
    parts: _AttrParts,
    rows: np.ndarray,
    at: np.ndarray,
    f: np.ndarray,
    node_base: np.ndarray,
    name: str,
    copies: bool = False,
) -> Iterable[tuple[int, Any]]:
    """``(file, {record: value})`` of ``pg_name`` (``string_val``, as :class:`PgNames`) or
    ``involved_dim`` (``bool_list``) from the entries of that name (group records ``at`` of files
    ``f``, in file order, one entry a record: ``_decode_group`` keeps a repeated name's first; ``rows``:
    their rows of ``parts``), for the files that have any: an entry of another kind leaves its
    record out.

    ``copies``: ``parts`` are a batch's distinct entries (``_SharedEntries``), which ``rows``
    repeat: each row's value is converted once and gathered (the 418k ``pg_name`` entries of a
    1,024-rank 96-layer step are copies of a few thousand, and grouping every entry's bytes by
    :func:`_payloads` was a quarter of the attribute decode)."""
    wanted = 29 if name == "pg_name" else 28
    convert: Callable[[bytes], Any] = _bool_list if name == "involved_dim" else _ascii_str
    kind = parts.kind[rows]
    local = at - node_base[f]
    keep = np.flatnonzero(kind == wanted)  # one entry a record, ascending: no entry overrides another
    if copies:
        once, inv = _once(rows[keep], len(parts.kind))
        values = _payloads(arr, parts.span_s[once], parts.span_l[once], convert)[inv].tolist()
    else:
        values = _payloads(arr, parts.span_s[rows[keep]], parts.span_l[rows[keep]], convert).tolist()
    if name == "involved_dim":  # each record its own list, as before: a caller may modify one
        values = [list(v) for v in values]
    records = local[keep].astype(np.intp)
    keys, files = _keys(records), f[keep]
    edges = np.flatnonzero(files[1:] != files[:-1]) + 1
    for a, b in zip([0, *edges.tolist()], [*edges.tolist(), len(keep)]):
        if b > a:
            if name == "pg_name":
                yield int(files[a]), PgNames(keys[a:b], values[a:b], records[a:b].tobytes())
            else:
                yield int(files[a]), dict(zip(keys[a:b], values[a:b]))
