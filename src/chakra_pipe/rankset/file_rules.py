"""Per-file rules (chakra-format.md §9, items 1–22): what makes one rank's ``.et`` unusable.

Rules run on the :class:`TraceGraph` columns with numpy; Python loops touch only offending nodes,
communication nodes and METADATA nodes. Rules whose findings can repeat on most nodes of a large
trace for one root cause (a non-canonical attribute kind, zero durations) report once per file
with the count and the first ids; rules that point at one broken node report per node.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import Any, TypeVar

import numpy as np

from ..decompress import GZIP_MAGIC
from ..et import schema
from ..et.attrs import CANONICAL_KINDS, KIND_NUMBER, NUMBER_KIND
from ..et.collectives import COLLECTIVES, REPLAYED, UNSUPPORTED
from ..et.framing import parse_node
from ..et.graph import TraceGraph
from ..et.metadata import plain_node_inputs
from ..et.process_groups import parse_process_groups
from ..et.traceset import WORLD_PG_NAMES
from .comm import COMM_REQUIRED, INT_KIND, INT_NUMBERS, WORLD, canonical_group, pg_name_hint
from .graphalgo import Parents, find_cycle, issue_order, parents_of
from .groups import SHOW_IDS, id_list
from .problems import ERROR, WARNING, Finding
from .sizes import all_gather_too_small
from .twins import SameArrays, SameInputs, has_p2p

R = TypeVar("R")

# Collectives ASTRA-sim accepts but does not simulate (chakra-format.md §9 item 16).
_REPLAYED = {c.comm_type for c in COLLECTIVES if c.astra_sim == REPLAYED}
_UNSUPPORTED = {c.comm_type for c in COLLECTIVES if c.astra_sim == UNSUPPORTED}
# comm_type values 0..9 whose collectives the comm-node rule may report on (all-gather: its size)
_NOTED_COLLECTIVE = np.zeros(10, dtype=bool)
_NOTED_COLLECTIVE[[schema.ALL_GATHER, *_REPLAYED, *_UNSUPPORTED]] = True
_MEM_TYPES = [schema.MEM_LOAD_NODE, schema.MEM_STORE_NODE]
_LINKS_NOTE = (
    " (a warning here: this file's ctrl_deps also name absent ids, so they are parent-op links "
    "to repair, not usable dependencies; see dangling-ctrl-dep)"
)

# Attributes whose value must be an integer when present (send's comm_src defaults to the rank).
_COMM_CHECKED = {
    t: names if t == schema.COMM_COLL_NODE else ("comm_src", "comm_dst", "comm_tag", "comm_size")
    for t, names in COMM_REQUIRED.items()
}
# Integer communication attributes whose values the comm-node rule reads.
_COMM_VALUES = ("comm_type", "comm_size", "comm_src", "comm_dst")
# Per communication attribute, by (node type, attribute kind): whether the kind is a comm-node
# problem there (required and not an integer, or checked, present and not an integer); one lookup a
# node and attribute for _plain_comm.
_PRESENT = np.arange(256) != 0  # by oneof field number: 0 is an absent attribute
# (Rows built with numpy: 11,520 scalar lookups cost ~5 ms of every command's start-up.)
_COMM_BAD_KIND = {
    name: np.array(
        [
            ~INT_KIND & ((name in COMM_REQUIRED.get(t, ())) | ((name in _COMM_CHECKED.get(t, ())) & _PRESENT))
            for t in range(max(COMM_REQUIRED) + 1)
        ]
    )
    for name in ("comm_type", "comm_size", "comm_src", "comm_dst", "comm_tag")
}


@dataclass
class FileResult:
    """Findings of one file plus what the cross-rank rules reuse."""

    findings: list[Finding]
    issue_order: np.ndarray  # record indices in (approximate) issue order
    parents: Parents  # data ∪ ctrl parents (record indices) the issue order was computed over
    stuck: np.ndarray  # mask of the records that never become ready (a cycle or downstream of one)
    # METADATA record index -> its process-group table (pg_name -> ranks, [] = all), parsed ones only
    metadata_tables: dict[int, dict[str, list[int]]] = field(default_factory=dict)
    comm_ok: list[int] = field(default_factory=list)  # communication records without a comm-node problem

    def moved(self, file: str) -> FileResult:
        """This result for a byte-identical file named ``file`` (``twins.py``): the findings name it,
        everything else is shared (nothing downstream modifies a result)."""
        return replace(self, findings=[replace(f, file=file) for f in self.findings])


class FileChecker:
    """Runs every per-file rule on one loaded graph."""

    def __init__(
        self,
        graph: TraceGraph,
        file: str,
        rank: int | None,
        comm_group_names: Iterable[str] = (),
        dataset_splits: int = 1,
        shapes: SameArrays[tuple[np.ndarray, Parents, np.ndarray]] | None = None,
        memo: SameInputs | None = None,
    ):
        self.g, self.file, self.rank = graph, file, rank
        # preferred-dataset-splits of the system config the trace is meant for (1 when none is given:
        # then only a 0-byte all-gather is certain to fail, on any system)
        self.dataset_splits = dataset_splits
        self.comm_group_names = set(comm_group_names)
        self.findings: list[Finding] = []
        # Ctrl lists naming absent ids are parent-op links from a converter (legacy and upstream
        # PyTorch converters), not dependencies any simulator can load: the dangling ids are
        # reported per node (errors: ASTRA-sim refuses the file) and other ctrl-list defects of such a file
        # (self-links, repeats, cycles through ctrl) are downgraded to warnings.
        self._deps: dict[str, tuple[np.ndarray, np.ndarray]] = {}
        self._type_masks: dict[tuple[int, ...], np.ndarray] = {}
        # dependency structures (ids and both lists) whose structural checks found nothing, shared
        # by the ranks of one analysis: a rank with the same structure reuses their results
        self.shapes = shapes
        # each rule's findings and result per distinct inputs (the very arrays, after
        # SharedColumns.share, and parameters), shared by the ranks of one analysis: see memoised
        self.memo = memo
        self.metadata_inputs: dict[int, str] = {}  # METADATA record -> its inputs.values ("": none)
        self.metadata_tables: dict[int, dict[str, list[int]]] = {}
        self.comm_ok: list[int] = []  # communication records without a comm-node problem
        self.informational_kinds: dict[tuple[str, str | None], list[int]] = {}

    @cached_property
    def ctrl_usable(self) -> bool:
        return not (self.dep_indices("ctrl")[1] < 0).any()

    def dep_indices(self, which: str) -> tuple[np.ndarray, np.ndarray]:
        """``TraceGraph.dep_indices`` resolved once per list: the rules read each list several times."""
        if which not in self._deps:
            self._deps[which] = self.g.dep_indices(which)
        return self._deps[which]

    def types_in(self, types: Iterable[int]) -> np.ndarray:
        """Mask of the records whose type is one of ``types`` (kept per type set: ``np.isin`` costs
        ~30 µs a call, which thousands of one-node ranks paid a dozen times each)."""
        key = tuple(sorted(types))
        mask = self._type_masks.get(key)
        if mask is None:
            mask = self.memoised("types-in", (self.g.types,), key, lambda: self._type_mask(key))
            self._type_masks[key] = mask
        return mask

    def records_of(self, node_type: int) -> np.ndarray:
        """Indices of the records of type ``node_type``, kept per types array (the ranks of a pipeline
        stage share theirs): the rules that read a few records' columns gather them by index."""
        g = self.g
        return self.memoised("records-of", (g.types,), node_type, lambda: _frozen(np.flatnonzero(g.types == node_type)))

    def _type_mask(self, types: tuple[int, ...]) -> np.ndarray:
        mask = np.zeros(len(self.g), dtype=bool)
        for t in types:
            mask |= self.g.types == t
        return _frozen(mask)

    def int_attr(self, name: str) -> np.ndarray:
        """``TraceGraph.int_attr(name, 0)``, a function of the attribute's kind and value columns."""
        g = self.g
        return self.memoised(
            "int-attr", (g.attr_kind[name], g.attr_value[name]), name, lambda: _frozen(g.int_attr(name, 0))
        )

    def memoised(
        self,
        rule: str,
        inputs: tuple[object, ...],
        params: Hashable,
        run: Callable[[], R],
        keep: Callable[[list[Finding]], bool] = lambda found: True,
    ) -> R:
        """``run()``'s result, and the findings it adds, reused from an earlier file of the analysis
        whose inputs to it were the very same objects and ``params`` equal (findings renamed to this
        file, in their order). ``inputs`` and ``params`` must name everything ``run`` reads; a rule
        that reads more on some paths (a node's name or raw record for its message) stores its
        result only when ``keep(findings)`` says it did not."""
        if self.memo is None:
            return run()
        key, hit = self.memo.get(rule, inputs, params)
        if hit is not None:
            found, value = hit
            self.findings += [f if f.file == self.file else replace(f, file=self.file) for f in found]
            return value
        before = len(self.findings)
        value = run()
        found = self.findings[before:]
        if keep(found):
            self.memo.put(key, inputs, (found, value))
        return value

    def add(self, index: int | None, rule: str, severity: str, message: str) -> None:
        node = int(self.g.ids[index]) if index is not None else None
        self.findings.append(Finding(self.file, node, rule, severity, message))

    def warn_once(self, where: np.ndarray, rule: str, what: str) -> None:
        """One warning per file for a defect that repeats on many nodes with one root cause (the
        producer): ``N {what}: ids`` at the first such node, instead of a line per node."""
        if len(where):
            self.add(int(where[0]), rule, WARNING, f"{len(where)} {what}: {id_list(self.g.ids[where])}")

    def run(self, full: bool = True) -> FileResult:
        """Every rule; ``full=False`` (simulate, replay) skips the per-record protobuf decode and the
        warning-only header checks, which cost the most and decide no error a stage refuses on."""
        g = self.g
        ids, types = g.ids, g.types
        # METADATA records are read raw: their bytes are the parameters of the rules that read them
        at = self.records_of(schema.METADATA_NODE)
        meta, starts, lengths = at.tolist(), g.rec_start[at].tolist(), g.rec_len[at].tolist()
        records = tuple((i, bytes(g.buf[s : s + n])) for i, s, n in zip(meta, starts, lengths))
        if full:
            self.decode_strictly()
            self.check_header()
        else:  # first, as before: a record that does not decode stops the file here
            self.metadata_inputs = self.memoised("metadata-inputs", (), records, lambda: self._inputs(records))
        kind, value = g.attr_kind, g.attr_value
        order, parents, stuck = self.check_structure()
        self.memoised("times", (ids, types, g.start_time_micros, g.duration_micros), (), self.check_times)
        informational = tuple((k, tuple(v)) for k, v in self.informational_kinds.items())  # full only
        self.memoised(
            "attr-kinds",
            (ids, types, *kind.values()),
            (tuple(kind), tuple(map(g.stored_kinds, kind)), informational),
            self.check_attribute_kinds,
        )
        comm_inputs, comm_params = self._comm_inputs()
        self.comm_ok = self.memoised(
            "comm-nodes", comm_inputs, comm_params, self._comm_ok, keep=lambda found: not found
        )
        self.memoised(
            "mem-roofline",
            (ids, types, kind["tensor_size"], value["tensor_size"], kind["num_ops"]),
            (),
            self.check_memory_and_roofline,
        )
        self.metadata_tables = self.memoised("metadata", (ids, types), records, self._metadata)
        self.check_pg_names()
        return FileResult(self.findings, order, parents, stuck, self.metadata_tables, self.comm_ok)

    def _comm_inputs(self) -> tuple[tuple[np.ndarray, ...], Hashable]:
        """What :meth:`check_comm_nodes` reads when it finds nothing (a finding names the node: the
        memo keeps only clean results, and a clean result's ``comm_ok`` is every comm record).

        The rank, and the ``comm_src``/``comm_dst`` values, enter only as "a send's ``comm_src``
        (a receive's ``comm_dst``) is not the rank": when no send or receive of the file has that,
        the rule runs as on any other rank where none has, so the key says so instead of naming the
        rank and those per-rank columns (a pipeline stage's ranks then share one result)."""
        g = self.g
        kind, value = g.attr_kind, g.attr_value
        inputs = (
            g.ids,
            g.types,
            kind["is_cpu_op"],
            value["is_cpu_op"],
            *(kind[n] for n in _COMM_BAD_KIND),
            value["comm_type"],
            value["comm_size"],
        )
        rank = self.rank
        if rank is None or not self.memoised("p2p", (g.types,), (), lambda: has_p2p(g)):
            return inputs, (None, self.dataset_splits)
        sends_own, recvs_own = ("comm_src", schema.COMM_SEND_NODE), ("comm_dst", schema.COMM_RECV_NODE)
        if self._all_rank(*sends_own, rank) and self._all_rank(*recvs_own, rank):
            return inputs, (None, self.dataset_splits)
        return (*inputs, value["comm_src"], value["comm_dst"]), (rank, self.dataset_splits)

    def _all_rank(self, name: str, node_type: int, rank: int) -> bool:
        """``(self.int_attr(name)[records of node_type] == rank).all()`` from those records alone: a
        negative or saturated value is never a rank, so the stored integer (0 where there is none)
        decides. Why: the peer columns differ on every rank, so ``int_attr``'s full-column result
        was computed afresh twice a rank (a tenth of the per-file rules' time at 1,024 ranks); the
        records are a few of a rank, gathered by index (kept per types array), not masked out of
        full columns."""
        g = self.g
        at = self.records_of(node_type)
        return bool((np.where(INT_KIND[g.attr_kind[name][at]], g.attr_value[name][at], 0) == rank).all())

    def _comm_ok(self) -> list[int]:
        self.check_comm_nodes()
        return self.comm_ok

    def _inputs(self, records: tuple[tuple[int, bytes], ...]) -> dict[int, str]:
        """Each METADATA record's ``inputs.values``: walked without protobuf where the record is
        plain (:func:`plain_node_inputs`), else strictly decoded (its errors stop the file)."""
        out = {}
        for i, record in records:
            values = plain_node_inputs(record)
            out[i] = _inputs_of(self.g.node(i)) if values is None else values
        return out

    def _metadata(self) -> dict[int, dict[str, list[int]]]:
        self.check_metadata_nodes()
        return self.metadata_tables

    def check_structure(self) -> tuple[np.ndarray, Parents, np.ndarray]:
        """Ids, types, dependency lists, cycles and roots (items 6–13); see :meth:`check_cycles_and_roots`
        for what is returned. Ids and dependency lists alone decide all but the type rules, so a rank
        whose structure an earlier rank of the analysis had without a finding reuses its results
        (the ranks of a pipeline stage share one structure and differ in attributes)."""
        g = self.g
        arrays = (g.ids, g.data_ptr, g.data_ids, g.ctrl_ptr, g.ctrl_ids)
        memo_key, hit = self.memo.get("structure", arrays) if self.memo is not None else (None, None)
        key = None
        if hit is None and self.shapes is not None:
            key, known = self.shapes.get(arrays)
            hit = None if known is None else ([], [], known)
        if hit is not None:
            ids_found, deps_found, result = hit
            self.findings += [replace(f, file=self.file) for f in ids_found]
            self._check_types()
            self.findings += [replace(f, file=self.file) for f in deps_found]
            return result
        before = len(self.findings)
        self.check_ids()
        ids_found = self.findings[before:]
        self._check_types()
        after_types = len(self.findings)
        self.check_dependency_lists()
        result = self.check_cycles_and_roots()
        deps_found = self.findings[after_types:]
        if self.memo is not None and memo_key is not None:
            self.memo.put(memo_key, arrays, (ids_found, deps_found, result))
        if self.shapes is not None and key is not None and not ids_found and not deps_found:
            self.shapes.put(key, arrays, result)
        return result

    def _check_types(self) -> None:
        """:meth:`check_types`, kept only without a ``node-type`` finding (whose message reads the record)."""
        self.memoised(
            "types",
            (self.g.ids, self.g.types),
            (),
            self.check_types,
            keep=lambda found: not any(f.rule == "node-type" for f in found),
        )

    # -- framing and header (items 1–5) ------------------------------------------------------
    def decode_strictly(self) -> None:
        """Decode every record with the protobuf runtime once (the bulk loader is lenient by design).

        A record that does not parse raises ``TraceFormatError`` with its byte offset (exit 2);
        the ``inputs`` of METADATA nodes are kept: they are checked later.
        """
        g = self.g
        starts, lengths = g.rec_start.tolist(), g.rec_len.tolist()
        # Offsets name the record's length prefix, as the streaming reader's errors do.
        prefix = (
            1 + (g.rec_len >= 1 << 7) + (g.rec_len >= 1 << 14) + (g.rec_len >= 1 << 21) + (g.rec_len >= 1 << 28)
        ).tolist()
        types = g.types.tolist()
        buf, path = g.buf, g.path
        # Well-known attributes the graph has no column for (informational ones such as rf_id):
        # their kinds are checked here, while each node is decoded anyway.
        columns = g.attr_kind
        expected = {name: kind for name, kind in CANONICAL_KINDS.items() if name not in columns}
        odd = self.informational_kinds
        for i, (s, n, p) in enumerate(zip(starts, lengths, prefix)):
            decoded = parse_node(buf[s : s + n], path, s - p)  # type: ignore[arg-type]
            if types[i] == schema.METADATA_NODE:
                self.metadata_inputs[i] = _inputs_of(decoded)
            for attr in decoded.attr:
                want = expected.get(attr.name)
                if want is not None and (kind := attr.WhichOneof("value")) != want:
                    odd.setdefault((attr.name, kind), []).append(i)

    def check_header(self) -> None:
        md = self.g.metadata
        if not md.version and not any(a.name == "schema" for a in md.attr):
            self.add(
                None,
                "metadata-version",
                WARNING,
                "GlobalMetadata has an empty version and no schema attribute (producer unknown)",
            )
        try:
            with open(self.g.path, "rb") as f:
                gz = f.read(2) == GZIP_MAGIC
        except OSError:
            gz = False
        if gz:
            self.add(None, "gzip", WARNING, "gzip-compressed: ASTRA-sim's feeder reads plain files only")

    # -- nodes and graph (items 6–13) --------------------------------------------------------
    def check_ids(self) -> None:
        ids = self.g.ids
        uniq, first, counts = np.unique(ids, return_index=True, return_counts=True)
        for k in np.nonzero(counts > 1)[0]:
            records = np.nonzero(ids == uniq[k])[0]
            self.add(
                int(first[k]),
                "duplicate-id",
                ERROR,
                f"id used by {counts[k]} records (#{id_list(records)} in file order); ids must be unique",
            )

    def check_types(self) -> None:
        types = self.g.types
        for i in np.nonzero((types < 0) | (types > schema.COMM_COLL_NODE))[0]:
            self.add(int(i), "node-type", ERROR, f"type {self.g.node(int(i)).type} is outside NodeType 0..7")
        self.warn_once(
            np.nonzero(types == schema.INVALID_NODE)[0], "invalid-node", "INVALID_NODE nodes (simulators skip them)"
        )

    def check_dependency_lists(self) -> None:
        g = self.g
        for which, lists_name in (("data", "data_deps"), ("ctrl", "ctrl_deps")):
            ptr, parent = self.dep_indices(which)
            dep_ids = g.data_ids if which == "data" else g.ctrl_ids
            child = np.repeat(np.arange(len(g), dtype=np.int64), np.diff(ptr))
            dangling = parent < 0
            if dangling.any():
                severity = ERROR
                why = (
                    "every simulator waits for it forever"
                    if which == "data"
                    else "ASTRA-sim refuses the file: 'not found in index'"
                )
                for i, missing in _group_by_child(child[dangling], dep_ids[dangling]):
                    self.add(
                        i,
                        f"dangling-{which}-dep",
                        severity,
                        f"{lists_name} names ids absent from the file: {id_list(missing)} ({why})",
                    )
            severity, note = ERROR, ""
            if which == "ctrl" and not self.ctrl_usable:
                severity, note = WARNING, _LINKS_NOTE
            selfdep = dep_ids == g.ids[child]
            for i, _ in _group_by_child(child[selfdep], dep_ids[selfdep]):
                self.add(i, "self-dep", severity, f"{lists_name} names the node itself (it can never issue){note}")
            order = np.lexsort((dep_ids, child))
            c, d = child[order], dep_ids[order]
            dup = np.nonzero((c[1:] == c[:-1]) & (d[1:] == d[:-1]))[0] + 1
            for i, ids in _group_by_child(c[dup], d[dup]):
                self.add(
                    i,
                    "duplicate-dep",
                    severity,
                    f"{lists_name} repeats {id_list(np.unique(ids))} (Chakra's C++ feeder frees one "
                    f"occurrence per parent and stalls){note}",
                )

    def check_cycles_and_roots(self) -> tuple[np.ndarray, Parents, np.ndarray]:
        """Items 11–12; returns the issue order (computed here once per rank: the cross-rank rules and
        the finish proof reuse it), the data ∪ ctrl parents and the mask of never-ready records."""
        g = self.g
        if len(g) == 0:
            self.add(None, "no-root", ERROR, "the file has no nodes (ASTRA-sim finds no dependency-free node)")
            empty = np.zeros(0, dtype=np.int64)
            return empty, Parents(np.zeros(1, dtype=np.int64), empty), np.zeros(0, dtype=bool)
        n = len(g)
        both = parents_of(n, [self.dep_indices("data"), self.dep_indices("ctrl")])
        order_both, stuck_both = issue_order(both, g.ids)
        # data_deps alone are a subgraph of the union: acyclic when the union is, so their own
        # issue order (a second Kahn pass per rank) is only needed to tell which list has the cycle
        stuck = np.zeros(n, dtype=bool)
        if stuck_both.any():
            data = parents_of(n, [self.dep_indices("data")])
            stuck = issue_order(data, g.ids)[1]
            if stuck.any():
                self._cycle("cycle-data", ERROR, "data_deps", data, stuck, "")
        if stuck_both.any() and not stuck.any():
            if not self.ctrl_usable:
                self._cycle("cycle-ctrl", WARNING, "data_deps ∪ ctrl_deps", both, stuck_both, _LINKS_NOTE)
            else:
                self._cycle(
                    "cycle-ctrl",
                    ERROR,
                    "data_deps ∪ ctrl_deps",
                    both,
                    stuck_both,
                    " (ASTRA-sim enforces both lists and would never finish)",
                )
        # Dependency-free: no data deps and no ctrl dep that resolves (dangling ctrl ids are their
        # own finding, and with them ctrl lists are parent-op links rather than dependencies).
        ctrl_ptr, ctrl_parent = self.dep_indices("ctrl")
        ctrl_child = np.repeat(np.arange(len(g), dtype=np.int64), np.diff(ctrl_ptr))
        existing_ctrl = np.bincount(ctrl_child[ctrl_parent >= 0], minlength=len(g))
        free = (np.diff(g.data_ptr) == 0) & (existing_ctrl == 0)
        if not free.any():
            self.add(
                None, "no-root", ERROR, "no dependency-free node (ASTRA-sim aborts: 'No dependancy free nodes found')"
            )
        return np.asarray(order_both, dtype=np.int64), both, stuck_both

    def _cycle(self, rule: str, severity: str, over: str, parents, stuck, note: str) -> None:
        cycle = find_cycle(parents, stuck)
        ids = [int(self.g.ids[i]) for i in cycle]
        k = ids.index(min(ids))  # start at the smallest id so the message is stable and readable
        cycle, ids = cycle[k:] + cycle[:k], ids[k:] + ids[:k]
        shown = (
            " -> ".join(map(str, ids[:SHOW_IDS] + ids[:1]))
            if len(ids) <= SHOW_IDS
            else " -> ".join(map(str, ids[:SHOW_IDS])) + f" -> … ({len(ids)} nodes) -> {ids[0]}"
        )
        self.add(
            cycle[0], rule, severity, f"cycle over {over}: {shown}; {int(stuck.sum())} nodes can never issue{note}"
        )

    def check_times(self) -> None:
        g = self.g
        if len(g) and not g.start_time_micros.any():
            self.add(
                None,
                "start-time-zero",
                WARNING,
                "start_time_micros is 0 on every node (no producer sets it; nothing can be ordered by it)",
            )
        self.warn_once(
            np.nonzero((g.types == schema.COMP_NODE) & (g.duration_micros == 0))[0],
            "zero-duration",
            "COMP nodes have duration_micros = 0 (replayed as 1 ns)",
        )

    # -- attributes (items 14–22) ------------------------------------------------------------
    def check_attribute_kinds(self) -> None:
        g = self.g
        for name, kinds in g.attr_kind.items():
            canonical = KIND_NUMBER[CANONICAL_KINDS[name]]
            if g.stored_kinds(name) <= {canonical}:  # the common case: no column to scan
                continue
            wrong = (kinds != 0) & (kinds != canonical)
            # A non-integer value where a COMM or MEM node needs the integer is an error of the
            # comm-node / mem-node rules already; do not report it a second time here.
            wrong &= ~(self._requires(name) & ~g.has_int(name))
            if not wrong.any():
                continue
            if name in ("involved_dim", "pg_name"):
                want = "a bool_list (ASTRA-sim rejects anything else)" if name == "involved_dim" else "a string"
                for i in np.nonzero(wrong)[0]:
                    self.add(
                        int(i),
                        name.replace("_", "-"),
                        ERROR,
                        f"{name} is {NUMBER_KIND[int(kinds[i])]}; it must be {want}",
                    )
                continue
            for k in np.unique(kinds[wrong]):
                self._kind_warning(name, NUMBER_KIND[int(k)], np.nonzero(wrong & (kinds == k))[0])
        for (name, kind), where in sorted(self.informational_kinds.items(), key=lambda kv: kv[1][0]):
            self._kind_warning(name, kind or "no value", np.asarray(where))

    def _kind_warning(self, name: str, kind: str, where: np.ndarray) -> None:
        """One warning per (attribute, kind): the root cause is the producer, not each node."""
        self.add(
            int(where[0]),
            "attr-kind",
            WARNING,
            f"{name} stored as {kind} on {len(where)} nodes ({id_list(self.g.ids[where])}); "
            f"canonical kind is {CANONICAL_KINDS[name]} (Chakra's C++ feeder reads others as 0)",
        )

    def _requires(self, name: str) -> np.ndarray:
        """Mask of the nodes whose type needs integer attribute ``name`` (comm and memory rules)."""
        types = [t for t, names in _COMM_CHECKED.items() if name in names]
        if name == "tensor_size":
            types += _MEM_TYPES
        return self.types_in(types)

    def _int_present(self, name: str) -> np.ndarray:
        return self.g.has_int(name)

    def check_comm_nodes(self) -> None:
        """Items 15–18: one finding per communication node listing all of its problems."""
        g = self.g
        comm = np.nonzero(self.types_in(COMM_REQUIRED))[0]
        if not len(comm):
            return
        cpu = self.int_attr("is_cpu_op") != 0  # TraceGraph.is_cpu_op
        kinds = {name: g.attr_kind[name] for name in _COMM_BAD_KIND}
        values = {name: self.int_attr(name) for name in _COMM_VALUES}
        types = g.types
        plain = self._plain_comm(comm, cpu, kinds, values)
        if plain.all():  # nothing for the per-node checks below to report
            self.comm_ok = comm.tolist()
            return
        for i, skip in zip(comm.tolist(), plain.tolist()):
            if skip:
                self.comm_ok.append(i)
                continue
            t = int(types[i])
            problems = []
            if cpu[i]:
                problems.append("is_cpu_op is true (ASTRA-sim throws on CPU-side communication)")
            for name in _COMM_CHECKED[t]:
                k = int(kinds[name][i])
                if k == 0:
                    if name in COMM_REQUIRED[t]:
                        problems.append(f"{name} missing")
                elif k not in INT_NUMBERS:
                    problems.append(f"{name} is {NUMBER_KIND[k]}, not an integer")
            ok = lambda name: int(kinds[name][i]) in INT_NUMBERS  # noqa: E731, B023 -- called at once, in this iteration
            if t == schema.COMM_COLL_NODE and ok("comm_type") and not 0 <= values["comm_type"][i] <= 9:
                problems.append(f"comm_type {values['comm_type'][i]} is outside CollectiveCommType 0..9")
            if ok("comm_size") and values["comm_size"][i] < 0:
                problems.append(f"comm_size {values['comm_size'][i]} is negative")
            elif (
                t == schema.COMM_COLL_NODE
                and ok("comm_size")
                and ok("comm_type")
                and values["comm_type"][i] == schema.ALL_GATHER
                and (too_small := all_gather_too_small(int(values["comm_size"][i]), self.dataset_splits))
            ):
                problems.append(too_small)
            if (
                t == schema.COMM_SEND_NODE
                and self.rank is not None
                and ok("comm_src")
                and values["comm_src"][i] != self.rank
            ):
                problems.append(f"comm_src {values['comm_src'][i]} is not this file's rank {self.rank}")
            if (
                t == schema.COMM_RECV_NODE
                and self.rank is not None
                and ok("comm_dst")
                and values["comm_dst"][i] != self.rank
            ):
                problems.append(f"comm_dst {values['comm_dst'][i]} is not this file's rank {self.rank}")
            if not problems:
                self.comm_ok.append(i)
            if problems:
                self.add(i, "comm-node", ERROR, f"{schema.NODE_TYPE_NAMES[t]} {g.name(i)!r}: " + "; ".join(problems))
            elif t != schema.COMM_COLL_NODE and values["comm_size"][i] == 0:
                name = schema.NODE_TYPE_NAMES[t]
                self.add(i, "p2p-empty", ERROR, f"{name} {g.name(i)!r}: comm_size is 0 (ASTRA-sim sends at least 1 B)")
            elif t == schema.COMM_COLL_NODE and int(values["comm_type"][i]) in _REPLAYED | _UNSUPPORTED:
                ct = int(values["comm_type"][i])
                what = (
                    "is replayed from duration_micros, not simulated"
                    if ct in _REPLAYED
                    else "is not simulated (runtime error 'Unsupported collective comm type')"
                )
                # an error where ASTRA-sim (and simulate) stop; replay, which can run it, tolerates it
                severity = WARNING if ct in _REPLAYED else ERROR
                self.add(i, "comm-type-unsupported", severity, f"{schema.COMM_TYPE_NAMES[ct]} {what} by ASTRA-sim")

    def _plain_comm(
        self, comm: np.ndarray, cpu: np.ndarray, kinds: dict[str, np.ndarray], values: dict[str, np.ndarray]
    ) -> np.ndarray:
        """Mask over ``comm`` of the nodes the per-node checks of :meth:`check_comm_nodes` certainly
        pass without a finding (a superset of each check's condition, in numpy: the per-node loop
        then runs only on the nodes that may have one, which keeps its findings and their order)."""
        t = self.g.types[comm]
        coll, send, recv = t == schema.COMM_COLL_NODE, t == schema.COMM_SEND_NODE, t == schema.COMM_RECV_NODE
        odd = cpu[comm]
        for name, bad in _COMM_BAD_KIND.items():
            odd |= bad[t, kinds[name][comm]]
        ct, size = values["comm_type"][comm], values["comm_size"][comm]
        outside = (ct < 0) | (ct > 9)
        odd |= coll & (outside | _NOTED_COLLECTIVE[np.where(outside, 0, ct)])
        odd |= size <= 0
        if self.rank is not None:
            odd |= send & (values["comm_src"][comm] != self.rank)
            odd |= recv & (values["comm_dst"][comm] != self.rank)
        return ~odd

    def check_memory_and_roofline(self) -> None:
        g = self.g
        mem = self.types_in(_MEM_TYPES)
        size_ok = self._int_present("tensor_size")
        for i in np.nonzero(mem & ~size_ok)[0]:
            k = int(g.attr_kind["tensor_size"][i])
            state = "missing" if k == 0 else f"{NUMBER_KIND[k]}, not an integer"
            self.add(
                int(i),
                "mem-node",
                ERROR,
                f"{schema.NODE_TYPE_NAMES[int(g.types[i])]} needs tensor_size (bytes); it is {state}",
            )
        roof = (g.types == schema.COMP_NODE) & g.has("num_ops") & (g.int_attr("tensor_size", 0) <= 0)
        self.warn_once(
            np.nonzero(roof)[0],
            "roofline-inputs",
            "COMP nodes carry num_ops without a positive tensor_size (roofline skips them as 0 ns)",
        )

    def check_metadata_nodes(self) -> None:
        """Item 22: METADATA ``inputs.values`` must be ``['<json>']`` holding the process-group list."""
        for i, values in self.metadata_inputs.items():
            groups, problem = parse_process_groups(values)
            if problem:
                self.add(i, "metadata-pg", ERROR, f"METADATA inputs.values {problem}")
                continue
            self.metadata_tables[i] = groups

    def check_pg_names(self) -> None:
        known = self.comm_group_names | {name for table in self.metadata_tables.values() for name in table}
        if set(self.g.pg_name.values()) <= known | WORLD_PG_NAMES:  # the common case: nothing to report
            return
        keys = {canonical_group(name) for name in known} | {WORLD}
        for i, name in sorted(self.g.pg_name.items()):
            if canonical_group(name) in keys:
                continue
            listed = ", ".join(sorted(known, key=lambda s: (len(s), s))) or "none"
            self.add(
                i,
                "pg-name",
                ERROR,
                f"pg_name {name!r} names no communicator group (known: {listed}){pg_name_hint(name)}",
            )


def _inputs_of(node: Any) -> str:
    """A decoded Node's ``inputs.values``; "" without ``inputs``."""
    return node.inputs.values if node.HasField("inputs") else ""


def _frozen(a: np.ndarray) -> np.ndarray:
    """``a`` made read-only: a memoised array serves other files' rules, so a writer must fail."""
    a.flags.writeable = False
    return a


def _group_by_child(child: np.ndarray, values: np.ndarray) -> Iterable[tuple[int, np.ndarray]]:
    """``(child index, its values)`` for each distinct child, in ascending child order."""
    if not len(child):
        return
    order = np.argsort(child, kind="stable")
    c, v = child[order], values[order]
    starts = np.nonzero(np.r_[True, c[1:] != c[:-1]])[0]
    ends = np.r_[starts[1:], len(c)]
    for s, e in zip(starts.tolist(), ends.tolist()):
        yield int(c[s]), v[s:e]
