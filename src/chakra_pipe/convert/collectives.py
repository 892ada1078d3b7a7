"""Recognise communication in PyTorch host traces: what kind, how many bytes, which peer and group.

Two sources (pytorch-traces.md §2.4, §7): NCCL process groups write ``record_param_comms`` nodes
(attrs from schema 1.1.0, positional inputs before); gloo writes none, so the dispatcher op
``c10d::<op>`` is the authoritative record and its tensors/scalars give size, root and peer.
Sizes follow ASTRA-sim's ``comm_size`` semantics (astra-sim-semantics.md §6.1): all-gather is the
per-rank input, reduce-scatter and all-to-all the full input buffer.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from ..et import schema
from ..et.collectives import COLLECTIVES
from ..link.hostet import attr

# kind: (Chakra node type, comm_type or -1 for p2p)
_COLL = schema.COMM_COLL_NODE
KINDS: dict[str, tuple[int, int]] = {
    **{c.key: (_COLL, c.comm_type) for c in COLLECTIVES if c.nccl},
    "send": (schema.COMM_SEND_NODE, -1),
    "recv": (schema.COMM_RECV_NODE, -1),
}


@dataclass(frozen=True)
class C10dOp:
    """Where a ``c10d::`` op keeps its size tensor, root/peer and tag among its positional inputs."""

    kind: str
    size_input: int
    peer_input: int = -1
    tag_input: int = -1
    gloo_name: str = ""


# Schemas from torch/csrc/distributed/c10d/Ops.cpp; size is the per-rank input per §6.1.
C10D_OPS: dict[str, C10dOp] = {
    "allreduce_": C10dOp("all_reduce", 0, gloo_name="gloo:all_reduce"),
    "allreduce_coalesced_": C10dOp("all_reduce", 0, gloo_name="gloo:all_reduce"),
    "allgather_": C10dOp("all_gather", 1, gloo_name="gloo:all_gather"),
    "_allgather_base_": C10dOp("all_gather", 1, gloo_name="gloo:all_gather"),
    "allgather_into_tensor_coalesced_": C10dOp("all_gather", 1, gloo_name="gloo:all_gather"),
    "reduce_scatter_": C10dOp("reduce_scatter", 1, gloo_name="gloo:all_reduce"),
    "_reduce_scatter_base_": C10dOp("reduce_scatter", 1, gloo_name="gloo:all_reduce"),
    "reduce_scatter_tensor_coalesced_": C10dOp("reduce_scatter", 1, gloo_name="gloo:all_reduce"),
    "alltoall_": C10dOp("all_to_all", 1, gloo_name="gloo:all_to_all"),
    "alltoall_base_": C10dOp("all_to_all", 1, gloo_name="gloo:all_to_all"),
    "broadcast_": C10dOp("broadcast", 0, peer_input=2, gloo_name="gloo:broadcast"),
    "reduce_": C10dOp("reduce", 0, peer_input=3, gloo_name="gloo:reduce"),
    "gather_": C10dOp("gather", 1, peer_input=3, gloo_name="gloo:gather"),
    "scatter_": C10dOp("scatter", 0, peer_input=3, gloo_name="gloo:scatter"),
    "barrier": C10dOp("barrier", -1, gloo_name="gloo:barrier"),
    "send": C10dOp("send", 0, peer_input=2, tag_input=3, gloo_name="gloo:send"),
    "recv_": C10dOp("recv", 0, peer_input=2, tag_input=3, gloo_name="gloo:recv"),
}

# record_param_comms collective names, normalised (lower case, no '_'), matched by prefix, the
# longest first (``reducescatter`` before ``reduce``).
_NCCL_PREFIXES = sorted(
    [*((c.nccl, c.key) for c in COLLECTIVES if c.nccl), ("send", "send"), ("recv", "recv")],
    key=lambda pair: -len(pair[0]),
)
DTYPE_BYTES = {
    "float": 4,
    "float32": 4,
    "double": 8,
    "float64": 8,
    "half": 2,
    "float16": 2,
    "bfloat16": 2,
    "long": 8,
    "int64": 8,
    "int": 4,
    "int32": 4,
    "short": 2,
    "int16": 2,
    "char": 1,
    "int8": 1,
    "byte": 1,
    "uint8": 1,
    "bool": 1,
}


@dataclass
class Comm:
    """A recognised communication op, before it is placed in the graph."""

    kind: str
    size: int
    pg_name: str = ""
    peer: int = -1  # group-local root (collectives) or peer (p2p); -1 when not recorded
    tag: int = 0
    gloo_name: str = ""  # the worker-thread range that carries the real transfer time (gloo)
    peer_global: bool = False  # True when ``peer`` is already a global rank

    @property
    def node_type(self) -> int:
        return KINDS[self.kind][0]

    @property
    def comm_type(self) -> int:
        return KINDS[self.kind][1]


def normalise_collective(name: str) -> str | None:
    """Our kind for a NCCL/Kineto collective name (``allreduce``, ``all_gather``, ``_allgather_base``…)."""
    key = name.lower().replace("_", "").replace("-", "")
    for prefix, kind in _NCCL_PREFIXES:
        if key.startswith(prefix):
            return kind
    return None


def _is_tensor(value: Any) -> bool:
    return isinstance(value, list) and len(value) >= 5 and all(isinstance(v, int) for v in value[:5])


def tensor_bytes(value: Any) -> int:
    """Bytes of a tensor 6-tuple or of (nested) lists of them: Σ numel × itemsize."""
    if _is_tensor(value):
        return max(0, value[3]) * max(0, value[4])
    if isinstance(value, list):
        return sum(tensor_bytes(v) for v in value)
    return 0


def tensor_storages(value: Any) -> set[int]:
    """Storage ids of a tensor tuple or of (nested) lists of them (0, an absent tensor's, left out)."""
    if _is_tensor(value):
        return {value[1]} if value[1] else set()
    if isinstance(value, list):
        return set().union(*(tensor_storages(v) for v in value))
    return set()


@dataclass(frozen=True)
class RecordSeq:
    """Where a NCCL record sits in its process group's sequence (``WorkNCCL``'s ``seq_``)."""

    seq: int
    p2p: bool  # p2p ops count on a counter of their own
    wait: bool  # a ``wait`` record (``work.wait()``), not the collective itself
    pg: str  # the group's name; "" when the record names none (1.0.x, waits before torch 2.4)


def _seq_value(value: Any) -> tuple[int, bool] | None:
    """``seq`` or ``[seq, isP2P]`` as ``(seq, is_p2p)``; None for anything else (a tensor list)."""
    if isinstance(value, list) and len(value) == 2 and isinstance(value[1], bool):
        value, p2p = value
    else:
        p2p = False
    return (value, p2p) if isinstance(value, int) and not isinstance(value, bool) else None


def record_seq(node: dict[str, Any]) -> RecordSeq | None:
    """A NCCL record's place in its group's sequence, or None when it records none.

    ``RECORD_PARAM_COMMS_DATA`` (a collective) leads with its tensor list, ``RECORD_PARAM_COMMS``
    (``wait``, ``barrier``) has none, so the rest shifts by one (pytorch-traces.md §2.4):
    ``[[tensors], seq, [pg, desc], rank, name, …]`` vs ``[seq, [pg, desc], rank, name, …]``; told
    apart by the first value, as the name is an attr only from schema 1.1.0. The number may be
    ``[seq, isP2P]`` (torch >= 2.4); 1.0.2 has a backend id instead of the group's name.
    """
    if node["name"] != "record_param_comms":
        return None
    values = node["inputs"].get("values") or []
    at = 0 if values and _seq_value(values[0]) is not None else 1
    found = _seq_value(values[at]) if len(values) > at else None
    if found is None:
        return None
    cname = attr(node, "collective_name")
    if not isinstance(cname, str) and len(values) > at + 3:
        cname = values[at + 3]
    pg = attr(node, "pg_name")
    if not isinstance(pg, str) and len(values) > at + 1 and isinstance(values[at + 1], list) and values[at + 1]:
        pg = values[at + 1][0]
    return RecordSeq(found[0], found[1], cname == "wait", pg if isinstance(pg, str) else "")


_TENSOR_TYPE = re.compile(r"Tensor\((?:c10::)?(\w+)\)")


def shape_bytes(shape: Any, type_str: Any) -> int:
    """Bytes from a recorded shape and type string (``[[1000]]``, ``GenericList[Tensor(float)]``).

    The fallback when tensor tuples carry no numel/itemsize: Σ over the (nested) shapes of
    Π dims × the element size of the dtype named in the type string.
    """
    dtypes = _TENSOR_TYPE.findall(type_str) if isinstance(type_str, str) else []
    itemsize = DTYPE_BYTES.get(dtypes[0].lower(), 0) if dtypes else 0

    def numel(sh: Any) -> int:
        if isinstance(sh, list) and all(isinstance(d, int) and not isinstance(d, bool) for d in sh):
            out = 1
            for d in sh:
                out *= max(0, d)
            return out
        return sum(numel(x) for x in sh) if isinstance(sh, list) else 0

    return numel(shape) * itemsize


def _int_input(values: list, index: int) -> int | None:
    if 0 <= index < len(values):
        v = values[index]
        if isinstance(v, int) and not isinstance(v, bool):
            return v
    return None


def from_c10d(node: dict[str, Any]) -> Comm | None:
    """A ``c10d::<op>`` node as a Comm (gloo path), or None for ops we do not model."""
    name = node["name"]
    if not name.startswith("c10d::"):
        return None
    spec = C10D_OPS.get(name[len("c10d::") :])
    if spec is None:
        return None
    values = node["inputs"].get("values") or []
    types = node["inputs"].get("types") or []
    size = 0
    if 0 <= spec.size_input < len(values):
        size = tensor_bytes(values[spec.size_input])
        if size == 0 and spec.size_input < min(len(types), len(node["inputs"].get("shapes") or [])):
            size = shape_bytes(node["inputs"]["shapes"][spec.size_input], types[spec.size_input])
    peer = _int_input(values, spec.peer_input)
    tag = _int_input(values, spec.tag_input)
    return Comm(spec.kind, size, peer=-1 if peer is None else peer, tag=tag or 0, gloo_name=spec.gloo_name)


def from_record_param_comms(node: dict[str, Any]) -> Comm | None:
    """A NCCL ``record_param_comms`` node as a Comm; None for ``wait`` and unknown names."""
    if node["name"] != "record_param_comms":
        return None
    values = node["inputs"].get("values") or []
    cname = attr(node, "collective_name")
    if not isinstance(cname, str) and len(values) > 4 and isinstance(values[4], str):
        cname = values[4]
    kind = normalise_collective(cname) if isinstance(cname, str) else None
    if kind is None:
        return None
    nelems, dtype = attr(node, "in_msg_nelems"), attr(node, "dtype")
    if isinstance(nelems, int) and isinstance(dtype, str) and dtype.lower() in DTYPE_BYTES:
        size = nelems * DTYPE_BYTES[dtype.lower()]
    else:
        size = tensor_bytes(values[0]) if values else 0
    pg = attr(node, "pg_name")
    if (
        not isinstance(pg, str)
        and len(values) > 2
        and isinstance(values[2], list)
        and values[2]
        and isinstance(values[2][0], str)
    ):
        pg = values[2][0]
    peer = _int_input(values, 3)
    start, stride = attr(node, "global_rank_start"), attr(node, "global_rank_stride")
    mapped = peer is not None and isinstance(start, int) and isinstance(stride, int) and stride > 0
    return Comm(
        kind,
        size,
        pg_name=pg if isinstance(pg, str) else "",
        peer=-1 if peer is None else (start + peer * stride if mapped else peer),
        peer_global=mapped,
    )


def kernel_kind(name: str) -> str | None:
    """Collective kind of a NCCL kernel name (``ncclDevKernel_AllReduce_Sum_f32_RING_LL``), if any:
    a name that *contains* ``ncclKernel`` or ``ncclDevKernel``, as Chakra's converter tests it (a
    demangled name may lead with a return type or namespace: ``void ncclKernel_…``).

    Only used for kernels no ``record_param_comms`` claims (older traces); SendRecv kernels carry
    no direction, so they are left to their host record.
    """
    key = name.lower().replace("_", "").replace("-", "")
    found = [(at, marker) for marker in ("nccldevkernel", "ncclkernel") if (at := key.find(marker)) >= 0]
    if not found:
        return None
    at, marker = min(found)  # the kernel's own name, not a marker in its argument types
    rest = key[at + len(marker) :]
    return None if rest.startswith("sendrecv") else normalise_collective(rest)
