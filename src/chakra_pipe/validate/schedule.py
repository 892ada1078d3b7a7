"""The critical path of one trace as the simulator would run it on its recorded durations.

A longest dependency chain over ``duration_micros`` is not what a simulator sees: it adds up
nodes that run side by side on different hardware slots and ignores that two nodes of one slot
never overlap. This replays the file through the simulator itself in ASTRA-sim's ``replay-only``
mode (every node, communication included, lasts its ``duration_micros``) on one NPU, so issue
order, the CPU / GPU / communication slots and their overlap are exactly ``simulate``'s. The path
is then read back from the schedule: from the last node to finish, step to whatever ended exactly
when it started — a parent or the previous occupant of its slot.
"""

from __future__ import annotations

from pathlib import Path

from ..errors import ChakraPipeError
from ..et.graph import TraceGraph
from ..et.traceset import TraceSet
from ..rankset.graphalgo import resolved_parents

_REPLAY_SYSTEM = {
    "scheduling-policy": "FIFO",
    "collective-optimization": "baseline",
    "endpoint-delay": 0,
    "preferred-dataset-splits": 1,
    "local-mem-bw": 1,
    "replay-only": 1,
    **{f"{k}-implementation": ["ring"] for k in ("all-reduce", "all-gather", "reduce-scatter", "all-to-all")},
}
_ONE_NPU = {"topology": ["Switch"], "npus_count": [1], "bandwidth": [1.0], "latency": [0.0]}


def scheduled_path(g: TraceGraph) -> dict | None:
    """``{"micros", "nodes", "from", "to"}`` of the simulated schedule; None when it cannot run.

    None means the simulator refuses or cannot finish the file (a cycle, an unsupported node):
    the reason is what ``validate`` reports.
    """
    from ..sim import HardwareConfig, NetworkConfig, SystemConfig, simulate

    if not len(g):
        return None
    hw = HardwareConfig(
        system=SystemConfig.from_dict(_REPLAY_SYSTEM, source="<replay-only>"),
        network=NetworkConfig.from_dict(_ONE_NPU, source="<one NPU>"),
    )
    try:
        result = simulate(TraceSet(g.path, [Path(g.path)], [g]), hw, comm_groups={})
    except ChakraPipeError:
        return None
    (w,) = result._workloads  # the one rank's issue loop: start/end per record index
    start, end = w.start, w.end
    parents = resolved_parents(g, ("data", "ctrl"), self_loops=False)
    ptr, par = parents.ptr.tolist(), parents.parents.tolist()
    by_slot_end: dict[tuple[int, int], int] = {}
    for i in range(len(end)):
        by_slot_end.setdefault((w.slot(i), end[i]), i)
    v = max(range(len(end)), key=lambda i: (end[i], -i))
    path = [v]
    while start[v] > 0:
        prev = [q for q in par[ptr[v] : ptr[v + 1]] if end[q] == start[v]]
        q = prev[0] if prev else by_slot_end.get((w.slot(v), start[v]))
        if q is None or q == v:
            break
        path.append(q)
        v = q
    path.reverse()
    micros = round(result.finish_ns[0] / 1000)
    return {"micros": micros, "nodes": len(path), "from": int(g.ids[path[0]]), "to": int(g.ids[path[-1]])}
