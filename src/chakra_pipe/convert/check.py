"""Structural self-check of a converted rank set, run before anything is written.

The converter's own guarantee is a subset of :mod:`chakra_pipe.rankset`'s rules — the ones about the
structure it builds: unique ids, every dependency inside the file and none repeated, acyclic with a
dependency-free node, complete communication nodes that are not CPU ops, and (for a whole set)
every send matched by a receive on its peer. The rules are rankset's own, run on the serialized
ranks, so the converter can never pass a structure that validate, simulate or replay refuses. A
failure here is a converter bug or an input we misread, so it stops the conversion. Rules about what
a target can *run* (a BARRIER ASTRA-sim does not simulate, an unknown group) are validate's business,
not a reason to refuse a faithful conversion.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ..et.framing import frame
from ..et.graph import graph_from_bytes
from ..et.schema import GlobalMetadata
from ..et.traceset import TraceSet
from ..rankset import Finding, analyze
from ..rankset.file_rules import FileChecker
from ..rankset.graphalgo import Parents, issue_order

# No target system: with 0 dataset splits the all-gather size rule (a property of the system a
# trace is simulated on, not of the trace) never fires.
NO_SYSTEM_SPLITS = 0
# rankset rules the converter guarantees (per file, then across the set)
FILE_GUARANTEES = frozenset(
    {
        "duplicate-id",
        "dangling-data-dep",
        "dangling-ctrl-dep",
        "self-dep",
        "duplicate-dep",
        "cycle-data",
        "cycle-ctrl",
        "no-root",
        "comm-node",
    }
)
SET_GUARANTEES = FILE_GUARANTEES | {"p2p-unmatched", "p2p-peer"}


def _graph(nodes: list, path: str):
    """The nodes as the rules see a file (the rules read no GlobalMetadata field, so an empty one)."""
    buf = b"".join([frame(GlobalMetadata().SerializeToString()), *(frame(n.SerializeToString()) for n in nodes)])
    return graph_from_bytes(buf, path)


def rank_problems(nodes: list, path: str = "<converted rank>") -> list[Finding]:
    """Guarantee violations inside one rank converted alone (its rank is not checked: no set)."""
    findings = FileChecker(_graph(nodes, path), path, None, (), NO_SYSTEM_SPLITS).run(full=False).findings
    return [f for f in findings if f.is_error and f.rule in FILE_GUARANTEES]


def set_problems(ranks: list[list], prefix: str = "<converted>") -> list[Finding]:
    """Guarantee violations of a whole converted set (``ranks``: each rank's nodes)."""
    files = [Path(f"{prefix}.{r}.et") for r in range(len(ranks))]
    graphs = [_graph(nodes, str(f)) for f, nodes in zip(files, ranks)]
    analysis = analyze(TraceSet(prefix, files, graphs, {}), dataset_splits=NO_SYSTEM_SPLITS)
    return [f for f in analysis.findings if f.is_error and f.rule in SET_GUARANTEES]


def cycle_node(parents: dict[int, set[int]]) -> int | None:
    """Smallest id left on (or behind) a cycle of ``{node id: parent ids}`` (None when acyclic).

    rankset's Kahn order over the same edges: the converter drops GPU-wait edges exactly when the
    order every stage computes could not cover the graph.
    """
    ids = np.fromiter(parents, dtype=np.int64, count=len(parents))
    index = {int(i): k for k, i in enumerate(ids.tolist())}
    counts = [len(ps) for ps in parents.values()]
    ptr = np.zeros(len(ids) + 1, dtype=np.int64)
    np.cumsum(counts, out=ptr[1:])
    flat = np.fromiter((index[p] for ps in parents.values() for p in ps), dtype=np.int64, count=int(ptr[-1]))
    _, stuck = issue_order(Parents(ptr, flat), ids)
    return int(ids[stuck].min()) if stuck.any() else None
