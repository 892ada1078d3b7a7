"""Where the data-parallel axis lies in a rank set, and how its groups widen.

A rank set's ranks are ``rank = inner + S·(d + D·outer)``: ``d`` the data-parallel replica
(``D`` of them, stride ``S``), ``(inner, outer)`` the position inside a replica — Megatron's
``tp_i + tp·(dp_i + dp·pp_i)`` is the case ``S = tp``. Widening to ``M = k·D`` replicas copies the
``D`` replicas ``k`` times ("blocks"), so everything inside a block (p2p peers, tags, per-block
groups) is an exact copy of the original and every group is either

* **spanning** — all replicas (a DP group), or one residue class ``d ≡ c (mod s)`` of them
  (expert-data-parallel): it grows to the same pattern over ``M`` replicas, or
* **local** — any other subset of replicas (tensor/pipeline groups: one replica; expert-parallel
  blocks): it is copied into every block with the same size.

A group must be a product (replica set) × (positions); one that mixes replicas irregularly has no
well-defined widening and is refused.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import InputError


@dataclass(frozen=True)
class DpAxis:
    """``D`` replicas of stride ``S`` in a world of ``N`` ranks."""

    width: int
    stride: int
    world: int

    def __post_init__(self) -> None:
        if self.width < 2 and self.world > 1:  # a one-rank set widens its world group (dp.identify)
            raise InputError("no DP group to widen: the set has one data-parallel replica")
        if self.world % (self.width * self.stride):
            raise InputError(f"DP width {self.width} with stride {self.stride} does not tile {self.world} ranks")

    def coords(self, rank: int) -> tuple[int, tuple[int, int]]:
        """``(d, (inner, outer))`` of an old rank."""
        s, d = self.stride, self.width
        return (rank // s) % d, (rank % s, rank // (s * d))

    def new_rank(self, d: int, pos: tuple[int, int], width: int) -> int:
        return pos[0] + self.stride * (d + width * pos[1])

    def dp_group(self, rank: int) -> list[int]:
        _, pos = self.coords(rank)
        return [self.new_rank(d, pos, self.width) for d in range(self.width)]


@dataclass(frozen=True)
class GroupShape:
    """A group as (replica set) × (positions), with how it widens."""

    members: tuple[int, ...]
    replicas: tuple[int, ...]  # sorted replica indices d
    positions: tuple[tuple[int, int], ...]  # sorted (inner, outer)
    spanning: bool
    residue: tuple[int, int] | None  # (c, s) for a spanning residue class; None when all replicas

    @property
    def kind(self) -> tuple:
        """Structural class: how generators number groups is per class (tp, dp, ep, edp)."""
        if self.spanning:
            return ("spanning", self.residue[1] if self.residue else 1)
        return ("local", len(self.replicas))


def shape_of(axis: DpAxis, pg: str, members: list[int]) -> GroupShape:
    coords = [axis.coords(m) for m in members]
    replicas = sorted({d for d, _ in coords})
    positions = sorted({p for _, p in coords})
    if len(set(members)) != len(replicas) * len(positions):
        raise InputError(
            f"group {pg} {members} mixes data-parallel replicas irregularly, so it has no well-defined widening"
        )
    spanning, residue = False, None
    if len(replicas) == axis.width > 1:  # with one replica (a one-rank set) named groups stay local
        spanning = True
    elif len(replicas) > 1:
        step = replicas[1] - replicas[0]
        c = replicas[0]
        if step > 1 and axis.width % step == 0 and c < step and replicas == list(range(c, axis.width, step)):
            spanning, residue = True, (c, step)
    if spanning and list(members) != sorted(members):
        raise InputError(
            f"group {pg} lists its members out of rank order, so where new replicas join its ring is undefined"
        )
    return GroupShape(tuple(members), tuple(replicas), tuple(positions), spanning, residue)


def widen(axis: DpAxis, shape: GroupShape, block: int, width: int) -> tuple[int, ...]:
    """Members of ``shape``'s new group as seen from copy ``block`` of the replicas, at ``width``."""
    if shape.spanning:
        c, s = shape.residue or (0, 1)
        return tuple(sorted(axis.new_rank(d, p, width) for d in range(c, width, s) for p in shape.positions))
    out = []
    for m in shape.members:
        d, p = axis.coords(m)
        out.append(axis.new_rank(block * axis.width + d, p, width))
    return tuple(out)
