"""Double-binary-tree phases on the congestion-aware network: one pass up, one down, over FIFO links.

``tree_fast.py`` evaluates a tree phase on the unaware network, where a message takes a fixed delay.
Here each message crosses FIFO links — an uplink and a downlink through a switch, one pair link on a
fully-connected network — so its arrival is the links' recurrence (``start = max(ready, free)``,
``free = start + hold``, arrival ``start + latency``), advanced on the links themselves message by
message in the order each link takes them, without events, bundles or send/receive matching:

    up:    child c's message to its parent p: arrival a_c; got_p = max over children of max(a_c, start_p)
    down:  p's message to each child (left, then right, at one ns): from_parent_c = max(arrival, up_c)

and the members' sends and exits as in ``tree_fast.evaluate``. Why one pass each way is the order
every link takes them in, on a layout where each link belongs to one member (checked when the layout
is built, else :class:`LinkConflict` and ``simulate`` reruns message by message): every hop but the
last is a link of the sender (a switch's uplink), the last a link of the receiver (its downlink).

- A member's own links carry, in one phase, its message up and then its messages down (sent after
  its parent's message came back, so after its message up), left before right (program order).
- A member's receiving link carries its children's messages up, then its parent's message down
  (sent after the member's message up, itself sent after both children's arrived: ``latency`` ≥
  ``hold``, so after they left the link). Its two children's messages reach it in the order of
  their ready times; at one ns the event order decides which goes first, but either order gives
  the same two arrival times (one size, one link), the member reduces both before sending on, and
  its parent's message down then overwrites the link's last sender; the link's remembered tail
  (below) holds the pair at one arrival, between which nothing can be placed, and the second one's
  end is the same whichever it is: no outcome depends on the tie.

Across phases (and beside ring / direct phases and the message path's point-to-point sends), a
phase's first message on a link that reaches it after the link's last message queues behind it.
One reaching it no later — the next chunk's tree overtaking the tail of the previous chunk's,
evaluated ahead of the clock — is placed in the link's remembered FIFO tail
(``network.aware.insert_kept``) where it moves no message already taken; a link with messages
queued on the message path, a tail not remembered (another path used the link since) or a message
that would delay the next one raise :class:`LinkConflict`, and ``simulate`` reruns message by message.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..network.aware import insert_kept, take_kept
from ..network.common import LinkConflict
from .topology import LEAF

if TYPE_CHECKING:  # tree_fast imports this module when a run has aware tree phases
    from .tree_fast import FastDoubleBinaryTree, TreeLayout

Hop = tuple[Any, int, int]  # (link, ns until the next device, ns it holds the link)


@dataclass(frozen=True)
class TreePaths:
    """Per member index (−1 hops for the root): its message up to its parent and its parent's message
    down to it, each as (the sender's hops, the receiver's last hop)."""

    up: list[tuple[list[Hop], Hop]]
    down: list[tuple[list[Hop], Hop]]
    members: list[int]  # what PhaseCoordinator.cached counts


def tree_paths(network, layout: TreeLayout, size: int) -> TreePaths:
    """The hops of every message of a tree phase of ``size`` bytes, checked for the one-owner layout."""
    owner: dict[int, tuple[str, int]] = {}

    def own(link, side: str, npu: int) -> None:
        if owner.setdefault(id(link), (side, npu)) != (side, npu):
            raise LinkConflict("a double-binary-tree phase's link is shared by two members' messages")

    def hops(src: int, dst: int) -> tuple[list[Hop], Hop]:
        path = network.hops(src, dst, size)
        if not path:
            raise LinkConflict("a double-binary-tree message with an empty route")
        for link, *_ in path[:-1]:
            own(link, "send", src)
        own(path[-1][0], "receive", dst)
        return path[:-1], path[-1]

    m = layout.members
    up: list[tuple[list[Hop], Hop]] = []
    down: list[tuple[list[Hop], Hop]] = []
    for i, p in enumerate(layout.parent):
        if p < 0:
            up.append(([], (None, 0, 0)))
            down.append(([], (None, 0, 0)))
        else:
            up.append(hops(m[i], m[p]))
            down.append(hops(m[p], m[i]))
    return TreePaths(up, down, m)


def _take(hop: Hop, t: int, npu: int, used: set[int]) -> int:
    """When ``npu``'s message reaching ``hop``'s link at ``t`` reaches the next device. The phase's first
    message on a link (not in ``used``) comes after what earlier phases left there (``_bound``) or is
    placed among the messages they took ahead of the clock (``insert_kept``: the next chunk's tree
    overtakes the last one's tail); later ones follow this phase's own, in the order described above."""
    link, latency, hold = hop
    key = id(link)
    if key not in used:
        if link.pending or (t <= link.offered and link.sender != -1):
            return insert_kept(link, latency, hold, t, npu)
        used.add(key)
    return take_kept(link, latency, hold, t, npu)


def _carry(sender: list[Hop], t: int, npu: int, used: set[int]) -> int:
    """``t`` after the sender's own hops."""
    for hop in sender:
        t = _take(hop, t, npu, used)
    return t


def evaluate_aware(coord, layout: TreeLayout, algos: list[FastDoubleBinaryTree]) -> None:
    """One tree phase on the aware network, every member at once; see the module docstring."""
    first = algos[0]
    size, e = first.data_size, first.sys.endpoint_delay
    pd = first.sys.reduction_delay(size)
    n = len(layout.members)
    paths: TreePaths = coord.cached(
        ("tree-aware", id(first.tree), size), lambda: tree_paths(coord.network, layout, size)
    )
    members, parent, children = layout.members, layout.parent, layout.children
    path_up, path_down = paths.up, paths.down
    start = [a.start_ns for a in algos]
    used: set[int] = set()  # links that took a message of this phase already
    up = [0] * n
    got = [0] * n
    for i in layout.post_order:
        kids = children[i]
        if not kids:
            up[i] = start[i] + e
            continue
        ready = sorted((_carry(path_up[c][0], up[c], members[c], used), c) for c in kids)
        latest = start[i]
        for t, c in ready:  # a tie: either order gives the two the same arrivals (module docstring)
            arrived = _take(path_up[c][1], t, members[c], used)
            if arrived > latest:
                latest = arrived
        got[i] = latest
        up[i] = latest + e + pd
    from_parent = [0] * n
    for i in reversed(layout.post_order):  # parents before children
        a = algos[i]
        if parent[i] < 0:
            sent = got[i] + e + pd
            coord.exit_at(a, got[i] + e, pd)
        elif a.kind == LEAF:
            coord.exit_at(a, from_parent[i], e)
            continue
        else:
            sent = from_parent[i] + e + pd
            coord.exit_at(a, from_parent[i] + e, pd)
        for c in children[i]:  # left, then right: one sender's messages at one ns, in program order
            sender, hop = path_down[c]
            arrived = _take(hop, _carry(sender, sent, members[i], used), members[i], used)
            from_parent[c] = max(arrived, up[c])
    coord.stats.messages += 2 * (n - 1)
    coord.stats.fast_messages += 2 * (n - 1)
