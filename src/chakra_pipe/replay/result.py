"""RESULT.json: merge the per-rank measurements into one document with bandwidths.

Layout (keys in this order, ranks and nodes in rank / file order so runs diff cleanly):
``trace`` (prefix, files, sha256), ``settings``, ``environment``, ``groups``, ``step_time_ns``
(per iteration the slowest rank's wall time, plus median/min/max), ``ranks`` (per iteration wall
time and per-node measured durations and the bytes handed to each ``torch.distributed`` call),
``collectives`` and ``p2p`` (median time per node, algbw and busbw as nccl-tests defines them).
"""

from __future__ import annotations

import statistics
from typing import Any

from ..et import schema
from ..results.busbw import bandwidth
from .plan import ACT_COLL, ACT_RECV, ACT_SEND, SLOT_NAMES, WORLD, ReplayPlan

SCHEMA = "chakra-pipe/replay/1"


def assemble(plan: ReplayPlan, settings: dict[str, Any], per_rank: list[dict]) -> dict:
    iterations = len(per_rank[0]["iteration_wall_ns"])
    step = [max(r["iteration_wall_ns"][k] for r in per_rank) for k in range(iterations)]
    env = dict(per_rank[0]["environment"], world_size=plan.world_size)
    ranks, colls, p2p = [], [], []
    for rp, res in zip(plan.ranks, per_rank):
        nodes = []
        for i in range(len(rp)):
            durations = [res["end_ns"][k][i] - res["start_ns"][k][i] for k in range(iterations)]
            entry: dict[str, Any] = {
                "id": rp.ids[i],
                "name": rp.names[i],
                "type": schema.NODE_TYPE_NAMES.get(rp.types[i], str(rp.types[i])),
                "slot": SLOT_NAMES[rp.slots[i]],
                "action": rp.actions[i],
                "start_ns": [res["start_ns"][k][i] for k in range(iterations)],
                "duration_ns": durations,
            }
            spec = rp.comm.get(i)
            if spec is not None:
                entry["comm_size"] = spec.nbytes
                entry["call_bytes"] = [res["call_bytes"][k].get(str(i), []) for k in range(iterations)]
            if str(i) in res["replayed_ops"]:
                entry["num_ops"] = rp.num_ops[i]
                entry["replayed_ops"] = res["replayed_ops"][str(i)]
            nodes.append(entry)
            if spec is None:
                continue
            med = int(statistics.median(durations))
            if spec.kind == ACT_COLL:
                bw = bandwidth(spec.comm_type, spec.nbytes, len(spec.members), med)
                colls.append(
                    {
                        "rank": rp.rank,
                        "node": rp.ids[i],
                        "name": rp.names[i],
                        "comm_type": schema.COMM_TYPE_NAMES[spec.comm_type],
                        "group": spec.group or "0",
                        "group_size": len(spec.members),
                        "comm_size": spec.nbytes,
                        "median_time_ns": med,
                        **_bw(bw),
                    }
                )
            elif spec.kind in (ACT_SEND, ACT_RECV):
                bw = bandwidth(None, spec.nbytes, 2, med)
                p2p.append(
                    {
                        "rank": rp.rank,
                        "node": rp.ids[i],
                        "name": rp.names[i],
                        "kind": spec.kind,
                        "peer": spec.peer,
                        "tag": spec.tag,
                        "comm_size": spec.nbytes,
                        "median_time_ns": med,
                        **_bw(bw),
                    }
                )
        ranks.append(
            {
                "rank": rp.rank,
                "file": rp.file,
                "iteration_wall_ns": res["iteration_wall_ns"],
                "iteration_origin_ns": res["iteration_origin_ns"],
                "nodes": nodes,
            }
        )
    groups = {"0": list(range(plan.world_size))}
    groups.update({name: list(m) for name, m in plan.groups.items() if name != WORLD})
    return {
        "schema": SCHEMA,
        "trace": {
            "prefix": plan.prefix,
            "ranks": plan.world_size,
            "files": [r.file for r in plan.ranks],
            "sha256": plan.sha256,
        },
        "settings": settings,
        "environment": env,
        "groups": groups,
        "step_time_ns": {
            "per_iteration": step,
            "median": int(statistics.median(step)),
            "min": min(step),
            "max": max(step),
        },
        "ranks": ranks,
        "collectives": colls,
        "p2p": p2p,
    }


def _bw(bw) -> dict[str, Any]:
    if bw is None:
        return {"size_bytes": None, "algbw_GBps": None, "busbw_GBps": None}
    return {"size_bytes": bw.size_bytes, "algbw_GBps": _sig6(bw.algbw_GBps), "busbw_GBps": _sig6(bw.busbw_GBps)}


def _sig6(x: float) -> float:
    """Six significant digits: measurement noise is far larger, and the JSON stays readable."""
    return float(f"{x:.6g}")
