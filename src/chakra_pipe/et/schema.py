"""Chakra message classes, built on first use from our own ``et_def.proto``; the enum numbers as plain ints.

Why not a committed ``_pb2`` module: generated code pins a protoc/runtime version pair, and the
gencode/runtime mismatch is the most common install failure Chakra users report. Parsing the
``.proto`` ourselves (it uses a small, fixed subset of proto3) and registering the descriptor with
the installed protobuf runtime gives the same upb-backed classes, always in step with the file.

Why on first use: the simulator, the rank-set checks and the column loader need only the enum
numbers and names below, and protobuf plus building the classes is ~60 ms of every ``chakra-pipe
simulate`` start-up (issue #15). The message classes and descriptors (``Node``, ``CLASSES``,
``NodeType``...) are built when first read, through the module's ``__getattr__``; a test checks the
plain tables against the descriptor.
"""

from __future__ import annotations

import _thread
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from google.protobuf import descriptor_pb2

PROTO_FILE = "et_def.proto"

# proto3 scalar type names: FieldDescriptorProto.TYPE_<NAME> gives each one's number.
_SCALARS = frozenset(
    "double float int32 int64 uint32 uint64 sint32 sint64 fixed32 fixed64 sfixed32 sfixed64 bool string bytes".split()
)
_TOKEN = r"[A-Za-z_][A-Za-z0-9_]*|[0-9]+|\"[^\"]*\"|[{}=;]"


def proto_text() -> str:
    """The packaged ``.proto`` source."""
    from importlib import resources

    return resources.files(__package__).joinpath(PROTO_FILE).read_text(encoding="utf-8")


def parse_proto(text: str) -> descriptor_pb2.FileDescriptorProto:
    """Parse the proto3 subset used by ``et_def.proto`` into a ``FileDescriptorProto``.

    Supported: ``syntax``, ``package``, top-level ``enum`` and ``message`` blocks, singular and
    ``repeated`` fields of scalar, enum or message type, and ``oneof`` groups.
    """
    import re

    from google.protobuf import descriptor_pb2

    _F = descriptor_pb2.FieldDescriptorProto
    text = re.sub(r"//[^\n]*", "", text)
    tokens = re.findall(_TOKEN, text)
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
                    field.type = getattr(_F, f"TYPE_{type_name.upper()}")
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


# Plain-int constants, so hot paths and other stages never go through descriptors (or protobuf).
INVALID_NODE, METADATA_NODE, MEM_LOAD_NODE, MEM_STORE_NODE = 0, 1, 2, 3
COMP_NODE, COMM_SEND_NODE, COMM_RECV_NODE, COMM_COLL_NODE = 4, 5, 6, 7
ALL_REDUCE, REDUCE, ALL_GATHER, GATHER, SCATTER = 0, 1, 2, 3, 4
BROADCAST, ALL_TO_ALL, REDUCE_SCATTER, REDUCE_SCATTER_BLOCK, BARRIER = 5, 6, 7, 8, 9

_NODE_TYPES = "INVALID METADATA MEM_LOAD MEM_STORE COMP COMM_SEND COMM_RECV COMM_COLL"
NODE_TYPE_NAMES: dict[int, str] = {i: f"{name}_NODE" for i, name in enumerate(_NODE_TYPES.split())}
_COMM_TYPES = (
    "ALL_REDUCE REDUCE ALL_GATHER GATHER SCATTER BROADCAST ALL_TO_ALL REDUCE_SCATTER REDUCE_SCATTER_BLOCK BARRIER"
)
COMM_TYPE_NAMES: dict[int, str] = dict(enumerate(_COMM_TYPES.split()))

# Built on first read (see the module docstring); declared here for type checkers.
_MESSAGES = ("GlobalMetadata", "Node", "IOInfo", "Tensor", "AttributeProto")
_ENUMS = ("NodeType", "CollectiveCommType")
if TYPE_CHECKING:
    FILE_DESCRIPTOR: Any
    CLASSES: dict[str, Any]
    GlobalMetadata: Any
    Node: Any
    IOInfo: Any
    Tensor: Any
    AttributeProto: Any
    NodeType: Any
    CollectiveCommType: Any
_BUILD_LOCK = _thread.allocate_lock()  # two threads' first reads must share one pool's classes


def _build() -> dict[str, Any]:
    from google.protobuf import descriptor_pool, message_factory

    fd = parse_proto(proto_text())
    pool = descriptor_pool.DescriptorPool()
    file_desc = pool.Add(fd)
    classes = {
        name: message_factory.GetMessageClass(file_desc.message_types_by_name[name])
        for name in file_desc.message_types_by_name
    }
    names = {name: classes[name] for name in _MESSAGES}
    names.update({name: file_desc.enum_types_by_name[name] for name in _ENUMS})
    return {"FILE_DESCRIPTOR": file_desc, "CLASSES": classes, **names}


def built() -> bool:
    """Whether the message classes exist already: then decoding a few records with them costs less
    than the vectorised loader's fixed overhead; before, importing protobuf costs far more."""
    return "CLASSES" in globals()


if not TYPE_CHECKING:

    def __getattr__(name: str) -> Any:
        if name not in ("FILE_DESCRIPTOR", "CLASSES", *_MESSAGES, *_ENUMS):
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
        with _BUILD_LOCK:
            if "CLASSES" not in globals():
                globals().update(_build())
        return globals()[name]
