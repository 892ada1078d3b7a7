"""Fast canonical encoding of many similar nodes.

Large generated workloads (1,024 ranks × ~1,000 nodes) differ between ranks of one pipeline
stage only in a few trailing attributes (``pg_name``, send/recv peers). ``Node.attr`` is the
highest-numbered field (10), so a canonical serialization of a node is "everything else" followed
by its attribute records in order. We serialize each template node once with protobuf, then append
pre-encoded attribute records per rank: byte-identical to serializing the full node, without a
protobuf object per rank.
"""

from __future__ import annotations

from functools import lru_cache

from ..et.attrs import make_attr
from ..et.framing import encode_varint

_ATTR_TAG = b"\x52"  # Node field 10 (attr), wire type 2


@lru_cache(maxsize=1 << 16)
def attr_record(name: str, value: int | str | bool) -> bytes:
    """The bytes ``Node`` uses to carry one attribute in its canonical kind (tag, length, message)."""
    data = make_attr(name, value).SerializeToString()
    return _ATTR_TAG + encode_varint(len(data)) + data


def framed(body: bytes) -> bytes:
    """One ``.et`` record: varint length prefix + message."""
    return encode_varint(len(body)) + body
