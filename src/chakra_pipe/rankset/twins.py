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

import hashlib
from typing import Generic, TypeVar

import numpy as np

from ..et import schema

T = TypeVar("T")


def twin_key(graph) -> tuple[int, bytes] | None:
    """What identifies ``graph``'s bytes (length, 16-byte BLAKE2b); None for a file with sends or
    receives, whose checks depend on its rank."""
    types = graph.types
    if ((types == schema.COMM_SEND_NODE) | (types == schema.COMM_RECV_NODE)).any():
        return None
    return len(graph.buf), hashlib.blake2b(graph.buf, digest_size=16).digest()


class Twins(Generic[T]):
    """A memo of one value per distinct file content, for one pass over a set's ranks.

    A hit is confirmed by comparing the bytes, so a hash collision can only cost a recomputation.
    """

    def __init__(self) -> None:
        self._seen: dict[tuple[int, bytes], tuple[object, T]] = {}

    def get(self, graph) -> tuple[tuple[int, bytes] | None, T | None]:
        """``(key, value)``: the value kept for a twin of ``graph`` (None when there is none) and the
        key to :meth:`put` this graph's own value under (None: it has no twins)."""
        key = twin_key(graph)
        hit = self._seen.get(key) if key is not None else None
        if hit is not None and _same_bytes(hit[0], graph):
            return key, hit[1]
        return key, None

    def put(self, key: tuple[int, bytes] | None, graph, value: T) -> None:
        if key is not None:
            self._seen.setdefault(key, (graph, value))


def _same_bytes(a, b) -> bool:
    return np.array_equal(np.frombuffer(a.buf, dtype=np.uint8), np.frombuffer(b.buf, dtype=np.uint8))
