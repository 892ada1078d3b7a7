"""Load a PyTorch host execution trace (any schema 1.0.1 … 1.1.1, plain or gzip) into one layout.

Upstream Chakra accepts a hard-coded list of schema versions and rejects the flat 1.0.1 layout
(chakra issues #127, #198). We parse by *layout* instead: flat nodes (``parent``, ``input_shapes``,
top-level attrs) are rewritten into the nested layout (``ctrl_deps``, ``inputs{values,shapes,types}``,
``attrs`` list) so link and convert see one shape. The version string is kept as a hint only.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from typing import Any

from ..errors import InputError
from ..readfile import read_json

# Attributes that 1.0.1 stores as top-level node keys and later schemas as ``attrs`` entries.
_FLAT_ATTRS = {
    "rf_id": "uint64",
    "fw_parent": "uint64",
    "seq_id": "int64",
    "scope": "uint64",
    "tid": "uint64",
    "fw_tid": "uint64",
    "op_schema": "string",
}
ROOT_NAMES = ("[pytorch|profiler|execution_trace|process]", "[pytorch|profiler|execution_graph|process]")
THREAD_NAMES = ("[pytorch|profiler|execution_trace|thread]", "[pytorch|profiler|execution_graph|thread]")
PG_INIT_MARK = "process_group:init"


@dataclass
class HostTrace:
    """A host ET (or a linked ET+) in nested layout; ``nodes`` keeps file order, ``by_id`` indexes it."""

    path: str
    header: dict[str, Any]  # every top-level key except ``nodes``, in file order
    nodes: list[dict[str, Any]]
    by_id: dict[int, dict[str, Any]] = field(default_factory=dict)

    @property
    def schema(self) -> str:
        return str(self.header.get("schema", ""))

    @property
    def pid(self) -> int | None:
        pid = self.header.get("pid")
        return pid if isinstance(pid, int) else None


def attr(node: dict[str, Any], name: str, default: Any = None) -> Any:
    """Value of a host attribute (``attrs`` entry) or ``default``."""
    for a in node.get("attrs", ()):
        if a.get("name") == name:
            return a.get("value", default)
    return default


def _flat_to_nested(node: dict[str, Any]) -> dict[str, Any]:
    out = {
        "id": node["id"],
        "name": node.get("name", ""),
        "ctrl_deps": node.get("parent", 0),
        "inputs": {
            "values": node.get("inputs", []),
            "shapes": node.get("input_shapes", []),
            "types": node.get("input_types", []),
        },
        "outputs": {
            "values": node.get("outputs", []),
            "shapes": node.get("output_shapes", []),
            "types": node.get("output_types", []),
        },
        "attrs": [{"name": k, "type": t, "value": node[k]} for k, t in _FLAT_ATTRS.items() if k in node],
    }
    return out


def _check_io(node: dict[str, Any], key: str, path: str) -> None:
    io = node.get(key)
    if io is None:
        node[key] = {"values": [], "shapes": [], "types": []}
        return
    if not isinstance(io, dict) or not isinstance(io.get("values", []), list):
        raise InputError(f"'{key}' must be an object with a 'values' list", file=path, where=f"node {node['id']}")


# Keys the linker adds (ET+), with the JSON types they must have when present.
_LINKED_KEYS: dict[str, tuple[type, ...]] = {
    "ts": (int, float),
    "launch_ts": (int, float),
    "inclusive_dur": (int, float),
    "exclusive_dur": (int, float),
    "cat": (str,),
    "stream": (int,),
    "args": (dict,),
    "sync_dep": (list,),
    "stream_wait": (list,),
}


def _check_linked(node: dict[str, Any], path: str) -> None:
    for key, types in _LINKED_KEYS.items():
        if key in node:
            value = node[key]
            if isinstance(value, bool) or not isinstance(value, types):
                raise InputError(
                    f"'{key}' has the wrong type ({type(value).__name__})", file=path, where=f"node {node['id']}"
                )
            if key in ("ts", "launch_ts", "inclusive_dur", "exclusive_dur", "stream") and not 0 <= value < 1e15:  # type: ignore[operator]
                raise InputError(f"'{key}' = {value} is out of range", file=path, where=f"node {node['id']}")
    for key in ("sync_dep", "stream_wait"):
        if not all(isinstance(d, int) and not isinstance(d, bool) for d in node.get(key, ())):
            raise InputError(f"'{key}' must list node ids", file=path, where=f"node {node['id']}")


def parse_host_trace(obj: Any, path: str) -> HostTrace:
    """Validate the top level and every node, normalising flat (1.0.1) nodes to the nested layout."""
    if not isinstance(obj, dict) or not isinstance(obj.get("nodes"), list):
        raise InputError("not a PyTorch host execution trace (no 'nodes' list)", file=path)
    header = {k: v for k, v in obj.items() if k != "nodes"}
    nodes: list[dict[str, Any]] = []
    by_id: dict[int, dict[str, Any]] = {}
    for pos, raw in enumerate(obj["nodes"]):
        if not isinstance(raw, dict) or not isinstance(raw.get("id"), int) or isinstance(raw.get("id"), bool):
            raise InputError("node without an integer 'id'", file=path, where=f"nodes[{pos}]")
        if "parent" in raw and "ctrl_deps" not in raw:
            raw = _flat_to_nested(raw)
        nid = raw["id"]
        if not 0 <= nid < 1 << 64:
            raise InputError(f"node id {nid} is not an unsigned 64-bit integer", file=path, where=f"nodes[{pos}]")
        if nid in by_id:
            raise InputError("duplicate node id", file=path, where=f"node {nid}")
        if not isinstance(raw.get("name", ""), str):
            raise InputError("'name' is not a string", file=path, where=f"node {nid}")
        parent = raw.get("ctrl_deps", 0)
        if isinstance(parent, list):  # tolerate a list form; the call stack has one parent
            parent = parent[0] if parent else 0
        if not isinstance(parent, int):
            raise InputError("'ctrl_deps' is not an integer id", file=path, where=f"node {nid}")
        raw["ctrl_deps"] = parent
        raw.setdefault("name", "")
        attrs = raw.setdefault("attrs", [])
        if not isinstance(attrs, list) or not all(isinstance(a, dict) for a in attrs):
            raise InputError("'attrs' is not a list of {name, type, value} objects", file=path, where=f"node {nid}")
        _check_io(raw, "inputs", path)
        _check_io(raw, "outputs", path)
        _check_linked(raw, path)
        nodes.append(raw)
        by_id[nid] = raw
    return HostTrace(path=path, header=header, nodes=nodes, by_id=by_id)


def load_host_trace(path: str | os.PathLike) -> HostTrace:
    return parse_host_trace(read_json(path, strict=False), str(path))  # machine-written: see parse_json


def device_of(node: dict[str, Any]) -> int | str | None:
    """The device an ET+ GPU node ran on (hashable; None when Kineto recorded no usable one)."""
    device = (node.get("args") or {}).get("device")
    return device if isinstance(device, (int, str)) and not isinstance(device, bool) else None


def is_root(node: dict[str, Any]) -> bool:
    return node["name"] in ROOT_NAMES


def is_thread(node: dict[str, Any]) -> bool:
    return node["name"] in THREAD_NAMES


def process_groups(trace: HostTrace) -> list[dict[str, Any]]:
    """The ``## process_group:init ##`` table (empty when absent or unparsable)."""
    for node in trace.nodes:
        if PG_INIT_MARK in node["name"]:
            values = node["inputs"].get("values") or []
            if values and isinstance(values[0], str):
                try:
                    groups = json.loads(values[0])
                except json.JSONDecodeError:
                    return []
                return [g for g in groups if isinstance(g, dict)] if isinstance(groups, list) else []
    return []
