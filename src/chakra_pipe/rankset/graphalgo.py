"""Dependency-graph algorithms over :class:`~chakra_pipe.et.graph.TraceGraph` CSR columns.

Traces reach millions of nodes and chains as deep as the trace is long (a PyTorch thread's CPU ops
form one chain), so everything here is iterative — no recursion — and works on flat integer arrays:
``ptr``/``parents`` is a CSR list of parent *record indices* per child, with dangling ids removed.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass

import numpy as np

from ..et.graph import TraceGraph


@dataclass(frozen=True)
class Parents:
    """CSR parent lists by child record index: ``parents[ptr[i]:ptr[i+1]]`` are i's parents."""

    ptr: np.ndarray
    parents: np.ndarray

    @property
    def n(self) -> int:
        return len(self.ptr) - 1

    def counts(self) -> np.ndarray:
        return np.diff(self.ptr)


def resolved_parents(graph: TraceGraph, which: tuple[str, ...] = ("data",), self_loops: bool = False) -> Parents:
    """Parent indices of every node over the union of the named dependency lists.

    Dangling ids (not in the file) are dropped: they are reported by the validator, and ASTRA-sim's
    feeder refuses the file before scheduling, so there is no edge to follow. Self-dependencies are
    dropped unless ``self_loops`` (the validator reports them as their own rule, so cycle search
    need not find them a second time).
    """
    return parents_of(len(graph), [graph.dep_indices(w) for w in which], self_loops)


def parents_of(n: int, lists: list[tuple[np.ndarray, np.ndarray]], self_loops: bool = False) -> Parents:
    """:func:`resolved_parents` over CSR ``(ptr, parent_index)`` lists already resolved (the file rules
    resolve each list once per rank and reuse it: at thousands of small ranks the per-call numpy
    overhead, not the data, is the cost)."""
    children, parents = [], []
    for ptr, par in lists:
        children.append(np.repeat(np.arange(n, dtype=np.int64), np.diff(ptr)))
        parents.append(par)
    child = np.concatenate(children) if children else np.zeros(0, dtype=np.int64)
    par = np.concatenate(parents) if parents else np.zeros(0, dtype=np.int64)
    keep = par >= 0
    if not self_loops:
        keep &= par != child
    child, par = child[keep], par[keep]
    order = np.argsort(child, kind="stable")
    ptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(child, minlength=n), out=ptr[1:])
    return Parents(ptr, par[order])


def children_csr(p: Parents) -> tuple[np.ndarray, np.ndarray]:
    """The transpose: ``(cptr, children)`` with each parent's children in ascending child index."""
    n = p.n
    child = np.repeat(np.arange(n, dtype=np.int64), p.counts())
    order = np.argsort(p.parents, kind="stable")
    cptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(p.parents, minlength=n), out=cptr[1:])
    return cptr, child[order]


def issue_order(p: Parents, ids: np.ndarray) -> tuple[list[int], np.ndarray]:
    """Kahn's algorithm picking the smallest ready node id first (ASTRA-sim's issue pass order).

    Returns ``(order, stuck)``: the record indices in issue order and a boolean mask of the nodes
    that never become ready — non-empty exactly when the graph has a cycle (they sit on a cycle or
    downstream of one).
    """
    n = p.n
    cptr, children = children_csr(p)
    indeg = p.counts().tolist()
    cptr_l, ch = cptr.tolist(), children.tolist()
    id_l = ids.tolist()
    ready = [(id_l[i], i) for i in np.nonzero(p.counts() == 0)[0].tolist()]
    heapq.heapify(ready)
    order: list[int] = []
    pop, push = heapq.heappop, heapq.heappush
    while ready:
        _, v = pop(ready)
        order.append(v)
        for c in ch[cptr_l[v] : cptr_l[v + 1]]:
            indeg[c] -= 1
            if indeg[c] == 0:
                push(ready, (id_l[c], c))
    stuck = np.ones(n, dtype=bool)
    stuck[np.asarray(order, dtype=np.int64)] = False
    return order, stuck


def find_cycle(p: Parents, stuck: np.ndarray) -> list[int]:
    """One dependency cycle among the ``stuck`` nodes, as record indices in parent→child order.

    Every stuck node keeps at least one stuck parent (otherwise Kahn would have released it), so
    walking "some stuck parent" from any stuck node must revisit a node; the revisited stretch is
    a cycle. Empty when nothing is stuck.
    """
    idx = np.nonzero(stuck)[0]
    if not len(idx):
        return []
    ptr, par = p.ptr, p.parents
    pos: dict[int, int] = {}
    path: list[int] = []
    v = int(idx[0])
    while v not in pos:
        pos[v] = len(path)
        path.append(v)
        cand = par[ptr[v] : ptr[v + 1]]
        v = int(cand[stuck[cand]][0])
    cycle = path[pos[v] :]
    cycle.reverse()  # the walk followed child→parent links
    return cycle


def critical_path(p: Parents, order: list[int], weight: np.ndarray) -> tuple[int, list[int]]:
    """Longest path (sum of node ``weight``) through an acyclic graph, and its record indices.

    ``order`` must be a topological order covering every node.
    """
    ptr, par = p.ptr.tolist(), p.parents.tolist()
    w = weight.astype(np.int64).tolist()
    dist = [0] * p.n
    best_parent = [-1] * p.n
    for v in order:
        best, arg = 0, -1
        for q in par[ptr[v] : ptr[v + 1]]:
            if dist[q] > best or arg < 0:
                best, arg = dist[q], q
        dist[v] = best + w[v]
        best_parent[v] = arg
    if not dist:
        return 0, []
    end = max(range(len(dist)), key=dist.__getitem__)
    path = [end]
    while best_parent[path[-1]] >= 0:
        path.append(best_parent[path[-1]])
    path.reverse()
    return dist[end], path
