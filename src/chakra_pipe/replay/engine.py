"""The torch side of one rank: turn a node into real device work and poll it.

Collectives and p2p run on the recorded process group with tensors whose byte size is exactly the
recorded size (``CommSpec.elem_bytes`` picks float32 or uint8), and every call logs the bytes it
handed to ``torch.distributed`` so a replay can prove it moved what the trace says.
Imported only inside rank processes: it needs torch.
"""

from __future__ import annotations

import queue
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass

import torch
import torch.distributed as dist

from ..et import schema
from .executor import idle_poll
from .plan import ACT_COLL, ACT_COMPUTE, ACT_RECV, ACT_SEND, SLOT_COMP, WORLD, CommSpec, RankPlan

GEMM_MAX_N = 2048  # larger num_ops run as repeated GEMMs of this size (bounded memory)

_all_gather = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor
_reduce_scatter = getattr(dist, "reduce_scatter_single", None) or dist.reduce_scatter_tensor


@dataclass(frozen=True)
class Gemm:
    """A square GEMM repeated ``reps`` times: ``ops = reps · 2n³`` approximates ``num_ops``."""

    n: int
    reps: int

    @property
    def ops(self) -> int:
        return self.reps * 2 * self.n**3

    @classmethod
    def for_ops(cls, num_ops: int) -> Gemm:
        n = max(1, min(GEMM_MAX_N, round((num_ops / 2) ** (1 / 3))))
        return cls(n, max(1, round(num_ops / (2 * n**3))))


# A waiter thread frees a finished work of at least this many bytes as soon as it has woken the
# loop, smaller ones when it takes its next job. gloo's reduce-scatter work owns a temporary the
# size of its input; freeing one that glibc mmapped is an munmap of ~70 µs per MiB (2-core machine,
# 64 MiB: 4-18 ms), which, deferred, fell on the next wait's path (calibrate's first send after
# its 64 MiB collectives: ~5 ms late). Freeing every work at once cost a 256 B ping-pong ~45 µs,
# more than a deferred free below 1 MiB costs (measured: 256 KiB <= 5 µs; 1 MiB 78 µs when
# unmapped). Figures: benchmarks/RESULTS.md, calibrate_harness.py.
EARLY_FREE_BYTES = 1 << 20


class _Waiter:
    """A work item that cannot be polled, waited for on a :class:`_WaitPool` thread.

    gloo's send/recv and reduce-scatter works have no future and never flip ``is_completed``
    unless someone waits on them, so a pool thread does the waiting and the loop reads the flag.
    ``nbytes`` is what the node handed to ``torch.distributed``: it decides when the work is freed
    (:data:`EARLY_FREE_BYTES`).
    """

    def __init__(self, work, nbytes: int = 0):
        self.work, self.nbytes, self.finished = work, nbytes, False
        self.error: BaseException | None = None
        self.finished_ns: int | None = None

    def run(self) -> None:
        try:
            self.work.wait()
        except BaseException as exc:  # noqa: BLE001 - re-raised in the polling thread
            self.error = exc
        self.finished_ns = time.monotonic_ns()
        self.finished = True


class _WaitPool:
    """Daemon threads that block in ``wait()`` for :class:`_Waiter` s, reused from op to op.

    A thread started per op cost a ping-pong's every send and receive a thread start on the
    critical path (calibrate's round trip is its fitted latency). Every waiter must get a thread at
    once, though, never queue behind a receive whose message is still to come (a send's completion
    may be what lets the peer send it): a waiter takes an idle thread, else a new one, so a rank
    holds as many as it ever had waits in flight (counting threads still freeing a large work,
    which rejoin the idle ones only then). Each thread has its own hand-off queue: one
    queue shared by all would strand jobs, as ``SimpleQueue.put`` wakes one blocked ``get`` per
    burst of puts, not one per put (measured: a send's wait picked up 2-9 ms late, after the next
    receive freed a thread). Daemons, because a wait on a dead peer may never return and must not
    hold the process at exit. Only the issue loop's thread submits.
    """

    def __init__(self, wake: threading.Event):
        self._idle: list[queue.SimpleQueue[_Waiter]] = []  # hand-offs of threads free for a waiter
        self._wake = wake

    def submit(self, waiter: _Waiter) -> _Waiter:
        if self._idle:
            handoff = self._idle.pop()
        else:
            handoff = queue.SimpleQueue()
            threading.Thread(target=self._serve, args=(handoff,), name="replay-wait", daemon=True).start()
        handoff.put(waiter)
        return waiter

    def _serve(self, handoff: queue.SimpleQueue[_Waiter]) -> None:
        while True:
            waiter = handoff.get()
            waiter.run()
            if waiter.nbytes < EARLY_FREE_BYTES:
                self._idle.append(handoff)
                self._wake.set()  # after the flag: the woken loop must see it
                continue  # ``waiter`` (and its work) dies at the next hand-off
            # A large work: free it after the wake (before, it would delay the wake) and before
            # going idle, so no wait is handed to this thread while it frees.
            self._wake.set()
            waiter.work = None
            self._idle.append(handoff)


class _Stamped:
    """A work with a future, and when the future completed (stamped on the backend's thread, which
    then wakes the issue loop)."""

    def __init__(self, work, future, wake: threading.Event):
        self.work, self._wake = work, wake
        self.finished_ns: int | None = None
        future.add_done_callback(self._stamp)

    def _stamp(self, _future) -> None:
        self.finished_ns = time.monotonic_ns()
        self._wake.set()


class TorchEngine:
    """Implements :class:`~chakra_pipe.replay.executor.Engine` for one rank."""

    def __init__(self, plan: RankPlan, groups: dict[str, object], device: torch.device, compute: str):
        self.plan, self.groups, self.device, self.compute = plan, groups, device, compute
        self.calls: dict[int, list[int]] = {}
        self.gemm_ops: dict[int, int] = {}
        self._buffers: dict[tuple, torch.Tensor] = {}
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="replay-compute")  # one compute slot
        # On CPU every handle signals its end (waiter, future callback, compute future), so the idle
        # loop sleeps on ``_wake`` instead of yielding and napping. CUDA events and NCCL works
        # (whose future completes at enqueue) signal nothing: there the loop keeps polling.
        self._wake = threading.Event()
        self._signalled = device.type == "cpu"
        self._waits = _WaitPool(self._wake)
        self._stream = torch.cuda.Stream(device) if device.type == "cuda" else None
        # gloo: post every receive when the iteration starts, in channel order, so a send completes
        # once its data arrives even if the RECV node is not issued yet — ASTRA-sim's semantics
        # (§2.4), without which pipeline traces deadlock on two sends facing each other. NCCL runs
        # p2p per peer pair in stream order, where an early receive would block later sends, so
        # there receives are posted when issued.
        self._prepost = device.type == "cpu"
        self._recv_order = [i for i in plan.order if plan.actions[i] == ACT_RECV]
        self._posted: dict[int, tuple[str, object]] = {}

    # -- Engine protocol -------------------------------------------------------------------
    def start(self, i: int) -> object | None:
        action = self.plan.actions[i]
        if action == ACT_COMPUTE:
            return self._compute(i)
        spec = self.plan.comm.get(i)
        if action == ACT_COLL:
            return self._track(i, self._collective(i, spec))  # type: ignore[arg-type]
        if action == ACT_SEND:
            t = self._buffer("p2p", spec)  # type: ignore[arg-type]
            self._log(i, t)
            return self._track(i, dist.isend(t, dst=spec.peer, tag=spec.tag))  # type: ignore[union-attr]
        if action == ACT_RECV:
            return self._posted.pop(i) if self._prepost else self._post_recv(i)
        return None

    def _track(self, i: int, work) -> tuple[str, object]:
        """A pollable handle for node ``i``'s work: the work (completion time-stamped) when it has a
        future, else a waiter, sized by the bytes node ``i`` handed over (logged by ``_log``)."""
        try:
            future = work.get_future()
        except RuntimeError:
            return ("waiter", self._waits.submit(_Waiter(work, self.calls[i][-1])))
        return ("work", _Stamped(work, future, self._wake))

    def _post_recv(self, i: int) -> tuple[str, object]:
        spec = self.plan.comm[i]
        t = self._buffer(("recv", i), spec)  # receives may overlap: one buffer each
        self._log(i, t)
        return self._track(i, dist.irecv(t, src=spec.peer, tag=spec.tag))

    def poll(self, handle) -> bool:
        kind, obj = handle
        if kind == "until":
            return time.monotonic_ns() >= obj
        if kind == "work":
            # gloo completes the future (stamp, wake) just before the work's own flag: on CPU the
            # stamp is the completion, or the woken loop would find nothing done and sleep on.
            if not (obj.finished_ns is not None if self._signalled else obj.work.is_completed()):
                return False
            obj.work.wait()  # surfaces the backend's error, if any
            return True
        if kind == "waiter":
            if obj.finished and obj.error is not None:
                raise obj.error
            return obj.finished
        if kind == "future":
            if not obj.done():
                return False
            obj.result()
            return True
        if kind == "event":
            return obj.query()
        raise ValueError(f"unknown handle {kind!r}")

    def due(self, handle) -> int | None:
        return handle[1] if handle[0] == "until" else None

    def finished_at(self, handle) -> int | None:
        kind, obj = handle
        if kind == "work" and not self._signalled:
            return None  # NCCL completes a work's future once it is enqueued: that stamp is the issue
        return obj.finished_ns if kind in ("work", "waiter") else None

    def idle(self, polls: int, timeout_ns: int) -> None:
        if not self._signalled:
            idle_poll(polls)
            return
        self._wake.wait(timeout_ns / 1e9)
        self._wake.clear()  # before the loop polls again: a later completion sets it anew

    def new_iteration(self) -> None:
        self.calls = {}
        if self._prepost:
            self._posted = {i: self._post_recv(i) for i in self._recv_order}

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)

    # -- compute ---------------------------------------------------------------------------
    def _compute(self, i: int):
        if self.compute == "skip":
            return None
        ops = self.plan.num_ops[i]
        if self.compute == "ops" and ops > 0 and self.plan.slots[i] == SLOT_COMP:
            return self._gemm(i, Gemm.for_ops(ops))
        # duration mode, and in ops mode CPU ops and nodes without num_ops (ASTRA-sim's roofline
        # mode also replays CPU ops from their duration): busy-wait inside the polling loop.
        dur = self.plan.duration_ns[i]
        return ("until", time.monotonic_ns() + dur) if dur > 0 else None

    def _gemm(self, i: int, gemm: Gemm):
        self.gemm_ops[i] = gemm.ops
        key = ("gemm", gemm.n)
        if key not in self._buffers:
            g = torch.Generator(device="cpu").manual_seed(gemm.n)
            mats = [torch.rand(gemm.n, gemm.n, generator=g).to(self.device) for _ in range(3)]
            self._buffers[key] = torch.stack(mats)
        a, b, c = self._buffers[key]
        if self._stream is not None:
            with torch.cuda.stream(self._stream):
                for _ in range(gemm.reps):
                    torch.mm(a, b, out=c)
                event = torch.cuda.Event()
                event.record(self._stream)
            return ("event", event)

        def run() -> None:
            for _ in range(gemm.reps):
                torch.mm(a, b, out=c)

        future: Future = self._pool.submit(run)
        future.add_done_callback(lambda _: self._wake.set())
        return ("future", future)

    # -- communication ---------------------------------------------------------------------
    def _buffer(self, role, spec: CommSpec, numel: int | None = None) -> torch.Tensor:
        dtype = torch.float32 if spec.elem_bytes == 4 else torch.uint8
        numel = spec.nbytes // spec.elem_bytes if numel is None else numel
        key = (role, numel, dtype)
        t = self._buffers.get(key)
        if t is None:
            t = self._buffers[key] = torch.zeros(numel, dtype=dtype, device=self.device)
        return t

    def _log(self, i: int, *tensors: torch.Tensor) -> None:
        self.calls.setdefault(i, []).append(sum(t.numel() * t.element_size() for t in tensors))

    def _collective(self, i: int, spec: CommSpec):
        pg = self.groups[spec.group] if spec.group != WORLD else None
        p = len(spec.members)
        root = spec.members[0]
        me = spec.members.index(self.plan.rank)
        t = self._buffer("in", spec)
        ct = spec.comm_type
        if ct == schema.BARRIER:
            self._log(i)
            return dist.barrier(group=pg, async_op=True)
        if ct == schema.ALL_REDUCE:
            self._log(i, t)
            return dist.all_reduce(t, group=pg, async_op=True)
        if ct == schema.REDUCE:
            self._log(i, t)
            return dist.reduce(t, dst=root, group=pg, async_op=True)
        if ct == schema.BROADCAST:
            self._log(i, t)
            return dist.broadcast(t, src=root, group=pg, async_op=True)
        if ct == schema.ALL_GATHER:
            out = self._buffer("out", spec, t.numel() * p)
            self._log(i, t)
            return _all_gather(out, t, group=pg, async_op=True)
        if ct in (schema.REDUCE_SCATTER, schema.REDUCE_SCATTER_BLOCK):
            if t.numel() % p:  # round the input up to whole chunks, as ASTRA-sim rounds the last chunk up
                t = self._buffer("in", spec, -(-t.numel() // p) * p)
            out = self._buffer("out", spec, t.numel() // p)
            self._log(i, t)
            return _reduce_scatter(out, t, group=pg, async_op=True)
        if ct == schema.ALL_TO_ALL:
            base, rem = divmod(t.numel(), p)
            in_splits = [base + (j < rem) for j in range(p)]
            out_splits = [base + (me < rem)] * p
            out = self._buffer("out", spec, sum(out_splits))
            self._log(i, t)
            return dist.all_to_all_single(out, t, out_splits, in_splits, group=pg, async_op=True)
        if ct == schema.GATHER:
            chunks = [self._buffer(("chunk", j), spec) for j in range(p)] if self.plan.rank == root else None
            self._log(i, t)
            return dist.gather(t, chunks, dst=root, group=pg, async_op=True)
        if ct == schema.SCATTER:
            chunks = [self._buffer(("chunk", j), spec) for j in range(p)] if self.plan.rank == root else None
            self._log(i, t)
            return dist.scatter(t, chunks, src=root, group=pg, async_op=True)
        raise ValueError(f"comm_type {ct} has no torch.distributed call")
