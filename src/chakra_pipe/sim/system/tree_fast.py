"""Fast path for double-binary-tree phases on the congestion-unaware network: one pass up, one down.

The state machine of :class:`~.double_binary_tree.DoubleBinaryTree` reduces exactly to (``E`` the
bus hop, ``Pd`` the reduction of the whole chunk, ``N`` the unaware delay of a chunk-sized message):

    leaf:          up = start + E
    intermediate:  up = max over both children of max(up[child] + N, start) + E + Pd
    root:          down = max(up[child] + N, start) + E + Pd            (exit then)
    non-root:      from_parent = max(down[parent] + N, up)
                   intermediate: down = from_parent + E + Pd            (exit then)
                   leaf:         exit = from_parent + E

Each intermediate reduces both children's messages whatever order they and its bus callbacks come
in, so no same-time order matters. The tree layout (post-order, parents, children) is built once per
tree and reused by every phase on it (O(P)).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .double_binary_tree import DoubleBinaryTree
from .topology import LEAF, BinaryTree


@dataclass(frozen=True)
class TreeLayout:
    """A tree's members (in-order ids) with parent / children indices, children listed before parents."""

    members: list[int]
    parent: list[int]  # index of the parent, -1 at the root
    children: list[list[int]]
    post_order: list[int]
    index: dict[int, int]

    @classmethod
    def of(cls, tree: BinaryTree) -> TreeLayout:
        members = sorted(tree.by_id)
        index = {npu: i for i, npu in enumerate(members)}
        parent = [index.get(tree.parent(m), -1) for m in members]
        children = [[index[c] for c in (tree.left(m), tree.right(m)) if c >= 0] for m in members]
        root = parent.index(-1)
        order, stack = [], [root]
        while stack:  # reversed pre-order: every child comes before its parent
            n = stack.pop()
            order.append(n)
            stack.extend(children[n])
        order.reverse()
        return cls(members, parent, children, order, index)


class FastDoubleBinaryTree(DoubleBinaryTree):
    """A tree phase evaluated by the phase coordinator instead of message by message (on the aware
    network by ``tree_aware.evaluate_aware``)."""

    def __init__(self, sys, tree: BinaryTree, data_size: int):
        super().__init__(sys, tree, data_size)
        self.tree = tree

    def start(self) -> None:
        self.start_ns = self.sys.now
        coord = self.sys.phase_coordinator
        layout = coord.cached(("tree", id(self.tree)), lambda: TreeLayout.of(self.tree))
        key = ("tree", id(self.tree), self.stream.stream_id, self.stream.steps_finished)
        run = evaluate
        if coord.aware:  # FIFO links (``tree_aware.py``), loaded by the runs that have them
            from .tree_aware import evaluate_aware as run
        coord.join(key, layout.index[self.id], len(layout.members), self, lambda a: run(coord, layout, a))

    def exit(self) -> None:
        self.sys.proceed_to_next_phase(self.stream)


def evaluate(coord, layout: TreeLayout, algos: list[FastDoubleBinaryTree]) -> None:
    first = algos[0]
    size, e = first.data_size, first.sys.endpoint_delay
    pd = first.sys.reduction_delay(size)
    n = len(layout.members)

    def build() -> tuple[list[int], list[int]]:
        kids = np.asarray([i for i in range(n) if layout.parent[i] >= 0], dtype=np.int64)
        mem = np.asarray(layout.members, dtype=np.int64)
        par = mem[np.asarray([layout.parent[i] for i in kids.tolist()], dtype=np.int64)]
        up, down = [0] * n, [0] * n
        for i, u, dn in zip(
            kids.tolist(), coord.delays(mem[kids], par, size).tolist(), coord.delays(par, mem[kids], size).tolist()
        ):
            up[i], down[i] = u, dn
        return up, down

    net_up, net_down = coord.cached(("tree-net", id(first.tree), size), build)
    start = [a.start_ns for a in algos]
    parent, children = layout.parent, layout.children
    up = [0] * n
    got = [0] * n  # when the last child's (root: the only child's) message was taken
    for i in layout.post_order:
        kids = children[i]
        if not kids:
            up[i] = start[i] + e
            continue
        got[i] = max(max(up[c] + net_up[c], start[i]) for c in kids)
        up[i] = got[i] + e + pd
    down = [0] * n
    for i in reversed(layout.post_order):  # parents before children
        a = algos[i]
        par = parent[i]
        if par < 0:
            down[i] = got[i] + e + pd
            coord.exit_at(a, got[i] + e, pd)
            continue
        from_parent = max(down[par] + net_down[i], up[i])
        if a.kind == LEAF:
            coord.exit_at(a, from_parent, e)
        else:
            down[i] = from_parent + e + pd
            coord.exit_at(a, from_parent + e, pd)
    coord.stats.messages += 2 * (n - 1)
    coord.stats.fast_messages += 2 * (n - 1)
