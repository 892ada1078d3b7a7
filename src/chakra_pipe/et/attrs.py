"""Typed node attributes: write the kind consumers expect, read any integer kind.

Chakra's C++ feeder reads each well-known attribute from exactly one oneof member and silently
gets 0 from any other (a ``comm_size`` written as ``uint64_val`` makes the collective vanish —
astra-sim issues #224/#229). ASTRA-sim's current feeder converts integer kinds implicitly. So we
write the canonical kind and read leniently, and the validator warns about non-canonical kinds.
"""

from __future__ import annotations

from typing import Any

# Canonical value kind (oneof member name) of every attribute name with a known consumer.
CANONICAL_KINDS: dict[str, str] = {
    "is_cpu_op": "bool_val",
    "num_ops": "int64_val",
    "tensor_size": "uint64_val",
    "tensor_loc": "int64_val",
    "comm_type": "int64_val",
    "comm_size": "int64_val",
    "comm_src": "int32_val",
    "comm_dst": "int32_val",
    "comm_tag": "int32_val",
    "comm_priority": "int32_val",
    "pg_name": "string_val",
    "involved_dim": "bool_list",
    "rf_id": "int64_val",
    "fw_parent": "int64_val",
    "seq_id": "int64_val",
    "scope": "int64_val",
    "tid": "int64_val",
    "fw_tid": "int64_val",
    "stream": "int64_val",
    "op_schema": "string_val",
}

INT_KINDS = frozenset(
    {
        "int32_val",
        "int64_val",
        "uint32_val",
        "uint64_val",
        "sint32_val",
        "sint64_val",
        "fixed32_val",
        "fixed64_val",
        "sfixed32_val",
        "sfixed64_val",
        "bool_val",
    }
)
# Oneof field number of each member, e.g. KIND_NUMBER["int64_val"] == 9: et_def.proto numbers the
# members pairwise from 3, scalar then list, in this order. Spelled here rather than read from the
# descriptor so that reading the columns of a trace needs no protobuf import (issue #15); a test checks
# it against the descriptor.
_VALUE_TYPES = (
    "double float int32 int64 uint32 uint64 sint32 sint64 fixed32 fixed64 sfixed32 sfixed64 bool string bytes"
)
KIND_NUMBER: dict[str, int] = {
    f"{t}_{form}": 3 + 2 * i + j for i, t in enumerate(_VALUE_TYPES.split()) for j, form in enumerate(("val", "list"))
}
NUMBER_KIND: dict[int, str] = {v: k for k, v in KIND_NUMBER.items()}

_MISSING = object()


def value_of(attr) -> Any:
    """Python value of an attribute: scalars as int/float/bool/str/bytes, lists as lists."""
    kind = attr.WhichOneof("value")
    if kind is None:
        return None
    value = getattr(attr, kind)
    return list(value.values) if kind.endswith("_list") else value


def make_attr(name: str, value: Any, kind: str | None = None):
    """An ``AttributeProto`` holding ``value`` as ``kind`` (default: the canonical kind for ``name``)."""
    kind = kind or CANONICAL_KINDS.get(name) or _infer_kind(value)
    if kind not in KIND_NUMBER:
        raise ValueError(f"unknown attribute kind {kind!r}")
    from . import schema  # the message classes: protobuf only when a node is built

    attr = schema.AttributeProto(name=name)
    if kind.endswith("_list"):
        getattr(attr, kind).values.extend(value)
    elif kind == "bool_val":
        attr.bool_val = bool(value)
    else:
        setattr(attr, kind, value)
    return attr


def _infer_kind(value: Any) -> str:
    if isinstance(value, bool):
        return "bool_val"
    if isinstance(value, int):
        return "int64_val"
    if isinstance(value, float):
        return "double_val"
    if isinstance(value, bytes):
        return "bytes_val"
    if isinstance(value, str):
        return "string_val"
    raise ValueError(f"cannot infer an attribute kind for {type(value).__name__}")


def set_attr(node, name: str, value: Any, kind: str | None = None) -> None:
    """Append attribute ``name`` to ``node`` (a Node or GlobalMetadata) in its canonical kind."""
    node.attr.append(make_attr(name, value, kind))


def get_attr(node, name: str, default: Any = _MISSING) -> Any:
    """Value of the first attribute called ``name`` (ASTRA-sim's feeder stops at the first match);
    integer kinds read as int (lenient)."""
    for attr in node.attr:
        if attr.name == name:
            value = value_of(attr)
            if attr.WhichOneof("value") in INT_KINDS and name != "is_cpu_op":
                return int(value)
            return value
    if default is _MISSING:
        raise KeyError(name)
    return default


def get_int(node, name: str, default: int | None = None) -> int | None:
    """Integer attribute (the first of that name) read leniently (any integer kind, bool included);
    ``default`` if absent or of another kind."""
    for attr in node.attr:
        if attr.name == name:
            kind = attr.WhichOneof("value")
            return int(getattr(attr, kind)) if kind in INT_KINDS else default
    return default
