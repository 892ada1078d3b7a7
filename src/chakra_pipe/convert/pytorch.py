"""Convert a PyTorch host ET or linked ET+ (one rank) into Chakra nodes.

Where we deliberately differ from upstream ``chakra_converter PyTorch`` (pytorch-traces.md §6.4):
* gloo collectives (``c10d::*``) and NCCL ``record_param_comms`` without device kernels become COMM
  nodes (upstream: COMP only); their implementation subtree (``nccl:*``/``gloo:*`` ranges, copies)
  is folded into them, and a gloo op lasts as long as its ``gloo:*`` worker range (paired by
  ``rf_id``), not the enqueue; a host op the ET records inside an op that Kineto shows had already
  ended is put back beside it (the ET observer's stack slips on gloo worker ranges; upstream
  re-parents by Kineto containment for ``ctrl_deps`` only, here for the whole call tree);
* a kernel-less NCCL record (a one-member group: NCCL copies out of place and does nothing in
  place; or a host-only trace) lasts its device work (the folded copies), while its host time,
  the launch, is added to its caller's compute (the ``c10d::`` op). Above a kernel these host ops
  are COMP nodes (here and upstream), since launching is host time on any number of GPUs. As the
  COMM node's own time it was lost from a simulated step (the network models the transfer, not
  the launch: -4..-25 % of the one-GPU captures' steps) or, for a broadcast, which ASTRA-sim
  replays from its duration, ran as a transfer (+0.6..+3.4 %). A gloo op's enqueue is not split
  off: its worker starts the transfer inside the call, so the two overlap;
* p2p nodes get ``comm_src``/``comm_dst``/``comm_tag``; every comm node gets ``pg_name``;
* a host op's COMP duration excludes the time it sat idle while a collective ran on a worker
  thread (linker ``comm_wait``): that was communication, which the simulated network models; and
  the time it sat blocked while another thread's ops ran (linker ``thread_wait``: ``backward()``
  on a GPU waits for the autograd device thread), which the cross-thread dependency reproduces;
* ``start_time_micros`` from Kineto ``ts``; ``Optimizer.step`` keeps its duration;
* dependencies: one chain per host thread in call (pre-)order, GPU ops after their launching op and
  after the previous op of their stream, a linked NCCL kernel after the last op launched before it on
  its thread's current stream of its device (the enqueue's ``syncStream``), the first op launched
  on that stream after a ``work.wait()`` on it after the kernel (the wait holds the stream, not the
  host) or after a future's ``cudaStreamWaitEvent`` (linker ``stream_wait_calls``: DDP's bucket
  waits, which leave no ``wait`` record) after the NCCL kernels that stream had not waited for,
  host ops after the GPU ops a ``*Synchronize`` made them wait for (linker ``sync_dep``);
  a kernel-less NCCL COMM node off the chain, as its kernel would be (after its launch, its
  group's previous NCCL group -- records sharing a sequence number were coalesced and run
  together -- and other groups' on its tensors; its ``wait`` record and the ops reading
  its tensor after it: NCCL is asynchronous to the host); ctrl deps only to nodes that are in the
  file. Every edge except the GPU waits points to a smaller id (host ids are assigned at op entry,
  GPU ids follow in time order; a stream's wait on another is kept only so); GPU waits go to strictly earlier
  starts and are dropped as a whole if they still close a cycle, so the output is always acyclic;
* the process root and thread roots are not emitted (they have no time of their own).
"""

from __future__ import annotations

import bisect
import math
from collections import Counter
from dataclasses import dataclass, field
from itertools import pairwise
from typing import Any

from ..capture.plan import PG_LABEL_PREFIX
from ..digits import is_int_text
from ..errors import InputError
from ..et import schema
from ..et.attrs import set_attr
from ..et.process_groups import format_process_groups
from ..et.traceset import WORLD_PG
from ..link.hostet import PG_INIT_MARK, HostTrace, attr, device_of, is_root, is_thread, process_groups
from .check import cycle_node
from .collectives import (
    C10D_OPS,
    DTYPE_BYTES,
    Comm,
    RecordSeq,
    from_c10d,
    from_record_param_comms,
    kernel_kind,
    normalise_collective,
    record_seq,
    tensor_bytes,
    tensor_storages,
)

# Roles of a host/ET+ node in the output.
DROP, ABSORB, CPU, COMM, METADATA, GPU = range(6)
_INFO_ATTRS = ("rf_id", "fw_parent", "seq_id", "scope", "tid", "fw_tid")
_INT64 = (-(1 << 63), (1 << 63) - 1)
_INT32 = 1 << 31
# A thread idle for longer than this has been waiting on another thread (µs; CPU op gaps from
# Python overhead are tens of µs).
THREAD_GAP_US = 100.0


@dataclass
class ProcessGroups:
    """The rank set's process groups: PyTorch name -> members (None = all ranks), plus our ids.

    ASTRA-sim selects a group by ``pg_name`` = a key of the comm-group file (integer > 0);
    ``"0"``/``""`` is the default group. PyTorch names are "0", "1", … today; any other name is
    given the next free integer so the file stays loadable.
    """

    members: dict[str, list[int] | None] = field(default_factory=dict)
    world_size: int = 1

    def chakra_name(self, pg: str) -> str:
        if pg in ("", WORLD_PG):
            return WORLD_PG
        if is_int_text(pg) and int(pg) > 0:
            return str(int(pg))
        numeric = [int(n) for n in self.members if is_int_text(n)]
        others = sorted(n for n in self.members if not is_int_text(n))
        base = max(numeric, default=0) + 1
        return str(base + others.index(pg)) if pg in others else WORLD_PG

    def ranks_of(self, pg: str) -> list[int]:
        ranks = self.members.get(pg)
        return list(ranks) if ranks else list(range(self.world_size))

    def to_global(self, pg: str, local: int) -> int:
        ranks = self.ranks_of(pg)
        return ranks[local] if 0 <= local < len(ranks) else local


def process_groups_of(trace: HostTrace, table: list[dict[str, Any]]) -> ProcessGroups:
    """Groups from Kineto ``distributedInfo.pg_config`` (explicit ranks) or the ET's PG table."""
    info = trace.header.get("distributedInfo") if isinstance(trace.header.get("distributedInfo"), dict) else {}
    pgs = ProcessGroups()
    world = info.get("world_size")  # type: ignore[union-attr]
    for g in table:
        if isinstance(g.get("pg_name"), str):
            ranks = g.get("ranks")
            pgs.members[g["pg_name"]] = (
                [r for r in ranks if isinstance(r, int)] if isinstance(ranks, list) and ranks else None
            )
            if g["pg_name"] == WORLD_PG and isinstance(g.get("group_size"), int) and not isinstance(world, int):
                world = g["group_size"]
    for g in info.get("pg_config") or []:  # type: ignore[union-attr]
        if isinstance(g, dict) and isinstance(g.get("pg_name"), str) and isinstance(g.get("ranks"), list):
            pgs.members[g["pg_name"]] = [r for r in g["ranks"] if isinstance(r, int)] or None
    pgs.world_size = world if isinstance(world, int) and world > 0 else 1
    return pgs


@dataclass
class RankConversion:
    """One rank's output and what the set-level writer and the CLI report need."""

    metadata: Any
    nodes: list[Any]
    groups: ProcessGroups
    used_pgs: set[str]
    counts: Counter
    pg_unknown: int = 0
    sync_dropped: int = 0


def _num(node: dict[str, Any], key: str) -> float:
    v = node.get(key)
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else 0.0


def _ns(us: float) -> int:
    """A Kineto time (µs with ns decimals) in whole ns: sums of epoch-sized µs round by an ulp."""
    return round(us * 1000)


def _exclusive_work(node: dict[str, Any]) -> float:
    """A host op's own time less what the linker measured as waiting (on a collective or a thread)."""
    return _num(node, "exclusive_dur") - _num(node, "comm_wait") - _num(node, "thread_wait")


def _micros(v: float) -> int:
    """Nearest µs (Chakra's converter truncates, ``int(exclusive_dur)``: 0.5 µs short per op on
    average, a bias that adds up over a step's thousands of ops; capture/README.md)."""
    return max(0, int(round(v)))


class _Converter:
    """Three ascending-id passes over the nodes (parents always have smaller ids than children)."""

    def __init__(self, trace: HostTrace, rank: int):
        self.trace, self.rank = trace, rank
        self.order = sorted(trace.nodes, key=lambda n: n["id"])
        self.parent: dict[int, int] = {}
        for n in self.order:
            p = n["ctrl_deps"]
            if p in trace.by_id and p < n["id"]:
                self.parent[n["id"]] = self._caller_side_parent(n, p)
        self.table = process_groups(trace)
        self.groups = process_groups_of(trace, self.table)

    def _caller_side_parent(self, n: dict[str, Any], p: int) -> int:
        """``p``, or its nearest ET ancestor still open when host op ``n`` began (Kineto times).

        A parent that had ended before its child began cannot be its caller: the ET observer's call
        stack slipped. It does when a gloo worker starts a ``gloo:*`` range while the enqueueing
        ``c10d::`` op is still open (one in five several-bucket DDP captures): the op's exit pops
        the range instead, and the rest of the step is recorded inside the op, so the next bucket's
        all-reduce would be folded into it and the ranks' collectives no longer match. It slips
        below DDP's ``AccumulateGrad`` hooks too: in 2-rank ``gpt-tiny`` captures with small
        buckets, 31-107 of 1,038 nodes a rank (the rest of backward) hung from a hook that had
        ended. Upstream re-parents such ops by Kineto containment too, for ``ctrl_deps`` only; here
        the corrected parent decides everything the call tree decides (``ctrl_deps``, folding into
        a collective, the process group a ``chakra_pipe.pg:`` label passes down); durations come
        from Kineto either way. Only a timed op below a timed parent is judged (a host-only trace keeps its
        ET tree); worker-side ranges stay where they are (their times are another thread's).
        """
        if "cat" in n or "ts" not in n or n["name"].startswith("gloo:"):
            return p
        ts = _num(n, "ts")
        while p in self.parent:
            up = self.trace.by_id[p]
            if "cat" in up or "ts" not in up or "inclusive_dur" not in up:
                break
            if _ns(_num(up, "ts")) + _ns(_num(up, "inclusive_dur")) >= _ns(ts):  # in whole ns: no float ulps
                break
            p = self.parent[p]
        return p

    def _subtree_flags(self) -> tuple[set[int], set[int]]:
        """Ids with a NCCL device op below them, and ids with a record_param_comms below them."""
        nccl_below: set[int] = set()
        rpc_below: set[int] = set()
        for n in reversed(self.order):
            nid = n["id"]
            p = self.parent.get(nid)
            if p is None:
                continue
            if nid in nccl_below or ("cat" in n and "nccl" in n["name"].lower()):
                nccl_below.add(p)
            if nid in rpc_below or n["name"] == "record_param_comms":
                rpc_below.add(p)
        return nccl_below, rpc_below

    def _kernels_beside_records(self, nccl_below: set[int]) -> dict[int, tuple[int, Comm]]:
        """NCCL kernels a linker attached to a record's caller, with that record's collective.

        Upstream ``chakra_trace_link`` attaches a launch to the op sharing its ``External id``
        (chakra issue #196), in older traces the ``c10d::`` op above ``record_param_comms`` rather
        than the ``nccl:*`` range below it, so the kernel is the record's sibling. Upstream's
        converter makes that kernel the one COMM node (pytorch-traces.md §6.2); without this
        pairing the record became a second COMM node for the same collective and the kernel one
        of 0 bytes. The k-th NCCL kernel child of an op takes its k-th collective record child
        that has no device work of its own. Returns {kernel id: (record id, comm)}.
        """
        kernels: dict[int, list[int]] = {}
        records: dict[int, list[tuple[int, Comm]]] = {}
        for n in self.order:
            p = self.parent.get(n["id"])
            if p is None:
                continue
            if "cat" in n and "nccl" in n["name"].lower():
                kernels.setdefault(p, []).append(n["id"])
            elif n["id"] not in nccl_below and (comm := from_record_param_comms(n)) is not None:
                records.setdefault(p, []).append((n["id"], comm))
        pairs: dict[int, tuple[int, Comm]] = {}
        for p, kernel_ids in kernels.items():
            pairs.update(zip(kernel_ids, records.get(p, ()), strict=False))
        return pairs

    def classify(self) -> None:
        nccl_below, rpc_below = self._subtree_flags()
        self.paired = self._kernels_beside_records(nccl_below)
        paired_records = {rid for rid, _ in self.paired.values()}
        self.kernel_of: dict[int, int] = {}  # a collective's host op (anchor, record) -> its NCCL kernel
        self.role: dict[int, int] = {}
        self.comm: dict[int, Comm] = {}
        self.absorbed_by: dict[int, int] = {}  # folded node -> the COMM node it belongs to
        self.records: set[int] = set()  # NCCL records that are COMM nodes (no kernel below)
        open_anchor: dict[int, int] = {}  # node -> nearest host anchor whose kernels carry the comm
        self.label: dict[int, str] = {}
        self.gloo_ranges: list[dict[str, Any]] = []
        for n in self.order:
            nid, name = n["id"], n["name"]
            p = self.parent.get(nid)
            self.label[nid] = (
                name[len(PG_LABEL_PREFIX) :]
                if name.startswith(PG_LABEL_PREFIX)
                else self.label.get(p, "")
                if p is not None
                else ""
            )
            if p is not None and (p in self.absorbed_by or self.role.get(p) == COMM):
                self.absorbed_by[nid] = self.absorbed_by.get(p, p)
            anchor = open_anchor.get(p) if p is not None else None
            if anchor is not None:
                open_anchor[nid] = anchor
            if is_root(n) or is_thread(n):
                self.role[nid] = DROP
            elif name.startswith("gloo:"):
                self.role[nid] = DROP
                self.gloo_ranges.append(n)
            elif nid in self.absorbed_by:
                self.role[nid] = ABSORB
            elif "cat" in n:
                self.role[nid] = GPU
                self._claim_kernel(n, anchor)
            elif PG_INIT_MARK in name:
                self.role[nid] = METADATA
            else:
                comm = from_record_param_comms(n)
                if comm is None and nid not in rpc_below:
                    comm = from_c10d(n)
                if comm is None:
                    self.role[nid] = CPU
                elif nid in nccl_below or nid in paired_records:
                    self.role[nid] = CPU  # the device kernel below is the communication
                    self.comm[nid] = comm
                    open_anchor[nid] = nid
                else:
                    self.role[nid] = COMM
                    self.comm[nid] = comm
                    if name == "record_param_comms":
                        self.records.add(nid)

    def _claim_kernel(self, n: dict[str, Any], anchor: int | None) -> None:
        """The first NCCL kernel under an anchor carries its comm; unclaimed ones use their name."""
        if "nccl" not in n["name"].lower():
            return
        paired = self.paired.get(n["id"])
        if paired is not None:  # attached beside its record (see _kernels_beside_records)
            self.kernel_of[paired[0]] = n["id"]
            self.comm[n["id"]] = paired[1]
            return
        if anchor is not None:  # further kernels of an already claimed anchor stay COMP
            if anchor not in self.kernel_of:
                self.kernel_of[anchor] = n["id"]
                self.comm[n["id"]] = self.comm[anchor]
            return
        args = n.get("args") or {}
        cname = args.get("Collective name")
        kind = normalise_collective(cname) if isinstance(cname, str) else kernel_kind(n["name"])
        if kind is None:
            return
        size = args.get("In msg nelems")
        dtype = str(args.get("dtype", "")).lower()
        # Upstream ET+ (pytorch-traces.md §5.2 step 7, §6.2): the kernel is a copy of its host op,
        # so its inputs are that op's tensors, and the linker put the group in a top-level pg_name.
        if isinstance(size, int) and dtype in DTYPE_BYTES:
            nbytes = size * DTYPE_BYTES[dtype]
        else:
            nbytes = tensor_bytes(n["inputs"].get("values") or [])
        pg = args.get("Process Group Name", n.get("pg_name"))
        self.comm[n["id"]] = Comm(kind, nbytes, pg_name=pg if isinstance(pg, str) else "")

    def gloo_durations(self) -> dict[int, float]:
        """Transfer time per gloo anchor: Σ of the ``gloo:*`` worker ranges that belong to it.

        ProcessGroupGloo creates a work's RecordFunction when the ``c10d::`` op enqueues it, on the
        caller's thread, and starts the range when a worker thread picks the work up. So ``rf_id``
        (a global counter taken at creation) puts a range right after its op's, while the ET ``id``
        is taken at the range's start: when the hooks of several DDP buckets enqueue all-reduces
        before the worker starts the first, every range's id follows every enqueue, and pairing by
        id credits them all to the last bucket. Ranges therefore go to the latest same-named op with
        a smaller ``rf_id``; by ``id`` only where the trace lacks ``rf_id`` (old or hand-made traces:
        exact when each range starts before the next op of its name is issued). ``self.order`` is
        ascending by id, so ``by_id`` is built sorted.
        """
        by_id: dict[str, list[int]] = {}
        by_rf: dict[str, list[tuple[int, int]] | None] = {}
        for n in self.order:
            nid = n["id"]
            comm = self.comm.get(nid) if self.role[nid] == COMM else None
            # A c10d op that is no COMM node (folded into another collective by an ET nesting slip,
            # or its arguments unreadable) still owns its ranges, on both paths: they must not be
            # credited to another collective (only COMM nodes read the totals).
            is_c10d = comm is None and n["name"].startswith("c10d::")
            spec = C10D_OPS.get(n["name"][len("c10d::") :]) if is_c10d else None
            name = comm.gloo_name if comm is not None else spec.gloo_name if spec is not None else ""
            if not name:
                continue
            by_id.setdefault(name, []).append(nid)
            rf, pairs = attr(n, "rf_id"), by_rf.setdefault(name, [])
            if not isinstance(rf, int):
                by_rf[name] = None  # one op without rf_id: this name pairs by id
            elif pairs is not None:
                pairs.append((rf, nid))
        for pairs in by_rf.values():
            if pairs is not None:
                pairs.sort()
        total: dict[int, float] = {}
        for g in self.gloo_ranges:
            rf, pairs = attr(g, "rf_id"), by_rf.get(g["name"])
            if isinstance(rf, int) and pairs is not None:
                i = bisect.bisect_left(pairs, (rf, -1)) - 1
                op = pairs[i][1] if i >= 0 else None
            else:
                ids = by_id.get(g["name"], [])
                i = bisect.bisect_left(ids, g["id"]) - 1
                op = ids[i] if i >= 0 else None
            if op is not None:
                total[op] = total.get(op, 0.0) + _num(g, "inclusive_dur")
        return total

    def _threads(self) -> tuple[dict[int, int | None], dict[int, int]]:
        """Nearest emitted ancestor and host thread (``tid`` attr, inherited) of every node."""
        kept_anc: dict[int, int | None] = {}
        tid_of: dict[int, int] = {}
        for n in self.order:
            nid = n["id"]
            p = self.parent.get(nid)
            kept_anc[nid] = None if p is None else (p if self.role[p] not in (DROP, ABSORB) else kept_anc[p])
            tid = attr(n, "tid")
            tid_of[nid] = tid if isinstance(tid, int) else tid_of.get(p, 0) if p is not None else 0
        return kept_anc, tid_of

    def _inter_thread_deps(self, tid_of: dict[int, int], off_chain: set[int]) -> dict[int, int]:
        """Cross-thread order for timed host ops (upstream's ``inter_thread_dep``, without its bugs).

        When a thread resumes after an idle gap (or starts), its op waits for the latest op that
        started before it on another thread: the autograd thread starts after the main thread
        called backward, and the main thread resumes after the last backward op. Only edges to
        smaller ids are kept, so the graph stays acyclic.
        """
        # A kernel-less NCCL record stands for device work, which no thread waits for by going on.
        host = [n for n in self.order if self.role[n["id"]] in (CPU, COMM, METADATA) and n["id"] not in off_chain]
        timed = [n for n in host if "ts" in n]
        if not timed:
            return _entry_order_deps(host, tid_of)
        if len({tid_of[n["id"]] for n in timed}) < 2:
            return {}
        all_sorted = sorted(timed, key=lambda n: (_num(n, "ts"), n["id"]))
        # An op that sat blocked on another thread covers no gap, nor does any op around it (a
        # ``record_function`` label holding ``backward()`` inside ``ProfilerStep``): the op after the
        # wait must see it and wait for that thread in turn.
        waited: set[int] = set()
        for n in timed:
            up: int | None = n["id"] if _num(n, "thread_wait") else None
            while up is not None and up not in waited:
                waited.add(up)
                up = self.parent.get(up)
        deps: dict[int, int] = {}
        prev_end: dict[int, float] = {}
        # The latest-started op overall and the latest on any other thread than its own: enough to
        # answer "latest op on a thread other than T" in O(1). Ops with equal start see neither.
        top1: dict[str, Any] | None = None
        top2: dict[str, Any] | None = None
        i = 0
        while i < len(all_sorted):
            ts = _num(all_sorted[i], "ts")
            j = i
            while j < len(all_sorted) and _num(all_sorted[j], "ts") == ts:
                j += 1
            batch = all_sorted[i:j]
            for n in batch:
                nid, tid = n["id"], tid_of[n["id"]]
                if tid not in prev_end or ts - prev_end[tid] > THREAD_GAP_US:
                    other = top1 if top1 is not None and tid_of[top1["id"]] != tid else top2
                    if other is not None and other["id"] < nid:
                        deps[nid] = other["id"]
                span = 0.0 if nid in waited else _num(n, "inclusive_dur")
                prev_end[tid] = max(prev_end.get(tid, ts), ts + span)
            for n in batch:
                if top1 is not None and tid_of[top1["id"]] != tid_of[n["id"]]:
                    top2 = top1
                top1 = n
            i = j
        return deps

    def _records_device_and_launch(self, kept_anc: dict[int, int | None]) -> tuple[dict[int, float], dict[int, float]]:
        """Per kernel-less NCCL record its device time (Σ of its folded GPU ops: NCCL's one-member
        copies), and per caller the host time of the records it called (their launch; see the
        module docstring). A record without a caller in the file keeps its host time as before."""
        by_id = self.trace.by_id
        device = dict.fromkeys(self.records, 0.0)
        for nid, anchor in self.absorbed_by.items():
            if anchor in device and "cat" in by_id[nid]:
                device[anchor] += _num(by_id[nid], "inclusive_dur")
        launch: dict[int, float] = {}
        for nid in self.records:
            caller = kept_anc[nid]
            if caller is None:
                del device[nid]
            else:
                launch[caller] = launch.get(caller, 0.0) + _num(by_id[nid], "inclusive_dur")
        return device, launch

    def _nccl_stream(self, nid: int) -> str:
        """The process group of a NCCL record (its name, else the inherited label): one NCCL stream."""
        return self.comm[nid].pg_name or self.label[nid]

    def _waits(self, records: set[int]) -> dict[int, list[int]]:
        """Per ``wait`` record (``work.wait()``) on a host thread, the collective records of ``records``
        it waits for: same sequence number, p2p counter and group (:func:`_waited_record`); the
        collectives precede their wait in id order (ids are taken at op entry). Several records
        share a number when they were coalesced into one NCCL group (``batch_isend_irecv``): its
        one work's wait waits for all of them."""
        out: dict[int, list[int]] = {}
        if not records:
            return out
        pending: dict[tuple[int, bool], dict[str, list[int]]] = {}  # (seq, p2p) -> {group name: records}
        for n in self.order:
            seq = record_seq(n)
            if seq is None:
                continue
            nid = n["id"]
            if nid in records:
                pending.setdefault((seq.seq, seq.p2p), {}).setdefault(seq.pg, []).append(nid)
            elif seq.wait and self.role[nid] in (CPU, COMM):
                waited = _waited_record(pending.get((seq.seq, seq.p2p), {}), seq.pg)
                if waited:
                    out[nid] = waited
        return out

    def _device_waits(self, tid_of: dict[int, int], waits: dict[int, list[int]]) -> dict[int, list[int]]:
        """Per GPU op, the GPU ops a stream's wait on the device makes it follow, other than its stream's.

        ProcessGroupNCCL orders its NCCL stream against the calling thread's current stream of the
        collective's device on the device, never on the host, at both ends of a collective:

        * the enqueue (``syncStream``: an event recorded on the current stream, the NCCL stream
          waits for it): the NCCL kernel follows the last op launched on the current stream before
          it (DDP's bucket all-reduce reduces the gradients the backward kernels wrote). Without
          it the kernel started right after its launching host op, beside the compute, and the
          simulated step was too short;
        * ``work.wait()`` (``WorkNCCL::wait``, ``cudaStreamWaitEvent`` on the collective's end
          event): the first op launched on the current stream after the wait returns follows the
          NCCL kernel (the optimizer's kernels follow the gradient all-reduce: a slower network
          lengthens the step).

        A wait holds the stream, whoever launches on it (the default stream is every thread's
        current stream: DDP waits on the autograd thread, the optimizer launches from the main
        one). The current stream is the one of the thread's nearest launch on that device off NCCL
        streams: the last before the point, else the first after (the first after, else the last
        before, for a wait: it may have switched streams since). Launches are ordered by their
        runtime call's time (``launch_ts``; the launching op's start in an ET+ without it); later
        ops of the waiting stream follow through the stream chain. Only edges to a smaller id are
        kept (GPU ids follow device start times), so the graph stays acyclic. A future's wait
        (DDP's ``finalize_backward``) leaves no ``wait`` record, only its runtime call
        (:meth:`_wait_call_holds`). Where Kineto recorded the streams' waits (``cuda_sync`` events),
        those are taken instead of inferred.
        """
        link = self.trace.header.get("link")
        if isinstance(link, dict) and link.get("stream_wait_events"):
            return self._recorded_stream_waits()
        nccl_kernels = [n for n in self.order if self.role[n["id"]] == GPU and n["id"] in self.comm]
        if not nccl_kernels:
            return {}
        by_id = self.trace.by_id
        launches = _ComputeLaunches.of(self, tid_of)
        out: dict[int, list[int]] = {}

        def add(gpu_op: int | None, waited: int | None) -> None:
            if gpu_op is not None and waited is not None and waited < gpu_op and waited not in out.get(gpu_op, ()):
                out.setdefault(gpu_op, []).append(waited)

        for k in nccl_kernels:  # the enqueue
            at = self._launch_ns(k)
            if at is not None:
                add(k["id"], launches.last_before(tid_of[k["id"]], device_of(k), at))
        for wid, records in waits.items():  # work.wait()
            w = by_id[wid]
            if "ts" not in w:  # an unlinked wait: no time to place it among the launches
                continue
            returned = _ns(_num(w, "ts")) + _ns(_num(w, "inclusive_dur"))
            for kernel in (kid for r in records if (kid := self.kernel_of.get(r)) is not None):
                add(launches.first_after(tid_of[wid], device_of(by_id[kernel]), returned), kernel)
        for gpu_op, kernel_id in self._wait_call_holds(launches, nccl_kernels):
            add(gpu_op, kernel_id)
        return out

    def _wait_call_holds(self, launches: _ComputeLaunches, nccl_kernels: list[dict[str, Any]]) -> list[tuple[int, int]]:
        """(held GPU op, NCCL kernel) for the linker's ``stream_wait_calls``: ``cudaStreamWaitEvent``
        calls outside any enqueue, which a future's wait makes (DDP's Reducer waits for its bucket
        all-reduces so in ``finalize_backward``; no ``wait`` record says so).

        A call carries no event handle, so it is assumed to wait for every NCCL kernel of the device
        launched before it (by any thread, on another stream) that the waiting stream -- the
        thread's current stream of the device, as for ``work.wait()`` -- has not waited for yet:
        the first op launched on that stream from the call on follows them. That is safe: a wait
        only adds an edge from a later launch to an earlier one, so it can lengthen a step (where
        the real wait was for fewer collectives) but never reorder one, and the waits a future
        chain passes on (its callback's) meet the same kernels at the final wait. A thread that
        launched on several devices is taken to wait on each (a one-process multi-GPU future holds
        an event per device).
        """
        calls = self._wait_calls()
        if not calls:
            return []
        kernels: dict[Any, list[tuple[int, int, int]]] = {}  # device -> [(launch ns, id, stream)]
        for k in nccl_kernels:
            at = self._launch_ns(k)
            if at is not None:
                kernels.setdefault(device_of(k), []).append((at, k["id"], k.get("stream", 0)))
        for ks in kernels.values():
            ks.sort()
        devices: dict[int, list[Any]] = {}
        for thread, device in launches.by_thread:
            devices.setdefault(thread, []).append(device)
        seen: dict[tuple[Any, int], int] = {}  # waiting (device, stream) -> kernels it has waited for
        holds: list[tuple[int, int]] = []
        for thread, at in calls:
            for device in devices.get(thread, ()):
                held = launches.first_after(thread, device, at)
                ks = kernels.get(device, [])
                if held is None or not ks:
                    continue
                stream = (device, self.trace.by_id[held].get("stream", 0))
                end = bisect.bisect_left(ks, (at,))
                holds.extend((held, kid) for _, kid, s in ks[seen.get(stream, 0) : end] if s != stream[1])
                seen[stream] = max(seen.get(stream, 0), end)
        return holds

    def _wait_calls(self) -> list[tuple[int, int]]:
        """The ET+'s ``stream_wait_calls`` as (ET thread, ns) in time order; one line naming the
        file and entry for a malformed one."""
        raw = self.trace.header.get("stream_wait_calls")
        if raw is None:
            return []
        if not isinstance(raw, list):
            raise InputError("'stream_wait_calls' must be a list", file=self.trace.path, where="stream_wait_calls")
        calls: list[tuple[int, int]] = []
        for i, call in enumerate(raw):
            ok = isinstance(call, list) and len(call) == 2 and all(type(v) in (int, float) for v in call)
            if not ok or type(call[0]) is not int or not math.isfinite(call[1]):
                raise InputError(
                    "a stream wait call must be [ET thread id, ts]",
                    file=self.trace.path,
                    where=f"stream_wait_calls[{i}]",
                )
            calls.append((call[0], _ns(call[1])))
        return sorted(calls, key=lambda c: (c[1], c[0]))

    def _launch_ns(self, n: dict[str, Any]) -> int | None:
        """When a GPU op was launched (ns): its runtime call's ``launch_ts``, else its launching op's start."""
        p = self.parent.get(n["id"])
        at = n.get("launch_ts", self.trace.by_id[p].get("ts") if p is not None else None)
        return _ns(at) if isinstance(at, (int, float)) and not isinstance(at, bool) else None

    def _recorded_stream_waits(self) -> dict[int, list[int]]:
        """The streams' waits Kineto recorded (linker ``stream_wait``), where Kineto recorded them at
        all: they need no inference and also hold a NCCL stream back until the compute it follows.
        Kept, like the inferred ones, when they point to a smaller id."""
        out: dict[int, list[int]] = {}
        for n in self.order:
            nid = n["id"]
            if self.role[nid] == GPU and n.get("stream_wait"):
                found = [g for g in n["stream_wait"] if g < nid and self.role.get(g) == GPU]
                if found:
                    out[nid] = found
        return out

    def _record_consumers(
        self, tid_of: dict[int, int], off_chain: set[int], kept_anc: dict[int, int | None], waits: dict[int, list[int]]
    ) -> dict[int, list[int]]:
        """Per node, the kernel-less NCCL records it must wait for (see :meth:`emit`).

        NCCL runs a collective asynchronously to the host: the host goes on right after the
        enqueue, and only what uses the result waits for it -- the ``wait`` record of the same
        group and sequence number (``work.wait()``), and the first later op of each thread that
        reads one of the record's tensors (its outputs, which for an in-place collective are its
        inputs; by storage, so views count). Later ops of that thread follow in the thread's chain.
        Per storage only a group's latest record is kept: the group's earlier ones precede it on its
        stream. A ``c10d::`` call enqueueing a collective, and what it runs inside, only enqueue
        device work, so they wait for none (an in-place chain of all-reduces on one bucket does
        not block the host); the collective itself, which reads its tensors on the device, waits
        for the records of other groups on them (another NCCL stream).
        """
        out: dict[int, list[int]] = {}
        if not off_chain:
            return out
        by_storage: dict[int, dict[str, int]] = {}  # storage -> {NCCL stream: its latest record}
        done: set[tuple[int, int]] = set()  # (record, thread) already waited for
        calls = {
            c for r in off_chain if (c := kept_anc[r]) is not None and self.trace.by_id[c]["name"].startswith("c10d::")
        }
        inside: set[int] = set()  # enqueueing calls and their descendants
        for n in self.order:
            nid = n["id"]
            if nid in calls or self.parent.get(nid) in inside:
                inside.add(nid)
            if nid in off_chain:
                stream = self._nccl_stream(nid)
                storages = _storages(n, "inputs") | _storages(n, "outputs")
                before = {rid for s in storages for g, rid in by_storage.get(s, {}).items() if g != stream}
                if before:
                    out[nid] = sorted(before)
                for storage in _storages(n, "outputs"):
                    by_storage.setdefault(storage, {})[stream] = nid
                continue
            if self.role[nid] not in (CPU, COMM) or nid in inside:
                continue
            tid = tid_of[nid]
            found = [r for r in waits.get(nid, ()) if r in off_chain]
            for storage in _storages(n, "inputs"):
                found.extend(by_storage.get(storage, {}).values())
            for rid in found:
                if (rid, tid) not in done:
                    done.add((rid, tid))
                    out.setdefault(nid, []).append(rid)
        return out

    def emit(self) -> RankConversion:
        """The Chakra nodes in id order.

        A kernel-less NCCL record (a one-member group, or a host-only trace) with a caller in the
        file is the collective's device work (its launch is the caller's), so it is ordered as a
        NCCL kernel would be: after its launch (the op before it on its thread, normally its
        ``c10d::`` caller), after the previous such records of its process group (one NCCL stream
        per group runs them in order; :class:`_GroupBatch`) and after other groups' records on its
        tensors; the thread's next op does not wait for it, its consumers do
        (:meth:`_record_consumers`). Before, the thread's chain ran through it, so the host sat out
        every collective, blocking or not.
        """
        gloo = self.gloo_durations()
        kept_anc, tid_of = self._threads()
        device, launch = self._records_device_and_launch(kept_anc)
        off_chain = set(device)  # a record without a caller lasts its host time: it stays on the chain
        cross = self._inter_thread_deps(tid_of, off_chain)
        waited = self._waits(off_chain | self.kernel_of.keys())
        consumers = self._record_consumers(tid_of, off_chain, kept_anc, waited)
        device_waits = self._device_waits(tid_of, waited)
        last_on_thread: dict[int, int] = {}
        last_on_stream: dict[tuple[Any, int], int] = {}
        on_group: dict[str, _GroupBatch] = {}
        nodes: list = []
        counts: Counter = Counter()
        used: set = set()
        sync_added: dict[int, list[int]] = {}
        parents: dict[int, set[int]] = {}  # for the cycle guard of GPU-wait edges
        pg_unknown = 0
        for n in self.order:
            nid = n["id"]
            role = self.role[nid]
            if role in (DROP, ABSORB):
                continue
            out = schema.Node(id=nid, name=n["name"])
            candidates: tuple[int | None, ...]
            if role == GPU:
                key = (device_of(n), n.get("stream", 0))
                candidates = (kept_anc[nid], last_on_stream.get(key), *device_waits.get(nid, ()))
                last_on_stream[key] = nid
            elif nid in off_chain:
                group = self._nccl_stream(nid)
                batch = on_group.setdefault(group, _GroupBatch())
                after = batch.add(nid, record_seq(n))
                candidates = (last_on_thread.get(tid_of[nid]), *after, *consumers.get(nid, ()))
            else:
                waits = self._sync_waits(n)
                if waits:
                    sync_added[nid] = waits
                candidates = (last_on_thread.get(tid_of[nid]), cross.get(nid), *waits, *consumers.get(nid, ()))
                last_on_thread[tid_of[nid]] = nid
            data = [d for i, d in enumerate(candidates) if d is not None and d not in candidates[:i]]
            out.data_deps.extend(data)
            if kept_anc[nid] is not None:
                out.ctrl_deps.append(kept_anc[nid])
            parents[nid] = {*data, *(() if kept_anc[nid] is None else (kept_anc[nid],))}
            out.start_time_micros = _micros(_num(n, "ts"))
            comm = self.comm.get(nid) if role in (COMM, GPU) else None
            if comm is not None:
                out.type = comm.node_type
                dur = device[nid] if nid in device else gloo.get(nid) or _num(n, "inclusive_dur")
                pg_unknown += self._comm_attrs(out, n, comm, used)
            elif role == METADATA:
                out.type = schema.METADATA_NODE
                dur = 0.0
            else:
                out.type = schema.COMP_NODE
                dur = _num(n, "inclusive_dur") if role == GPU else _exclusive_work(n) + launch.get(nid, 0.0)
            out.duration_micros = _micros(dur)
            if comm is None:
                set_attr(out, "is_cpu_op", role != GPU)
            self._io(out, n, role)
            self._info_attrs(out, n, role)
            counts[out.type] += 1
            nodes.append(out)
        sync_dropped = _drop_sync_if_cyclic(nodes, parents, sync_added)
        return RankConversion(self._metadata(), nodes, self.groups, used, counts, pg_unknown, sync_dropped)

    def _sync_waits(self, n: dict[str, Any]) -> list[int]:
        """GPU ops this host op waits for (linker ``sync_dep``), kept only when they started earlier."""
        ts = _num(n, "ts")
        by_id = self.trace.by_id
        return [
            g
            for g in n.get("sync_dep") or ()
            if isinstance(g, int) and self.role.get(g) == GPU and _num(by_id[g], "ts") < ts
        ]

    def _comm_attrs(self, out, n: dict[str, Any], comm: Comm, used: set[str]) -> int:
        set_attr(out, "is_cpu_op", False)
        unknown = 0
        pg = comm.pg_name or self.label[n["id"]]  # labels are inherited down the call tree
        if not pg:
            pg = WORLD_PG
            unknown = int(len(self.groups.members) > 1)
        where = f"node {n['id']}"
        if not 0 <= comm.size <= _INT64[1]:
            raise InputError(
                f"{comm.kind} of {comm.size} bytes does not fit comm_size (int64)", file=self.trace.path, where=where
            )
        if comm.node_type == schema.COMM_COLL_NODE:
            set_attr(out, "comm_type", comm.comm_type)
        set_attr(out, "comm_size", comm.size)
        if comm.node_type != schema.COMM_COLL_NODE:
            peer = comm.peer if comm.peer_global or comm.peer < 0 else self.groups.to_global(pg, comm.peer)
            if not (0 <= peer < _INT32 and -_INT32 <= comm.tag < _INT32):
                raise InputError(
                    f"{comm.kind} without a valid peer rank and tag (peer {peer}, tag {comm.tag})",
                    file=self.trace.path,
                    where=where,
                )
            src, dst = (self.rank, peer) if comm.node_type == schema.COMM_SEND_NODE else (peer, self.rank)
            set_attr(out, "comm_src", src)
            set_attr(out, "comm_dst", dst)
            set_attr(out, "comm_tag", comm.tag)
        name = self.groups.chakra_name(pg)
        set_attr(out, "pg_name", name)
        if name != WORLD_PG:
            used.add(pg)
        return unknown

    def _io(self, out, n: dict[str, Any], role: int) -> None:
        if role == METADATA:
            mapped = [
                dict(g, pg_name=self.groups.chakra_name(g["pg_name"])) if isinstance(g.get("pg_name"), str) else g
                for g in self.table
            ]
            try:
                out.inputs.values = format_process_groups(mapped, compact=False)
            except ValueError:  # a quote or backslash ASTRA-sim's parser would mangle: leave it out
                out.inputs.values = ""
            return
        for key, io in (("inputs", out.inputs), ("outputs", out.outputs)):
            src = n.get(key) or {}
            io.values = str(src.get("values", []))
            io.shapes = str(src.get("shapes", []))
            io.types = str(src.get("types", []))

    def _info_attrs(self, out, n: dict[str, Any], role: int) -> None:
        """Upstream's informational attrs (int64 ids, op schema); the hot loop of conversion."""
        host = {a.get("name"): a.get("value") for a in n["attrs"]}
        for name in _INFO_ATTRS:
            v = host.get(name)
            if isinstance(v, int) and not isinstance(v, bool) and _INT64[0] <= v <= _INT64[1]:
                out.attr.add(name=name, int64_val=v)
        op_schema = host.get("op_schema")
        if isinstance(op_schema, str) and op_schema:
            out.attr.add(name="op_schema", string_val=op_schema)
        if role == GPU:
            set_attr(out, "stream", n.get("stream") if isinstance(n.get("stream"), int) else 0)

    def _metadata(self):
        md = schema.GlobalMetadata(version="0.0.4")
        h = self.trace.header
        for key, kind in (
            ("schema", "string_val"),
            ("pid", "uint64_val"),
            ("time", "string_val"),
            ("start_ts", "uint64_val"),
            ("finish_ts", "uint64_val"),
        ):
            v = h.get(key)
            if kind == "string_val" and isinstance(v, str) or kind == "uint64_val" and isinstance(v, int) and v >= 0:
                set_attr(md, key, v, kind)
        set_attr(md, "converter", "chakra_pipe.convert.pytorch", "string_val")
        return md


def _storages(n: dict[str, Any], key: str) -> set[int]:
    """Storage ids of a node's ``inputs`` or ``outputs`` tensors: of its tensor-typed values where
    the types are recorded (a list of five ints, a 5-D shape, has a tensor tuple's form)."""
    io = n.get(key) or {}
    values, types = io.get("values") or [], io.get("types") or []
    if len(types) == len(values):
        values = [v for v, t in zip(values, types, strict=True) if not isinstance(t, str) or "Tensor" in t]
    return tensor_storages(values)


@dataclass
class _GroupBatch:
    """A process group's NCCL stream as kernel-less records fill it: the records of its last NCCL
    group (those sharing a sequence number: ``batch_isend_irecv``'s sends and receives, coalesced
    collectives; one kernel runs them together) and of the group before it.

    A record follows the whole previous group, not the records of its own: chained, a batch whose
    receive comes before its send (``[irecv(prev), isend(next)]``) made every rank's send wait for
    its receive, which waits for the peer's send -- a rank set that cannot finish.
    """

    key: tuple[int, bool] | None = None
    members: list[int] = field(default_factory=list)
    before: list[int] = field(default_factory=list)

    def add(self, nid: int, seq: RecordSeq | None) -> list[int]:
        """Put record ``nid`` on the stream; return the records it follows."""
        key = None if seq is None else (seq.seq, seq.p2p)
        if key is None or key != self.key or not self.members:
            self.key, self.before, self.members = key, self.members, []
        self.members.append(nid)
        return self.before


_COPIES = frozenset({"gpu_memcpy", "gpu_memset"})  # Kineto's device copies and fills (not kernels)


@dataclass
class _ComputeLaunches:
    """The GPU ops launched off NCCL streams (a NCCL stream is never a thread's current stream), in
    launch order (launch ns, correlation, id), per (host thread, device) to tell a thread's current
    stream and per (device, stream) to find the ops a stream's wait holds or waits for.

    A NCCL stream is one whose first kernel (in id order: device start order; copies skipped, as a
    collective copies its inputs in on its NCCL stream before its kernel) is a NCCL kernel:
    ProcessGroupNCCL makes its own streams for a communicator's first collective, while a current
    stream also carries the NCCL kernels of synchronous (``async_op=False``) collectives, which
    PyTorch runs on it, after the compute that came first. Taking any stream with a NCCL kernel for
    a NCCL stream lost every op of a compute stream that had one such kernel."""

    by_thread: dict[tuple[int, Any], list[tuple[int, int, int, int]]]  # -> [(ns, corr, id, stream)]
    by_stream: dict[tuple[Any, int], list[tuple[int, int, int]]]  # -> [(ns, corr, id)]

    @classmethod
    def of(cls, conv: _Converter, tid_of: dict[int, int]) -> _ComputeLaunches:
        gpu = [n for n in conv.order if conv.role[n["id"]] == GPU]
        first: dict[tuple[Any, int], str] = {}
        for n in gpu:
            if n.get("cat") not in _COPIES:
                first.setdefault((device_of(n), n.get("stream", 0)), n["name"])
        nccl_streams = {key for key, name in first.items() if "nccl" in name.lower()}
        out = cls({}, {})
        for n in gpu:
            key = (device_of(n), n.get("stream", 0))
            if key in nccl_streams or (at := conv._launch_ns(n)) is None:
                continue
            corr = (n.get("args") or {}).get("correlation")
            op = (at, corr if type(corr) is int else 0, n["id"])
            out.by_thread.setdefault((tid_of[n["id"]], key[0]), []).append((*op, key[1]))
            out.by_stream.setdefault(key, []).append(op)
        for mine in out.by_thread.values():
            mine.sort()
        for ops in out.by_stream.values():
            ops.sort()
        return out

    def _current(self, thread: int, device: Any, at: int, after: bool) -> tuple[list[tuple[int, int, int]], int]:
        """The thread's current stream of ``device`` at ``at`` (the stream of its nearest launch there:
        the last before ``at``, else the first after; with ``after``, the first from ``at`` on, else
        the last before) as its ops and the insertion point of ``at`` among them; ([], 0) if the
        thread launched nothing there."""
        mine = self.by_thread.get((thread, device))
        if not mine:
            return [], 0
        i = bisect.bisect_left(mine, (at,))
        nearest = (i if i < len(mine) else -1) if after else (i - 1 if i else 0)
        on = self.by_stream[device, mine[nearest][3]]
        return on, bisect.bisect_left(on, (at,))

    def last_before(self, thread: int, device: Any, at: int) -> int | None:
        """The last op launched before ``at`` on the thread's current stream of ``device``."""
        on, j = self._current(thread, device, at, after=False)
        return on[j - 1][2] if j else None

    def first_after(self, thread: int, device: Any, at: int) -> int | None:
        """The first op launched at or after ``at`` on the thread's current stream of ``device``."""
        on, j = self._current(thread, device, at, after=True)
        return on[j][2] if j < len(on) else None


def _waited_record(pending: dict[str, list[int]], pg: str) -> list[int]:
    """The records a ``wait`` of group ``pg`` waits for, taken out of ``pending`` (its sequence
    number's records by group): its group's; the latest group's where the wait or the records name
    no group (waits before torch 2.4 record ``["", ""]``; one group is then all a trace can tell)."""
    if pg in pending:
        return pending.pop(pg)
    loose = [g for g in pending if not pg or not g]
    return pending.pop(max(loose, key=lambda g: pending[g][-1])) if loose else []


def _entry_order_deps(host: list[dict[str, Any]], tid_of: dict[int, int]) -> dict[int, int]:
    """Cross-thread order for a host-only trace (no timestamps): ids are assigned at op entry.

    Whenever the next op in id order runs on another thread than the previous one, it waits for
    that previous op, so ops of all threads start in id order (PARAM's DLRM: the autograd thread's
    backward all-reduces no longer overtake the forward all-to-alls). ``host`` is in id order.
    """
    deps: dict[int, int] = {}
    for prev, n in pairwise(host):
        if tid_of[n["id"]] != tid_of[prev["id"]]:
            deps[n["id"]] = prev["id"]
    return deps


def _drop_sync_if_cyclic(nodes: list, parents: dict[int, set[int]], sync_added: dict[int, list[int]]) -> int:
    """Remove every GPU-wait edge if together they close a cycle (chakra issue #189); return how many.

    All other edges follow start times and ids, so they cannot form a cycle; GPU-wait edges point
    to later ids and could, with inconsistent timestamps. Dropping them keeps the file simulable.
    """
    if not sync_added or cycle_node(parents) is None:
        return 0
    for node in nodes:
        waits = sync_added.get(node.id)
        if waits:
            kept = [d for d in node.data_deps if d not in waits]
            del node.data_deps[:]
            node.data_deps.extend(kept)
    return sum(len(w) for w in sync_added.values())


def convert_trace(trace: HostTrace, rank: int) -> RankConversion:
    """Chakra nodes (ascending id) and metadata for one rank of a host ET or linked ET+."""
    conv = _Converter(trace, rank)
    conv.classify()
    return conv.emit()
