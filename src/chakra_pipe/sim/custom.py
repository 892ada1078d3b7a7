"""Loading Chakra-defined custom collectives for the system layer (spec §3.5, §5.1).

A collective whose workload node id is in ``per-node-custom-implementation``, or whose type has an
``*-implementation-custom`` prefix, runs ``prefix.<position in its group>.et`` instead of the native
algorithms. This module is the workload layer's half: it reads and checks that file once per run and
hands ``Sys.generate_custom`` a ``CustomProgram`` of plain data (the system layer never reads a
trace). Paths are used as written, relative to the working directory, as upstream opens them.
"""

from __future__ import annotations

from collections import Counter

from ..errors import InputError
from ..et import schema
from ..et.graph import load_graph
from .system.custom import COMP, RECV, SEND, CustomNode, CustomProgram
from .system.sys import TAG_SPACE

_KINDS = {schema.COMM_SEND_NODE: SEND, schema.COMM_RECV_NODE: RECV, schema.COMP_NODE: COMP}
_PEER_ATTR = {SEND: "comm_dst", RECV: "comm_src"}


class CustomCollectives:
    """The custom traces of one run, each file loaded and checked once (ranks share the cache)."""

    def __init__(self) -> None:
        self._programs: dict[str, tuple[CustomProgram, int, int]] = {}  # path -> (program, max peer, its node)

    def program(self, prefix: str, position: int, group_size: int) -> CustomProgram:
        """The program of the rank at ``position`` of a ``group_size``-member group."""
        path = f"{prefix}.{position}.et"
        hit = self._programs.get(path)
        if hit is None:
            hit = self._programs[path] = _load(path, position)
        program, top, top_node = hit
        if top >= group_size:
            raise InputError(
                f"peer position {top} is outside the collective's group of {group_size} members",
                file=path,
                where=f"node {top_node}",
            )
        return program


def _load(path: str, position: int) -> tuple[CustomProgram, int, int]:
    """``path``'s nodes in id order with their dependencies resolved, and its largest peer position
    (with the node that names it); every node is checked here, so the run meets no bad value. The
    group size is the collective's, so the caller checks that largest peer against it."""
    g = load_graph(path)
    ids = g.ids.tolist()
    order = sorted(range(len(ids)), key=ids.__getitem__)
    at = {ids[i]: k for k, i in enumerate(order)}  # id -> position in id order
    if len(at) != len(ids):
        dup = next(x for x, count in Counter(ids).items() if count > 1)
        raise InputError("node id appears twice in a custom collective trace", file=path, where=f"node {dup}")
    cols = {a: g.exact_ints(a) for a in ("comm_src", "comm_dst", "comm_size", "comm_tag")}
    present = {a: (g.attr_kind[a] != 0).tolist() for a in cols}
    ints = {a: g.has_int(a).tolist() for a in cols}
    children: list[list[int]] = [[] for _ in ids]
    parents = [0] * len(ids)
    nodes_raw = []
    top, top_node = -1, -1
    for k, i in enumerate(order):
        nid = ids[i]

        def error(what: str, nid: int = nid) -> InputError:
            return InputError(what, file=path, where=f"node {nid}")

        kind = _KINDS.get(int(g.types[i]))
        if kind is None:
            name = schema.NODE_TYPE_NAMES.get(int(g.types[i]), str(int(g.types[i])))
            raise error(f"node type {name} in a custom collective trace (only COMM_SEND, COMM_RECV and COMP)")
        for a in cols:
            if present[a][i] and not ints[a][i]:
                raise error(f"attribute {a} must be an integer")
        peer, size, tag = -1, 0, cols["comm_tag"][i] % TAG_SPACE
        if kind != COMP:
            attr = _PEER_ATTR[kind]
            for need in (attr, "comm_size"):
                if not present[need][i]:
                    raise error(f"missing required attribute {need}")
            peer, size = cols[attr][i], cols["comm_size"][i]
            if peer < 0:
                raise error(f"{attr} {peer} is not a position in the group")
            if peer == position:
                raise error(f"{attr} {peer} is this rank's own position in the group (the file's suffix)")
            if size <= 0:
                raise error(f"comm_size must be > 0, got {size}")
            if peer > top:
                top, top_node = peer, nid
        deps = dict.fromkeys([*g.data_deps(i).tolist(), *g.ctrl_deps(i).tolist()])  # a parent listed twice counts once
        for d in deps:
            parent = at.get(d)
            if parent is None:
                raise error(f"dependency on node {d}, which the custom collective trace does not have")
            children[parent].append(k)
        parents[k] = len(deps)
        runtime = int(g.duration_micros[i]) * 1000 or 1
        nodes_raw.append((nid, kind, peer, size, tag, runtime))
    if 0 not in parents:  # upstream's feeder throws "No dependancy free nodes found" (exit 1)
        raise InputError(
            "no dependency-free node: the custom collective trace is empty or every node waits for another "
            "(ASTRA-sim's feeder refuses it when the collective starts)",
            file=path,
        )
    nodes = tuple(
        CustomNode(nid, kind, peer, size, tag, runtime, parents[k], tuple(children[k]))
        for k, (nid, kind, peer, size, tag, runtime) in enumerate(nodes_raw)
    )
    return CustomProgram(path, nodes), top, top_node
