"""``SimResult``: per-rank times, per-collective records, JSON and Chrome-trace views.

Definitions (all integer ns, per rank):
* ``finish_ns`` — when the rank's last node finished (ASTRA-sim's "finished, T cycles").
* ``compute_ns`` — sum of GPU compute durations (ASTRA-sim's ``tics_gpu_ops``; overlap not removed).
* ``cpu_ns`` — sum of CPU-op durations (``is_cpu_op`` COMP nodes; one CPU slot, so no overlap).
* ``exposed_comm_ns`` — ``finish_ns - compute_ns`` exactly as ASTRA-sim prints it (ignores CPU time;
  negative where ASTRA-sim's unsigned value would wrap, e.g. replay-only runs).
* ``comm_ns`` — union of the intervals during which a collective, send or receive was in flight.
* ``idle_ns`` — ``finish_ns`` minus the union of all node intervals (nothing running at all).
"""

from __future__ import annotations

from dataclasses import dataclass, field


def finished_line(rank: int, finish_ns: int, exposed_comm_ns: int) -> str:
    """ASTRA-sim's per-rank result line, the one text the CLI and the drop-in print (finished or stopped runs)."""
    return f"sys[{rank}] finished, {finish_ns} cycles, exposed communication {exposed_comm_ns} cycles."


# A dataclass without a docstring gets one built by ``inspect.signature`` when its module is imported
# (~0.1-0.3 ms a class of every ``simulate``'s start-up, issue #15): those of the run's path have one.
@dataclass(frozen=True)
class CollectiveRecord:
    """One collective a rank ran: its node, kind, bytes and group, and its start and end (ns)."""

    rank: int
    node_id: int
    kind: str
    bytes: int
    group: str
    start_ns: int
    end_ns: int


def union_ns(intervals: list[tuple[int, int]]) -> int:
    total, cur_s, cur_e = 0, None, None
    for s, e in sorted(intervals):
        if cur_e is None or s > cur_e:
            if cur_e is not None:
                total += cur_e - cur_s  # type: ignore[operator]
            cur_s, cur_e = s, e
        else:
            cur_e = max(cur_e, e)
    if cur_e is not None:
        total += cur_e - cur_s  # type: ignore[operator]
    return total


@dataclass
class SimResult:
    """What one simulation produced: the per-rank lists (indexed by rank; definitions in the module
    docstring), the collective records and the message counts."""

    backend: str
    finish_ns: list[int] = field(default_factory=list)
    compute_ns: list[int] = field(default_factory=list)
    cpu_ns: list[int] = field(default_factory=list)
    exposed_comm_ns: list[int] = field(default_factory=list)
    comm_ns: list[int] = field(default_factory=list)
    idle_ns: list[int] = field(default_factory=list)
    collectives: list[CollectiveRecord] = field(default_factory=list)
    messages: int = 0
    # Ranks in the order they finished (time, then this engine's event order): ASTRA-sim prints each
    # rank's ``finished`` line when it finishes, so a stopped run lists its finished ranks so. Ranks
    # finishing in the same ns may come in another order than upstream's (its event queue orders the
    # last messages' callbacks otherwise: the conformance log agrees on all 111 runs' times, on 34
    # runs' tie order). Full engine only: a symmetric run lists no finish order (it stops without one).
    finish_order: list[int] = field(default_factory=list, repr=False)
    fast_messages: int = 0  # of ``messages``, those a fast path evaluated as a recurrence; the rest went one by one
    _workloads: list = field(default_factory=list, repr=False)  # per-rank issue loops, for timeline()

    def add_collective(self, rank: int, node_id: int, kind: str, nbytes: int, group: str, start: int, end: int) -> None:
        self.collectives.append(CollectiveRecord(rank, node_id, kind, nbytes, group, start, end))

    def finalize(self, workloads) -> None:
        self.collectives.sort(key=lambda c: (c.rank, c.start_ns, c.node_id))
        comm_by_rank: dict[int, list] = {}
        for c in self.collectives:
            comm_by_rank.setdefault(c.rank, []).append((c.start_ns, c.end_ns))
        for w in workloads:
            self.finish_ns.append(w.finish_ns)
            self.compute_ns.append(w.hardware.tics_gpu)
            self.cpu_ns.append(w.hardware.tics_cpu)
            self.exposed_comm_ns.append(w.finish_ns - w.hardware.tics_gpu)
            self.comm_ns.append(union_ns(comm_by_rank.get(w.rank, [])))
            self.idle_ns.append(w.finish_ns - union_ns([(s, e) for s, e in zip(w.start, w.end) if s >= 0]))
        self._workloads = list(workloads)

    @property
    def workloads(self) -> list:
        """The finished per-rank issue loops (node start/end times), for statistics and timelines."""
        return self._workloads

    def comm_time_by_type_ns(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for c in self.collectives:
            out[c.kind] = out.get(c.kind, 0) + (c.end_ns - c.start_ns)
        return dict(sorted(out.items()))

    def to_dict(self) -> dict:
        return {
            "backend": self.backend,
            "npus": len(self.finish_ns),
            "finish_ns": self.finish_ns,
            "max_finish_ns": max(self.finish_ns, default=0),
            "exposed_comm_ns": self.exposed_comm_ns,
            "compute_ns": self.compute_ns,
            "cpu_ns": self.cpu_ns,
            "comm_ns": self.comm_ns,
            "idle_ns": self.idle_ns,
            "comm_time_by_type_ns": self.comm_time_by_type_ns(),
            "collectives": [c.__dict__ for c in self.collectives],
        }

    def timeline(self) -> dict:
        """Chrome/Perfetto trace of every node (see :mod:`chakra_pipe.sim.timeline`).

        Node names come from the simulated ``TraceSet``; call this while it is alive (the result keeps
        no strong reference to the traces), otherwise events are named ``node <id>``.
        """
        from .timeline import chrome_trace

        return chrome_trace(self)
