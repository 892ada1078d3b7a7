"""``dp --to M``: re-target the data-parallel width of a rank set.

The DP groups are those of ``--group PG`` when the user names one; otherwise, in order: METADATA process
groups labelled ``pg_desc: "dp"`` (our generator) or ``DATA_PARALLEL_GROUP`` (Megatron-Core), the
``generate llm`` parameters in GlobalMetadata, or — for a set with no group smaller than the world — the
whole world. A one-rank set (a one-GPU capture of a DDP model: its gradient all-reduces run on the
one-member world group) widens its world group, and its named groups are copied to every rank (so one
whose collectives run on a group labelled data-parallel, or a generated one, is refused). The ``D``
replicas are then copied to ``M = k·D`` (see :mod:`.dp_axis`), with every ``pg_name``, p2p peer,
METADATA table and the comm-group file rewritten. Collective sizes follow ASTRA-sim's ``comm_size``
meaning on a group that grows from ``n`` to ``n'`` ranks: an all-reduce buffer and an all-to-all
per-rank buffer keep their size; an all-gather's per-rank input is a shard of a fixed whole, so it
becomes ``ceil(size·n/n')``; a reduce-scatter's input keeps its size, re-padded to a multiple of ``n'``
when it was padded to a multiple of ``n`` (ZeRO buckets). With ``D | M`` this reproduces exactly what
``generate llm --dp M`` writes.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from ..errors import InputError
from ..et import schema
from ..et.attrs import get_attr, get_int
from ..et.process_groups import format_process_groups, parse_process_groups
from ..et.traceset import WORLD_PG_NAMES
from ..rankset.comm import WORLD, canonical_group, lookup_group
from .comm import set_int_attr
from .dp_axis import DpAxis, GroupShape, shape_of, widen
from .rankset import RankSet

GENERATOR = "chakra-pipe generate llm"
# pg_desc values that name a data-parallel group: ours, and Megatron-Core's (NCCL and gloo twins).
DP_DESCS = frozenset({"dp", "DATA_PARALLEL_GROUP", "DATA_PARALLEL_GROUP_GLOO"})
GENERATED_DP1 = "no DP group to widen: the set was generated with dp 1 (it has no gradient reduction to widen)"


def _one_rank_axis(rs: RankSet, group: str | None) -> DpAxis:
    """A one-rank set's DP axis: its world group, when a collective runs there to widen.

    Its named groups are copied to every rank (one member each), so a collective on a group
    labelled data-parallel would stay a one-member copy: refused rather than widened without its
    gradient traffic."""
    if group is not None and group not in WORLD_PG_NAMES:
        raise InputError("a one-rank set widens its world group (--group 0) only", where="dp --group")
    if _generator_config(rs.metadata[0]) is not None:
        raise InputError(GENERATED_DP1)
    used = {get_attr(n, "pg_name", "") for n in rs.nodes[0] if n.type == schema.COMM_COLL_NODE}
    labelled = sorted((pg for pg in used if rs.descs.get(canonical_group(pg)) in DP_DESCS), key=str)
    if labelled:
        raise InputError(
            f"the one-rank set runs collectives on group {labelled[0]}, labelled data-parallel "
            f"({rs.descs[canonical_group(labelled[0])]}): only its world group can be widened, and that group's "
            "reductions would stay one-member copies"
        )
    if not used & WORLD_PG_NAMES:
        raise InputError(
            "no DP group to widen: the one-rank set has no collective on its world group (a one-GPU run "
            "without DDP has no gradient reduction to widen)"
        )
    return DpAxis(1, 1, 1)


def _generator_config(metadata) -> dict | None:
    if get_attr(metadata, "generator", None) != GENERATOR:
        return None
    try:
        config = json.loads(get_attr(metadata, "config", ""))
    except (json.JSONDecodeError, TypeError):
        return None
    return config if isinstance(config, dict) else None


def _axis_of(members: list[int], world: int, what: str) -> DpAxis:
    """The DP axis whose replica group through ``members[0]`` is ``members`` (evenly strided)."""
    members = sorted(members)
    stride = members[1] - members[0] if len(members) > 1 else 1
    if members != list(range(members[0], members[0] + stride * len(members), stride)):
        raise InputError(f"{what} {members} is not an evenly strided set of replicas")
    axis = DpAxis(len(members), stride, world)
    if axis.dp_group(members[0]) != members:
        raise InputError(f"{what} {members} does not start a replica block of a {world}-rank layout")
    return axis


def identify(rs: RankSet, group: str | None = None) -> DpAxis:
    """The set's DP axis (through ``group`` when the user names a DP group), or exit 2 naming why not."""
    world = len(rs)
    if world == 1:
        return _one_rank_axis(rs, group)
    if group is not None:
        members = list(range(world)) if group in WORLD_PG_NAMES else lookup_group(rs.groups(), group)
        if members is None:
            raise InputError(f"the set has no process group {group!r}", where="dp --group")
        return _axis_of(members, world, f"group {group}")
    labelled = sorted({tuple(sorted(m)) for pg, m in rs.tables.items() if rs.descs.get(pg) in DP_DESCS})
    if labelled:
        axis = _axis_of(list(labelled[0]), world, "data-parallel group")
        expected = sorted({tuple(axis.dp_group(r)) for r in range(world)})
        if labelled != expected:
            raise InputError("the groups labelled as data-parallel are not evenly strided replicas of one layout")
        return axis
    config = _generator_config(rs.metadata[0])
    if (
        config is not None
        and all(isinstance(config.get(k), int) for k in ("dp", "tp", "pp"))
        and config["dp"] * config["tp"] * config["pp"] == world
    ):
        if config["dp"] == 1:
            raise InputError(GENERATED_DP1)
        if config.get("ep", 1) == config["dp"]:
            raise InputError(
                f"the expert-parallel groups are the DP groups (ep = dp = {config['dp']}), so expert "
                "all-to-alls cannot be told from gradient reductions; generate with ep < dp"
            )
        return DpAxis(config["dp"], config["tp"], world)
    smaller = sorted((pg for pg, m in rs.groups().items() if set(m) != set(range(world))), key=int)
    if smaller:
        raise InputError(
            f"cannot identify the data-parallel groups: the set has groups smaller than the world "
            f"({', '.join(smaller[:3])}{', …' if len(smaller) > 3 else ''}) and none is labelled "
            "pg_desc 'dp' or 'DATA_PARALLEL_GROUP' (name one with --group)"
        )
    return DpAxis(world, 1, world)


def resized(comm_type: int, size: int, n: int, n_new: int) -> int:
    """A collective's ``comm_size`` after its group grows from ``n`` to ``n_new`` ranks."""
    if n == n_new:
        return size
    if comm_type == schema.ALL_GATHER:
        return -(-size * n // n_new)
    if comm_type == schema.REDUCE_SCATTER and size % n == 0:
        return -(-size // n_new) * n_new
    return size


@dataclass
class _Plan:
    """Old groups' shapes and the names of the new groups."""

    axis: DpAxis
    width: int
    shapes: dict[str, GroupShape]
    names: dict[tuple[int, ...], str]
    _memo: dict[tuple[str, int], tuple[str, tuple[int, ...]]] = field(default_factory=dict)

    @property
    def world(self) -> int:
        return self.axis.world // self.axis.width * self.width

    def group(self, pg: str, block: int) -> tuple[str, tuple[int, ...]]:
        key = (pg, block)
        if key not in self._memo:  # every rank of a block asks the same few questions, once per node
            members = widen(self.axis, self.shapes[pg], block, self.width)
            self._memo[key] = (self.names[members], members)
        return self._memo[key]

    def peer(self, old: int, block: int) -> int:
        d, pos = self.axis.coords(old)
        return self.axis.new_rank(block * self.axis.width + d, pos, self.width)


def plan(rs: RankSet, axis: DpAxis, width: int) -> _Plan:
    """Shapes of every named group and deterministic names for the widened ones.

    New groups are numbered class by class (classes ordered by their lowest old id; a class is the
    group's ``pg_desc`` or else its structural kind), then by members — the order ``generate llm``
    numbers tp, dp, ep and edp groups in.
    """
    groups = {pg: m for pg, m in rs.groups().items() if pg not in WORLD_PG_NAMES}
    shapes = {pg: shape_of(axis, pg, m) for pg, m in groups.items()}
    klass = {pg: ("desc", rs.descs[pg]) if pg in rs.descs else shapes[pg].kind for pg in groups}
    first: dict[tuple, int] = {}
    for pg in sorted(groups, key=int):
        first.setdefault(klass[pg], int(pg))
    blocks = range(width // axis.width)
    keyed = sorted({(first[klass[pg]], widen(axis, shapes[pg], b, width)) for pg in groups for b in blocks})
    names: dict[tuple[int, ...], str] = {}
    for _, members in keyed:
        names.setdefault(members, str(len(names) + 1))
    return _Plan(axis, width, shapes, names)


def _rewrite_table(node, p: _Plan, block: int, old_count: int) -> bool:
    values = node.inputs.values
    if parse_process_groups(values)[1]:
        return False  # not a process-group table: nothing of ours to rewrite
    entries = json.loads(values[2:-2])
    compact = json.dumps(entries, separators=(",", ":"), ensure_ascii=True) == values[2:-2]
    out, seen = [], set()
    for entry in entries:
        entry = dict(entry)
        if entry["pg_name"] in WORLD_PG_NAMES:
            if entry.get("ranks"):
                entry["ranks"] = list(range(p.world))
            if "group_size" in entry:
                entry["group_size"] = p.world
        else:
            name, members = p.group(canonical_group(entry["pg_name"]), block)
            # PyTorch's empty ``ranks`` means "every rank"; keep it where the group is still the world.
            whole = not entry.get("ranks") and len(members) == p.world
            entry.update(pg_name=name, ranks=[] if whole else list(members))
            if "group_size" in entry:
                entry["group_size"] = len(members)
        if isinstance(entry.get("group_count"), int):
            entry["group_count"] += len(p.names) - old_count
        if entry["pg_name"] not in seen:
            seen.add(entry["pg_name"])
            out.append(entry)
    node.inputs.values = format_process_groups(out, compact)
    return node.inputs.values != values


def _rewrite_node(node, p: _Plan, block: int, src: int, old_count: int) -> bool:
    """Rewrite one copied node for its new rank; True when anything changed."""
    if node.type == schema.METADATA_NODE:
        return _rewrite_table(node, p, block, old_count)
    changed = False
    if node.type == schema.COMM_COLL_NODE:
        pg = get_attr(node, "pg_name", "")
        pg = pg if isinstance(pg, str) else ""
        key = canonical_group(pg)  # the group ASTRA-sim reads it as ("03" is group 3)
        if key == WORLD:
            n, n_new = p.axis.world, p.world
        elif key in p.shapes:
            name, members = p.group(key, block)
            n, n_new = len(p.shapes[key].members), len(members)
            for attr in node.attr:
                if attr.name == "pg_name" and attr.WhichOneof("value") == "string_val" and attr.string_val != name:
                    attr.string_val, changed = name, True
        else:
            raise InputError(
                f"node {node.id} uses pg_name {pg!r}, which names no group of the set", where=f"rank {src}"
            )
        size = get_int(node, "comm_size")
        if size is not None:
            comm_type = get_int(node, "comm_type")
            new_size = resized(-1 if comm_type is None else comm_type, size, n, n_new)
            if new_size != size:
                set_int_attr(node, "comm_size", new_size)
                changed = True
    elif node.type in (schema.COMM_SEND_NODE, schema.COMM_RECV_NODE):
        for key in ("comm_src", "comm_dst"):
            old = get_int(node, key)
            if old is None:
                continue
            if not 0 <= old < p.axis.world:
                raise InputError(
                    f"node {node.id} has {key} {old} outside the set's {p.axis.world} ranks", where=f"rank {src}"
                )
            new = p.peer(old, block)
            if new != old:
                set_int_attr(node, key, new)
                changed = True
    return changed


def _widened_metadata(metadata, factor: int):
    """GlobalMetadata with ``generate llm``'s ``dp`` and global batch updated (same per-replica batch)."""
    out = type(metadata)()
    out.CopyFrom(metadata)
    config = _generator_config(metadata)
    if config is not None and isinstance(config.get("dp"), int) and isinstance(config.get("global_batch"), int):
        config.update(dp=config["dp"] * factor, global_batch=config["global_batch"] * factor)
        for attr in out.attr:
            if attr.name == "config" and attr.WhichOneof("value") == "string_val":
                attr.string_val = json.dumps(config, sort_keys=True)
    return out


@dataclass(frozen=True)
class DpOp:
    """``dp --to M [--group PG]``: ``group`` names one DP group (``0``: the world) when labels are missing."""

    to: int
    group: str | None = None

    name = "dp"

    def apply(self, rs: RankSet) -> int:
        axis = identify(rs, self.group)
        if self.to < axis.width or self.to % axis.width:
            raise InputError(
                f"--to {self.to} is not a multiple of the set's DP width {axis.width} (replicas are "
                "copied whole; shrinking would cut p2p peers and groups)",
                where="--to",
            )
        p = plan(rs, axis, self.to)
        old_count = len(p.shapes)
        metadata, nodes, touched = [], [], 0
        factor = self.to // axis.width
        for rank in range(p.world):
            d, pos = (rank // axis.stride) % self.to, (rank % axis.stride, rank // (axis.stride * self.to))
            src, block = axis.new_rank(d % axis.width, pos, axis.width), d // axis.width
            copies = []
            for old in rs.nodes[src]:
                node = type(old)()
                node.CopyFrom(old)
                touched += _rewrite_node(node, p, block, src, old_count)
                copies.append(node)
            nodes.append(copies)
            metadata.append(_widened_metadata(rs.metadata[src], factor))
        rs.metadata, rs.nodes = metadata, nodes
        if rs.comm_groups is not None:
            rs.comm_groups = {name: list(members) for members, name in p.names.items()}
        rs.tables, rs.descs = {}, {}
        rs.reread_tables()
        return touched
