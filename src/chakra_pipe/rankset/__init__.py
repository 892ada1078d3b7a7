"""One definition of what a rank set means when it runs: validate, simulate, replay and convert read it.

The execution rules of ASTRA-sim over a :class:`~chakra_pipe.et.traceset.TraceSet` live here and
only here (no torch, no output formatting beyond the one problem line):

* the hardware slot of a node — :mod:`.slots` (one table; ``is_cpu_op`` decides first);
* dependency checks and issue order — :mod:`.file_rules` with :mod:`.graphalgo` (one Kahn order with
  ascending-id tie-break, computed once per rank);
* process-group resolution — :mod:`.groups` (comm-group file + METADATA + ``pg_name``, one rule);
* the comm spec of every communication node — :mod:`.comm`, its per-node problems the ``comm-node``
  rule;
* cross-rank matching — :mod:`.set_rules` (one reference rank per group, one channel key);
* the untimed "can this set finish" proof — :mod:`.progress` (run on first use of
  ``RankSetAnalysis.stuck`` / ``findings``: simulate needs it only when input errors or a stopped
  run ask);
* byte-identical rank files — :mod:`.twins` (checked once; every finding still names its own file).

Layer contract (other stages rely on it; do not change it):

* A problem is a :class:`~.problems.Finding` ``(file, node | None, rule, severity, message)`` and
  prints as ``{file}: node {node}: {severity}: {rule}: {message}`` (no ``node N: `` when None).
* ``validate`` (default mode) reports every problem of :func:`analyze` with these rule names; its
  ``--json`` findings carry rule, file and node.
* ``replay`` calls :meth:`RankSetAnalysis.refuse`, ``simulate`` :meth:`~RankSetAnalysis.refuse_input`:
  on input grounds they print the same error lines (stderr) and exit 2 (:class:`SetRefused`); on a
  deadlock they exit 3 (:class:`SetStuck`) with ``stuck`` = the nodes validate's ``set-deadlock``
  problems list. (Simulate runs a set the static proof finds stuck, as a ready collective may overtake
  in time, and the sets ASTRA-sim runs despite ``collective-order``, ``collective-mismatch``,
  ``p2p-unmatched`` and ``duplicate-dep`` (``analysis.SIMULATE_RUNS_DESPITE``); if its run stops, it raises
  :meth:`~RankSetAnalysis.stuck_error`, with ``set-deadlock`` lines of its own when the deadlock
  depends on time or message sizes and validate could not see it.)

Rule names: per file — ``duplicate-id``, ``node-type``, ``dangling-data-dep``, ``dangling-ctrl-dep``,
``self-dep``, ``duplicate-dep``, ``cycle-data``, ``cycle-ctrl``, ``no-root``, ``involved-dim``,
``pg-name`` (kind and unknown group), ``comm-node``, ``comm-type-unsupported`` (error but for the
replayed BROADCAST; replay tolerates it), ``p2p-empty``, ``mem-node``, ``metadata-pg``; per set —
``group-members``, ``incomplete-set``, ``collective-mismatch``, ``collective-order`` (two different
collectives of a group whose issue order depends on timing; simulate runs the set anyway, as
ASTRA-sim: it finishes or deadlocks as its timing decides), ``p2p-unmatched``, ``p2p-peer`` (a peer
outside the set: refused by every stage), ``set-deadlock``
(validate adds ``rank-gap`` and warning-only rules).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..lazy import lazy_getattr

if TYPE_CHECKING:  # the names as the type checker sees them; at run time __getattr__ below resolves them
    from .analysis import DEADLOCK, RankSetAnalysis, analyze  # noqa: F401 (exported: __all__)
    from .comm import WORLD, CommSpec, canonical_group  # noqa: F401 (exported: __all__)
    from .problems import ERROR, WARNING, Finding, SetRefused, SetStuck  # noqa: F401 (exported: __all__)
    from .slots import SLOT_COMM, SLOT_CPU, SLOT_GPU, SLOT_NAMES, SLOT_NONE, slot_of  # noqa: F401

# Resolved lazily: the simulator's config module reads one rule from here (``comm``), and importing
# it must not pull in the analysis, numpy-heavy rules and protobuf.
_EXPORTS = {
    **dict.fromkeys(("DEADLOCK", "RankSetAnalysis", "analyze"), "analysis"),
    **dict.fromkeys(("WORLD", "CommSpec", "canonical_group"), "comm"),
    **dict.fromkeys(("ERROR", "WARNING", "Finding", "SetRefused", "SetStuck"), "problems"),
    **dict.fromkeys(("SLOT_COMM", "SLOT_CPU", "SLOT_GPU", "SLOT_NAMES", "SLOT_NONE", "slot_of"), "slots"),
}
__all__ = sorted(_EXPORTS)

__getattr__ = lazy_getattr(__name__, _EXPORTS)
