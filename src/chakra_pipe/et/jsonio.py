"""Lossless JSON for Chakra traces: ``{"metadata": {...}, "nodes": [...]}``.

Unlike Chakra's jsonizer (a stream of camelCase protobuf-JSON objects, 64-bit integers as strings,
defaults dropped), this is one valid JSON document with the proto's snake_case field names, integers
as numbers, every attribute as ``{"name", "kind", "value"}`` (kind = oneof member) and ``inputs`` /
``outputs`` as ``null`` when unset — so ``.et -> JSON -> .et`` reproduces the file byte for byte.
"""

from __future__ import annotations

import base64
import json
import math
import os
import struct
from typing import Any

from ..atomic import atomic_open
from ..errors import InputError
from ..readfile import read_json
from . import attrs as _attrs
from . import schema
from .framing import TraceReader, write_trace

_IO_FIELDS = ("values", "shapes", "types")
_TYPE_BY_NAME = {name: num for num, name in schema.NODE_TYPE_NAMES.items()}


# -- to JSON --------------------------------------------------------------------------------
def _json_scalar(kind: str, value: Any) -> Any:
    if kind.startswith("bytes"):
        return base64.b64encode(value).decode("ascii")
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
    return value


def attr_to_json(attr) -> dict[str, Any]:
    kind = attr.WhichOneof("value")
    out: dict[str, Any] = {"name": attr.name}
    if attr.doc_string:
        out["doc_string"] = attr.doc_string
    out["kind"] = kind
    if kind is None:
        out["value"] = None
    elif kind.endswith("_list"):
        out["value"] = [_json_scalar(kind, v) for v in getattr(attr, kind).values]
    else:
        out["value"] = _json_scalar(kind, getattr(attr, kind))
    return out


def _io_to_json(node, name: str) -> dict[str, str] | None:
    if not node.HasField(name):
        return None
    io = getattr(node, name)
    return {f: getattr(io, f) for f in _IO_FIELDS}


def node_to_json(node) -> dict[str, Any]:
    return {
        "id": node.id,
        "name": node.name,
        "type": schema.NODE_TYPE_NAMES.get(node.type, node.type),
        "ctrl_deps": list(node.ctrl_deps),
        "data_deps": list(node.data_deps),
        "start_time_micros": node.start_time_micros,
        "duration_micros": node.duration_micros,
        "inputs": _io_to_json(node, "inputs"),
        "outputs": _io_to_json(node, "outputs"),
        "attr": [attr_to_json(a) for a in node.attr],
    }


def metadata_to_json(md) -> dict[str, Any]:
    return {"version": md.version, "attr": [attr_to_json(a) for a in md.attr]}


def jsonize(src: str | os.PathLike, dst: str | os.PathLike, *, indent: int | None = None) -> int:
    """Write ``src`` (.et) as one JSON document at ``dst``; streams nodes, returns the node count."""
    count = 0
    with TraceReader(src) as reader, atomic_open(dst, "w") as out:
        out.write('{"metadata": ' + json.dumps(metadata_to_json(reader.metadata), ensure_ascii=False))
        out.write(', "nodes": [')
        sep = "\n"
        for _, node in reader:
            out.write(sep + json.dumps(node_to_json(node), ensure_ascii=False, indent=indent))
            sep = ",\n"
            count += 1
        out.write("\n]}\n")
    return count


# -- from JSON ------------------------------------------------------------------------------
class _Where:
    """Location of the value being decoded, for error messages (``nodes[12].attr[3].value``)."""

    def __init__(self, file: str):
        self.file = file

    def fail(self, where: str, what: str) -> InputError:
        return InputError(what, file=self.file, where=where)


def _from_json_scalar(kind: str, value: Any, loc: _Where, where: str) -> Any:
    try:
        if kind.startswith("bytes"):
            return base64.b64decode(value, validate=True)
        if kind.startswith(("double", "float")):
            if isinstance(value, bool) or not isinstance(value, (int, float, str)):
                raise TypeError
            number = float(value)  # OverflowError for an int past a double; "NaN"/"Infinity" as jsonize writes
            if kind.startswith("float"):
                struct.pack("<f", number)  # OverflowError where float32 would round a finite value to inf
            return number
        if kind.startswith("bool"):
            if not isinstance(value, bool):
                raise TypeError
            return value
        if kind.startswith("string"):
            if not isinstance(value, str):
                raise TypeError
            return value
        if isinstance(value, bool) or not isinstance(value, int):
            raise TypeError
        return value
    except OverflowError:
        raise loc.fail(
            where,
            f"value {value!r} overflows a {'32-bit float' if kind.startswith('float') else 'double'}"
            " (it would read as infinity)",
        ) from None
    except (TypeError, ValueError):
        raise loc.fail(where, f"value {value!r} is not a valid {kind}") from None


def attr_from_json(obj: Any, loc: _Where, where: str):
    if not isinstance(obj, dict) or not isinstance(obj.get("name"), str) or "kind" not in obj:
        raise loc.fail(where, 'attribute must be an object with "name", "kind" and "value"')
    kind, doc = obj["kind"], obj.get("doc_string", "")
    if not isinstance(doc, str):
        raise loc.fail(where + ".doc_string", "must be a string")
    attr = schema.AttributeProto(name=obj["name"], doc_string=doc)
    if kind is None:
        return attr
    if not isinstance(kind, str) or kind not in _attrs.KIND_NUMBER:
        raise loc.fail(where + ".kind", f"unknown attribute kind {kind!r}")
    value = obj.get("value")
    try:
        if kind.endswith("_list"):
            if not isinstance(value, list):
                raise loc.fail(where + ".value", f"{kind} value must be a list")
            getattr(attr, kind).values.extend(
                _from_json_scalar(kind, v, loc, f"{where}.value[{i}]") for i, v in enumerate(value)
            )
            if not value:
                getattr(attr, kind).SetInParent()
        else:
            setattr(attr, kind, _from_json_scalar(kind, value, loc, where + ".value"))
    except ValueError as exc:  # out-of-range integers
        raise loc.fail(where + ".value", str(exc)) from None
    return attr


def _uint_list(obj: dict, key: str, loc: _Where, where: str) -> list[int]:
    value = obj.get(key, [])
    if not isinstance(value, list) or not all(isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in value):
        raise loc.fail(f"{where}.{key}", "must be a list of non-negative integers")
    return value


def node_from_json(obj: Any, loc: _Where, where: str):
    if not isinstance(obj, dict):
        raise loc.fail(where, "node must be an object")
    node = schema.Node()
    try:
        node.id = obj.get("id", 0)
        node.name = obj.get("name", "")
        t = obj.get("type", 0)
        node.type = _TYPE_BY_NAME[t] if isinstance(t, str) else t
        node.ctrl_deps.extend(_uint_list(obj, "ctrl_deps", loc, where))
        node.data_deps.extend(_uint_list(obj, "data_deps", loc, where))
        node.start_time_micros = obj.get("start_time_micros", 0)
        node.duration_micros = obj.get("duration_micros", 0)
    except KeyError:
        raise loc.fail(f"{where}.type", f"unknown node type {obj.get('type')!r}") from None
    except (TypeError, ValueError) as exc:
        raise loc.fail(where, f"bad field value: {exc}") from None
    for name in ("inputs", "outputs"):
        io = obj.get(name)
        if io is None:
            continue
        if not isinstance(io, dict) or not all(isinstance(io.get(f, ""), str) for f in _IO_FIELDS):
            raise loc.fail(f"{where}.{name}", "must be null or an object of strings values/shapes/types")
        msg = getattr(node, name)
        msg.SetInParent()
        for f in _IO_FIELDS:
            setattr(msg, f, io.get(f, ""))
    attrs = obj.get("attr", [])
    if not isinstance(attrs, list):
        raise loc.fail(f"{where}.attr", "must be a list")
    node.attr.extend(attr_from_json(a, loc, f"{where}.attr[{i}]") for i, a in enumerate(attrs))
    return node


def load_json(src: str | os.PathLike) -> tuple[Any, list]:
    """Parse a chakra-pipe JSON trace into ``(GlobalMetadata, [Node])``."""
    loc = _Where(str(src))
    doc = read_json(src)
    if not isinstance(doc, dict) or "nodes" not in doc or not isinstance(doc["nodes"], list):
        raise loc.fail("top level", 'expected {"metadata": {...}, "nodes": [...]}')
    md_obj = doc.get("metadata") or {}
    if not isinstance(md_obj, dict):
        raise loc.fail("metadata", "must be an object")
    md = schema.GlobalMetadata(version=str(md_obj.get("version", "")))
    md_attrs = md_obj.get("attr", [])
    if not isinstance(md_attrs, list):
        raise loc.fail("metadata.attr", "must be a list")
    md.attr.extend(attr_from_json(a, loc, f"metadata.attr[{i}]") for i, a in enumerate(md_attrs))
    nodes = [node_from_json(n, loc, f"nodes[{i}]") for i, n in enumerate(doc["nodes"])]
    return md, nodes


def dejsonize(src: str | os.PathLike, dst: str | os.PathLike) -> int:
    """Write the JSON trace ``src`` as ``.et`` at ``dst``; returns the node count."""
    md, nodes = load_json(src)
    return write_trace(dst, md, nodes)
