"""Chakra message classes, built at import time from our own ``et_def.proto``.

Why not a committed ``_pb2`` module: generated code pins a protoc/runtime version pair, and the
gencode/runtime mismatch is the most common install failure Chakra users report. Parsing the
``.proto`` ourselves (it uses a small, fixed subset of proto3) and registering the descriptor with
the installed protobuf runtime gives the same upb-backed classes, always in step with the file.
"""

from __future__ import annotations

import re
from importlib import resources

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

PROTO_FILE = "et_def.proto"

_F = descriptor_pb2.FieldDescriptorProto
_SCALARS = {
    "double": _F.TYPE_DOUBLE,
    "float": _F.TYPE_FLOAT,
    "int32": _F.TYPE_INT32,
    "int64": _F.TYPE_INT64,
    "uint32": _F.TYPE_UINT32,
    "uint64": _F.TYPE_UINT64,
    "sint32": _F.TYPE_SINT32,
    "sint64": _F.TYPE_SINT64,
    "fixed32": _F.TYPE_FIXED32,
    "fixed64": _F.TYPE_FIXED64,
    "sfixed32": _F.TYPE_SFIXED32,
    "sfixed64": _F.TYPE_SFIXED64,
    "bool": _F.TYPE_BOOL,
    "string": _F.TYPE_STRING,
    "bytes": _F.TYPE_BYTES,
}
_TOKEN = re.compile(r"[A-Za-z_][A-Za-z0-9_]*|[0-9]+|\"[^\"]*\"|[{}=;]")


def proto_text() -> str:
    """The packaged ``.proto`` source."""
    return resources.files(__package__).joinpath(PROTO_FILE).read_text(encoding="utf-8")


def parse_proto(text: str) -> descriptor_pb2.FileDescriptorProto:
    """Parse the proto3 subset used by ``et_def.proto`` into a ``FileDescriptorProto``.

    Supported: ``syntax``, ``package``, top-level ``enum`` and ``message`` blocks, singular and
    ``repeated`` fields of scalar, enum or message type, and ``oneof`` groups.
    """
    text = re.sub(r"//[^\n]*", "", text)
    tokens = _TOKEN.findall(text)
    fd = descriptor_pb2.FileDescriptorProto(name=PROTO_FILE, syntax="proto3")
    enums: set[str] = set()
    pending: list[tuple[descriptor_pb2.FieldDescriptorProto, str]] = []
    i = 0

    def expect(tok: str) -> None:
        nonlocal i
        if tokens[i] != tok:
            raise ValueError(f"{PROTO_FILE}: expected {tok!r}, found {tokens[i]!r}")
        i += 1

    while i < len(tokens):
        tok = tokens[i]
        if tok == "syntax":
            i += 4  # syntax = "proto3" ;
        elif tok == "package":
            fd.package = tokens[i + 1]
            i += 3
        elif tok == "enum":
            enum = fd.enum_type.add(name=tokens[i + 1])
            enums.add(enum.name)
            i += 2
            expect("{")
            while tokens[i] != "}":
                enum.value.add(name=tokens[i], number=int(tokens[i + 2]))
                i += 4
            i += 1
        elif tok == "message":
            msg = fd.message_type.add(name=tokens[i + 1])
            i += 2
            expect("{")
            oneof_index = None
            while True:
                tok = tokens[i]
                if tok == "}":
                    i += 1
                    if oneof_index is None:
                        break
                    oneof_index = None
                    continue
                if tok == "oneof":
                    oneof_index = len(msg.oneof_decl)
                    msg.oneof_decl.add(name=tokens[i + 1])
                    i += 3
                    continue
                label = _F.LABEL_OPTIONAL
                if tok == "repeated":
                    label = _F.LABEL_REPEATED
                    i += 1
                type_name, name, number = tokens[i], tokens[i + 1], int(tokens[i + 3])
                i += 5
                field = msg.field.add(name=name, number=number, label=label, json_name=_camel(name))
                if oneof_index is not None:
                    field.oneof_index = oneof_index
                if type_name in _SCALARS:
                    field.type = _SCALARS[type_name]
                else:
                    pending.append((field, type_name))
        else:
            raise ValueError(f"{PROTO_FILE}: unexpected token {tok!r}")
    for field, type_name in pending:
        field.type = _F.TYPE_ENUM if type_name in enums else _F.TYPE_MESSAGE
        field.type_name = f".{fd.package}.{type_name}"
    return fd


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part.capitalize() for part in rest)


def _build():
    fd = parse_proto(proto_text())
    pool = descriptor_pool.DescriptorPool()
    file_desc = pool.Add(fd)
    classes = {
        name: message_factory.GetMessageClass(file_desc.message_types_by_name[name])
        for name in file_desc.message_types_by_name
    }
    return file_desc, classes


FILE_DESCRIPTOR, CLASSES = _build()
GlobalMetadata = CLASSES["GlobalMetadata"]
Node = CLASSES["Node"]
IOInfo = CLASSES["IOInfo"]
Tensor = CLASSES["Tensor"]
AttributeProto = CLASSES["AttributeProto"]
NodeType = FILE_DESCRIPTOR.enum_types_by_name["NodeType"]
CollectiveCommType = FILE_DESCRIPTOR.enum_types_by_name["CollectiveCommType"]

# Plain-int constants, so hot paths and other stages never go through descriptors.
INVALID_NODE, METADATA_NODE, MEM_LOAD_NODE, MEM_STORE_NODE = 0, 1, 2, 3
COMP_NODE, COMM_SEND_NODE, COMM_RECV_NODE, COMM_COLL_NODE = 4, 5, 6, 7
ALL_REDUCE, REDUCE, ALL_GATHER, GATHER, SCATTER = 0, 1, 2, 3, 4
BROADCAST, ALL_TO_ALL, REDUCE_SCATTER, REDUCE_SCATTER_BLOCK, BARRIER = 5, 6, 7, 8, 9

NODE_TYPE_NAMES = {v.number: v.name for v in NodeType.values}
COMM_TYPE_NAMES = {v.number: v.name for v in CollectiveCommType.values}
