"""Multi-dimensional decomposition of one chunk into a chain of phases (spec §3.2 step 4).

``baseline`` (and every non-all-reduce collective) runs one phase of the collective's own type per
active dimension. ``localBWAware`` all-reduce runs reduce-scatter on the active dimensions below the
last one, all-reduce on the last active dimension, then all-gather back down. Each phase also names
the queue allocator it draws from: since PR #135 (the fix of issue #137) ASTRA-sim takes localBWAware
reduce-scatter queues *and the last dimension's all-reduce queue* from the "first half" allocator and
all-gather queues from the "last half" one (anticlockwise rings). The all-reduce takes the first half
so that it feeds the all-gather phases through as many parallel queues as they have (upstream: n
queues feeding n/2 could deadlock). With one queue per dimension both halves are that one queue; with
``--num-queues-per-dim 2`` every chunk's all-reduce waits in the dimension's first queue.
"""

from __future__ import annotations

from collections.abc import Callable

from .algorithm import AG, AR, RS

NEXT, FIRST, LAST = "next", "first", "last"


def phase_chain(
    ctype: str, n_dims: int, active: Callable[[int], bool], optimization: str
) -> list[tuple[str, int, str]]:
    """``[(phase type, position in the dimension order, allocator)]`` for one chunk."""
    if ctype != AR or optimization == "baseline":
        return [(ctype, i, NEXT) for i in range(n_dims) if active(i)]
    last = 0
    for i in range(n_dims):
        if active(i):
            last = i
    chain = [(RS, i, FIRST) for i in range(last) if active(i)]
    i = last
    while i > 0 and not active(i):
        i -= 1
    if active(i):
        chain.append((AR, i, FIRST))
    chain += [(AG, j, LAST) for j in range(i - 1, -1, -1) if active(j)]
    return chain
