"""Record framing of a whole ``.et`` buffer with numpy: no Python step per record.

Finding where each varint32-prefixed record starts is inherently sequential (each start is the
previous start plus its prefix and length), and the per-record Python walk of
:func:`framing.scan_records` costs ~2 µs a record: most of the load time of a trace of small
records. This module guesses instead: every node a Chakra writer produces starts with field 1 (the
id, tag byte 0x08) unless its id is 0, so every 0x08 byte preceded by a 1–3 byte varint is a
*candidate* record start (a few per cent more than the real ones). The successor of every
candidate (start + prefix + length) is computed at once, and the chain from the first node record
is isolated by pruning the candidates no candidate points to (pointer doubling, log2(records)
gathers, when a few rounds do not do it). The chain is exact by construction; when
it leaves the candidates (an id-0 node past the first, a record over 2 MiB, a foreign writer, a
corrupt file) the caller falls back to the sequential walk, which also raises the precise error.
"""

from __future__ import annotations

import numpy as np

from ..errors import TraceFormatError
from .framing import scan_records, walk_records

_ID_TAG = 0x08  # field 1 (id), wire type 0: the first byte of every canonical node with id != 0
_HEAD_RECORDS = 2  # metadata and the first node (often id 0) are walked one by one
_MIN_RECORD = 8  # bytes per record below which the walk is used (a node with an id, a name and a type is more)
_BLOCK = 1 << 20  # bytes searched for tag bytes per step: a mask that stays in cache
# Files up to this size are walked record by record: the ~30 numpy calls of the chain cost ~0.8 ms
# whatever the size, the walk ~1.4 us a record (a rank set's 10 KB files framed 7x faster).
_WALK_BYTES = 1 << 15


def scan_array(arr: np.ndarray, size: int, file: str) -> tuple[np.ndarray, np.ndarray]:
    """Payload starts and lengths (int64) of every record in ``arr[:size]``, metadata first.

    Same result and errors as :func:`framing.scan_records`; ``arr`` must have at least one byte of
    padding after ``size``.
    """
    buf = memoryview(arr)[:size]  # type: ignore[arg-type]
    head = _head(buf, file) if size > _WALK_BYTES else None
    chain = None
    if head is not None:
        head_s, head_l, pos = head
        chain = _chain(arr, size, pos) if pos < size else (np.zeros(0, np.int64), np.zeros(0, np.int64))
    if chain is None:
        starts, lengths = scan_records(buf, file)  # type: ignore[arg-type]
        return np.array(starts, dtype=np.int64), np.array(lengths, dtype=np.int64)
    return np.concatenate([head_s, chain[0]]), np.concatenate([head_l, chain[1]])


def _head(buf: memoryview, file: str) -> tuple[np.ndarray, np.ndarray, int] | None:
    """The first records and the position after them, walked one by one; None on any anomaly
    (the whole-file walk then reports it with the first-record hint)."""
    try:
        starts, lengths, pos = walk_records(buf, file, _HEAD_RECORDS)  # type: ignore[arg-type]
    except TraceFormatError:
        return None
    return np.array(starts, dtype=np.int64), np.array(lengths, dtype=np.int64), pos


def _candidates(arr: np.ndarray, lo: int, size: int) -> tuple[np.ndarray, np.ndarray] | None:
    """``(record start, prefix bytes)`` of every position in ``[lo, size)`` that a 1–3 byte varint
    prefix followed by the id tag could start, in ascending order of start; None when there are
    more than one per ``_MIN_RECORD`` bytes (no trace has records that small on average; a file
    full of 0x08 bytes must not cost many times its size here)."""
    tags = []
    limit = (size - lo) // _MIN_RECORD + 1024
    found = 0
    for b0 in range(lo, size, _BLOCK):
        b1 = min(b0 + _BLOCK, size)
        tags.append(np.flatnonzero(arr[b0:b1] == _ID_TAG) + b0)
        found += len(tags[-1])
        if found > limit:
            return None
    t = np.concatenate(tags) if tags else np.zeros(0, np.int64)
    t = t[(t >= lo + 1) & (arr[t - 1] < 0x80)]  # the prefix's last byte
    starts, plens = [t - 1], [np.ones(len(t), np.int64)]
    cont = t
    for width in (2, 3):  # longer prefixes: every earlier byte has the continuation bit
        cont = cont[(cont >= lo + width) & (arr[cont - width] >= 0x80)]
        starts.append(cont - width)
        plens.append(np.full(len(cont), width, np.int64))
    s, k = np.concatenate(starts), np.concatenate(plens)
    order = np.argsort(s, kind="stable")
    return s[order], k[order]


def _prefix_lengths(arr: np.ndarray, s: np.ndarray, k: np.ndarray) -> np.ndarray:
    """The record lengths whose 1-3-byte varint prefixes start at ``s`` (``k`` bytes each)."""
    length = (arr[s] & 0x7F).astype(np.int64)
    for byte in (1, 2):
        more = np.flatnonzero(k > byte)
        length[more] |= (arr[s[more] + byte] & 0x7F).astype(np.int64) << (7 * byte)
    return length


def _chain(arr: np.ndarray, size: int, first: int) -> tuple[np.ndarray, np.ndarray] | None:
    """Starts and lengths of the records from ``first`` to the end, or None if the chain leaves
    the candidate starts before ending exactly at ``size``."""
    cands = _candidates(arr, first, size)
    if cands is None:
        return None
    s, k = cands
    if not len(s) or s[0] != first:
        return None
    length = _prefix_lengths(arr, s, k)
    nxt = s + k + length
    bad, end = len(s), len(s) + 1
    j = _successors(s, nxt)
    hit = (j < len(s)) & (s[np.minimum(j, len(s) - 1)] == nxt)
    jump = np.empty(len(s) + 2, dtype=np.int64)
    jump[:-2] = np.where(hit, j, np.where(nxt == size, end, bad))
    jump[:-2][length == 0] = bad  # a zero-length node record is an error: the walk reports it
    jump[bad], jump[end] = bad, end
    chain = _pruned(jump, bad, end)
    if chain is not None:
        return s[chain] + k[chain], length[chain]
    # Pointer doubling: ``path`` holds the candidate index after 0, 1, ... steps; each round
    # appends as many steps again through the table of 2^r steps, then squares that table.
    path = np.zeros(1, dtype=np.int64)
    while path[-1] < bad:
        path = np.concatenate([path, jump[path]])
        jump = jump[jump]
    stop = int(np.argmax(path >= bad))
    if path[stop] != end:
        return None
    path = path[:stop]
    return s[path] + k[path], length[path]


def _successors(s: np.ndarray, nxt: np.ndarray) -> np.ndarray:
    """``np.searchsorted(s, nxt)`` for ascending candidate starts ``s`` and each one's successor
    ``nxt``: the successor of a real record is usually the next candidate or the one after (a
    record with a 2-byte prefix is also a false 1-byte candidate one byte on), so only the
    others are searched. The binary search of every candidate was a fifth of a generated
    trace's framing (4.6 of 25 ms at 200k records).

    Where ``nxt[i] == s[i + 1]``, the left insertion point is ``i + 1``, as ``nxt[i] > s[i]``
    (a record has a prefix); where ``nxt[i] == s[i + 2]`` and ``s[i + 1] < nxt[i]``, it is
    ``i + 2``."""
    n = len(s)
    j = np.arange(1, n + 1, dtype=np.int64)
    near = np.zeros(n, dtype=bool)
    near[:-1] = nxt[:-1] == s[1:]
    two = np.zeros(n, dtype=bool)
    two[:-2] = (nxt[:-2] == s[2:]) & (s[1:-1] < nxt[:-2])
    j[two] += 1
    miss = np.flatnonzero(~(near | two))
    j[miss] = np.searchsorted(s, nxt[miss])
    return j


_PRUNE_ROUNDS = 4  # rounds of pruning before pointer doubling decides


def _pruned(jump: np.ndarray, bad: int, end: int) -> np.ndarray | None:
    """Candidate indices of the chain from candidate 0 to the end of the data, found by pruning;
    None if a few rounds do not isolate it.

    Every record after the first is the successor of the record before it, so the chain keeps
    only candidates that some kept candidate jumps to: each round drops the false candidates no
    kept one points at (runs of false candidates pointing at each other shrink by one a round).
    Once the kept candidates, in order, each jump to the next and the last to the end, they are
    the chain: a few O(n) rounds instead of log2(n) rounds of pointer doubling.
    """
    member = np.ones(len(jump) - 2, dtype=bool)
    for _ in range(_PRUNE_ROUNDS):
        idx = np.flatnonzero(member)
        succ = jump[idx]
        if (succ[:-1] == idx[1:]).all() and succ[-1] == end:
            return idx
        member = np.zeros(len(jump) - 2, dtype=bool)
        member[succ[succ < bad]] = True
        member[0] = True
    return None


def scan_arrays(arr: np.ndarray, files: list[tuple[int, int, str]]) -> list[tuple[np.ndarray, np.ndarray] | None]:
    """:func:`scan_array` of each ``(base, size, file)`` laid out in ``arr`` (each followed by its
    padding), with the candidate chains of all of them found in one pass; None for a file the
    batch cannot frame (its own :func:`scan_array` then walks it and raises its error).

    A rank set of a thousand ~80 KB files paid the ~30 numpy calls of :func:`_chain` per file
    (0.37 s of a 1,024-file load), and its files under ``_WALK_BYTES`` a Python step per record.
    Records never cross their file's end, so one table of candidates over the batch holds every
    file's chain apart: a jump is valid only within its file, and each file's chain is checked on
    its own (a bad file does not hold the others back). Nothing here raises: a file's result is
    either exactly its chain or None.
    """
    out: list[tuple[np.ndarray, np.ndarray] | None] = [None] * len(files)
    if len(files) < 2 or len(arr) <= _WALK_BYTES:  # one file, or a few small ones: framed alone
        return out
    heads: list[tuple[int, np.ndarray, np.ndarray]] = []
    lo: list[int] = []
    hi: list[int] = []
    for i, (base, size, file) in enumerate(files):
        head = _head(memoryview(arr)[base : base + size], file)  # type: ignore[arg-type]
        if head is None:
            continue
        head_s, head_l, pos = head
        if pos >= size:
            out[i] = (head_s, head_l)
            continue
        heads.append((i, head_s, head_l))
        lo.append(base + pos)
        hi.append(base + size)
    if heads:
        chains = _chains(arr, np.array(lo, dtype=np.int64), np.array(hi, dtype=np.int64))
        for (i, head_s, head_l), chain in zip(heads, chains):
            if chain is not None:
                base = files[i][0]
                out[i] = (np.concatenate([head_s, chain[0] - base]), np.concatenate([head_l, chain[1]]))
    return out


def _chains(arr: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> list[tuple[np.ndarray, np.ndarray] | None]:
    """:func:`_chain` of every range ``[lo[r], hi[r])`` (ascending, disjoint) at once: the
    records' starts and lengths (positions in ``arr``), or None where a few pruning rounds do not
    isolate the range's chain (:func:`scan_array` then decides alone, pointer doubling included)."""
    ranges = len(lo)
    fail: list[tuple[np.ndarray, np.ndarray] | None] = [None] * ranges
    limit = int(((hi - lo) // _MIN_RECORD + 1024).sum())
    tags, found = [], 0
    for b0 in range(int(lo[0]), int(hi[-1]), _BLOCK):
        tags.append(np.flatnonzero(arr[b0 : min(b0 + _BLOCK, int(hi[-1]))] == _ID_TAG) + b0)
        found += len(tags[-1])
        if found > limit:
            return fail
    t = np.concatenate(tags)
    f = np.searchsorted(lo, t, side="right") - 1  # the range each tag byte lies in (-1: before all)
    fc = np.maximum(f, 0)
    inside = (f >= 0) & (t < hi[fc])
    t, fc = t[inside], fc[inside]
    tag_lo = lo[fc]
    keep = (t >= tag_lo + 1) & (arr[t - 1] < 0x80)
    t, tag_lo, fc = t[keep], tag_lo[keep], fc[keep]
    starts, plens, files = [t - 1], [np.ones(len(t), np.int64)], [fc]
    for width in (2, 3):  # as _candidates: every earlier byte of a longer prefix has the continuation bit
        keep = (t >= tag_lo + width) & (arr[t - width] >= 0x80)
        t, tag_lo, fc = t[keep], tag_lo[keep], fc[keep]
        starts.append(t - width)
        plens.append(np.full(len(t), width, np.int64))
        files.append(fc)
    s = np.concatenate(starts)
    order = np.argsort(s, kind="stable")
    s, k, fs = s[order], np.concatenate(plens)[order], np.concatenate(files)[order]
    if not len(s):
        return fail
    length = _prefix_lengths(arr, s, k)
    nxt = s + k + length
    bad, end = len(s), len(s) + 1
    j = _successors(s, nxt)
    hit = (j < len(s)) & (s[np.minimum(j, len(s) - 1)] == nxt) & (nxt < hi[fs])
    jump = np.where(hit, j, np.where(nxt == hi[fs], end, bad))
    jump[length == 0] = bad
    seed = np.minimum(np.searchsorted(s, lo), len(s) - 1)  # the first candidate of each range
    seeded = s[seed] == lo  # a range whose first record is no candidate is left to scan_array
    member = np.ones(len(s), dtype=bool)
    good = np.zeros(ranges, dtype=bool)
    for _ in range(_PRUNE_ROUNDS):
        idx = np.flatnonzero(member)
        succ, fi = jump[idx], fs[idx]
        last = np.ones(len(idx), dtype=bool)  # the last kept candidate of its range
        last[:-1] = fi[1:] != fi[:-1]
        ok = np.where(last, succ == end, np.append(succ[:-1] == idx[1:], False))
        good = seeded & (np.bincount(fi[~ok], minlength=ranges) == 0)
        if good.all():
            break
        member = np.zeros(len(s), dtype=bool)
        member[succ[succ < bad]] = True
        member[seed[seeded]] = True
    cut = np.searchsorted(fi, np.arange(ranges + 1)).tolist()
    result = fail
    for r in np.flatnonzero(good).tolist():
        chain = idx[cut[r] : cut[r + 1]]
        result[r] = (s[chain] + k[chain], length[chain])
    return result
