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
checked. Any difference is logged at INFO with the rank and column, and the full engine runs. A
representative's collective over every rank (no ``pg_name``, a world name, ``involved_dim``) passes
the proof but declines the run (:func:`.symmetric.world_collective`): its plan follows the network.

**Result**: the quotient's per-rank lists already cover every rank; here the per-collective records
and the per-rank issue loops (statistics lines, timelines) are expanded too, each rank's records being
its representative's with the rank and its own group names (also the keys of its ``groups``, which
the per-collective rows read sizes from), so every output is the full engine's.
``messages`` / ``fast_messages`` count the representatives' messages only, ``finish_order`` is empty
(a finished run has no use for it).
"""

from __future__ import annotations

import weakref
from collections.abc import Mapping
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import numpy as np

from ..console import logger
from ..et import schema
from ..et.graph import INT_ATTRS
from ..et.traceset import WORLD_PG_NAMES
from ..heap import release_free_heap
from ..rankset.comm import WORLD
from ..rankset.groups import GroupTable
from .config import HardwareConfig
from .result import CollectiveRecord, SimResult

if TYPE_CHECKING:
    from .symmetric import RankSymmetry

PEER_ATTRS = ("comm_src", "comm_dst")  # rank-valued attributes: mapped by the translation
COLUMNS = ("ids", "types", "duration_micros", "ctrl_ptr", "ctrl_ids", "data_ptr", "data_ids")
PEER_BATCH_NODES = 1 << 16  # nodes per vectorised batch of the peer check (bounds its temporaries)
MAX_CANDIDATES = 16  # layouts tried against symmetry_problem (each O(ranks)); a real set has 1-3


def candidates(table: GroupTable, world: int) -> list[RankSymmetry]:
    """Layouts the groups suggest, fewest representatives first (module docstring)."""
    from .symmetric import RankSymmetry

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
    """The first candidate the hardware and the groups allow, or None and why the first (the one with
    fewest representatives, the likeliest layout) is refused."""
    from .symmetric import fit, symmetry_problem

    groups = {name: list(m) for name, m in sorted(table.members.items()) if name != WORLD}
    reasons = []
    for cand in candidates(table, world):
        sym = fit(cand, hw)
        problem = "every rank is its own class" if len(sym.reps()) >= world else symmetry_problem(sym, groups, hw)
        if problem is None:
            return sym, ""
        reasons.append(f"tp {cand.tp} dp {cand.dp} pp {cand.pp} ep {cand.ep}: {problem}")
    return None, reasons[0] if reasons else "no candidate layout in the communicator groups"


def _same(a: np.ndarray, b: np.ndarray) -> bool:
    """Equal dtype, shape and bytes: ``np.array_equal`` costs ~10 µs a call, ~30 calls a rank (most
    are one array: the analysis keeps equal columns of different ranks once, ``rankset/twins.py``)."""
    return a is b or (a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes())


def _column_problem(gx: Any, gr: Any, same_carriers: bool) -> str | None:
    """Which column the simulator reads differs between a rank and its representative (peers and
    group names aside: they are compared mapped, over all ranks at once). ``same_carriers``: the
    same records carry a ``pg_name`` in both, in the same order (then no set comparison)."""
    if len(gx) != len(gr):
        return f"{len(gx)} nodes vs {len(gr)}"
    for col in COLUMNS:
        if not _same(getattr(gx, col), getattr(gr, col)):
            return f"column {col}"
    kinds_x, kinds_r, values_x, values_r = gx.attr_kind, gr.attr_kind, gx.attr_value, gr.attr_value
    for a in INT_ATTRS:
        if not _same(kinds_x[a], kinds_r[a]):
            return f"attribute {a}'s kind"
        if a not in PEER_ATTRS and not _same(values_x[a], values_r[a]):
            return f"attribute {a}"
    if gx.involved_dim != gr.involved_dim:
        return "involved_dim"
    if not same_carriers and gx.pg_name.keys() != gr.pg_name.keys():
        return "which nodes carry a pg_name"
    return None


def _name_pairs(x: int, r: int, gx: Any, gr: Any, table: GroupTable, same_carriers: bool) -> set[tuple[str, str]] | str:
    """(rank ``x``'s group name, its representative's) at every ``pg_name`` and METADATA node."""
    px, pr = gx.pg_name, gr.pg_name
    if same_carriers:  # the same records in the same order (the load's): pair the values directly
        pairs = set(zip(px.values(), pr.values()))
    else:
        pairs = {(px[i], pr[i]) for i in px}
    mx, mr = table.metadata[x], table.metadata[r]
    if mx.keys() != mr.keys() or any(len(mx[i]) != len(mr[i]) for i in mx):
        return "METADATA nodes"
    pairs.update(p for i in mx for p in zip(mx[i], mr[i]))
    return pairs


def _one_to_one(pairs: set[tuple[str, str]], table: GroupTable) -> tuple[dict[str, str], str | None]:
    """The inverse name map (representative's name → rank's) and why the pairs are no bijection of
    known groups (world names only to themselves)."""
    fwd: dict[str, str] = {}
    inv: dict[str, str] = {}
    for name, rep_name in sorted(pairs):
        if fwd.setdefault(name, rep_name) != rep_name:
            return inv, f"group {name!r} maps onto both {fwd[name]!r} and {rep_name!r}"
        if inv.setdefault(rep_name, name) != name:
            return inv, f"groups {inv[rep_name]!r} and {name!r} both map onto {rep_name!r}"
        unknown = name not in table.members or rep_name not in table.members
        if unknown and (name != rep_name or name not in WORLD_PG_NAMES):
            # a name spelled otherwise than its group's key ("01" for group 1) runs on the full engine,
            # which looks it up by canonical_group: the quotient maps records' names as written
            return inv, f"group {name!r} vs {rep_name!r} (a name not written as its group's key)"
    return inv, None


def _images_problem(sym: RankSymmetry, mapped: list[tuple[int, str, str]], table: GroupTable) -> str | None:
    """Why some rank's group is not mapped by its translation onto the representative's group it
    corresponds to (one vectorised translation for every (rank, group) of the set)."""
    known = [(x, n, rn) for x, n, rn in mapped if n in table.members and rn in table.members and n != rn]
    if not known:
        return None
    sizes = np.asarray([len(table.members[n]) for _, n, _ in known], dtype=np.int64)
    if any(len(table.members[rn]) != k for (_, _, rn), k in zip(known, sizes.tolist())):
        bad = next(p for p, k in zip(known, sizes.tolist()) if len(table.members[p[2]]) != k)
        return f"rank {bad[0]}: group {bad[1]!r} and {bad[2]!r} differ in size"
    xs = np.repeat(np.asarray([x for x, _, _ in known], dtype=np.int64), sizes)
    # each group's members as an array once: a group is in thousands of (rank, group) pairs
    arrays = {n: np.asarray(m, dtype=np.int64) for n, m in table.members.items()}
    members = np.concatenate([arrays[n] for _, n, _ in known])
    expected = np.concatenate([arrays[rn] for _, _, rn in known])
    segment = np.repeat(np.arange(len(known)), sizes)
    image = sym.translate(xs, members)
    image = image[np.lexsort((image, segment))]  # each group's image in ascending order, as listed
    wrong = np.flatnonzero(image != expected)
    if len(wrong):
        x, n, rn = known[int(segment[wrong[0]])]
        return f"rank {x}: group {n!r}'s image is not group {rn!r}"
    return None


def _peer_values(sym: RankSymmetry, xs: list[int], gx: list[Any], gr: list[Any]) -> str | None:
    """Why some rank's ``comm_src`` / ``comm_dst`` is not its representative's mapped by the translation
    (vectorised over batches of ranks of at most :data:`PEER_BATCH_NODES` nodes: one batch over every
    rank of a 1,024-rank 96-layer step was ~110 MB of int64 temporaries, the command's peak)."""
    for a in PEER_ATTRS:
        lo = 0
        while lo < len(gx):
            hi, nodes = lo + 1, len(gx[lo])
            while hi < len(gx) and nodes + len(gx[hi]) <= PEER_BATCH_NODES:
                nodes += len(gx[hi])
                hi += 1
            why = _peer_batch(sym, a, xs[lo:hi], gx[lo:hi], gr[lo:hi])
            if why is not None:
                return why
            lo = hi
    return None


def _peer_batch(sym: RankSymmetry, a: str, xs: list[int], gx: list[Any], gr: list[Any]) -> str | None:
    """:func:`_peer_values` of attribute ``a`` over one batch of ranks."""
    world = sym.world
    got = [g.attr_value[a] for g in gx]
    owner = np.repeat(np.asarray(xs, dtype=np.int64), [len(v) for v in got])
    vx = np.concatenate(got)
    kind = np.concatenate([g.attr_kind[a] for g in gx])
    peer = np.flatnonzero((kind != 0) & (vx >= 0) & (vx < world))  # a few records a rank: translate only those
    mapped = vx.copy()
    mapped[peer] = sym.translate(owner[peer], vx[peer])
    wrong = np.flatnonzero(mapped != np.concatenate([g.attr_value[a] for g in gr]))
    if len(wrong):
        return f"rank {int(owner[wrong[0]])} differs from its representative: attribute {a}"
    return None


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


def trace_problem(trace_set: Any, table: GroupTable, sym: RankSymmetry) -> tuple[str | None, list[dict[str, str]]]:
    """Why some rank's trace is not its representative's translated (module docstring, *Proof*), and
    per rank its representative's group names → its own."""
    ranks = trace_set.ranks
    rep = sym.rep(np.arange(sym.world, dtype=np.int64)).tolist()
    inverse: list[dict[str, str]] = []
    mapped: list[tuple[int, str, str]] = []
    others = [x for x, r in enumerate(rep) if x != r]
    carriers = {r: list(ranks[r].pg_name) for r in set(rep)}  # per representative: its many ranks compare to it
    for x, r in enumerate(rep):
        if x == r:
            inverse.append({})
            continue
        same_carriers = list(ranks[x].pg_name) == carriers[r]
        why = _column_problem(ranks[x], ranks[r], same_carriers)
        pairs = why or _name_pairs(x, r, ranks[x], ranks[r], table, same_carriers)
        if isinstance(pairs, str):
            return f"rank {x} differs from its representative {r}: {pairs}", inverse
        inv, why = _one_to_one(pairs, table)
        if why is not None:
            return f"rank {x} differs from its representative {r}: {why}", inverse
        inverse.append(inv)
        mapped.extend((x, n, rn) for rn, n in inv.items())
    why = _images_problem(sym, mapped, table) or _peer_values(
        sym, others, [ranks[x] for x in others], [ranks[rep[x]] for x in others]
    )
    return why or _peer_problem(sym, {r: ranks[r] for r in sym.reps()}, table), inverse


_PROOFS: dict[tuple[int, int, RankSymmetry], tuple[Any, Any, tuple[str | None, list[dict[str, str]]]]] = {}


def _proof(trace_set: Any, table: GroupTable, sym: RankSymmetry) -> tuple[str | None, list[dict[str, str]]]:
    """:func:`trace_problem`, once per trace set, group table and symmetry: a sweep simulates one set
    on many hardware points (the set is never modified; its analysis is cached the same way)."""
    for key in [k for k, (a, b, _) in _PROOFS.items() if a() is None or b() is None]:
        del _PROOFS[key]
    key = (id(trace_set), id(table), sym)
    hit = _PROOFS.get(key)
    if hit is not None and hit[0]() is trace_set and hit[1]() is table:
        return hit[2]
    proof = trace_problem(trace_set, table, sym)
    release_free_heap()  # its translation tables: not carried into the simulation's peak
    _PROOFS[key] = (weakref.ref(trace_set), weakref.ref(table), proof)
    return proof


class _Replica:
    """Rank ``rank``'s issue loop seen through its representative's (same node times by the proof).

    ``t`` is the representative's columns (equal by the proof) with the rank's own file, graph (node
    names for timelines) and ``pg_name``s: no per-rank ``RankTrace.build``."""

    def __init__(self, rank: int, workload: Any, graph: Any, inverse: dict[str, str]):
        self.rank, self._w = rank, workload
        # the rank's own group names (its records carry them): the representative's Group objects,
        # of the same sizes by the proof, which is all the per-collective rows read of them
        self.groups = {inverse.get(name, name): g for name, g in workload.groups.items()}
        self.t = workload.t  # the set is gone: node names fall back as ``SimResult.timeline`` says
        if graph is not None:
            self.t = replace(self.t, path=str(graph.path), pg_name=graph.pg_name, graph_ref=weakref.ref(graph))

    def __getattr__(self, name: str) -> Any:
        return getattr(self._w, name)


class QuotientResult(SimResult):
    """A quotient run's result: per-rank lists for every rank at once; the per-collective records and
    the issue loops of every rank expanded from the representatives' on first use (the CLI's
    ``finished`` lines need neither: at 1,024 ranks the expansion costs four times the run)."""

    _pending: tuple | None = None
    simulated_ranks = 0  # the representatives simulated (the rest are their translates)

    @classmethod
    def of(cls, result: SimResult, trace_set: Any, sym: RankSymmetry, inverse: list[dict[str, str]]) -> QuotientResult:
        out = cls.__new__(cls)
        state = dict(vars(result))
        out._records = state.pop("collectives")
        out.__dict__.update(state)
        out._pending = (weakref.ref(trace_set), sym, inverse)
        out.simulated_ranks = len(sym.reps())
        return out

    @property
    def collectives(self) -> list[CollectiveRecord]:
        self._expand()
        return self._records

    @collectives.setter
    def collectives(self, value: list[CollectiveRecord]) -> None:
        self._records = value

    @property
    def workloads(self) -> list:
        self._expand()
        return self._workloads

    def _expand(self) -> None:
        """Every rank's records and issue loop from its representative's (module docstring)."""
        if self._pending is None:
            return
        ref, sym, inverse = self._pending
        self._pending = None
        trace_set = ref()
        by_rep: dict[int, list[CollectiveRecord]] = {}
        for c in self._records:
            by_rep.setdefault(c.rank, []).append(c)
        loops = {w.rank: w for w in self._workloads}
        out: list[CollectiveRecord] = []
        workloads: list = []
        for x, (r, inv) in enumerate(zip(sym.rep(np.arange(sym.world, dtype=np.int64)).tolist(), inverse)):
            if x == r:
                out.extend(by_rep.get(r, ()))
                workloads.append(loops[r])
                continue
            out.extend(
                CollectiveRecord(x, c.node_id, c.kind, c.bytes, inv.get(c.group, c.group), c.start_ns, c.end_ns)
                for c in by_rep.get(r, ())
            )
            workloads.append(_Replica(x, loops[r], None if trace_set is None else trace_set.ranks[x], inv))
        self._records, self._workloads = out, workloads


def simulate_file_set(trace_set: Any, hw: HardwareConfig, table: GroupTable) -> SimResult | None:
    """The quotient run of a rank-file set when its symmetry is proven; None (reason logged at INFO)
    when the full engine must run."""
    world = len(trace_set.ranks)
    if not any(1 < len(m) < world and m[0] == 0 for m in table.members.values()):
        return None  # no group to infer a layout from (a collective microbenchmark): nothing more to import
    from ..errors import StuckError
    from .symmetric import SymmetryDeclined, simulate_symmetric

    log = logger(__name__)
    sym, why = find_symmetry(table, world, hw)
    inverse: list[dict[str, str]] = []
    if sym is not None:
        problem, inverse = _proof(trace_set, table, sym)
        why = problem or ""
    if sym is None or why:
        log.info("full engine: no proven rank symmetry (%s)", why)
        return None
    reps = sym.reps()
    members = table.members
    metadata = {r: {i: [(n, list(members[n])) for n in names] for i, names in table.metadata[r].items()} for r in reps}
    groups = {g: list(m) for g, m in table.from_file.items()}
    try:
        result = simulate_symmetric({r: trace_set.ranks[r] for r in reps}, sym, groups, hw, metadata)
    except (SymmetryDeclined, StuckError) as exc:  # the full engine settles the order / explains the stop
        log.info("full engine: symmetric run declined (%s)", exc)
        return None
    log.info(
        "symmetric run of tp %d dp %d pp %d ep %d: %d of %d ranks", sym.tp, sym.dp, sym.pp, sym.ep, len(reps), world
    )
    return QuotientResult.of(result, trace_set, sym, inverse)
