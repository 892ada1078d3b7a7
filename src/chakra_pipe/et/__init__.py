"""The Chakra execution-trace format: schema, framing, attributes, compact graphs, rank sets.

Every other stage reads traces through this package; nothing else parses protobuf. Names are
resolved lazily: every ``chakra-pipe`` start-up imports ``et.cli`` (hence this package) to register
its verbs, and must not pay for protobuf and numpy unless a command reads a trace.
"""

from __future__ import annotations

from ..lazy import lazy_getattr

_EXPORTS = {
    "schema": None,
    "AttributeProto": "schema",
    "GlobalMetadata": "schema",
    "IOInfo": "schema",
    "Node": "schema",
    "CANONICAL_KINDS": "attrs",
    "get_attr": "attrs",
    "get_int": "attrs",
    "make_attr": "attrs",
    "set_attr": "attrs",
    "TraceReader": "framing",
    "iter_nodes": "framing",
    "read_trace": "framing",
    "write_trace": "framing",
    "TraceGraph": "graph",
    "graph_from_bytes": "graph",
    "load_graph": "graph",
    "load_graphs": "graph",
    "TraceSet": "traceset",
    "clear_rank_set": "traceset",
    "find_rank_files": "rankfiles",
    "load_comm_groups": "traceset",
    "rank_files": "traceset",
    "resolve": "traceset",
    "write_order": "traceset",
}
__all__ = sorted(_EXPORTS)

__getattr__ = lazy_getattr(__name__, _EXPORTS)
