"""The simulated run as a Chrome trace-event file that Perfetto and chrome://tracing open as is.

Layout: one process per rank (``pid`` = rank, named ``rank R``), one thread per hardware slot with a
fixed integer ``tid`` (named ``cpu``, ``gpu``, ``comm``, ``recv``), one complete (``X``) event per
node with its id, node type and, for communication, comm type, bytes and group in ``args``. The
participants of one collective are joined by a flow (``s`` -> ``t`` ... -> ``f``, one id per
collective): the k-th collective a rank issues in a group is the same collective on every member,
since members issue a group's collectives in the same order (validate checks it). Timestamps are
microseconds, as the format requires; the simulator's integer ns divide exactly into them.
"""

from __future__ import annotations

from ..et import schema
from ..et.traceset import WORLD_PG_NAMES
from ..rankset.comm import canonical_group
from ..rankset.slots import SLOT_COMM, SLOT_CPU, SLOT_GPU, SLOT_NAMES, SLOT_NONE

TIDS = {SLOT_CPU: 0, SLOT_GPU: 1, SLOT_COMM: 2, SLOT_NONE: 3}  # slot -> tid
FLOW_CATEGORY = "collective"


def _us(ns: int) -> float:
    return ns / 1000.0


def chrome_trace(result) -> dict:
    """Trace-event JSON of a finished :class:`SimResult` (see the module docstring)."""
    records = {(c.rank, c.node_id): c for c in result.collectives}
    slices, threads = [], set()
    for w in result.workloads:
        graph = w.t.graph
        for i, (s, e) in enumerate(zip(w.start, w.end)):
            if s < 0:
                continue
            node_id, slot = w.t.ids[i], w.slot(i)
            args = {"node_id": node_id, "type": schema.NODE_TYPE_NAMES.get(w.t.types[i], str(w.t.types[i]))}
            rec = records.get((w.rank, node_id))
            if rec is not None:
                args.update(comm_type=rec.kind, comm_bytes=rec.bytes, group=rec.group or "world")
            name = (graph.name(i) if graph is not None else "") or f"node {node_id}"
            slices.append(
                (
                    w.rank,
                    s,
                    node_id,
                    {
                        "name": name,
                        "ph": "X",
                        "pid": w.rank,
                        "tid": TIDS[slot],
                        "ts": _us(s),
                        "dur": _us(e - s),
                        "args": args,
                    },
                )
            )
            threads.add((w.rank, slot))
    slices.sort(key=lambda x: x[:3])
    meta = []
    for rank in sorted({r for r, _ in threads}):
        meta.append({"name": "process_name", "ph": "M", "pid": rank, "tid": 0, "args": {"name": f"rank {rank}"}})
        meta.append({"name": "process_sort_index", "ph": "M", "pid": rank, "tid": 0, "args": {"sort_index": rank}})
    for rank, slot in sorted(threads):
        meta.append(
            {"name": "thread_name", "ph": "M", "pid": rank, "tid": TIDS[slot], "args": {"name": SLOT_NAMES[slot]}}
        )
    return {"traceEvents": meta + [ev for *_, ev in slices] + _flows(result), "displayTimeUnit": "ns"}


def _flows(result) -> list[dict]:
    """One flow per collective instance joining its participants, in start order."""
    instances: dict[tuple, list] = {}
    seen: dict[tuple, int] = {}
    for c in sorted(result.collectives, key=lambda c: (c.rank, c.start_ns, c.node_id)):
        if c.kind in ("SEND", "RECV"):
            continue
        # ranks may spell one group differently ("3", "03": canonical_group); "" and "0" stay apart
        # as they always were, so the flows of sets without respelled names are unchanged
        group = c.group if c.group in WORLD_PG_NAMES else canonical_group(c.group)
        k = seen.get((c.rank, group), 0)
        seen[(c.rank, group)] = k + 1
        instances.setdefault((group, k), []).append(c)
    out = []
    for flow_id, ((group, k), members) in enumerate(
        sorted(instances.items(), key=lambda x: (x[0][1], x[0][0])), start=1
    ):
        if len(members) < 2:
            continue
        members.sort(key=lambda c: (c.start_ns, c.rank))
        for n, c in enumerate(members):
            ph = "s" if n == 0 else "f" if n == len(members) - 1 else "t"
            out.append(
                {
                    "name": f"{c.kind} #{k} ({group or 'world'})",
                    "cat": FLOW_CATEGORY,
                    "ph": ph,
                    "id": flow_id,
                    "pid": c.rank,
                    "tid": TIDS[2],
                    "ts": _us(c.start_ns),
                    "bp": "e",
                }
            )
    return out
