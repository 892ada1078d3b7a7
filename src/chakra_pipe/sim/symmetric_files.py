"""Symmetric runs of rank FILES: find a set's DP×TP×PP(×EP) symmetry, prove it, run the quotient.

Why: ``chakra-pipe simulate`` (and the ASTRA-sim drop-ins) read rank files written by ``generate
llm`` or any tool numbering ranks as Megatron does (``rank = t + tp·(d + dp·p)``); only the in-memory
campaign knew the layout, so those files always ran every rank on the full engine. Here the layout is
inferred from the set itself and used only once proven, so the result is the full engine's to the ns
on every rank whenever the quotient run of :mod:`.symmetric` is used.

**Candidates** (:func:`candidates`) come from the set's communicator groups (``rankset``'s one group
table: comm-group file and METADATA): ``tp`` is the size of a group of consecutive ranks starting at 0
(or 1), ``dp`` and ``ep`` sizes of groups of rank 0 with stride ``tp`` (or 1), ``pp = ranks / (tp·dp)``;
the first (fewest representatives) that :func:`.symmetric.fit` and :func:`.symmetric.symmetry_problem`
accept for the hardware is the one proven next. Pipeline peers need no guess: the proof maps them.

**Proof** (:func:`trace_problem`): every rank ``x`` must run its representative ``r = rep(x)``'s
program under the translation ``g`` taking ``x`` to ``r``, in everything the simulator reads
(``RankTrace.build``): the node ids, types, durations, every integer attribute's kind and value with
``comm_src`` / ``comm_dst`` mapped by ``g``, the data and control dependency lists, ``involved_dim``,
and the groups — each ``pg_name`` and each METADATA node's group names map to the names of the
``g``-images of their member lists, one to one (a rank's two groups never fold into one). Column by
column array equality: cheap beside loading the files. A representative's point-to-point peers must be
members of its groups or its pipeline peers (``rank ± tp·dp``), whose delays ``symmetry_problem``
checked. Any difference is logged at INFO with the rank and column, and the full engine runs.

**Result**: the quotient's per-rank lists already cover every rank; here the per-collective records
and the per-rank issue loops (statistics lines, timelines) are expanded too, each rank's records being
its representative's with the rank and its own group names, so every output is the full engine's.
``messages`` / ``fast_messages`` count the representatives' messages only, ``finish_order`` is empty
(a finished run has no use for it).
"""

from __future__ import annotations

import weakref
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

import numpy as np

from ..console import logger
from ..errors import StuckError
from ..et import schema
from ..et.graph import INT_ATTRS
from ..et.traceset import WORLD_PG_NAMES
from ..rankset.comm import WORLD
from ..rankset.groups import GroupTable
from .config import HardwareConfig
from .result import CollectiveRecord, SimResult
from .symmetric import RankSymmetry, SymmetryDeclined, fit, simulate_symmetric, symmetry_problem

log = logger(__name__)

PEER_ATTRS = ("comm_src", "comm_dst")  # rank-valued attributes: mapped by the translation
COLUMNS = ("ids", "types", "duration_micros", "ctrl_ptr", "ctrl_ids", "data_ptr", "data_ids")
MAX_CANDIDATES = 16  # layouts tried against symmetry_problem (each O(ranks)); a real set has 1-3


def candidates(table: GroupTable, world: int) -> list[RankSymmetry]:
    """Layouts the groups suggest, fewest representatives first (module docstring)."""
    rank0 = [m for name, m in table.members.items() if name != WORLD and 1 < len(m) < world and m[0] == 0]
    tps = {len(m) for m in rank0 if m == tuple(range(len(m)))} | {1}
    out = []
    for tp in sorted(tps, reverse=True):
        strided = {len(m) for m in rank0 if m == tuple(range(0, tp * len(m), tp))} | {1}
        for dp in sorted(strided, reverse=True):
            if world % (tp * dp):
                continue
            for ep in sorted(e for e in strided if dp % e == 0):
                out.append(RankSymmetry(tp, dp, world // (tp * dp), ep))
    out.sort(key=lambda s: (s.pp * s.ep, -s.tp))
    return out[:MAX_CANDIDATES]


def find_symmetry(table: GroupTable, world: int, hw: HardwareConfig) -> tuple[RankSymmetry | None, str]:
    """The first candidate the hardware and the groups allow, or None and why not."""
    groups = {i: list(m) for i, (name, m) in enumerate(sorted(table.members.items())) if name != WORLD}
    why = "no candidate layout in the communicator groups"
    for cand in candidates(table, world):
        sym = fit(cand, hw)
        if len(sym.reps()) >= world:
            why = f"tp {cand.tp} dp {cand.dp} pp {cand.pp} ep {cand.ep}: every rank is its own class"
            continue
        problem = symmetry_problem(sym, groups, hw)
        if problem is None:
            return sym, ""
        why = f"tp {cand.tp} dp {cand.dp} pp {cand.pp} ep {cand.ep}: {problem}"
    return None, why


class _NameMap:
    """A rank's group names → its representative's, checked one to one and member-wise."""

    def __init__(self, sym: RankSymmetry, x: int, table: GroupTable):
        self.sym, self.x, self.table = sym, x, table
        self.fwd: dict[str, str] = {}
        self.inv: dict[str, str] = {}

    def add(self, name: str, rep_name: str) -> str | None:
        """Why ``name`` (rank ``x``'s) cannot correspond to ``rep_name`` (None when it can)."""
        known = self.fwd.get(name)
        if known is not None:
            return None if known == rep_name else f"group {name!r} maps onto both {known!r} and {rep_name!r}"
        if rep_name in self.inv:
            return f"groups {self.inv[rep_name]!r} and {name!r} both map onto {rep_name!r}"
        members = self.table.members
        if name not in members or rep_name not in members:
            if name != rep_name or name not in WORLD_PG_NAMES:
                return f"group {name!r} vs {rep_name!r}"
        else:
            image = np.sort(self.sym.translate(self.x, np.asarray(members[name], dtype=np.int64)))
            if not np.array_equal(image, np.asarray(members[rep_name], dtype=np.int64)):
                return f"group {name!r}'s image is not group {rep_name!r}"
        self.fwd[name], self.inv[rep_name] = rep_name, name
        return None


def _rank_problem(sym: RankSymmetry, x: int, gx: Any, gr: Any, table: GroupTable) -> tuple[str | None, _NameMap]:
    """Why rank ``x``'s trace is not its representative's under the translation (None when it is)."""
    names = _NameMap(sym, x, table)
    if len(gx) != len(gr):
        return f"{len(gx)} nodes vs {len(gr)}", names
    for col in COLUMNS:
        if not np.array_equal(getattr(gx, col), getattr(gr, col)):
            return f"column {col}", names
    world = sym.world
    for a in INT_ATTRS:
        kx, vx, vr = gx.attr_kind[a], gx.attr_value[a], gr.attr_value[a]
        if not np.array_equal(kx, gr.attr_kind[a]):
            return f"attribute {a}'s kind", names
        if a in PEER_ATTRS:
            peer = (kx != 0) & (vx >= 0) & (vx < world)
            vx = np.where(peer, sym.translate(x, np.where(peer, vx, 0)), vx)
        if not np.array_equal(vx, vr):
            return f"attribute {a}", names
    if gx.involved_dim != gr.involved_dim:
        return "involved_dim", names
    px, pr = gx.pg_name, gr.pg_name
    if px.keys() != pr.keys():
        return "which nodes carry a pg_name", names
    pairs = {(px[i], pr[i]) for i in px}
    mx, mr = table.metadata[x], table.metadata[sym.rep(x)]
    if mx.keys() != mr.keys() or any(len(mx[i]) != len(mr[i]) for i in mx):
        return "METADATA nodes", names
    pairs.update(p for i in mx for p in zip(mx[i], mr[i]))
    for name, rep_name in sorted(pairs):
        why = names.add(name, rep_name)
        if why is not None:
            return why, names
    return None, names


def _peer_problem(sym: RankSymmetry, graphs: Mapping[int, Any], table: GroupTable) -> str | None:
    """A representative's send/recv peer outside its groups and pipeline peers (delays unchecked)."""
    stride = sym.tp * sym.dp
    for r, g in graphs.items():
        allowed = {r - stride, r + stride}.union(*(m for m in table.members.values() if r in m and len(m) < sym.world))
        for kind, attr in ((schema.COMM_SEND_NODE, "comm_dst"), (schema.COMM_RECV_NODE, "comm_src")):
            on = (g.types == kind) & (g.attr_kind[attr] != 0)
            peers = set(g.attr_value[attr][on].tolist()) - allowed
            if peers:
                return f"rank {r} exchanges messages with rank {min(peers)}, outside its groups and pipeline peers"
    return None


def trace_problem(trace_set: Any, table: GroupTable, sym: RankSymmetry) -> tuple[str | None, list[_NameMap]]:
    """Why some rank's trace is not its representative's translated (module docstring, *Proof*)."""
    ranks = trace_set.ranks
    rep = sym.rep(np.arange(sym.world, dtype=np.int64)).tolist()
    maps = []
    for x, r in enumerate(rep):
        why, names = (None, _NameMap(sym, x, table)) if x == r else _rank_problem(sym, x, ranks[x], ranks[r], table)
        if why is not None:
            return f"rank {x} differs from its representative {r}: {why}", maps
        maps.append(names)
    return _peer_problem(sym, {r: ranks[r] for r in sym.reps()}, table), maps


class _Replica:
    """Rank ``rank``'s issue loop seen through its representative's (same node times by the proof).

    ``t`` is the representative's columns (equal by the proof) with the rank's own file, graph (node
    names for timelines) and ``pg_name``s: no per-rank ``RankTrace.build``."""

    def __init__(self, rank: int, workload: Any, graph: Any):
        self.rank, self._w = rank, workload
        self.t = replace(workload.t, path=str(graph.path), pg_name=dict(graph.pg_name), graph_ref=weakref.ref(graph))

    def __getattr__(self, name: str) -> Any:
        return getattr(self._w, name)


def _expand(result: SimResult, trace_set: Any, sym: RankSymmetry, maps: list[_NameMap]) -> SimResult:
    """Every rank's collective records and issue loop from its representative's (module docstring)."""
    by_rep: dict[int, list[CollectiveRecord]] = {}
    for c in result.collectives:
        by_rep.setdefault(c.rank, []).append(c)
    loops = {w.rank: w for w in result.workloads}
    out, workloads = [], []
    for x, names in enumerate(maps):
        r = int(sym.rep(x))
        if x == r:
            out.extend(by_rep.get(r, ()))
            workloads.append(loops[r])
            continue
        inv = names.inv
        out.extend(
            CollectiveRecord(x, c.node_id, c.kind, c.bytes, inv.get(c.group, c.group), c.start_ns, c.end_ns)
            for c in by_rep.get(r, ())
        )
        workloads.append(_Replica(x, loops[r], trace_set.ranks[x]))
    result.collectives = out
    result._workloads = workloads
    return result


def simulate_file_set(trace_set: Any, hw: HardwareConfig, table: GroupTable) -> SimResult | None:
    """The quotient run of a rank-file set when its symmetry is proven; None (reason logged at INFO)
    when the full engine must run."""
    world = len(trace_set.ranks)
    sym, why = find_symmetry(table, world, hw)
    maps: list[_NameMap] = []
    if sym is not None:
        problem, maps = trace_problem(trace_set, table, sym)
        why = problem or ""
    if sym is None or why:
        log.info("full engine: no proven rank symmetry (%s)", why)
        return None
    reps = sym.reps()
    metadata = {r: {i: [(n, list(table.members[n])) for n in names] for i, names in table.metadata[r].items()} for r in reps}
    groups = {g: list(m) for g, m in table.from_file.items()}
    try:
        result = simulate_symmetric({r: trace_set.ranks[r] for r in reps}, sym, groups, hw, metadata)
    except (SymmetryDeclined, StuckError) as exc:  # the full engine settles the order / explains the stop
        log.info("full engine: symmetric run declined (%s)", exc)
        return None
    log.info("symmetric run of tp %d dp %d pp %d ep %d: %d of %d ranks", sym.tp, sym.dp, sym.pp, sym.ep, len(reps), world)
    return _expand(result, trace_set, sym, maps)
