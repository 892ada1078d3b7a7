"""Trace statistics (``chakra-pipe info``): the figures chakra-format.md §8 quotes for the fixtures.

Degrees, roots, sinks and forward references are over ``data_deps`` — the edges every simulator
resolves and the ones §8.1 measures. The critical path is the simulator's schedule on the recorded
durations (``schedule``: slots and overlap as ``simulate`` has them, see schedule.py); the longest
dependency chain is reported twice beside it: over ``data_deps`` (the Chakra C++ feeder's view,
46,140 µs on ``chakra.0.et``) and over ``data_deps ∪`` resolvable ``ctrl_deps`` (None when that
union has a cycle, as in ``chakra.0.et``). Without durations (all 0) the text says so plainly.
"""

from __future__ import annotations

import os
from collections import Counter

import numpy as np

from ..et import schema
from ..et.graph import TraceGraph, load_graph
from ..et.traceset import resolve
from ..rankset.graphalgo import critical_path, issue_order, resolved_parents
from .schedule import scheduled_path

TOP_DANGLING = 5  # most frequent dangling targets listed


def graph_info(g: TraceGraph) -> dict:
    """Statistics of one trace as a JSON-ready dict (plain ints, stable key order)."""
    n = len(g)
    types = g.types
    by_type = {schema.NODE_TYPE_NAMES.get(t, str(t)): int(c) for t, c in zip(*np.unique(types, return_counts=True))}
    data = resolved_parents(g, ("data",), self_loops=True)
    indeg = np.diff(g.data_ptr)
    outdeg = np.bincount(data.parents, minlength=n) if n else np.zeros(0, dtype=np.int64)
    _, data_parent = g.dep_indices("data")
    _, ctrl_parent = g.dep_indices("ctrl")
    child = np.repeat(np.arange(n, dtype=np.int64), indeg)
    forward = int((g.data_ids > g.ids[child]).sum()) if n else 0
    return {
        "file": g.path,
        "nodes": n,
        "nodes_by_type": by_type,
        "comm_bytes": comm_bytes(g),
        "roots": int((indeg == 0).sum()),
        "sinks": int((outdeg == 0).sum()),
        "deps": {
            "data": int(len(g.data_ids)),
            "ctrl": int(len(g.ctrl_ids)),
            "dangling_data": int((data_parent < 0).sum()),
            "dangling_ctrl": int((ctrl_parent < 0).sum()),
            "top_dangling_ctrl": _top(g.ctrl_ids[ctrl_parent < 0]),
            "top_dangling_data": _top(g.data_ids[data_parent < 0]),
        },
        "forward_references": forward,
        "max_in_degree": int(indeg.max()) if n else 0,
        "max_out_degree": int(outdeg.max()) if n else 0,
        "duration_micros_sum": int(g.duration_micros.sum()),
        "critical_path": {"data": _critical(g, ("data",)), "data_ctrl": _critical(g, ("data", "ctrl"))},
        "durations_recorded": bool(g.duration_micros.any()),
        "schedule": scheduled_path(g),
    }


def comm_bytes(g: TraceGraph) -> dict[str, int]:
    """Bytes by collective name, plus ``SEND``/``RECV`` for point-to-point (``comm_size`` sums)."""
    size = g.int_attr("comm_size", 0)
    ctype = g.int_attr("comm_type", -1)
    out: Counter[str] = Counter()
    coll = np.nonzero(g.types == schema.COMM_COLL_NODE)[0]
    for t in np.unique(ctype[coll]):
        sel = coll[ctype[coll] == t]
        out[schema.COMM_TYPE_NAMES.get(int(t), "no_comm_type")] += int(size[sel].sum())
    for t, name in ((schema.COMM_SEND_NODE, "SEND"), (schema.COMM_RECV_NODE, "RECV")):
        sel = g.types == t
        if sel.any():
            out[name] += int(size[sel].sum())
    return dict(sorted(out.items()))


def _critical(g: TraceGraph, which: tuple[str, ...]) -> dict | None:
    """Longest path over ``duration_micros`` (µs, node count, end ids); None when cyclic."""
    parents = resolved_parents(g, which, self_loops=True)
    order, stuck = issue_order(parents, g.ids)
    if stuck.any() or not len(g):
        return None
    micros, path = critical_path(parents, order, g.duration_micros)
    return {"micros": micros, "nodes": len(path), "from": int(g.ids[path[0]]), "to": int(g.ids[path[-1]])}


def _top(ids: np.ndarray) -> list[list[int]]:
    """``[[id, count], ...]`` of the most frequent ids, most frequent first (ties by id)."""
    if not len(ids):
        return []
    uniq, counts = np.unique(ids, return_counts=True)
    order = np.lexsort((uniq, -counts))[:TOP_DANGLING]
    return [[int(uniq[k]), int(counts[k])] for k in order]


def trace_info(trace_or_prefix: str | os.PathLike) -> list[dict]:
    """Statistics of each file of a single trace or a rank set, in rank order."""
    return [graph_info(load_graph(f)) for f in resolve(trace_or_prefix)]


def format_info(info: dict) -> str:
    """Human-readable block for one file."""
    deps = info["deps"]
    top = ", ".join(f"{i} ×{c}" for i, c in deps["top_dangling_ctrl"])
    lines = [
        f"{info['file']}:",
        f"  nodes: {info['nodes']:,} (" + ", ".join(f"{k} {v:,}" for k, v in info["nodes_by_type"].items()) + ")",
        "  comm bytes: " + (", ".join(f"{k} {v:,}" for k, v in info["comm_bytes"].items()) or "none"),
        f"  roots: {info['roots']:,}  sinks: {info['sinks']:,}",
        f"  data deps: {deps['data']:,} ({deps['dangling_data']:,} dangling)  "
        f"ctrl deps: {deps['ctrl']:,} ({deps['dangling_ctrl']:,} dangling{': ' + top if top else ''})",
        f"  forward references: {info['forward_references']:,}",
        f"  max in-degree: {info['max_in_degree']:,}  max out-degree: {info['max_out_degree']:,}",
        f"  duration_micros sum: {info['duration_micros_sum']:,}",
        *_critical_lines(info),
    ]
    return "\n".join(lines)


def _critical_lines(info: dict) -> list[str]:
    if not info["durations_recorded"]:
        return [
            (
                "  critical path: none — every duration_micros is 0 (no timing recorded, e.g. a host trace "
                "converted without Kineto)"
            )
        ]
    cp, sched = info["critical_path"], info["schedule"]
    path = (
        f"{_fmt(sched)} as simulate issues it (CPU, GPU and comm slots, recorded durations)"
        if sched
        else "none (the simulator cannot run this file; see validate)"
    )
    chain = f"{_fmt(cp['data'])} over data deps, {_fmt(cp['data_ctrl'])} over data ∪ ctrl deps"
    return [f"  critical path: {path}", f"  longest dependency chain: {chain}"]


def _fmt(path: dict | None) -> str:
    if path is None:
        return "none (cyclic)"
    return f"{path['micros']:,} µs ({path['nodes']:,} nodes, {path['from']} to {path['to']})"
