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
from typing import Generic, TypeVar

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


def _has_p2p(graph) -> bool:
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
        if _has_p2p(graph):
            return None, None
        return self._same.get(_content(graph))

    def put(self, key: Key | None, graph, value: T) -> None:
        if key is not None:
            self._same.put(key, _content(graph), value)


def _content(graph) -> tuple[np.ndarray, ...]:
    return (np.frombuffer(graph.buf, dtype=np.uint8),)
