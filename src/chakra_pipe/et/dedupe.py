"""Byte-identical records of a batch of rank files, found without a Python step per record.

The files of a generated SPMD rank set are nearly one program: the ranks of a pipeline stage share
most node records byte for byte (ids, names, sizes, dependencies); only the communication nodes'
``pg_name`` and peers and the metadata differ. A 1,024-file 96-layer set's 8 MiB load batches hold
~843k records of which ~93k are distinct, so the loader decodes each distinct record once and
gathers every record's columns from it (see ``graph._decode``). A record's decoding depends on its
own bytes alone, so a record and its representative decode alike wherever they lie.

Records are grouped by a hash of four sampled words (cheap: a gather each), then every record is
compared with its group's leader over all its bytes; the records that differ (a hash collision, or
records that differ only between the sampled words) are grouped again among themselves, for up to
``_ROUNDS`` rounds, and those left over are their own representatives: a match is always exact.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

_U64 = np.uint64
_LOW = np.array([(1 << (8 * k)) - 1 for k in range(8)] + [(1 << 64) - 1], dtype=_U64)  # low k bytes
_MIX = tuple(_U64(k) for k in (0x9E3779B97F4A7C15, 0xC2B2AE3D27D4EB4F, 0x165667B19E3779F9, 0x85EBCA77C2B2AE63))
_MIX_LAST = _U64(0xFF51AFD7ED558CCD)
# Grouping pays only when distinct records are at most this share of a batch (1 in 2): a converted
# trace's records differ in their times within the first words, and it stops after the sampling.
_MOST_DISTINCT = 2


@dataclass
class Groups:
    """Representatives of a batch's records: ``distinct`` (record indices, ascending) and, for
    every record, ``rep`` (index into ``distinct`` of the record with the same bytes)."""

    distinct: np.ndarray
    rep: np.ndarray


def _words(arr: np.ndarray) -> np.ndarray:
    """A uint64 view of ``arr`` at every byte offset (unaligned, byte-strided)."""
    return np.ndarray((len(arr) - 7,), dtype="<u8", buffer=arr.data, strides=(1,))


def group_records(arr: np.ndarray, starts: np.ndarray, lens: np.ndarray) -> Groups | None:
    """The byte-identical records among ``[starts, starts + lens)`` of ``arr`` (int64 positions;
    ``arr`` must be zero-padded by at least 8 bytes after the last record), or None when sampled
    words already show more than half of them distinct (grouping would not pay). The first word
    (a record's id and the start of its name) is sampled alone first: a converted trace, whose
    records all differ there, stops after one gather a record."""
    n = len(starts)
    if n == 0:
        return None
    words = _words(arr)
    top = len(words) - 1
    bits = min(max(int(n).bit_length() + 1, 10), 24)
    h = lens.astype(_U64)
    # Sampled words: the first, then the second, one from the middle and the last (masked to the record).
    for k, off in enumerate((np.zeros_like(lens), np.full_like(lens, 8), lens // 2 - 4, lens - 8)):
        off = np.maximum(off, 0)
        w = words[np.minimum(starts + off, top)] & _LOW[np.clip(lens - off, 0, 8)]
        h = (h ^ w) * _MIX[k]
        if k == 0 and _slots(h, bits)[1] * _MOST_DISTINCT > n:
            return None
    slot, used = _slots(h, bits)
    if used * _MOST_DISTINCT > n:
        return None
    leader = np.arange(n, dtype=np.intp)  # each record's representative (so far itself)
    todo = leader.copy()
    # One slot table for all rounds: every slot a round reads was written by that round, so no
    # reset is needed (a fresh 2 MiB table a round was ~10 % of the grouping: page faults).
    table = np.empty(1 << bits, dtype=np.intp)
    for _ in range(_ROUNDS):
        # a member of each slot (the first, in practice) leads it; the records whose bytes differ
        # from their leader's (a collision, or a difference between the sampled words) try again
        # among themselves
        table[slot[todo[::-1]]] = todo[::-1]
        lead = table[slot[todo]]
        same = _equal(arr, starts, lens, todo, lead)
        leader[todo[same]] = lead[same]
        left = todo[~same]
        if len(todo) - len(left) < _FEW or len(left) < _FEW:
            break
        todo = left
    distinct = np.flatnonzero(leader == np.arange(n))
    index = np.zeros(n, dtype=np.intp)
    index[distinct] = np.arange(len(distinct), dtype=np.intp)
    return Groups(distinct, index[leader])


def _slots(h: np.ndarray, bits: int) -> tuple[np.ndarray, int]:
    """Each hash's slot of ``2^bits`` (after a final mix) and how many slots are used: at most
    the number of distinct keys, so a bound on how many records could share their bytes."""
    h = h ^ (h >> _U64(31))
    slot = ((h * _MIX_LAST) >> _U64(64 - bits)).astype(np.intp)
    return slot, int(np.count_nonzero(np.bincount(slot, minlength=1 << bits)))


def _equal(arr: np.ndarray, starts: np.ndarray, lens: np.ndarray, rec: np.ndarray, lead: np.ndarray) -> np.ndarray:
    """Whether the bytes of each record ``rec`` equal those of record ``lead`` (True where they are
    one record); a record whose length fewer than ``_FEW`` of the compared records share is taken
    as different (a numpy pass a length would cost more than decoding it).

    Records of one length ``L`` are gathered as rows of ``ceil(L / 8)`` words (one ``memcpy``
    each, ~10 ns, where a word at a time was ~10 ns a word; numpy's compare of ``L``-byte void
    elements took ~80 ns a record), compared word by word and the bytes past ``L`` (read from
    the next record or the zero padding) masked off.
    """
    out = rec == lead
    check = np.flatnonzero(~out & (lens[rec] == lens[lead]))
    length = lens[rec[check]]
    # numpy's stable sort of 16-bit keys is a radix sort: ~4x faster than of int64 ones
    order = np.argsort(length.astype(np.uint16) if len(length) and length.max() < 1 << 16 else length, kind="stable")
    check, length = check[order], length[order]
    edges = [0, *(np.flatnonzero(length[1:] != length[:-1]) + 1).tolist(), len(check)]
    for lo, hi in zip(edges, edges[1:]):
        part, ln = check[lo:hi], int(length[lo]) if hi > lo else 0
        if hi - lo < _FEW or ln == 0:
            out[part] = ln == 0
            continue
        nw = -(-ln // 8)
        # each record's words as one void element: a gather of those is a memcpy each (a 2-D
        # view's row gather copied word by word, 2x slower)
        rows = np.ndarray((len(arr) - 8 * nw + 1,), dtype=f"V{8 * nw}", buffer=arr.data, strides=(1,))
        step = max(_BLOCK_BYTES // (8 * nw), 1)  # temporaries of ~_BLOCK_BYTES: in cache, on the heap
        for at in range(0, len(part), step):
            block = part[at : at + step]
            diff = rows[starts[rec[block]]].view("<u8").reshape(-1, nw)
            diff ^= rows[starts[lead[block]]].view("<u8").reshape(-1, nw)
            diff[:, -1] &= _LOW[ln - 8 * (nw - 1)]
            out[block] = True
            if diff.any():  # a row reduction of ~12 words is slow: the rare differing words are looked up
                out[block[np.flatnonzero(diff) // nw]] = False
    return out


_ROUNDS = 8  # grouping rounds at most (a round's leaders are the ones of the records left over)
_FEW = 32
_BLOCK_BYTES = 1 << 18
