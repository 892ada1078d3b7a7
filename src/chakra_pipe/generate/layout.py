"""Megatron-style rank layout and the communicator groups it implies.

``world = dp · tp · pp`` and ``rank = tp_i + tp · (dp_i + dp · pp_i)``: tensor-parallel ranks are
adjacent (so TP maps onto the first, fastest network dimension, where ASTRA-sim's dimension-0 ring
places consecutive NPUs), then data-parallel replicas, then pipeline stages.

Groups (each listed in ascending rank order, which is the ring order ASTRA-sim uses for a sub-group):

* ``tp``  — same (dp_i, pp_i): Megatron's tensor-parallel all-reduces.
* ``dp``  — same (tp_i, pp_i): gradient all-reduce / reduce-scatter + all-gather of dense weights.
* ``ep``  — expert parallelism carved out of DP: ``ep`` consecutive dp indices (``dp_i // ep``
  blocks) exchange tokens with all-to-all.
* ``edp`` — expert data parallelism: same ``dp_i mod ep``; reduces expert gradients (size dp/ep).

Numbering is deterministic: groups of size 1 are dropped (nothing to communicate), a group equal
to the whole world uses ASTRA-sim's default group ``pg_name "0"``, and every other distinct member
list gets the next id (from 1) in the order tp, dp, ep, edp, then by first member. ``pg_name`` is
that id as a string and ``PREFIX.comm_groups.json`` maps the same id to the members, so the two
can never disagree.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..errors import InputError
from ..et.traceset import WORLD_PG


@dataclass(frozen=True)
class Layout:
    """Parallel degrees and the derived rank ↔ (tp_i, dp_i, pp_i) mapping."""

    dp: int
    tp: int
    pp: int
    ep: int = 1
    moe: bool = False
    group_ids: dict[tuple[int, ...], str] = field(default_factory=dict, compare=False, repr=False)
    # (role, lowest member) -> members: every rank of a group asks for the same tuple (a rank's
    # METADATA node and pg names), and building a 2,048-member DP group per rank made hashing an
    # in-memory 131,072-rank set's bytes O(world · group size) in Python.
    _members: dict[tuple[str, int], tuple[int, ...]] = field(default_factory=dict, compare=False, repr=False)

    def __post_init__(self) -> None:
        for key in ("dp", "tp", "pp", "ep"):
            if getattr(self, key) < 1:
                raise InputError(f"{key} must be >= 1, got {getattr(self, key)}", where=f"--{key}")
        if self.dp % self.ep:
            raise InputError(
                f"ep {self.ep} must divide dp {self.dp} (expert groups are carved out of DP)", where="--ep"
            )
        if self.ep > 1 and not self.moe:
            raise InputError("ep > 1 needs a mixture-of-experts model (--experts)", where="--ep")
        self._number_groups()

    @property
    def world(self) -> int:
        return self.dp * self.tp * self.pp

    @property
    def stage_stride(self) -> int:
        """Rank distance between neighbouring pipeline stages."""
        return self.tp * self.dp

    def rank(self, tp_i: int, dp_i: int, pp_i: int) -> int:
        return tp_i + self.tp * (dp_i + self.dp * pp_i)

    def coords(self, rank: int) -> tuple[int, int, int]:
        """``(tp_i, dp_i, pp_i)`` of a rank."""
        return rank % self.tp, (rank // self.tp) % self.dp, rank // self.stage_stride

    def members(self, role: str, rank: int) -> tuple[int, ...]:
        """``rank``'s ``role`` group in ascending rank order (built once per group)."""
        key = (role, self._lead(role, rank))
        found = self._members.get(key)
        if found is None:
            found = self._members[key] = self._build_members(role, rank)
        return found

    def _lead(self, role: str, rank: int) -> int:
        """The lowest member of ``rank``'s ``role`` group (O(1): the group's key)."""
        t, d, p = self.coords(rank)
        if role == "tp":
            return self.rank(0, d, p)
        if role == "dp":
            return self.rank(t, 0, p)
        return self.rank(t, d - d % self.ep if role == "ep" else d % self.ep, p)

    def _build_members(self, role: str, rank: int) -> tuple[int, ...]:
        t, d, p = self.coords(rank)
        if role == "tp":
            return tuple(self.rank(i, d, p) for i in range(self.tp))
        if role == "dp":
            return tuple(self.rank(t, i, p) for i in range(self.dp))
        if role == "ep":
            first = d - d % self.ep
            return tuple(self.rank(t, first + i, p) for i in range(self.ep))
        if role == "edp":
            return tuple(self.rank(t, d % self.ep + self.ep * j, p) for j in range(self.dp // self.ep))
        raise ValueError(f"unknown group role {role!r}")

    def active_roles(self) -> tuple[str, ...]:
        """Roles that carry collectives: tp, dp always; ep/edp only for expert parallelism."""
        return ("tp", "dp", "ep", "edp") if self.moe and self.ep > 1 else ("tp", "dp")

    def _number_groups(self) -> None:
        ids = self.group_ids
        for role in self.active_roles():
            for rank in range(self.world):
                # A group is first met at its lowest member: only those ranks build the member tuple
                # (building it for every rank was O(world · group size), minutes at 131,072 ranks).
                if not self._leads(role, rank):
                    continue
                members = self.members(role, rank)
                if len(members) > 1 and len(members) < self.world and members not in ids:
                    ids[members] = str(len(ids) + 1)

    def _leads(self, role: str, rank: int) -> bool:
        """Whether ``rank`` is the lowest member of its ``role`` group."""
        t, d, _ = self.coords(rank)
        return {"tp": t == 0, "dp": d == 0, "ep": d % self.ep == 0, "edp": d < self.ep}[role]

    def pg_name(self, role: str, rank: int) -> str | None:
        """The ``pg_name`` of ``rank``'s group for ``role``; None when the group is just the rank."""
        members = self.members(role, rank)
        if len(members) == 1:
            return None
        if len(members) == self.world:
            return WORLD_PG
        return self.group_ids[members]

    def group_size(self, role: str) -> int:
        return len(self.members(role, 0))

    def comm_groups(self) -> dict[str, list[int]]:
        """ASTRA-sim comm-group JSON content: ``{"<id>": [ranks…]}`` in id order."""
        return {gid: list(members) for members, gid in sorted(self.group_ids.items(), key=lambda kv: int(kv[1]))}
