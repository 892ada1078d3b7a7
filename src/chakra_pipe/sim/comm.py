"""Issuing COMM nodes (ASTRA-sim's ``Workload::issue_comm``): checks, then calls into the system layer.

A collective goes to ``Sys.generate_collective`` with its group, involved dimensions and priority; a
BROADCAST is replayed for its duration; a send or receive goes to ``Sys.send`` / ``Sys.recv`` with its
tag taken modulo ``TAG_SPACE``. Each finished node is recorded in the result and completed in its
workload.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..et import schema
from ..et.collectives import ASTRA_SIM
from .config import all_gather_too_small
from .groups import group_of
from .system.sys import TAG_SPACE

if TYPE_CHECKING:
    from .workload import Workload

S = schema
SUPPORTED_COLLECTIVES = {c.comm_type: c.name for c in ASTRA_SIM}


def issue_comm(w: Workload, i: int) -> None:
    """Start COMM node ``i`` of ``w``'s rank (collective, BROADCAST, send or receive)."""
    t = w.t
    if t.cpu[i]:
        raise t.error(i, "communication node with is_cpu_op = true")
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
    kind = SUPPORTED_COLLECTIVES.get(ctype)
    if kind is None:
        name = schema.COMM_TYPE_NAMES.get(ctype, str(ctype))
        raise t.error(
            i,
            f"unsupported collective comm type {name} (ASTRA-sim supports ALL_REDUCE, "
            "REDUCE_SCATTER, ALL_GATHER, ALL_TO_ALL; BROADCAST is replayed)",
        )
    # ASTRA-sim rewrites a chunk smaller than the NPU count (0 included) to the minimum chunk,
    # except for all-gather: size // preferred-dataset-splits = 0 divides by zero (spec §3.2).
    if size < 0:
        raise t.error(i, f"comm_size must be >= 0 for a {kind}, got {size}")
    too_small = all_gather_too_small(size, w.cfg.preferred_dataset_splits) if ctype == S.ALL_GATHER else None
    if too_small:
        raise t.error(i, too_small)
    involved = t.involved_dim.get(i)
    pg = t.pg_name.get(i, "")
    group = None
    if involved is None:
        group = group_of(w.groups, pg)
        if group is None:
            raise t.error(i, f"pg_name {pg!r} names no communicator group")
    start = sys.now
    ds = sys.generate_collective(kind, size, involved, group, t.attr(i, "comm_priority", 0))

    def finished() -> None:
        w.res.add_collective(w.rank, t.ids[i], kind, size, pg, start, sys.now)
        w.complete(i)

    ds.notifier = finished


def _point_to_point(w: Workload, i: int, size: int) -> None:
    t, sys, rank = w.t, w.sys, w.rank
    if size <= 0:
        raise t.error(i, f"comm_size must be > 0, got {size}")
    tag = t.attr(i, "comm_tag") % TAG_SPACE
    npus = sys.total_nodes
    send = t.types[i] == S.COMM_SEND_NODE
    if send:
        src, dst = t.attr(i, "comm_src", rank), t.attr(i, "comm_dst")
        if src != rank:
            raise t.error(i, f"send node on rank {rank} names comm_src {src}")
        if not 0 <= dst < npus:
            raise t.error(i, f"comm_dst {dst} is not an NPU (0..{npus - 1})")
    else:
        src, dst = t.attr(i, "comm_src"), t.attr(i, "comm_dst", rank)
        if dst != rank:
            raise t.error(i, f"recv node on rank {rank} names comm_dst {dst}")
        if not 0 <= src < npus:
            raise t.error(i, f"comm_src {src} is not an NPU (0..{npus - 1})")
    start = sys.now

    def arrived() -> None:
        kind = "SEND" if send else "RECV"
        w.res.add_collective(rank, t.ids[i], kind, size, t.pg_name.get(i, ""), start, sys.now)
        w.complete(i)

    if send:
        sys.send(dst, size, tag, arrived)
    else:
        sys.recv(src, size, tag, arrived)
