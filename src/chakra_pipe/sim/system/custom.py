"""Chakra-defined custom collectives (ASTRA-sim's ``CustomAlgorithm``, spec §3.5, §3.2 item 6).

A custom collective replaces the native chunk streams with a small trace of its own per rank: SEND,
RECV and COMP nodes with their own sizes (the workload node's ``comm_size`` is ignored, quirk 15).
The trace runs as one stream over the whole collective: no chunking, no dimensions, no slots. Every
dependency-free node issues at once (in ascending id, the order the feeder hands them out), a SEND or
RECV goes straight to the network (no memory-bus ``E``) and completes at arrival as a workload
point-to-point message does (§4.3, quirk 16), a COMP node takes ``duration_micros × 1000`` ns (at
least 1). The collective completes when every node of the trace has.

The stream is queued as a native chunk's first phase: upstream's custom branch of
``Sys::generate_collective`` builds ``CollectivePhase(0, CustomAlgorithm)``, i.e. a phase in
dimension 0's queue 0, so ``Sys.generate_custom`` hands the stream to ``proceed_to_next_phase``
with a :class:`CustomRun` as the phase's algorithm: it starts when the queue lets it (§3.3; it counts
against ``active-chunks-per-dimension``) and leaves the queue through ``proceed_to_next_phase`` when
its last node ends (``Algorithm::exit``).

The system layer never reads a trace file: the workload layer (``sim/custom.py``) loads and checks
the ``.et`` file and hands over a :class:`CustomProgram` of plain data, whose peers are positions in
the collective's group; they are mapped to NPUs here, through the group's member list.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from .stream import Stream

SEND, RECV, COMP = "SEND", "RECV", "COMP"
CUSTOM_QUEUE = 0  # upstream's CollectivePhase(0, CustomAlgorithm): dimension 0's first queue


@dataclass(frozen=True, slots=True)
class CustomNode:
    """One node of a custom trace: ``peer`` is a position in the group (-1 for COMP), ``children``
    indices into the program's nodes."""

    id: int
    kind: str  # SEND, RECV or COMP
    peer: int
    size: int
    tag: int  # already reduced modulo TAG_SPACE
    runtime_ns: int
    parents: int
    children: tuple[int, ...]


@dataclass(frozen=True)
class CustomProgram:
    """One rank's custom trace (``prefix.<position>.et``), nodes in ascending id order."""

    path: str
    nodes: tuple[CustomNode, ...]


class CustomRun:
    """One issued custom collective on one NPU, the algorithm of its stream's one phase: dependency
    counts and the nodes still running."""

    __slots__ = ("sys", "program", "members", "stream", "waiting", "left", "running")

    def __init__(self, sys, program: CustomProgram, members: Sequence[int], stream: Stream):
        self.sys, self.program, self.members, self.stream = sys, program, members, stream
        self.waiting = [n.parents for n in program.nodes]
        self.left = len(program.nodes)
        self.running: set[int] = set()  # for a stuck run's report (``pending``)

    def start(self) -> None:
        """The stream's ``init``: issue the dependency-free nodes (``CustomAlgorithm::run``)."""
        for i, n in enumerate(self.program.nodes):
            if not n.parents:
                self._issue(i)

    def _issue(self, i: int) -> None:
        n = self.program.nodes[i]
        self.running.add(i)
        done = lambda: self._done(i)  # noqa: E731
        if n.kind == COMP:
            self.sys.register_event(done, n.runtime_ns)
        elif n.kind == SEND:
            self.sys.send(self.members[n.peer], n.size, n.tag, done)
        else:
            self.sys.recv(self.members[n.peer], n.size, n.tag, done)

    def _done(self, i: int) -> None:
        self.running.discard(i)
        self.left -= 1
        freed = []
        waiting = self.waiting
        for c in self.program.nodes[i].children:
            waiting[c] -= 1
            if not waiting[c]:
                freed.append(c)
        for c in sorted(freed):  # node order is id order: the feeder's dependency-free queue
            self._issue(c)
        if not self.left:  # upstream's Algorithm::exit: the workload hears of it, then the stream leaves queue 0
            self.sys.custom_runs.discard(self)
            self.sys.proceed_to_next_phase(self.stream)

    def pending(self) -> str:
        """What this run still waits for, naming the custom file and nodes (a stuck run's report)."""
        nodes = self.program.nodes
        waits = []
        for i in sorted(self.running):
            n = nodes[i]
            peer = "" if n.kind == COMP else f" {'to' if n.kind == SEND else 'from'} NPU {self.members[n.peer]}"
            waits.append(f"node {n.id} ({n.kind}{peer})")
        if not waits:
            waits.append("nodes that never become dependency-free (a cycle)")
        return f"NPU {self.sys.id}: custom collective {self.program.path} waits for " + ", ".join(waits)
