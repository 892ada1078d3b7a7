"""Logical topologies the collective algorithms walk: rings per dimension, binary trees, plans.

Mirrors ASTRA-sim's ``GeneralComplexTopology``: one logical dimension per entry of the
``*-implementation`` list; ``one*`` algorithms make one ring over every NPU and end the list; a
``doubleBinaryTree`` dimension hands out its two trees alternately (successive chunks alternate).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ...errors import ConfigError
from ..config import Algorithm

CLOCKWISE, ANTICLOCKWISE = 0, 1


class RingTopology:
    """NPUs of one logical ring in ring order; ``local`` rings (sub-groups) use the 10-ns bus hop."""

    __slots__ = ("index", "key", "local", "members")

    def __init__(self, members: list[int], me: int, local: bool = False, key=None):
        self.members = members
        self.index = {npu: i for i, npu in enumerate(members)}
        self.check_member(me)
        self.local = local
        # Identifies the ring among the NPUs of one simulation (hashing a P-tuple per use was O(P)).
        self.key = tuple(members) if key is None else key

    def check_member(self, me: int) -> None:
        if me not in self.index:
            raise ConfigError(f"NPU {me} is not a member of its logical ring {self.members}")

    @property
    def size(self) -> int:
        return len(self.members)

    def index_of(self, npu: int) -> int:
        return self.index[npu]

    def receiver(self, npu: int, direction: int) -> int:
        i = self.index[npu] + (1 if direction == CLOCKWISE else -1)
        return self.members[i % len(self.members)]

    def sender(self, npu: int, direction: int) -> int:
        return self.receiver(npu, ANTICLOCKWISE if direction == CLOCKWISE else CLOCKWISE)


ROOT, INTERMEDIATE, LEAF = "root", "intermediate", "leaf"


class BinaryTree:
    """ASTRA-sim's in-order numbered tree: a root with one full subtree (left when root = max)."""

    def __init__(self, size: int, start: int, stride: int, root_max: bool):
        depth = 1
        tmp = size
        while tmp > 1:
            depth += 1
            tmp //= 2
        # node: [id, parent, left, right] with indices into self._nodes
        self._nodes: list[list] = [[-1, None, None, None]]
        sub = self._grow(depth - 1, 0)
        if root_max:
            self._nodes[0][2] = sub
        else:
            self._nodes[0][3] = sub
        self._next = start
        self._stride = stride
        self.by_id: dict[int, int] = {}
        self._number(0)
        self.size = size

    def _grow(self, depth: int, parent: int) -> int:
        me = len(self._nodes)
        self._nodes.append([-1, parent, None, None])
        if depth > 1:
            self._nodes[me][2] = self._grow(depth - 1, me)
            self._nodes[me][3] = self._grow(depth - 1, me)
        return me

    def _number(self, n: int) -> None:
        stack: list[int] = []
        cur: int | None = n
        while stack or cur is not None:
            while cur is not None:
                stack.append(cur)
                cur = self._nodes[cur][2]
            cur = stack.pop()
            self._nodes[cur][0] = self._next
            self.by_id[self._next] = cur
            self._next += self._stride
            cur = self._nodes[cur][3]

    def _node(self, npu: int) -> list:
        if npu not in self.by_id:
            raise ConfigError(
                f"doubleBinaryTree: NPU {npu} is not in its tree (the dimension size "
                f"{self.size} must be a power of two)"
            )
        return self._nodes[self.by_id[npu]]

    def _id(self, ref) -> int:
        return -1 if ref is None else self._nodes[ref][0]

    def parent(self, npu: int) -> int:
        return self._id(self._node(npu)[1])

    def left(self, npu: int) -> int:
        return self._id(self._node(npu)[2])

    def right(self, npu: int) -> int:
        return self._id(self._node(npu)[3])

    def kind(self, npu: int) -> str:
        n = self._node(npu)
        if n[1] is None:
            return ROOT
        if n[2] is None and n[3] is None:
            return LEAF
        return INTERMEDIATE


class DoubleBinaryTree:
    """Two trees (root = max id, root = min id) handed out alternately, one per chunk."""

    def __init__(self, size: int, trees: tuple[BinaryTree, BinaryTree]):
        self.trees = trees
        self.counter = 0  # per NPU: its successive chunks alternate trees
        self.size = size

    @staticmethod
    def build(size: int, start: int, stride: int) -> tuple[BinaryTree, BinaryTree]:
        return BinaryTree(size, start, stride, True), BinaryTree(size, start, stride, False)

    def next_tree(self) -> BinaryTree:
        t = self.trees[self.counter % 2]
        self.counter += 1
        return t


@dataclass
class Dimension:
    """One logical dimension of a plan: its algorithm, its NPU count and its ring or double binary tree."""

    algorithm: Algorithm
    size: int
    ring: RingTopology | None = None
    dbt: DoubleBinaryTree | None = None

    def basic(self):
        """The per-phase topology (advances the tree alternation, as ASTRA-sim does per call)."""
        return self.dbt.next_tree() if self.dbt is not None else self.ring


class LogicalTopology:
    """Logical dimensions of one collective type for one NPU (global plan or a sub-group ring)."""

    def __init__(self, dims: list[Dimension]):
        self.dims = dims

    @classmethod
    def global_plan(
        cls, me: int, physical: tuple[int, ...], algos: tuple[Algorithm, ...], rings: dict | None = None
    ) -> LogicalTopology:
        """``rings`` shares the (immutable) ring objects between the NPUs of one simulation."""
        rings = {} if rings is None else rings

        def ring(base: int, step: int, p: int) -> RingTopology:
            key = (base, step, p)
            r = rings.get(key)
            if r is None:
                r = rings[key] = RingTopology([base + k * step for k in range(p)], me, key=key)
            return r

        if len(algos) > len(physical):
            raise ConfigError(f"{len(algos)} algorithms listed for a {len(physical)}-dimensional network")
        dims: list[Dimension] = []
        offset = 1
        last = len(algos) - 1
        for d, algo in enumerate(algos):
            p = physical[d]
            if algo.one:
                total = math.prod(physical)
                dims.append(Dimension(algo, total, ring=ring(0, 1, total)))
                break
            if algo.base == "doubleBinaryTree":
                start = me % offset if d == last else (me - me % (offset * p)) + me % offset
                trees = rings.get(("dbt", p, start, offset))
                if trees is None:  # the trees are immutable: one pair per tree set, not per NPU
                    trees = rings["dbt", p, start, offset] = DoubleBinaryTree.build(p, start, offset)
                dims.append(Dimension(algo, p, dbt=DoubleBinaryTree(p, trees)))
            else:
                index = (me % (offset * p)) // offset
                base = me - index * offset
                dims.append(Dimension(algo, p, ring=ring(base, offset, p)))
            offset *= p
        return cls(dims)

    @classmethod
    def group_ring(
        cls, me: int, members: list[int], algos: tuple[Algorithm, ...], rings: dict | None = None
    ) -> LogicalTopology:
        """Sub-group: a 1-D ring in listed order; a multi-entry list collapses to ``ring`` (§2.5).

        ``rings`` shares one ring object between the members (one per NPU was O(P^2) for big groups).
        """
        algo = algos[0] if len(algos) == 1 else Algorithm("ring")
        if algo.base == "doubleBinaryTree":
            raise ConfigError("doubleBinaryTree cannot run on a communicator sub-group")
        key = ("group", tuple(members))
        ring = None if rings is None else rings.get(key)
        if ring is None:
            ring = RingTopology(list(members), me, local=True, key=key)
            if rings is not None:
                rings[key] = ring
        else:
            ring.check_member(me)
        return cls([Dimension(algo, len(members), ring=ring)])
