"""Symmetric simulation: one representative rank per class of a generated training step.

Why: a generated DP×TP×PP(×EP) step on 16,384 or 131,072 GPUs repeats one program per pipeline
stage (and per position inside an expert group) on every tensor- and data-parallel replica. On a
network whose delays do not change when those replicas are relabelled, every replica has the same
timeline to the ns, so simulating one representative per class gives the full engine's per-rank
results at the cost of ``pp·ep`` ranks instead of ``dp·tp·pp``.

**The symmetry.** With the generator's numbering ``rank = t + tp·(d + dp·p)`` and ``d = blk·ep + e``
(``e`` the position inside an expert group, ``blk`` the expert group), the translations
``t → t + a (mod tp)`` and ``blk → blk + b (mod dp/ep)`` map every communicator group onto a group,
keep each group's ring order up to a rotation (the rings of the ``ring`` and ``direct`` algorithms
are the ascending member lists), keep pipeline peers (``rank ± tp·dp``) and keep the stage, hence
the program. A rank's class is its ``(p, e)``; its representative has ``t = blk = 0``.

**Quotient run.** Only the representatives get a ``Workload`` and a ``Sys`` (built through the
wiring API of ``simulate.py``, ``rank_trace`` and ``RunStats``). A message a representative ``r``
sends to ``y`` is, by symmetry, also sent by ``g(r)`` to ``rep(y)`` at the same time, where ``g`` is
the translation taking ``y`` to ``rep(y)``: the network times it on the real pair ``(r, y)`` and
matches it as ``(tag, g(r), rep(y), size)``, which is the receive the representative ``rep(y)``
posts. On the unaware backend ring phases use the exact fast path of :mod:`.system.ring_fast` (its
public ``RingCoordinator.recurrence``) over every member of the ring, each member starting when its
representative did; when every member is in one class (the usual case) the max-plus recurrence
collapses to a closed form ``exit = start + Σ d_k + steps·N``.

**Congestion-aware backend.** Links are FIFO servers shared by many senders (``network/aware.py``:
``(dimension, other coordinates, from, to)``, routed lowest differing dimension first), so a
representative's messages contend with the replicas' — but, by symmetry, with translated copies of
its own. The argument, and what it needs:

1. *Automorphism.* Each translation must map every link to a link and every route to the image
   route. It does when it permutes NPU coordinates dimension by dimension (coordinate ``d`` of the
   image depends only on coordinate ``d``): dimension groups go to dimension groups, a switch's up-
   and down-links to the image switch's, a FullyConnected link ``(a, b)`` to ``(π a, π b)``, and the
   route's intermediate NPUs ``(y_<k, x_≥k)`` to the image's. This is stronger than the unaware
   condition: ``tp = 4`` over a dimension 0 of 2 NPUs makes ``t → t+1`` carry into dimension 1 (a
   dimension-0 pair maps to two different switches). :func:`fit` therefore takes the smallest
   *steps* ``t → t + s_t``, ``blk → blk + s_b`` whose translations are automorphisms (checked on the
   two generators over every NPU, :func:`_coordinatewise`); the classes become ``(t mod s_t,
   blk mod s_b, e, p)``, e.g. DP 256 over a 16-NPU rail and 16 spine positions keeps ``blk → blk+16``
   and simulates 16 representatives per stage. No translation left: fall back.
2. *Free action, canonical links.* The translations act freely on NPUs (a translation fixing one
   rank is the identity), and every Switch/FullyConnected link has one NPU that *owns* it —
   up-link and NPU-to-NPU link: the sender side; down-link: the receiver side — with
   ``owner(g ℓ) = g owner(ℓ)``. So every link orbit has one *canonical* member: ``g_o(ℓ)``, ``g_o``
   the translation taking the owner ``o`` to ``rep(o)``. A representative's own up-links are canonical;
   ``y``'s down-link maps to ``rep(y)``'s.
3. *Bijection of traffic.* Let the full run be symmetric up to time ``T`` (every translate of a
   message crosses the translated links at the same times). A message ``m`` of the full run on a
   canonical link ``ℓ*`` has sender ``x``; with ``h`` the translation taking ``x`` to ``rep(x)``, ``h(m)``
   is a representative's message and its hop ``h(ℓ*)`` has owner ``h(o*)``, whose canonical image is
   ``h⁻¹ h ℓ* = ℓ*``. Conversely a representative's hop ``ℓ`` is canonically ``g_o(ℓ)``, carrying
   ``g_o(m)``. So ``ℓ*`` in the full run carries exactly the canonical images of the representatives'
   hops, at the same times: :class:`_QuotientAwareNetwork` replaces each link of a representative's
   route by its canonical link (``CongestionAwareNetwork._link``, the one hook in ``aware.py``) and
   ``_Link.times`` and the FIFO do the rest, message by message.
4. *Order.* A FIFO link serves same-ns arrivals in event order. Arrivals from one sender keep that
   sender's order (its own program, as on the unaware path); arrivals from two senders at the same
   ns are ordered by the full engine's global event sequence, which follows rank numbers and is not
   translation invariant. The quotient network therefore raises :class:`SymmetryDeclined` when two
   senders (the full engine's: the real sender's image under the hop owner's translation) offer to
   one canonical link at the same ns, and the caller reruns on the full engine (exact or not used,
   like the direct fast path's ``FastPathDeclined``). Chunks running the rings both ways round
   (several queues per dimension) are quotiented only while their ring phases stay on the
   recurrence: message by message the quotient's members of a class came out alike where the full
   engine's finish apart (FullyConnected 8 × 2, two queues: rank 0 53 µs after rank 8, its two
   directions' chunks meeting on the dimension of two), so there the run declines instead of
   rerunning; so does, from the start, a run whose direct phases would go message by message
   beside them (FullyConnected 16, two queues, direct all-reduces: 20 ns off; why the quotient's
   message path differs there is not established). By induction on events the full run stays
   symmetric, and each representative's timeline is its own in the full run.

5. *Ring phases.* As on the unaware backend, :class:`_QuotientRings` evaluates each ring phase with
   ``RingCoordinator.recurrence`` over every member, each starting when its representative did, on
   the FIFO links of ``ring_links``: member ``i``'s hop ``j`` is the canonical link of its real link,
   with the full engine's sender on it (``i``'s predecessor's image under the hop owner's
   translation). Several members may reach one canonical link. (a) At the same hop with the same full
   sender: their real links are images of each other, and by 3 the canonical link carries, in the
   full run, one message — the full sender's in the one translate of the group it belongs to, which
   sends one message per step. ``FifoRingLinks`` gives each entry its own copy of the link's state;
   the copies must see the same arrival times (checked at every step; equal by symmetry) and so
   evolve identically: the real link's single message, not two messages contending. (b) Anything
   else is two messages on one link in one phase, whose FIFO order the recurrence does not time:
   ``LinkConflict``. Across phases the links' run-time order check (a phase's first message on a
   link comes after the same sender's last evaluated one, or once another sender's has left it)
   holds on canonical links with the full engine's senders, i.e. on the real link's traffic (3). The
   message path (pipeline sends, direct all-to-alls) shares those links as in the full engine
   (``CongestionAwareNetwork.check_order``): it raises ``LinkConflict`` when it reaches a link no
   later than a ring message evaluated there, and leaves the link marked ``POINT_TO_POINT`` at
   its arrival, so a later phase's first message there must arrive strictly after it and queues
   behind it through the link's free time (a phase reaching a link with messages still queued
   raises). By 3 the canonical link's marks are the real link's, so a pipeline activation that
   holds a rank's downlink on a 1-D switch when a TP ring message arrives is timed by the
   recurrence, as in the full engine. The full engine needs 1-D preconditions so that its check
   never fires; here the check is the guarantee: any ``LinkConflict`` reruns the quotient message
   by message (exact, as before, costing one more run). Where the full engine evaluates a
   collective's chunks together (one queue per dimension with several chunks in flight: every
   chunk at once on a 1-D network, ``simulate``'s ``_chunks_evaluated_together``, or chunks
   starting at different times, held until their earliest exit, ``RingCoordinator._batch``) the
   quotient does too (:class:`_QuotientChunks`; a message of its message path settles the held
   phases on its canonical link first, as in the full engine). Two exact
   shortcuts of that recurrence make the scale runs cheap (``RingCoordinator.recurrence``): when
   every member's entries are (a)-copies of one message
   and all start together (a TP ring of one class), ``FifoRingLinks.copies`` gives the closed form;
   when members repeat with a period ``q`` in links, senders and starts (a DP ring over ``q``
   classes), the recurrence of one period stands for the ring.

6. *Direct phases* take the full engine's fast path (``system/direct_fast.py``; on the aware
   backend only where ``simulate._batches_exact`` admits it there: a 1-D switch or fully-connected
   network, windows covering every peer, one chunk of a collective at a time — or several chunks
   in flight with one queue, ``simulate._direct_chunks_batched``: the chunks' phases, each complete
   over every member, are held (to the end of the ns, or, chunks admitted one by one, to the ns
   before the earliest exit) and evaluated as one batch, ``PhaseCoordinator.hold`` and
   ``direct_aware.outcome_chunks``, on the real links below as one phase is). :class:`_QuotientPhases`
   evaluates a phase once every representative in its group has started, over every member with its
   representative's start (by symmetry a member starts when its representative does), and registers
   each representative's exit once, checking that every member of its class exits alike (else
   :class:`SymmetryDeclined`). Unaware: the closed form on the real pairs' delays. Aware: the FIFO
   batch (``FifoBatchLinks``) cannot run on canonical links — a member's and its representative's
   uplinks are one canonical link, which would then queue copies of one message behind each other —
   so :class:`_CanonicalBatch` evaluates the members' *real* links (the full engine's batch: same
   messages, ties and order checks), each loaded from its canonical link (by 3, the real link's state
   up to relabelling its last sender, so senders are compared in the canonical frame) and stored back
   to it, the real links of one orbit having to end alike (by symmetry; else ``LinkConflict``). A
   tie only the event order settles (``FastPathDeclined``) reruns the quotient with direct phases
   message by message. Halving-doubling and double-binary-tree phases are not quotiented at all
   (below): their peers are not preserved by rotating a group.

**When it holds** (:func:`symmetry_problem` checks before a run, each failed condition a reason the
caller logs before falling back to the full engine): no rendezvous; every network dimension a
``Switch`` or ``FullyConnected``; on the unaware backend NPU-id boundaries that nest with ``tp``,
``tp·ep`` and ``tp·dp`` (so the lowest differing dimension of two ranks, which sets the delay, is
invariant), on the aware one the automorphism above; ``ring``/``direct`` algorithms for every
collective (halving-doubling and trees pair ranks by XOR and tree position, not by rotation); no
world-sized group and no collective over every rank (their plan spans the physical dimensions:
``simulate_symmetric`` declines a representative's, :func:`world_collective`); no pooled remote
memory. The rank set's own structure is then verified, in O(ranks): every (member, ring successor) pair of every group,
and every pipeline peer, maps under the translation to the corresponding pair of the
representative, and the delay of every message a representative sends equals that of its image.
Tests compare against the full engine at 64–1,024 ranks on both backends, including expert
all-to-alls and pipeline sends.

**Result.** Per-rank lists (``finish_ns``, ``compute_ns``, ``cpu_ns``, ``exposed_comm_ns``,
``comm_ns``, ``idle_ns``) cover every rank (a rank's values are its representative's);
``collectives``, ``workloads`` and ``messages`` (the messages sent) cover the representatives only.
Since a representative is the lowest rank of its class, the campaign's slowest-rank metrics (lowest
rank on ties) are the full engine's.
"""

from __future__ import annotations

import gc
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from ..console import logger
from ..errors import StuckError
from ..et import schema
from ..et.traceset import WORLD_PG_NAMES
from ..rankset.progress import STUCK_LIST_LIMIT
from .config import HardwareConfig
from .engine import EventQueue
from .groups import groups_at_start
from .memory import RemoteMemory
from .network.aware import POINT_TO_POINT, CongestionAwareNetwork, FifoBatchLinks, FifoRingLinks
from .network.common import LinkConflict
from .network.switch import SWITCH
from .network.unaware import CongestionUnawareNetwork
from .result import SimResult
from .simulate import RunStats, _batches_exact, _direct_chunks_batched, chunk_batching, rank_trace
from .system.phase_fast import FastPathDeclined, PhaseCoordinator
from .system.ring_fast import RingCoordinator
from .system.sys import Sys
from .workload import Workload

log = logger(__name__)

SYMMETRIC_TOPOLOGIES = ("Switch", "FullyConnected")  # hop count independent of the two NPUs
SYMMETRIC_ALGORITHMS = ("ring", "direct")  # peers by ring position, so rotations preserve them
FULL_CHECK = 256  # groups up to this size: every member's translation checked, beyond: ring neighbours
_CLOSED = "quotient closed form"  # a phase shape's ``_QuotientRings._alone`` in ``PacketAlgorithm.shape``


@dataclass(frozen=True)
class RankSymmetry:
    """The translations of a generated layout (module docstring): classes, representatives, images.

    Every method takes ints or numpy integer arrays (element-wise), so checks over all ranks are
    vectorised.
    """

    tp: int
    dp: int
    pp: int
    ep: int = 1
    tp_step: int = 1  # the translations move t by multiples of this (a divisor of tp) ...
    block_step: int = 1  # ... and blk by multiples of this (a divisor of dp / ep): see ``fit``

    @property
    def world(self) -> int:
        return self.tp * self.dp * self.pp

    @property
    def blocks(self) -> int:
        return self.dp // self.ep

    def _split(self, x: Any) -> tuple[Any, Any, Any, Any]:
        """``(t, e, blk, p)`` of rank ``x``."""
        d = (x // self.tp) % self.dp
        return x % self.tp, d % self.ep, d // self.ep, x // (self.tp * self.dp)

    def _join(self, t: Any, e: Any, blk: Any, p: Any) -> Any:
        return t + self.tp * (blk * self.ep + e + self.dp * p)

    def rep(self, x: Any) -> Any:
        """The representative of ``x``'s class: the same stage, expert position and residues of ``t`` and
        ``blk`` modulo the steps (``t = blk = 0`` with unit steps): the lowest rank of the class."""
        t, e, b, p = self._split(x)
        return self._join(t % self.tp_step, e, b % self.block_step, p)

    def translate(self, x: Any, y: Any) -> Any:
        """``g(y)`` for the translation ``g`` that takes ``x`` to ``rep(x)``."""
        tx, _, bx, _ = self._split(x)
        ty, ey, by, py = self._split(y)
        shift_t, shift_b = tx - tx % self.tp_step, bx - bx % self.block_step
        return self._join((ty - shift_t) % self.tp, ey, (by - shift_b) % self.blocks, py)

    def reps(self) -> list[int]:
        return sorted(
            self._join(t, e, b, p)
            for p in range(self.pp)
            for e in range(self.ep)
            for b in range(self.block_step)
            for t in range(self.tp_step)
        )


def _network_problem(sym: RankSymmetry, hw: HardwareConfig) -> str | None:
    net = hw.network
    for d, (kind, n) in enumerate(zip(net.topology, net.npus_count)):
        if n > 1 and kind not in SYMMETRIC_TOPOLOGIES:
            return f"network dimension {d} is a {kind} (hops depend on the NPU pair)"
    if hw.backend == "congestion_aware":
        return _automorphism_problem(sym, hw)  # the exact condition there; it implies what follows
    bound = 1
    for d, n in enumerate(net.npus_count):
        bound *= n
        for what, b in (("tp", sym.tp), ("tp·ep", sym.tp * sym.ep), ("tp·dp", sym.tp * sym.dp)):
            if bound % b and b % bound:
                return (
                    f"network dimensions 0..{d} hold {bound} NPUs, which does not nest with {what} = {b} "
                    "(replicas would sit at different network positions)"
                )
    return None


def _coords(npus: Any, dims: tuple[int, ...] | list[int]) -> list[Any]:
    """Each dimension's coordinate of ``npus`` (dimension 0 varies fastest, as ``Network.coords``)."""
    out = []
    for n in dims:
        out.append(npus % n)
        npus = npus // n
    return out


def _coordinatewise(sym: RankSymmetry, x: int, dims: list[int]) -> int | None:
    """The first dimension where the translation taking ``x`` to ``rep(x)`` is not a per-coordinate
    permutation (the image's coordinate ``d`` depends on other coordinates), None when there is none."""
    ranks = np.arange(sym.world, dtype=np.int64)
    for d, (c, image) in enumerate(zip(_coords(ranks, dims), _coords(sym.translate(x, ranks), dims))):
        table = np.zeros(dims[d], dtype=np.int64)
        table[c] = image
        if not np.array_equal(table[c], image):
            return d
    return None


def _generators(sym: RankSymmetry) -> list[tuple[str, int]]:
    """(name, a rank ``x``) per generator of the translations: ``g_x`` (taking ``x`` to ``rep(x)``) is
    the inverse of ``t → t + tp_step`` and of ``blk → blk + block_step``; they generate the group."""
    out = []
    if sym.tp > sym.tp_step:
        out.append((f"t → t+{sym.tp_step}", sym.tp_step))
    if sym.blocks > sym.block_step:
        out.append((f"expert block → block+{sym.block_step}", sym.tp * sym.ep * sym.block_step))
    return out


def fit(sym: RankSymmetry, hw: HardwareConfig) -> RankSymmetry:
    """The symmetry a run on ``hw`` may use: on the congestion-aware backend, the smallest steps whose
    translations are network automorphisms (e.g. DP 256 over a 16-NPU rail dimension and part of the
    spine: ``blk → blk+16``, 16 representatives per stage); unchanged on the unaware backend."""
    if hw.backend != "congestion_aware":
        return sym
    dims = list(hw.network.npus_count)
    if sym.world != int(np.prod(dims)):
        return sym
    tp_step = next(
        s for s in _divisors(sym.tp) if s == sym.tp or _coordinatewise(replace(sym, tp_step=s), s, dims) is None
    )
    block = next(
        b
        for b in _divisors(sym.blocks)
        if b == sym.blocks or _coordinatewise(replace(sym, block_step=b), sym.tp * sym.ep * b, dims) is None
    )
    return replace(sym, tp_step=tp_step, block_step=block)


def _divisors(n: int) -> list[int]:
    return [k for k in range(1, n + 1) if n % k == 0]


def _automorphism_problem(sym: RankSymmetry, hw: HardwareConfig) -> str | None:
    """Why the translations would not map every aware link onto a link (None when they do).

    A translation maps links to links, and routes to routes, when it acts on NPU coordinates
    dimension by dimension (the image's coordinate ``d`` depends only on coordinate ``d``): a
    dimension group then goes to a dimension group, a switch's up- and down-links to the image
    switch's, and the lowest-differing-dimension-first route to the image route. Checking the
    generators over every NPU suffices (compositions of per-coordinate permutations are per-coordinate).
    """
    dims = list(hw.network.npus_count)
    unit = replace(sym, tp_step=1, block_step=1)
    if (sym.tp > 1 or sym.blocks > 1) and sym.tp_step == sym.tp and sym.block_step == sym.blocks:
        sym = unit  # no translation left: name the failure of the smallest ones
    for name, x in _generators(sym):
        d = _coordinatewise(sym, x, dims)
        if d is not None:
            return (
                f"the translation {name} is not a network automorphism: dimension {d}'s coordinate of an "
                "NPU's image depends on its other coordinates (links would map onto non-links)"
            )
    return None


def _hardware_problem(sym: RankSymmetry, hw: HardwareConfig) -> str | None:
    if hw.backend not in ("congestion_unaware", "congestion_aware"):
        return f"the {hw.backend} backend"
    if hw.rendezvous:
        return "rendezvous messages"
    if hw.memory is not None and hw.memory.memory_type not in ("NO_MEMORY_EXPANSION", "PER_NPU_MEMORY_EXPANSION"):
        return f"remote memory {hw.memory.memory_type} is shared between ranks"
    if hw.network.npus != sym.world:
        return f"the network has {hw.network.npus} NPUs, the layout {sym.world} ranks"
    if hw.system.uses_custom:
        return "custom (Chakra-defined) collectives (their traces' peers are not translated)"
    both_ways = hw.backend == "congestion_aware" and _chunks_both_ways(hw)
    for kind, algos in hw.system.implementations:  # a collective without a key: the run reports it if used
        algo = algos[0] if len(algos) == 1 else None  # a sub-group collapses a list to "ring"
        if algo is not None and algo.base not in SYMMETRIC_ALGORITHMS:
            return f"{kind.lower()} uses {algo.base} (peers not preserved by rotating a group)"
        if algo is not None and algo.base != "ring" and both_ways:  # see simulate_symmetric's LinkConflict
            return f"{kind.lower()} uses {algo.base} with chunks running both ways round: message by message"
    return _network_problem(sym, hw)


def _chunks_both_ways(hw: HardwareConfig) -> bool:
    """Whether a collective's chunks run its rings both ways round at once (several queues per
    dimension alternate the directions, and the chunks are batched): the quotient is then exact only
    while every phase stays on a fast path (module docstring, point 4), so :func:`_hardware_problem`
    declines direct phases, which would go message by message, and :func:`simulate_symmetric`
    declines where the ring recurrence does."""
    return hw.num_queues_per_dim != 1 and chunk_batching(hw)[0]


def _pairs(groups: Mapping[Any, list[int]]) -> tuple[np.ndarray, np.ndarray]:
    """Every (member, ring successor) pair of every group, as two arrays."""
    members = [np.asarray(m, dtype=np.int64) for m in groups.values()]
    if not members:
        empty = np.zeros(0, dtype=np.int64)
        return empty, empty
    return np.concatenate(members), np.concatenate([np.roll(m, -1) for m in members])


def _among(values: np.ndarray, pool: np.ndarray) -> np.ndarray:
    """``np.isin(values, pool)``, by binary search in the sorted ``pool``.

    Why not ``np.isin``: on integers spread wider than the arrays it sorts through the plain
    ``np.unique``, whose check for masked arrays imports ``numpy.ma`` (~8 ms of a symmetric run's
    start-up, issue #15)."""
    pool = np.sort(pool)
    at = np.searchsorted(pool, values)
    found = at < len(pool)
    found[found] = pool[at[found]] == values[found]
    return found


def _structure_problem(sym: RankSymmetry, groups: Mapping[Any, list[int]], hw: HardwareConfig) -> str | None:
    """Verify the rank set itself: groups, ring order, pipeline peers, message delays (O(ranks))."""
    world = sym.world
    if world > 1 and world in (sym.tp, sym.dp):
        return "a collective spans every rank (its plan follows the physical dimensions)"
    for gid, members in groups.items():
        if len(members) >= world:
            return f"group {gid} spans every rank (its plan follows the physical dimensions)"
        if list(members) != sorted(set(members)):
            return f"group {gid} is not an ascending list of distinct ranks"
    x, succ = _pairs(groups)
    mapped = _among(sym.rep(x) * world + sym.translate(x, succ), x * world + succ)
    if not mapped.all():
        bad = int(x[~mapped][0])
        return f"rank {bad}'s ring successor does not map onto its representative's"
    ranks = np.arange(world, dtype=np.int64)
    stride = sym.tp * sym.dp
    for peer in (ranks - stride, ranks + stride):
        ok = (peer < 0) | (peer >= world) | (sym.translate(ranks, peer) == sym.rep(ranks) + (peer - ranks))
        if not ok.all():
            return f"rank {int(ranks[~ok][0])}'s pipeline peer does not map onto its representative's"
    network = CongestionUnawareNetwork(hw.network, EventQueue())
    reps = set(sym.reps())
    for gid, members in groups.items():
        senders = [m for m in members if m in reps]
        arr = np.asarray(members, dtype=np.int64)
        for r in senders:
            i = members.index(r)
            near = {members[i - 1], members[(i + 1) % len(members)]}
            peers = list(members) + [r - stride, r + stride]
            for y in peers:
                if 0 <= y < world and y != r:
                    image = int(sym.translate(y, r))
                    if network.delay(r, y, 1 << 20) != network.delay(image, int(sym.rep(y)), 1 << 20):
                        return f"the delay {r}→{y} differs from its image {image}→{int(sym.rep(y))}"
                    if (len(members) <= FULL_CHECK or y in near) and not np.array_equal(
                        np.sort(sym.translate(y, arr)), arr
                    ):
                        return f"rank {y} does not map group {gid} onto itself"
    return None


def symmetry_problem(sym: RankSymmetry, groups: Mapping[Any, list[int]], hw: HardwareConfig) -> str | None:
    """Why the symmetric run would not be exact for this layout and hardware (None when it is).

    ``groups`` maps a group's id or name (named in the reasons) to its ascending members."""
    return _hardware_problem(sym, hw) or _structure_problem(sym, groups, hw)


def world_collective(graphs: Mapping[int, Any], named: set[str]) -> str | None:
    """Which representative's collective runs over every rank, if any: one whose ``pg_name`` is
    missing or a world name (``""``, ``"0"``) and that carries ``involved_dim`` or whose name
    ``named`` (the comm-group file's names) does not define, as the full engine resolves it
    (``comm._collective``, ``group_of``, ``_rings_used``; beside a named group ``involved_dim`` is
    ignored, as upstream).

    Why: such a collective runs the global plan, which follows the physical dimensions and, with a
    per-dimension algorithm list, any algorithm of it: the quotient's translations do not preserve
    its peers (wrong times, or no ring for the ring coordinator), and the groups ``symmetry_problem``
    is given cannot show it, since only the traces say which group a collective uses."""
    for r, g in graphs.items():
        pg, involved = g.pg_name, g.involved_dim
        for i in np.flatnonzero(g.types == schema.COMM_COLL_NODE).tolist():
            name = pg.get(i, "")
            if name in WORLD_PG_NAMES and (i in involved or name not in named):
                node = int(g.ids[i])
                return f"rank {r}'s node {node} is a collective over every rank: its plan follows the network"
    return None


class SymmetryDeclined(Exception):
    """The symmetric run met an order only the full engine's global event sequence settles: rerun
    on the full engine (the message says why)."""


class _Quotient:
    """Times a message on its real pair, matches it as the image that reaches a representative.

    A mixin over either backend's network: ``send`` matches the image ``(g(src), rep(dst))``, and
    ``_transmit`` times the real pair ``(src, dst)`` with the backend's own model.
    """

    _sym: RankSymmetry
    _ends: tuple[int, int]
    _images: dict[tuple[int, int], tuple[int, int]]  # (src, dst) -> (g(src), rep(dst)), a few per representative

    def _quotient(self, sym: RankSymmetry) -> None:
        """The mixin's state (called by each quotient network's ``__init__`` after the backend's)."""
        self._sym, self._ends, self._images = sym, (0, 0), {}

    def send(self, src: int, dst: int, size: int, tag: int, on_arrival) -> None:
        self._ends = ends = (src, dst)
        image = self._images.get(ends)
        if image is None:
            image = self._images[ends] = (int(self._sym.translate(dst, src)), int(self._sym.rep(dst)))
        super().send(*image, size, tag, on_arrival)  # type: ignore[misc]

    def _transmit(self, src: int, dst: int, size: int, full: tuple) -> None:
        super()._transmit(*self._ends, size, full)  # type: ignore[misc]


class _QuotientNetwork(_Quotient, CongestionUnawareNetwork):
    """The congestion-unaware quotient: a stateless delay per pair, nothing shared."""

    def __init__(self, cfg, queue, sym: RankSymmetry):
        super().__init__(cfg, queue)
        self._quotient(sym)


class _QuotientAwareNetwork(_Quotient, CongestionAwareNetwork):
    """The congestion-aware quotient: every link of a route is replaced by its orbit's canonical link.

    A link ``(d, group, a, b)`` has one owner NPU: the sender side ``a`` (an up-link, a
    FullyConnected link), or the receiver side ``b`` for a switch's down-link. Its canonical link is
    its image under the translation taking the owner to ``rep(owner)``; the map is computed once per
    link key (the route cache in the base class then holds canonical links per real pair).
    """

    def __init__(self, cfg, queue, sym: RankSymmetry):
        super().__init__(cfg, queue)
        self._quotient(sym)
        self._stride = [int(np.prod(cfg.npus_count[:d], dtype=np.int64)) for d in range(len(cfg.npus_count))]
        self._owners: list[int] = []  # the owners of the links of the route being built
        self._senders: dict[int, list[int]] = {}  # id(path) -> the full engine's sender on each hop
        self._last: dict[int, tuple[int, int]] = {}  # id(link) -> (ns, full engine's sender) of its last offer
        self._real = CongestionAwareNetwork(cfg, queue)  # the real links of direct phases' batches (keys only)
        self._real_keys: dict[int, tuple] = {}  # id(real link) -> its key

    def _npu(self, coords: list[int]) -> int:
        return sum(c * s for c, s in zip(coords, self._stride))

    def _path(self, src: int, dst: int) -> list:
        """The canonical links of ``src → dst`` and, per hop, the sender of the message the full engine
        has on that link: ``src``'s image under the hop owner's translation."""
        self._owners = []
        path = super()._path(src, dst)
        if id(path) not in self._senders:
            self._senders[id(path)] = [int(self._sym.translate(o, src)) for o in self._owners]
        return path

    def _offer(self, link, msg: list) -> None:
        """Decline when two senders' messages reach one link at the same ns, or a message reaches a
        link no later than a ring phase's message already evaluated on it (module docstring)."""
        if self.before_offer is not None:
            self.before_offer(link)
        now, sender = self.queue.now, self._senders[id(msg[1])][msg[2]]
        if link.sender >= 0 and now <= link.offered:
            raise LinkConflict(
                f"NPU {sender}'s message reaches a link at {now} ns, before a ring message evaluated on it"
            )
        last = self._last.get(id(link))
        if last is not None and last[0] == now and last[1] != sender:
            raise SymmetryDeclined(
                f"NPUs {last[1]} and {sender} offer a message to one link at {now} ns "
                "(the full engine orders them by its global event sequence)"
            )
        self._last[id(link)] = (now, sender)
        link.sender, link.offered = POINT_TO_POINT, now  # a later ring phase's first message must come after it
        super()._offer(link, msg)

    def ring_links(self, senders: list[int], receivers: list[int], size: int) -> FifoRingLinks:
        """The phase's canonical links, each hop with the full engine's sender on it (module docstring,
        *Ring phases*)."""
        paths = [self._path(s, r) for s, r in zip(senders, receivers)]
        return FifoRingLinks(paths, size, senders, [self._senders[id(path)] for path in paths])

    def batch_links(self, senders: list[int], receivers: list[list[int]], size: int) -> FifoBatchLinks:
        """A direct phase's batch over every member's real links, whose state lives on their canonical
        links (:class:`_CanonicalBatch`; module docstring, *Direct phases*)."""
        batch = self._real.batch_links(senders, receivers, size)
        if len(self._real_keys) != len(self._real._links):
            self._real_keys = {id(link): key for key, link in self._real._links.items()}
        canonical = []
        for links, *_ in batch._hops:
            hop = []
            for link in links:
                self._owners = []
                hop.append((self._link(self._real_keys[id(link)]), self._owners[0]))
            canonical.append(hop)
        self._owners = []
        return _CanonicalBatch(batch, canonical, self._sym)

    def _link(self, key: tuple):
        d, group, a, b = key
        at = list(group)
        at[d] = b if a == SWITCH else a
        owner = self._npu(at)
        self._owners.append(owner)
        home = self.coords(int(self._sym.rep(owner)))
        if a == SWITCH:
            a2, b2 = SWITCH, home[d]
        elif b == SWITCH:
            a2, b2 = home[d], SWITCH
        else:  # a link between two NPUs: b is mapped by the same translation
            at[d] = b
            a2, b2 = home[d], self.coords(int(self._sym.translate(owner, self._npu(at))))[d]
        home[d] = None  # type: ignore[call-overload]
        return super()._link((d, tuple(home), a2, b2))


class _CanonicalBatch(FifoBatchLinks):
    """A direct phase's :class:`FifoBatchLinks` over every member's *real* links, each loaded from and
    stored to its orbit's canonical link (module docstring, *Direct phases*).

    Why real links, not canonical ones as for ring phases: a member and its representative send over
    links of one orbit, so on canonical links a switch's uplink would carry ``P − 1`` messages per
    member of the class instead of its one sender's, and the per-link cumulative maximum would queue
    copies of one message behind each other. On the real links the batch is the full engine's
    (same messages, same ties, same order checks); each real link ``ℓ`` with owner ``o`` starts from
    its canonical link ``g_o(ℓ)``'s state, which by symmetry is ``ℓ``'s in the full run up to
    relabelling its last sender by ``g_o``. Senders are compared in that frame: each message's
    sender is replaced by its image under its link's ``g_o`` (a bijection per link, so equal senders
    stay equal and different ones different), as the canonical links record them. :meth:`store`
    writes each canonical link back from the real links of its orbit, which must agree: they do by
    symmetry, else :class:`LinkConflict` and the quotient reruns message by message.
    """

    def __init__(self, batch: FifoBatchLinks, canonical: list[list[tuple[Any, int]]], sym: RankSymmetry):
        self.__dict__.update(vars(batch))
        # per hop: the distinct canonical links, each real link's index among them, and the first real
        # link of each canonical one (state and store work on arrays: a phase is ~60 links)
        self._canonical: list[tuple[list[Any], np.ndarray, np.ndarray, np.ndarray | None]] = []
        hops = []
        for hop, (links, msgs, link_of, sender, *rest) in zip(canonical, self._hops):
            index: dict[int, int] = {}
            distinct: list[Any] = []
            for link, _ in hop:
                if index.setdefault(id(link), len(distinct)) == len(distinct):
                    distinct.append(link)
            of = np.asarray([index[id(link)] for link, _ in hop], dtype=np.int64)
            first = np.unique(of, return_index=True)[1]
            # each real link's orbit's first real link: the one store takes the canonical state from
            self._canonical.append((distinct, of, first, None if len(first) == len(of) else first[of]))
            # each message's sender as its canonical link records it (``g_o``, ``o`` the real link's
            # owner): a bijection per link, so ties and the last-sender checks compare as on real links
            owners = np.asarray([o for _, o in hop], dtype=np.int64)
            hops.append((links, msgs, link_of, sym.translate(owners[link_of], sender), *rest))
        self._hops = hops

    def state(self) -> list[tuple[np.ndarray, np.ndarray, np.ndarray]]:
        out = []
        for links, of, _, _ in self._canonical:
            if any(link.pending for link in links):
                raise LinkConflict("a batch of messages reaches a link with messages queued on the message path")
            out.append(
                (
                    np.asarray([link.free_at for link in links], dtype=np.int64)[of],
                    np.asarray([link.offered for link in links], dtype=np.int64)[of],
                    np.asarray([link.sender for link in links], dtype=np.int64)[of],
                )
            )
        return out

    def _stored(self) -> list[list[Any]]:
        return [links for links, *_ in self._canonical]

    def kept(self, state: list, c: int) -> list[tuple[list[int], list[int], list[int]]]:
        return [
            ((free[first] + c).tolist(), (offered[first] + c).tolist(), last[first].tolist())
            for (_, _, first, _), (free, offered, last) in zip(self._canonical, state)
        ]

    def store(self, state: list) -> None:
        for (links, _, first, orbit), hop_state in zip(self._canonical, state):
            if orbit is not None and any((values != values[orbit]).any() for values in hop_state):
                raise LinkConflict("the real links of one orbit leave a direct phase in different states")
            free, offered, last = (values[first].tolist() for values in hop_state)
            for link, f, r, s in zip(links, free, offered, last):
                link.free_at, link.offered, link.sender = f, r, s

    def send(self, sent: list[int]) -> list[int]:
        """Halving-doubling's per-message path, which steps the links themselves: never quotiented
        (``symmetry_problem`` refuses that algorithm)."""
        raise TypeError("a quotient batch is evaluated through state() / arrive() / store() only")


def _gather(waiting: dict[tuple, dict[int, Any]], key: tuple, algo, count: int) -> dict[int, Any] | None:
    """Add ``algo`` to the representatives that reached the phase ``key``; all of them (``count``, by
    NPU id) once the last has, else None. A quotient phase is evaluated over every member with its
    representative's start, so it waits for every representative in the group (rings and direct)."""
    present = waiting.get(key)
    if present is None:
        present = waiting[key] = {}
    present[algo.id] = algo
    if len(present) < count:
        return None
    del waiting[key]
    return present


class _QuotientPhases(PhaseCoordinator):
    """Direct phases over every member, each starting when its representative did (module
    docstring, *Direct phases*): the full engine's ``direct_fast.evaluate`` on the quotient's
    network, once every representative in the group has started."""

    def __init__(
        self, network, queue, stats, rings: _QuotientRings, aware: bool, chunks: bool = False, stagger: bool = False
    ):
        super().__init__(network, queue, stats, aware, chunks, stagger)
        self._rings = rings  # their ring layouts (representatives, positions, each member's representative)
        self._exits: dict[int, tuple[int, int]] = {}

    def join(self, key: tuple, index: int, size: int, algo, evaluate) -> None:
        order, _, rep_of = self._rings.layout(algo.ring)
        present = _gather(self._waiting, key, algo, len(order))
        if present is not None:
            self._counted(len(order), size, evaluate, [present[r] for r in rep_of])

    def hold(self, key: tuple, algos: list, evaluate, due: int = 0) -> None:
        """The full engine's chunk batch (every chunk of a collective at once: ``direct_fast.evaluate``
        holds each complete phase until the ns ends, ``direct_aware.outcome_chunks``), over every
        member as :meth:`join` hands it; its messages are counted when the batch is evaluated."""
        reps = len(self._rings.layout(algos[0].ring)[0])
        super().hold(key, algos, lambda chunks: self._counted(reps, len(algos), evaluate, chunks), due)

    def _counted(self, reps: int, size: int, evaluate, members: list) -> None:
        """``evaluate(members)``, counting the representatives' messages only, as on the message path
        (``evaluate`` counts every member's of ``size``; a held phase counts none until released)."""
        self._exits = {}
        before = self.stats.messages, self.stats.fast_messages
        evaluate(members)
        each = (self.stats.messages - before[0]) // size
        self.stats.messages = before[0] + each * reps
        self.stats.fast_messages = before[1] + each * reps

    def exit_at(self, algo, registered: int, delay: int) -> None:
        """Register each representative's exit once: every member of its class must exit alike."""
        hit = self._exits.get(id(algo))
        if hit is None:
            self._exits[id(algo)] = (registered, delay)
            super().exit_at(algo, registered, delay)
        elif hit != (registered, delay):
            raise SymmetryDeclined(f"two members of NPU {algo.id}'s class leave a direct phase at different times")


class _QuotientChunks(RingCoordinator):
    """The full engine's chunk batching (``RingCoordinator._flush``: a collective's chunks' phases as
    one FIFO recurrence, the order checked on every link) over every member with its representative's
    start, on the canonical links: each entry of a copy keeps its own link state (``FifoRingLinks``),
    so the chunk-after-chunk checks hold per entry. Only the representatives' exits are registered,
    at their own ring positions, and only their messages counted."""

    def batch(self, algos: list) -> None:
        self._batch(algos)

    def _finish(self, algos: list, last: list[int], tail: int | list[int], steps: int) -> None:
        members = algos[0].ring.members
        tails = tail if isinstance(tail, list) else [tail] * len(algos)
        own = [i for i, a in enumerate(algos) if a.id == members[i]]
        self.stats.messages += steps * len(own)
        self.stats.fast_messages += steps * len(own)
        for i in own:
            self.queue.schedule(last[i], algos[i].sys.register_event, algos[i].exit, tails[i])


class _QuotientRings:
    """Ring phases over every member, evaluated once every representative in the ring has started.

    The system layer's ``ring_coordinator`` for a quotient run: it collects the representatives'
    starts itself and asks a plain :class:`RingCoordinator` (its public ``recurrence`` and ``links``)
    for the phase, so the recurrence exists once, in ``system/ring_fast.py``. On the aware backend
    (``aware``) every phase goes through the FIFO links' recurrence (module docstring, item 5).
    """

    def __init__(
        self, network, queue, stats, sym: RankSymmetry, aware: bool = False, chunks: bool = False, stagger: bool = False
    ):
        """``chunks``: several chunks of a collective run a phase at once (aware, one queue): the
        chunks' phases are evaluated together as in the full engine (:class:`_QuotientChunks`),
        ``stagger``: held back until just before their earliest exit, as there."""
        self._chunked = _QuotientChunks(network, queue, stats, aware, chunks=True, stagger=stagger) if chunks else None
        self._phase = self._chunked or RingCoordinator(network, queue, stats, aware)
        self.aware = aware  # FIFO links: never the closed form below (their state carries over)
        self.queue, self.stats, self._sym = queue, stats, sym
        self._waiting: dict[tuple, dict[int, Any]] = {}
        self._rings: dict[int, tuple[list[int], list[int], list[int]]] = {}
        self._uniform: dict[tuple, int | None] = {}
        self._closed: dict[tuple, tuple[int, int]] = {}

    def layout(self, ring) -> tuple[list[int], list[int], list[int]]:
        """The representatives in the ring (ring order), their ring positions and each member's
        representative (cached)."""
        hit = self._rings.get(id(ring))
        if hit is None:
            m = np.asarray(ring.members, dtype=np.int64)
            r = self._sym.rep(m)
            hit = self._rings[id(ring)] = (m[r == m].tolist(), np.flatnonzero(r == m).tolist(), r.tolist())
        return hit

    def join(self, algo) -> None:
        shape = algo.shape  # shared by every copy of this phase's prototype (ring, type, size, direction)
        closed = shape.get(_CLOSED)
        if closed is None:
            closed = shape[_CLOSED] = self._alone(algo)
        if closed:  # the one representative of its ring, every member alike: the closed form, no waiting
            span, tail = closed
            self.stats.messages += algo.stream_count
            self.stats.fast_messages += algo.stream_count
            self.queue.schedule(algo.start_ns + span, algo.sys.register_event, algo.exit, tail)
            return
        ring = algo.ring
        order, at, rep_of = self.layout(ring)
        present: dict[int, Any] | None = {algo.id: algo}  # one representative: nobody to wait for
        if len(order) > 1:
            # id(ring), not ring.key: a sub-group's key holds its member tuple, whose hash is not cached
            # (O(P) per phase); the ring objects are shared by the NPUs and live as long as the run.
            stream = algo.stream
            key = (id(ring), stream.stream_id, stream.steps_finished, algo.ctype, algo.msg_size, algo.direction)
            present = _gather(self._waiting, key, algo, len(order))
        if present is None:  # representatives still to come
            return
        if self._chunked is not None:  # held with the collective's other chunks (RingCoordinator._batch)
            self._chunked.batch([present[r] for r in rep_of])
            return
        reps = [present[r] for r in order]
        first = reps[0]
        steps = first.stream_count
        self.stats.messages += steps * len(reps)
        self.stats.fast_messages += steps * len(reps)
        net = None if self.aware else self._uniform_delay(first)
        if net is None or any(a.start_ns != first.start_ns for a in reps):
            last, tail, _ = self._phase.recurrence([present[r] for r in rep_of])
            for a, i in zip(reps, at):  # the representatives' exits, at their ring positions
                self.queue.schedule(last[i], a.sys.register_event, a.exit, tail)
            return
        span, tail = self._closed_form(first, net)
        for a in reps:
            self.queue.schedule(first.start_ns + span, a.sys.register_event, a.exit, tail)

    def _alone(self, algo) -> tuple[int, int] | tuple[()]:
        """The closed form of a phase shape whose ring holds one representative, on the unaware network
        with every hop alike and no chunk batching: what :meth:`join` would compute for it on every
        call (it waits for nobody, and its members all start with it); ``()`` for any other shape."""
        if self.aware or self._chunked is not None or len(self.layout(algo.ring)[0]) != 1:
            return ()
        net = self._uniform_delay(algo)
        return () if net is None else self._closed_form(algo, net)

    def _closed_form(self, algo, net: int) -> tuple[int, int]:
        """``(Σ_{k<S} d_k + S·N, d_S)``: recv_k = send_k + N when every member is alike (cached, as a
        search repeats the same phase shapes hundreds of thousands of times)."""
        key = (algo.ctype, algo.msg_size, algo.P, algo.ring.local, algo.stream_count, algo.parallel_reduce, net)
        hit = self._closed.get(key)
        if hit is None:
            d, steps = algo.packet_delays(), algo.stream_count
            hit = self._closed[key] = (sum(d[:steps]) + steps * net, d[steps])
        return hit

    def _uniform_delay(self, algo) -> int | None:
        key = (id(algo.ring), algo.msg_size, algo.direction)
        if key not in self._uniform:
            net = self._phase.links(algo.ring, algo.msg_size, algo.direction).delays
            self._uniform[key] = net[0] if min(net) == max(net) else None
        return self._uniform[key]


def simulate_symmetric(
    graphs: Mapping[int, Any],
    sym: RankSymmetry,
    groups: Mapping[int, list[int]],
    hw: HardwareConfig,
    metadata: Mapping[int, dict[int, list[tuple[str, list[int]]]]] | None = None,
) -> SimResult:
    """Simulate the representatives' graphs (``rank → TraceGraph``) and expand to every rank.

    The caller must have checked :func:`symmetry_problem`; ``groups`` are the whole rank set's
    communicator groups (id → ascending members); ``metadata`` the groups each representative's
    METADATA nodes create (record → (name, members), as ``simulate`` hands them to ``Workload``).
    A representative's collective over every rank (:func:`world_collective`) declines the run.
    """
    world = world_collective(graphs, {str(g) for g in groups})
    if world is not None:
        raise SymmetryDeclined(world)
    was_enabled = gc.isenabled()
    gc.disable()  # as simulate(): many long-lived small objects, nothing for the collector to free
    ring_fast = phases_fast = True
    try:
        while True:  # each rerun turns a fast path off, so at most two reruns
            try:
                return _run(graphs, sym, groups, hw, metadata or {}, ring_fast=ring_fast, phases_fast=phases_fast)
            except FastPathDeclined as tie:  # a direct phase hit a same-time tie only the event order settles
                log.info("symmetric run: direct fast path declined (%s); rerunning it message by message", tie)
                phases_fast = False
            except LinkConflict as conflict:  # the aware recurrences met an order they cannot time
                if _chunks_both_ways(hw):
                    raise SymmetryDeclined(
                        f"chunks running both ways round would go message by message ({conflict})"
                    ) from None
                log.info("symmetric run: ring fast path declined (%s); rerunning message by message", conflict)
                ring_fast = phases_fast = False
    finally:
        if was_enabled:
            gc.enable()


def _run(
    graphs: Mapping[int, Any],
    sym: RankSymmetry,
    groups: Mapping[int, list[int]],
    hw: HardwareConfig,
    metadata: Mapping[int, dict[int, list[tuple[str, list[int]]]]],
    ring_fast: bool,
    phases_fast: bool,
):
    reps = sym.reps()
    queue = EventQueue()
    stats = RunStats()
    result = SimResult(hw.backend)
    network: CongestionUnawareNetwork | CongestionAwareNetwork
    aware = hw.backend == "congestion_aware"
    if aware:
        network = _QuotientAwareNetwork(hw.network, queue, sym)
    else:
        network = _QuotientNetwork(hw.network, queue, sym)
    coordinator = None
    chunks, stagger = chunk_batching(hw) if aware else (False, False)
    if ring_fast or not aware:
        coordinator = _QuotientRings(network, queue, stats, sym, aware, chunks, stagger)
    phases = None  # direct phases' fast path where the full engine takes it (simulate.py)
    if coordinator is not None and phases_fast and (not aware or _batches_exact(hw) or _direct_chunks_batched(hw)):
        phases = _QuotientPhases(network, queue, stats, coordinator, aware, chunks, stagger)
    rep_set = set(reps)
    start = groups_at_start({g: m for g, m in groups.items() if not rep_set.isdisjoint(m)}, sym.world, reps)
    rings: dict = {}
    workloads = []
    for r in reps:
        sys = Sys(r, hw, queue, network, stats, coordinator, rings, phases)
        memory = RemoteMemory(hw.memory, None)  # per NPU: symmetry_problem refuses shared ports
        workloads.append(Workload(r, rank_trace(graphs[r]), sys, hw, start[r], memory, result, metadata.get(r)))
    for w in workloads:
        w.fire()
    queue.run()
    stuck = {w.rank: sorted(w.t.ids[i] for i in w.ongoing)[:STUCK_LIST_LIMIT] for w in workloads if not w.finished}
    if stuck:
        first = min(stuck)
        raise StuckError(
            f"{len(stuck)} representative rank(s) cannot finish; rank {first} waits on node(s) {stuck[first]}",
            stuck=stuck,
        )
    result.messages, result.fast_messages = stats.messages, stats.fast_messages
    result.finalize(workloads)
    index = np.searchsorted(np.asarray(reps), sym.rep(np.arange(sym.world, dtype=np.int64)))
    for name in ("finish_ns", "compute_ns", "cpu_ns", "exposed_comm_ns", "comm_ns", "idle_ns"):
        setattr(result, name, np.asarray(getattr(result, name), dtype=np.int64)[index].tolist())
    log.info("symmetric run: %d of %d ranks simulated (%d classes)", len(reps), sym.world, len(reps))
    return result
