"""Converting ET+ written by upstream ``chakra_trace_link`` (pytorch-traces.md §5.2 step 7, §5.3, §6.2).

Upstream's linker renumbers host nodes densely from 0 and emits each GPU op right after the host
op it attached it to, as a deep copy of that host node (attrs, inputs) with the Kineto ``cat``,
``name``, ``stream`` and, for ``ncclDevKernel`` names, a top-level ``pg_name``. It attaches a
launch to the op with the launch's ``External id`` (chakra issue #196), which in older traces is
the ``c10d::`` dispatcher op rather than the ``nccl:*`` range inside its ``record_param_comms``.
Upstream's converter makes the NCCL kernel the one COMM node (§6.2): one collective per kernel.
"""

from __future__ import annotations

import copy
import json

import pytest

from chakra_pipe.convert.check import rank_problems
from chakra_pipe.convert.pytorch import convert_trace
from chakra_pipe.et import schema
from chakra_pipe.et.attrs import get_attr
from chakra_pipe.link.hostet import parse_host_trace

EMPTY = {"values": [], "shapes": [], "types": []}
TENSOR = [200, 201, 0, 1024, 4, "cuda:0"]  # 1,024 floats: 4,096 bytes


def _host(nid: int, name: str, parent: int, values=None, **extra):
    node = {
        "id": nid,
        "name": name,
        "ctrl_deps": parent,
        "inputs": {"values": values or [], "shapes": [], "types": []},
        "outputs": dict(EMPTY),
        "attrs": [{"name": "tid", "type": "uint64", "value": 1}, {"name": "rf_id", "type": "uint64", "value": nid}],
    }
    node.update(extra)
    return node


def _kernel_copy(host: dict, name: str, pg: str) -> dict:
    """The NCCL kernel as upstream's linker writes it: a deep copy of its host node (inputs
    included) with the Kineto kernel's fields and a top-level ``pg_name``; 40 us on stream 20."""
    kernel = copy.deepcopy(host)
    kernel.update(
        ctrl_deps=host["id"],
        name=name,
        cat="kernel",
        ph="X",
        ts=150,
        inclusive_dur=40,
        exclusive_dur=40,
        stream=20,
        pg_name=pg,
    )
    return kernel


def _upstream_etplus(attach_to: str, pg: str = "0") -> dict:
    """A dense-id ET+ as upstream writes it: the kernel's copy follows the host op it is attached to."""
    rpc_values = [[TENSOR], 1, [pg, "default_pg"], 0, "allreduce", [], [], 0, 1, 2]
    host = [
        _host(0, "[pytorch|profiler|execution_trace|process]", 0),
        _host(1, "[pytorch|profiler|execution_trace|thread]", 0),
        _host(2, "c10d::allreduce_", 1, [[TENSOR], "<Object>", "<Object>", "<None>", False, -1], ts=100),
        _host(3, "record_param_comms", 2, rpc_values, ts=105),
        _host(4, "nccl:all_reduce", 3, ts=106),
        _host(5, "aten::add_", 1, ts=130),
    ]
    for n in host[2:]:
        n.update(inclusive_dur=5, exclusive_dur=5, inter_thread_dep=None)
    nodes: list[dict] = []
    for n in host:
        nodes.append(n)
        if n["name"] == attach_to:
            nodes.append(_kernel_copy(n, "ncclDevKernel_AllReduce_Sum_f32_RING_LL", pg))
    # Dense ids in emission order; a kernel copy's ctrl_deps names its host op, which precedes it.
    new_of: dict[int, int] = {}
    for new_id, n in enumerate(nodes):
        is_kernel = "cat" in n
        n["ctrl_deps"] = new_of.get(n["ctrl_deps"], 0) if is_kernel else n["ctrl_deps"]
        if not is_kernel:
            new_of[n["id"]] = new_id
        n["id"] = new_id
    for n in nodes:
        if "cat" not in n:
            n["ctrl_deps"] = new_of[n["ctrl_deps"]]
    return {"schema": "1.1.0-chakra.0.0.4", "pid": 9, "time": "t", "start_ts": 0, "finish_ts": 1, "nodes": nodes}


def _convert(obj: dict):
    conv = convert_trace(parse_host_trace(obj, "etplus.json"), 0)
    return conv, [n for n in conv.nodes if n.type == schema.COMM_COLL_NODE]


@pytest.mark.parametrize("attach_to", ["nccl:all_reduce", "record_param_comms", "c10d::allreduce_"])
def test_one_collective_per_nccl_kernel_wherever_upstream_attached_it(attach_to: str):
    conv, comms = _convert(_upstream_etplus(attach_to))
    assert [(n.name, get_attr(n, "comm_type"), get_attr(n, "comm_size"), get_attr(n, "pg_name")) for n in comms] == [
        ("ncclDevKernel_AllReduce_Sum_f32_RING_LL", schema.ALL_REDUCE, 4096, "0")
    ]
    assert get_attr(comms[0], "stream") == 20 and comms[0].duration_micros == 40
    assert rank_problems(conv.nodes) == []


@pytest.mark.parametrize(
    "kernel_name",
    [
        "ncclDevKernel_AllGather_RING_LL",
        "void ncclKernel_AllGather_RING_LL_Sum_float(ncclWorkElem)",
        "void ncclKernel_AllGather_RING_LL_Sum_float(ncclDevKernelArgsStorage<4096ul>)",
    ],
)
def test_an_unclaimed_kernel_takes_upstreams_pg_name_key_and_copied_inputs(kernel_name: str):
    """No record above the kernel: upstream's top-level ``pg_name`` and the inputs copied from its host op count.

    §5.2 step 7: the linker adds ``pg_name`` to ``ncclDevKernel`` nodes; §6.1/§6.2: the converter
    reads it (default "") and sums the kernel's tensor inputs (its host op's, copied) into comm_size.
    §6.2: a kernel is a collective when its name *contains* ``ncclKernel``/``ncclDevKernel``.
    """
    pg_init = _host(2, "## process_group:init ##", 1)
    pg_init["inputs"] = {
        "values": [
            '[{"pg_name": "0", "ranks": [], "group_size": 2}, {"pg_name": "1", "ranks": [0, 1], "group_size": 2}]'
        ],
        "shapes": [[]],
        "types": ["String"],
    }
    op = _host(3, "aten::cat", 1, [[TENSOR]], ts=100, inclusive_dur=5, exclusive_dur=5)
    kernel = {**_kernel_copy(op, kernel_name, "1"), "id": 4}
    nodes = [
        _host(0, "[pytorch|profiler|execution_trace|process]", 0),
        _host(1, "[pytorch|profiler|execution_trace|thread]", 0),
        pg_init,
        op,
        kernel,
    ]
    _, comms = _convert({"schema": "1.1.0-chakra.0.0.4", "pid": 9, "nodes": nodes})
    assert [(get_attr(n, "comm_type"), get_attr(n, "comm_size"), get_attr(n, "pg_name")) for n in comms] == [
        (schema.ALL_GATHER, 4096, "1")
    ]


@pytest.mark.parametrize("version", ["1.0.3-chakra.0.0.4", "1.0.4-chakra.0.0.4", "1.1.1-chakra.1.0.0"])
def test_positional_only_records_of_every_nested_schema(version: str):
    """§2.2/§2.4 pinned: versions upstream rejects or crashes on; records without comm attrs.

    ``seq`` as ``[seq, isP2P]``, a ``wait`` without a tensor list (stays COMP), a 5-tuple tensor
    without device, a group-local peer mapped through the ``## process_group:init ##`` ranks.
    """
    pg_init = _host(2, "## process_group:init ##", 1)
    groups = [{"pg_name": "0", "ranks": [], "group_size": 4}, {"pg_name": "1", "ranks": [2, 3], "group_size": 2}]
    pg_init["inputs"] = {"values": [json.dumps(groups)], "shapes": [[]], "types": ["String"]}
    nodes = [
        _host(0, "[pytorch|profiler|execution_trace|process]", 0),
        _host(1, "[pytorch|profiler|execution_trace|thread]", 0),
        pg_init,
        _host(3, "record_param_comms", 1, [[TENSOR], [7, True], ["1", "undefined"], 1, "send", [], [], -1, -1, 2]),
        _host(4, "record_param_comms", 1, [[7, True], ["", ""], 0, "wait", [], [], -1, -1, 1]),
        _host(5, "record_param_comms", 1, [[[300, 301, 0, 256, 2]], 8, ["1", "undefined"], 0, "_allgather_base"]),
    ]
    conv, _ = _convert({"schema": version, "pid": 1, "nodes": nodes})
    out = {n.id: n for n in conv.nodes}
    send, wait, gather = out[3], out[4], out[5]
    assert send.type == schema.COMM_SEND_NODE
    assert [get_attr(send, k) for k in ("comm_size", "comm_src", "comm_dst", "comm_tag", "pg_name")] == [
        4096,
        0,
        3,
        0,
        "1",
    ]
    assert wait.type == schema.COMP_NODE
    assert [get_attr(gather, k) for k in ("comm_type", "comm_size", "pg_name")] == [schema.ALL_GATHER, 512, "1"]
