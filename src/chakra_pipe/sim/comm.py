"""Issuing COMM nodes (ASTRA-sim's ``Workload::issue_comm``): calls into the system layer.

A collective goes to ``Sys.generate_collective`` with its group, involved dimensions and priority; a
BROADCAST is replayed for its duration; a send or receive goes to ``Sys.send`` / ``Sys.recv`` with its
tag taken modulo ``TAG_SPACE``. Each finished node is recorded in the result and completed in its
workload.

The per-node input rules (CPU-side communication, missing or non-integer attributes, collectives
ASTRA-sim does not simulate, negative or empty sizes, a send's source or a receive's destination
other than the rank, a peer outside the set) are ``chakra_pipe.rankset``'s, which ``simulate``
applies before anything runs. Only what the run alone can see is checked here: an all-gather too
small for this hardware point's ``preferred-dataset-splits`` (symmetric runs skip the set analysis)
and a ``pg_name`` whose METADATA node has not run yet when the collective is issued (ASTRA-sim exits).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..et import schema
from ..et.collectives import ASTRA_SIM
from ..et.traceset import WORLD_PG_NAMES
from ..rankset.comm import pg_name_hint
from .config import all_gather_too_small
from .groups import group_of
from .system.sys import TAG_SPACE, Group, chunking

if TYPE_CHECKING:
    from ..errors import InputError
    from .workload import RankTrace, Workload

S = schema
SUPPORTED_COLLECTIVES = {c.comm_type: c.name for c in ASTRA_SIM}


def issue_comm(w: Workload, i: int) -> None:
    """Start COMM node ``i`` of ``w``'s rank (collective, BROADCAST, send or receive)."""
    t = w.t
    size = t.attr(i, "comm_size")
    if t.types[i] == S.COMM_COLL_NODE:
        _collective(w, i, size)
    else:
        _point_to_point(w, i, size)


def _collective(w: Workload, i: int, size: int) -> None:
    t, sys = w.t, w.sys
    ctype = t.attr(i, "comm_type")
    if ctype == S.BROADCAST:
        runtime = t.dur_us[i] * 1000 or 1
        w.res.add_collective(w.rank, t.ids[i], "BROADCAST", size, t.pg_name.get(i, ""), sys.now, sys.now + runtime)
        sys.register_event(lambda: w.complete(i), runtime)
        return
    kind = SUPPORTED_COLLECTIVES[ctype]
    # ASTRA-sim rewrites a chunk smaller than the NPU count (0 included) to the minimum chunk,
    # except for all-gather: size // preferred-dataset-splits = 0 divides by zero (spec §3.2), for a
    # custom all-gather too (upstream chunks before it takes the custom branch).
    too_small = all_gather_too_small(size, w.cfg.preferred_dataset_splits) if ctype == S.ALL_GATHER else None
    if too_small:
        raise t.error(i, too_small)
    pg = t.pg_name.get(i, "")
    # ASTRA-sim's workload hands a named group (anything but "" / "0") to the system layer, whose
    # plan, dimensions included, replaces the node's involved_dim; involved_dim restricts the world
    # group's global plan only (a node may carry both: the legacy converter's [true], tools that
    # write one flag per NPU beside pg_name).
    involved = t.involved_dim.get(i) if pg in WORLD_PG_NAMES else None
    group = None
    if involved is None:
        group = group_of(w.groups, pg)
        if group is None:
            raise _no_group(t, i, pg)
    prefix = _custom_prefix(w, i, kind, None if pg in WORLD_PG_NAMES else group)
    if prefix is not None:
        _custom(w, i, kind, size, prefix, group)
        return
    start = sys.now
    ds = sys.generate_collective(kind, size, involved, group, t.attr(i, "comm_priority", 0))

    def finished() -> None:
        w.res.add_collective(w.rank, t.ids[i], kind, size, pg, start, sys.now)
        w.complete(i)

    ds.notifier = finished


def _custom_prefix(w: Workload, i: int, kind: str, named: Group | None) -> str | None:
    """Node ``i``'s custom prefix, None for the native algorithms (spec §3.5 lookup). On a named
    group (``named``) the first collective of each type decides for all later ones: upstream's
    ``CommunicatorGroup::get_collective_plan`` looks the implementation up for that node and caches
    the plan per type; on the world group (no group handed down) every node is looked up."""
    node_id = w.t.ids[i]
    if named is None:
        return w.cfg.custom_prefix(node_id, kind)
    if kind not in named.custom:
        named.custom[kind] = w.cfg.custom_prefix(node_id, kind)
    return named.custom[kind]


def _custom(w: Workload, i: int, kind: str, size: int, prefix: str, group: Group | None) -> None:
    """A Chakra-defined custom collective (spec §3.5): this rank runs ``prefix.<its position in the
    group>.et``; the custom trace's sizes count, ``size`` (the node's ``comm_size``) only decides
    whether upstream's data set ever completes: ``Sys::generate_collective`` creates it for the
    native chunking's stream count and then runs the custom algorithm as one stream. ``group`` is
    the one the native path would hand down (None: the world group's global plan); its stream
    counter numbers the custom stream and its members map positions (``involved_dim`` plays no part:
    a custom collective has no dimensions)."""
    t, sys = w.t, w.sys
    splits = w.cfg.preferred_dataset_splits
    streams = chunking(kind, size, splits, sys.total_nodes)[2]
    if streams != 1:
        raise t.error(
            i,
            f"a custom collective never completes in ASTRA-sim unless the native chunking gives one stream: "
            f"preferred-dataset-splits {splits} cuts comm_size {size} B into {streams} streams, and its "
            "data set waits for all of them while the custom algorithm runs as one; use preferred-dataset-splits 1",
        )
    pg = t.pg_name.get(i, "")
    members = (group or w.groups[""]).members
    program = w.custom.program(prefix, members.index(w.rank), len(members))
    start = sys.now

    def finished() -> None:
        w.res.add_collective(w.rank, t.ids[i], kind, size, pg, start, sys.now)
        w.complete(i)

    sys.generate_custom(program, members, group, t.attr(i, "comm_priority", 0)).notifier = finished


def _point_to_point(w: Workload, i: int, size: int) -> None:
    t, sys, rank = w.t, w.sys, w.rank
    tag = t.attr(i, "comm_tag") % TAG_SPACE
    send = t.types[i] == S.COMM_SEND_NODE
    start = sys.now

    def arrived() -> None:
        kind = "SEND" if send else "RECV"
        w.res.add_collective(rank, t.ids[i], kind, size, t.pg_name.get(i, ""), start, sys.now)
        w.complete(i)

    if send:
        sys.send(t.attr(i, "comm_dst"), size, tag, arrived)
    else:
        sys.recv(t.attr(i, "comm_src"), size, tag, arrived)


def _no_group(t: RankTrace, i: int, pg: str) -> InputError:
    """The error of a collective whose ``pg_name`` selects no group (yet), saying why ASTRA-sim cannot
    read it as a group id where that is the reason."""
    why = pg_name_hint(pg) or " (yet: its METADATA node has not run)"
    return t.error(i, f"pg_name {pg!r} names no communicator group{why}")
