"""``analyze(trace_set)``: every execution rule over a rank set, computed once, and the stage verdict.

Order of work: per-file rules on every rank (one Kahn issue order per rank), the one group table
(:mod:`.groups`), the comm spec of every communication node (:mod:`.comm`), the cross-rank matching
(:mod:`.set_rules`) and, when nothing but a cycle or a mismatch stands in the way, the untimed finish
proof (:mod:`.progress`), whose stuck ranks become ``set-deadlock`` problems.

:meth:`RankSetAnalysis.refuse` is the verdict simulate and replay share: a deadlock raises
:class:`~.problems.SetStuck` (exit 3), any other error :class:`~.problems.SetRefused` (exit 2); both
print the very problem lines validate reports for the set.
"""

from __future__ import annotations

import json
import weakref
from dataclasses import dataclass, field

from ..et import schema
from ..et.graph import TraceGraph
from ..et.traceset import TraceSet
from ..heap import release_free_heap
from .comm import comm_specs
from .file_rules import FileChecker, FileResult
from .groups import GroupTable, id_list, resolve_groups
from .problems import ERROR, Finding, SetRefused, SetStuck
from .progress import stuck_nodes
from .set_rules import RankView, check_collective_order, check_collectives, check_point_to_point
from .slots import slot_of
from .twins import SameArrays, SameInputs, SharedColumns, Twins

DEADLOCK = "set-deadlock"
# Errors that leave every comm spec intact, so the finish proof still runs: how a set hangs (a cycle,
# a collective or message some rank never matches), a collective only ASTRA-sim cannot run, or a
# parent listed twice (the proof's Kahn order counts and releases each listing alike).
PROOF_RUNS_DESPITE = frozenset(
    {
        "duplicate-dep",
        "cycle-data",
        "cycle-ctrl",
        "collective-mismatch",
        "p2p-unmatched",
        "p2p-peer",
        "comm-type-unsupported",
        "collective-order",
    }
)
# Errors simulate leaves to its timed run, because ASTRA-sim runs such sets and the run decides
# (astra-sim-semantics.md §4.3): members pair a group's collectives in the order the run issues them
# (``collective-order``); each member runs its own collective at its own type and size, and every
# message matches on (tag, src, dst, size, k), so chunks of different sizes never meet
# (``collective-mismatch``: the set stops, unless the messages come out the same size anyway); a
# send completes when its data arrives, received or not, while a receive waits for a send of its size
# (``p2p-unmatched``); a parent listed twice in a dependency list is one parent (§2.2: the union of
# the lists; ASTRA-sim's feeder keeps parents in a set, only Chakra's C++ feeder stalls on it:
# ``duplicate-dep``). The run finishes (the numbers ASTRA-sim prints, these problems as warnings)
# or stops (exit 3, as ASTRA-sim's "unreleased nodes").
SIMULATE_RUNS_DESPITE = frozenset({"collective-order", "collective-mismatch", "p2p-unmatched", "duplicate-dep"})
# Of those, the ones that need the message-by-message run: the fast paths evaluate a phase once all
# members joined it with one size, which members of different sizes do not share.
MESSAGE_PATH_ONLY = frozenset({"collective-mismatch"})
# Errors replay tolerates: torch.distributed runs the collectives ASTRA-sim does not simulate.
REPLAY_TOLERATES = frozenset({"comm-type-unsupported"})
# Errors of a set that cannot finish (with ``set-deadlock``): simulate lets its timed run decide.
CANNOT_FINISH = frozenset({DEADLOCK, "cycle-data", "cycle-ctrl"})


@dataclass
class RankSetAnalysis:
    """The rules' results for one rank set: problems, per-rank views and slots, groups, stuck ranks.

    The finish proof runs on first use of :attr:`stuck` or :attr:`findings`: a simulation of a set
    without input errors needs it only if its timed run stops (:meth:`refuse_input`), and at 1,024
    ranks it was ~15 % of the set-up.
    """

    prefix: str
    checked: list[Finding]  # every rule's problems but the proof's set-deadlock ones
    ranks: list[RankView]
    slots: list[list[int]]  # SLOT_* of every record, per rank
    groups: GroupTable
    proof_runs: bool  # whether the errors leave the comm specs the proof needs (PROOF_RUNS_DESPITE)
    warned: bool = False  # simulate printed the errors it runs despite (once per cached analysis)
    _stuck: dict[int, list[int]] | None = field(default=None, repr=False)

    @property
    def stuck(self) -> dict[int, list[int]]:
        """rank -> stuck node ids (empty: the set finishes, or was not proven)."""
        if self._stuck is None:
            self._stuck = stuck_nodes(self.ranks, self.slots, self.groups.members) if self.proof_runs else {}
        return self._stuck

    @property
    def findings(self) -> list[Finding]:
        return self.checked + deadlock_findings([v.file for v in self.ranks], self.stuck)

    @property
    def errors(self) -> list[Finding]:
        return [f for f in self.findings if f.is_error]

    def refuse(self, tolerated: frozenset[str] = frozenset()) -> None:
        """Raise what replay (``tolerated=REPLAY_TOLERATES``) does for this set; return when it may run.

        Replay walks each rank's comm slot in the static issue order the proof plays, so a stuck
        proof is a replay that cannot finish.
        """
        errors = [f for f in self.errors if f.rule not in tolerated]
        if self.stuck:
            raise SetStuck(errors, self.stuck)
        if errors:
            raise SetRefused(errors)

    def refuse_input(self) -> list[Finding]:
        """Raise what simulate does before running: ``SetRefused`` for any error, unless the errors
        are the ones of a set that cannot finish (then the timed run decides, see :meth:`stuck_error`).
        Returns the errors the run goes ahead despite (:data:`SIMULATE_RUNS_DESPITE`), for simulate
        to print as warnings.

        ASTRA-sim's comm slot takes the smallest *ready* id, so a later collective may overtake one
        still waiting for its inputs: a set the static proof finds stuck can still finish in time.
        """
        if not any(f.is_error and f.rule not in SIMULATE_RUNS_DESPITE for f in self.checked):
            return self.timed  # the proof could add only set-deadlock errors, which the run decides
        errors = [f for f in self.errors if f.rule not in SIMULATE_RUNS_DESPITE]
        if errors and not (self.stuck and all(f.rule in CANNOT_FINISH for f in errors)):
            raise SetRefused(errors)
        return self.timed

    @property
    def timed(self) -> list[Finding]:
        """The errors simulate leaves to its timed run (:data:`SIMULATE_RUNS_DESPITE`)."""
        return [f for f in self.checked if f.is_error and f.rule in SIMULATE_RUNS_DESPITE]

    @property
    def message_path_only(self) -> bool:
        """Whether simulate must run message by message (:data:`MESSAGE_PATH_ONLY`)."""
        return any(f.is_error and f.rule in MESSAGE_PATH_ONLY for f in self.checked)

    def stuck_error(
        self,
        stuck: dict[int, list[int]],
        why: str | None = None,
        finished: dict[int, tuple[int, int]] | None = None,
    ) -> SetStuck:
        """What simulate raises when its timed run stops with ``stuck`` nodes: validate's problem
        lines when the proof saw this deadlock (its ``set-deadlock`` nodes are the same frontier),
        else validate's other errors and ``set-deadlock`` lines for the timed run's own stuck nodes
        (a deadlock that depends on time, or on the sizes messages match by).
        ``why`` is the simulator's own diagnosis when it has one (a chunk-queue cycle); ``finished``
        the ranks that did finish (``finish_ns``, ``exposed_comm_ns``), whose lines ASTRA-sim prints."""
        if self.stuck == stuck:
            found = self.errors
        else:
            found = [f for f in self.errors if f.rule != DEADLOCK]
            found += deadlock_findings([v.file for v in self.ranks], stuck)
        return SetStuck(found, stuck, why, finished)


# id(TraceSet) -> (weak reference to it, key, analysis): TraceSets are unhashable dataclasses
_CACHE: dict[int, tuple[weakref.ref, tuple, RankSetAnalysis]] = {}


def analyze(
    ts: TraceSet,
    comm_groups: dict[int, list[int]] | None = None,
    groups_file: str | None = None,
    dataset_splits: int = 1,
    full: bool = False,
) -> RankSetAnalysis:
    """Analyze ``ts`` (``comm_groups`` overrides ``ts.comm_groups``; ``groups_file`` names its origin).

    ``dataset_splits`` is the target system's ``preferred-dataset-splits`` (the all-gather rule);
    ``full`` adds validate's decode-everything and warning-only checks. Results are cached per
    TraceSet, so a sweep simulating one set on many systems analyzes it once per distinct input.
    """
    if comm_groups is None:
        comm_groups = ts.comm_groups
        if ts.comm_groups_file is not None:
            groups_file = str(ts.comm_groups_file)
    key = (json.dumps(comm_groups, sort_keys=True), groups_file, full)
    hit = _CACHE.get(id(ts))
    if hit is not None and hit[0]() is ts and hit[1][:-1] == key:
        if hit[1][-1] == dataset_splits or not _all_gather_below(ts, max(hit[1][-1], dataset_splits)):
            return hit[2]
    for k in [k for k, (ref, _, _) in _CACHE.items() if ref() is None]:
        del _CACHE[k]
    analysis = _analyze(ts, comm_groups, groups_file or ts.prefix, dataset_splits, full)
    release_free_heap()  # the per-rank temporaries: not carried into the simulation's peak
    _CACHE[id(ts)] = (weakref.ref(ts), (*key, dataset_splits), analysis)  # one per set: a sweep repeats one key
    return analysis


def _all_gather_below(ts: TraceSet, splits: int) -> bool:
    """Whether an all-gather of the set may have a ``comm_size`` below ``splits``.

    Why: the splits value enters the analysis only through the all-gather rule (``size < splits``,
    ``rankset.sizes``, whose message names the value), so when every all-gather is at least as large
    as both values every finding, comm spec and verdict is the same for both, and a sweep over
    ``preferred-dataset-splits`` checks its set once, not once per value. Sizes are read for every
    collective typed ALL_GATHER, a superset of the nodes the rule looks at.
    """
    for g in {id(g): g for g in ts.ranks}.values():
        gather = (g.types == schema.COMM_COLL_NODE) & (g.int_attr("comm_type", -1) == schema.ALL_GATHER)
        if (g.int_attr("comm_size", 0)[gather] < splits).any():
            return True
    return False


def _analyze(
    ts: TraceSet, comm_groups: dict[int, list[int]] | None, groups_file: str, splits: int, full: bool
) -> RankSetAnalysis:
    # an in-memory set (search, what-ifs) has no files: its graphs name themselves
    files = [str(f) for f in ts.files] if len(ts.files) == len(ts.ranks) else [str(g.path) for g in ts.ranks]
    names = [str(k) for k in comm_groups] if comm_groups else []
    results, slots, first = file_results(ts.ranks, files, names, splits, full)
    findings = [f for res in results for f in res.findings]
    table, group_findings = resolve_groups(
        files, [g.ids for g in ts.ranks], [res.metadata_tables for res in results], comm_groups, groups_file
    )
    findings += group_findings
    views: list[RankView] = []
    shared = SameInputs()  # comm spec columns and sequences of ranks with the same inputs
    for r, (g, res) in enumerate(zip(ts.ranks, results)):
        specs = views[first[r]].specs if first[r] != r else comm_specs(g, r, res.comm_ok, table.members, shared)
        views.append(RankView(r, files[r], g, res, specs, shared))
    findings += check_collectives(views, table)
    findings += check_collective_order(views)
    findings += check_point_to_point(views)
    proof_runs = all(f.rule in PROOF_RUNS_DESPITE for f in findings if f.is_error)
    return RankSetAnalysis(ts.prefix, findings, views, slots, table, proof_runs)


def file_results(
    graphs: list[TraceGraph], files: list[str], names: list[str], splits: int, full: bool, memo: bool = True
) -> tuple[list[FileResult], list[list[int]], list[int]]:
    """The per-file rules' results, each rank's slots, and the rank whose results each reuses
    (itself if none). ``memo=False`` runs every rule on every file (tests compare the two).

    full=False: byte-identical files (twins.py) are checked once, and share their comm specs;
    validate's full checks also read each file's framing and header from disk, so they run per file.
    Each rank's columns are shared with the previous rank's equal ones (``SharedColumns``) *before*
    its rules run, so a rule whose inputs are the very arrays an earlier rank's were reuses that
    rank's findings and result (``FileChecker.memoised``): the ranks of a pipeline stage repeat
    most rules' inputs, and each rule then costs one ``is`` per input.
    """
    twins: Twins[int] = Twins()
    shapes: SameArrays = SameArrays()  # dependency structures checked clean (FileChecker.check_structure)
    shared = SharedColumns()  # each rank's decoded attributes, equal columns kept once (twins.py)
    rules = SameInputs() if memo else None
    results: list[FileResult] = []
    slots: list[list[int]] = []
    first: list[int] = []
    for r, g in enumerate(graphs):
        key, twin = (None, None) if full or not memo else twins.get(g)
        if twin is not None:
            results.append(results[twin].moved(files[r]))
            slots.append(slots[twin])
            first.append(twin)
            continue
        if memo:
            shared.share(g)
        checker = FileChecker(g, files[r], r, names, splits, shapes if memo else None, rules)
        results.append(checker.run(full))
        cpu = g.attr_kind["is_cpu_op"], g.attr_value["is_cpu_op"]  # TraceGraph.is_cpu_op's inputs
        slot = checker.memoised("slots", (g.types, *cpu), (), lambda: slot_of(g.types, g.is_cpu_op).tolist())  # noqa: B023
        slots.append(slot)
        first.append(r)
        twins.put(key, g, r)
    return results, slots, first


def deadlock_findings(files: list[str], stuck: dict[int, list[int]]) -> list[Finding]:
    """One ``set-deadlock`` problem per stuck rank, at its first stuck node, listing them all."""
    return [
        Finding(
            files[r],
            ids[0],
            DEADLOCK,
            ERROR,
            f"rank {r} cannot finish: it stops at node(s) {id_list(ids)} (a collective some member "
            "never reaches, a receive whose send never comes, or a dependency cycle)",
        )
        for r, ids in sorted(stuck.items())
    ]
