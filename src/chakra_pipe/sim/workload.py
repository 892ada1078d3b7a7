"""Per-rank issue loop (ASTRA-sim's ``Workload``, spec §2) and the per-rank columns it reads.

A node becomes issuable when every parent in ``data_deps`` ∪ ``ctrl_deps`` has finished. Each pass
walks the issuable nodes in ascending id and issues those whose hardware slot is free (``ready.py``,
``hardware.py``); a pass runs at start and after every completion. Issuing dispatches on the node
type: replay, roofline (``roofline.py``), remote memory (``memory.py``), COMM nodes (``comm.py``),
METADATA groups (``groups.py``).
"""

from __future__ import annotations

import weakref
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

import numpy as np

from ..errors import InputError
from ..et import schema
from ..et.attrs import INT_KINDS, KIND_NUMBER
from ..et.graph import INT_ATTRS
from ..et.rows import CsrRows
from ..rankset.slots import slot_of
from .comm import issue_comm
from .custom import CustomCollectives
from .hardware import HardwareResource
from .memory import RemoteMemory
from .ready import ReadySet
from .roofline import Roofline
from .system.sys import Group

S = schema
# RankTrace.has by oneof field number: 1 = an integer value, 0 = absent, -1 = present with a
# non-integer kind (an input error)
_HAS_STATE = np.full(256, -1, dtype=np.int8)
_HAS_STATE[0] = 0
_HAS_STATE[[KIND_NUMBER[k] for k in INT_KINDS]] = 1
_COMM_TYPES = frozenset((S.COMM_COLL_NODE, S.COMM_SEND_NODE, S.COMM_RECV_NODE))


@dataclass
class RankTrace:
    """The columns of one rank the simulator reads, as plain Python lists (built once per graph)."""

    path: str
    ids: list[int]
    types: list[int]
    dur_us: list[int]
    cpu: list[bool]
    attrs: dict[str, list[int]]
    has: dict[str, list[int]]
    pg_name: Mapping[int, str]  # a dict when built; a quotient run's replica reads its graph's
    involved_dim: dict[int, list[bool]]
    n_parents: list[int]
    children: Sequence[list[int]]
    slot_of: list[int]  # SLOT_* of each node
    pos: list[int]  # rank of each node in ascending id order (the issue order)
    index: list[int]  # node index at each such rank
    graph_ref: weakref.ref = field(repr=False)  # weak: the column cache must not keep traces alive

    @property
    def graph(self):
        """The source ``TraceGraph`` (None once the caller dropped its TraceSet)."""
        return self.graph_ref()

    @classmethod
    def build(cls, g) -> RankTrace:
        n = len(g)
        ids = g.ids.tolist()  # uint64 -> exact Python ints (no wrap above 2^63)
        # integer view of each well-known attribute (the graph's one list): one table lookup
        # instead of np.isin per column
        attrs, has = {}, {}
        absent = [0] * n  # shared by the attributes no node of this rank carries (read-only)
        for a in INT_ATTRS:
            kind = g.attr_kind[a]
            if not kind.any():  # most attributes on most ranks: no column to convert
                attrs[a] = has[a] = absent
                continue
            attrs[a] = g.exact_ints(a)  # uint64 sizes of 2^63 and more stay positive
            has[a] = _HAS_STATE[kind].tolist()
        pairs = []  # (child, parent) over data ∪ ctrl deps, duplicates removed below
        for which in ("data", "ctrl"):
            ptr, par = g.dep_indices(which)  # no dangling ids: rankset refused such sets already
            child = np.repeat(np.arange(n, dtype=np.int64), np.diff(ptr).astype(np.int64))
            pairs.append(par.astype(np.int64) * max(n, 1) + child)  # one sortable key per (parent, child)
        keys = np.sort(np.concatenate(pairs))  # sorted by parent, then child; duplicates dropped next
        keys = keys[np.concatenate((keys[:1] == keys[:1], keys[1:] != keys[:-1]))]  # np.unique imports numpy.ma
        parent_of, child_of = np.divmod(keys, max(n, 1))
        n_parents = np.bincount(child_of, minlength=n).tolist()
        child_ptr = np.concatenate([[0], np.cumsum(np.bincount(parent_of, minlength=n))])
        children = CsrRows(child_ptr, child_of)  # lists made on access: ~50 deps a node are GBs as lists
        slots = slot_of(g.types, g.is_cpu_op)
        order = np.argsort(g.ids, kind="stable")
        pos = np.empty(n, dtype=np.int64)
        pos[order] = np.arange(n, dtype=np.int64)
        return cls(
            str(g.path),
            ids,
            g.types.tolist(),
            g.duration_micros.tolist(),
            g.is_cpu_op.tolist(),
            attrs,
            has,
            g.pg_name.copy(),  # a real dict: the engine's lookups per collective
            dict(g.involved_dim),
            n_parents,
            children,
            slots.tolist(),
            pos.tolist(),
            order.tolist(),
            weakref.ref(g),
        )

    def of_twin(self, g) -> RankTrace:
        """These columns for ``g``, a byte-identical file (``rankset/twins.py``): shared, since no
        ``Workload`` modifies them; only the file name its errors give and the graph differ."""
        return replace(self, path=str(g.path), graph_ref=weakref.ref(g))

    def attr(self, i: int, name: str, default: int | None = None) -> int:
        """Integer attribute ``name`` of node ``i``; ``default`` when absent (required when None)."""
        state = self.has[name][i]
        if state == 1:
            return self.attrs[name][i]
        if state == -1:
            raise self.error(i, f"attribute {name} must be an integer")
        if default is None:
            raise self.error(i, f"missing required attribute {name}")
        return default

    def error(self, i: int, what: str) -> InputError:
        """An input error naming this rank's file and node ``i``."""
        return InputError(what, file=self.path, where=f"node {self.ids[i]}")


class Workload:
    """One rank's issue loop: dependency counts, free nodes, slots, and each node's start and end."""

    def __init__(
        self,
        rank: int,
        trace: RankTrace,
        sys,
        hw,
        groups: dict[str, Group],
        memory: RemoteMemory,
        result,
        metadata_groups: dict[int, list[tuple[str, list[int]]]] | None = None,
        custom: CustomCollectives | None = None,
    ):
        self.rank = rank
        self.t = trace
        self.sys = sys
        self.cfg = hw.system
        self.groups = groups
        self.memory = memory
        self.roofline = Roofline.of(hw.system)
        # METADATA record -> the groups it creates, with members resolved by chakra_pipe.rankset
        self.metadata_groups = metadata_groups or {}
        self.res = result
        # custom collectives' traces (``custom.py``): one cache per run when the caller shares it
        self.custom = CustomCollectives() if custom is None else custom
        n = len(trace.ids)
        self.waiting = list(trace.n_parents)
        self.free = ReadySet(trace.pos, trace.index, trace.slot_of)
        for i in range(n):
            if self.waiting[i] == 0:
                self.free.add(i)
        self.ongoing: set[int] = set()
        self.hardware = HardwareResource()
        self.finished = False
        self.finish_ns = -1
        self.start = [-1] * n
        self.end = [-1] * n
        self.done_count = 0

    def slot(self, i: int) -> int:
        """The hardware slot node ``i`` occupies (``rankset.slots.slot_of``)."""
        return self.t.slot_of[i]

    # -- driving ----------------------------------------------------------------------------------
    def fire(self) -> None:
        """Start the rank (rankset's ``no-root`` rule refused a rank with no dependency-free node)."""
        self.issue_free()
        self.check_finished()

    def issue_free(self) -> None:
        self.free.issue_pass(self.hardware.busy, self.issue)

    def check_finished(self) -> None:
        # Fix of quirk 1: a skipped METADATA/INVALID node frees its children without a new pass;
        # when nothing else is in flight ASTRA-sim then never finishes. Re-scan instead.
        free = self.free  # its ``size``: len() without a Python-level __len__ call (once per completion)
        while free.size and not self.ongoing:
            before = self.done_count
            self.issue_free()
            if self.done_count == before:
                break
        if not free.size and not self.ongoing and self.done_count == len(self.t.ids):
            self.finished = True
            self.finish_ns = self.sys.now
            self.res.finish_order.append(self.rank)
        # With nothing free or in flight but nodes left (a dependency cycle), the rank stays
        # unfinished and simulate() reports it stuck instead of a silent partial result.

    def complete(self, i: int) -> None:
        if self.finished:
            return
        self.finish_node(i)
        self.issue_free()
        self.check_finished()

    def finish_node(self, i: int) -> None:
        t = self.t
        self.hardware.release(t.slot_of[i])
        self.ongoing.discard(i)
        self.end[i] = self.sys.queue.now
        self.done_count += 1
        waiting, add = self.waiting, self.free.add
        for c in t.children[i]:
            waiting[c] -= 1
            if not waiting[c]:
                add(c)

    # -- issue ------------------------------------------------------------------------------------
    def issue(self, i: int, s: int) -> None:
        t = self.t
        self.ongoing.add(i)
        self.hardware.occupy(s)
        self.start[i] = self.sys.queue.now
        ty = t.types[i]
        if self.cfg.replay_only:
            self.replay(i)
        elif ty in _COMM_TYPES:  # the node types are disjoint: the most frequent are tested first
            issue_comm(self, i)
        elif ty == S.COMP_NODE:
            if self.cfg.roofline_enabled and not t.cpu[i]:
                self.compute(i)
            else:
                self.replay(i)
        elif ty in (S.MEM_LOAD_NODE, S.MEM_STORE_NODE):
            self.remote_mem(i)
        elif ty == S.INVALID_NODE:
            self.finish_node(i)
        elif ty == S.METADATA_NODE:  # types outside 0..7 are rankset's node-type errors
            self.metadata(i)
            self.finish_node(i)

    def _done(self, i: int):
        return lambda: self.complete(i)

    def replay(self, i: int) -> None:
        runtime = self.t.dur_us[i] * 1000 or 1
        if self.t.cpu[i]:
            self.hardware.tics_cpu += runtime
        else:
            self.hardware.tics_gpu += runtime
        self.sys.register_event(self._done(i), runtime)

    def compute(self, i: int) -> None:
        """A GPU compute node on the roofline; ``tensor_size`` 0 is skipped as invalid, as upstream."""
        num_ops, tensor_size = self.t.attr(i, "num_ops"), self.t.attr(i, "tensor_size")
        if tensor_size == 0:
            self.finish_node(i)
            return
        runtime = self.roofline.runtime_ns(num_ops, tensor_size)
        self.hardware.tics_gpu += runtime
        self.sys.register_event(self._done(i), runtime)

    def remote_mem(self, i: int) -> None:
        if not self.memory.enabled:
            raise self.t.error(
                i,
                "remote-memory node but the memory model is NO_MEMORY_EXPANSION "
                "(give --remote-memory-configuration with an expansion type)",
            )
        delay = self.memory.access_ns(self.sys.now, self.t.attr(i, "tensor_size"))
        self.sys.register_event(self._done(i), delay)

    def metadata(self, i: int) -> None:
        for name, members in self.metadata_groups.get(i, ()):  # ASTRA-sim numbers them pg_name + 1
            self.groups[name] = Group(int(name) + 1, members, name)
