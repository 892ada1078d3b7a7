"""The Chakra execution-trace format: schema, framing, attributes, compact graphs, rank sets.

Every other stage reads traces through this package; nothing else parses protobuf.
"""

from . import schema
from .attrs import CANONICAL_KINDS, get_attr, get_int, make_attr, set_attr
from .framing import TraceReader, iter_nodes, read_trace, write_trace
from .graph import TraceGraph, graph_from_bytes, load_graph
from .schema import AttributeProto, GlobalMetadata, IOInfo, Node
from .traceset import TraceSet, clear_rank_set, find_rank_files, load_comm_groups, rank_files, resolve, write_order

__all__ = [
    "AttributeProto", "CANONICAL_KINDS", "GlobalMetadata", "IOInfo", "Node", "TraceGraph",
    "TraceReader", "TraceSet", "clear_rank_set", "find_rank_files", "get_attr", "get_int", "graph_from_bytes",
    "iter_nodes",
    "load_comm_groups", "load_graph", "make_attr", "rank_files", "read_trace", "resolve", "schema",
    "set_attr", "write_order", "write_trace",
]
