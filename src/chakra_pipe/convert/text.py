"""ASTRA-sim 1.0 text workloads → Chakra rank sets, edge for edge like upstream's ``Text`` converter.

Input (chakra-format.md §7): line 1 holds the parallelism policy (``MICRO``, ``DATA``, ``MODEL``,
``HYBRID_DATA_MODEL``, ``HYBRID_MODEL_DATA``, ``HYBRID_DLRM``, ``HYBRID_DLRM_ENHANCED``; the DLRM
policies add ``last_bottom_layer``), line 2 the layer count, then one line per layer::

    name  reserved  fwd_time fwd_comm fwd_size  ig_time ig_comm ig_size  wg_time wg_comm wg_size  wg_update

Every NPU gets the same graph in ``PREFIX.<npu>.et``; node ids come from one counter that is not
reset between files, compute nodes carry only ``duration_micros`` (1.0's cycles read as µs) and
collectives only ``comm_type``/``comm_size``, exactly as upstream writes them, so results can be
compared with workloads converted by upstream.

Decisions where upstream is wrong or silent:

* ``NONE`` comm types become ``ALL_REDUCE`` nodes by default (upstream parity — a zero-byte
  all-reduce still costs time in ASTRA-sim because of its minimum chunk size). ``skip_none=True``
  fixes it: no node is written and edges to it go to the node it would have depended on.
* Any other unknown comm type (upstream silently reads it as ``ALL_REDUCE``) is an error: it is a
  typo, not a policy.
* Where upstream would crash or link to a node of a previous NPU file (a layer count on line 2
  that disagrees with the layer lines under ``MODEL``/``HYBRID_*``, a DLRM ``last_bottom_layer``
  whose forward all-to-all does not exist yet), we stop with an error naming the line.
* Trailing blank lines are ignored; a blank line followed by more layers is an error.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..digits import is_int_text
from ..errors import InputError
from ..et import schema
from ..et.attrs import set_attr
from ..et.collectives import ASTRA_SIM
from ..et.framing import write_trace
from ..et.traceset import clear_rank_set, write_order
from ..generate.limits import check_output

POLICIES = ("MICRO", "DATA", "MODEL", "HYBRID_DATA_MODEL", "HYBRID_MODEL_DATA", "HYBRID_DLRM", "HYBRID_DLRM_ENHANCED")
COMM_TYPES = {c.text_name: c.comm_type for c in ASTRA_SIM}
NONE = "NONE"
SCHEMA = "1.0.2-chakra.1.0.0"  # what upstream's text converter writes into GlobalMetadata
_INT_COLUMNS = {
    2: "forward compute time",
    4: "forward comm size",
    5: "input-grad compute time",
    7: "input-grad comm size",
    8: "weight-grad compute time",
    10: "weight-grad comm size",
}
_MAX = (1 << 63) - 1


@dataclass(frozen=True)
class Layer:
    """One layer line; ``line`` is its 1-based line number for error messages."""

    name: str
    line: int
    fwd_time: int
    fwd_comm: str
    fwd_size: int
    ig_time: int
    ig_comm: str
    ig_size: int
    wg_time: int
    wg_comm: str
    wg_size: int


@dataclass(frozen=True)
class TextWorkload:
    path: str
    text: str
    policy: str
    declared_layers: int
    last_bottom_layer: int | None
    layers: list[Layer]


def parse_text(path: str | os.PathLike) -> TextWorkload:
    """Parse and check a text workload; every error names the file and line."""
    file = str(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise InputError(f"cannot read: {exc.strerror}", file=file) from None
    except UnicodeDecodeError as exc:
        raise InputError(f"not UTF-8 text (byte {exc.start})", file=file) from None
    lines = text.splitlines()
    head = lines[0].split() if lines else []
    if not head:
        raise InputError("missing parallelism policy", file=file, where="line 1")
    policy = head[0]
    if policy not in POLICIES:
        raise InputError(
            f"unsupported parallelism policy {policy!r} (supported: {', '.join(POLICIES)})", file=file, where="line 1"
        )
    last_bottom = None
    if policy.startswith("HYBRID_DLRM"):
        if len(head) < 2 or not is_int_text(head[1], signed=True):
            raise InputError(
                f"{policy} needs last_bottom_layer (an integer) as the second token", file=file, where="line 1"
            )
        last_bottom = int(head[1])
    if len(lines) < 2 or not is_int_text(lines[1].strip(), signed=True) or int(lines[1]) < 0:
        raise InputError("expected the layer count (a non-negative integer)", file=file, where="line 2")
    layers: list[Layer] = []
    blank_at = None
    for number, raw in enumerate(lines[2:], start=3):
        if not raw.strip():
            blank_at = blank_at or number
            continue
        if blank_at is not None:
            raise InputError(f"layer line after the blank line {blank_at}", file=file, where=f"line {number}")
        layers.append(_layer(raw, number, file))
    if not layers:
        raise InputError("no layer lines", file=file, where="line 3")
    return TextWorkload(file, text, policy, int(lines[1]), last_bottom, layers)


def _layer(raw: str, number: int, file: str) -> Layer:
    cols = raw.split()
    where = f"line {number}"
    if len(cols) < 12:
        raise InputError(
            f"layer line has {len(cols)} columns, needs 12 (name, reserved, then fwd/ig/wg "
            "time, comm type, comm size, then wg update time)",
            file=file,
            where=where,
        )
    values = {}
    for col, what in _INT_COLUMNS.items():
        if not is_int_text(cols[col], signed=True) or not 0 <= int(cols[col]) <= _MAX:
            raise InputError(
                f"column {col + 1} ({what}) must be a non-negative integer, got {cols[col]!r}", file=file, where=where
            )
        values[col] = int(cols[col])
    for col in (3, 6, 9):
        if cols[col] not in COMM_TYPES and cols[col] != NONE:
            raise InputError(
                f"column {col + 1}: unknown comm type {cols[col]!r} (expected {', '.join(COMM_TYPES)} or NONE)",
                file=file,
                where=where,
            )
    return Layer(
        cols[0], number, values[2], cols[3], values[4], values[5], cols[6], values[7], values[8], cols[9], values[10]
    )


@dataclass
class _Handles:
    """Per-layer node handles; they persist across passes of one NPU ("previous pass" edges)."""

    fwd_comp: object = None
    fwd_comm: object = None
    ig_comp: object = None
    ig_comm: object = None
    wg_comp: object = None
    wg_comm: object = None


@dataclass
class _Emitter:
    """Builds one NPU file's nodes; ``next_id`` continues across files as upstream's counter does."""

    wl: TextWorkload
    skip_none: bool
    next_id: int = 0
    nodes: list = field(default_factory=list)

    def _node(self, name: str, ntype: int, parents: tuple) -> object:
        node = schema.Node(id=self.next_id, name=name, type=ntype)
        self.next_id += 1
        for parent in parents:
            if parent is not None and parent.id not in node.data_deps:
                node.data_deps.append(parent.id)
        self.nodes.append(node)
        return node

    def comp(self, layer: Layer, phase: str, time: int, *parents) -> Any:
        node = self._node(f"COMP_NODE_{layer.name}_{phase}", schema.COMP_NODE, parents)
        node.duration_micros = time  # type: ignore[attr-defined]
        return node

    def comm(self, label: str, comm: str, size: int, *parents) -> object:
        """A collective, or with ``skip_none`` and a ``NONE`` type the first parent in its place."""
        if comm == NONE and self.skip_none:
            return parents[0] if parents else None
        node = self._node(f"COMM_COLL_NODE_{label}_{comm}", schema.COMM_COLL_NODE, parents)
        set_attr(node, "comm_type", COMM_TYPES.get(comm, schema.ALL_REDUCE))
        set_attr(node, "comm_size", size)
        return node

    def need(self, handle, what: str, line: int) -> object:
        if handle is None:
            raise InputError(
                f"{self.wl.policy}: {what} does not exist at this point (upstream would crash or "
                "link to another NPU's node)",
                file=self.wl.path,
                where=f"line {line}",
            )
        return handle


def _micro(e: _Emitter, layers: list[Layer], h: list[_Handles]) -> None:
    for layer in layers:
        e.comm(layer.name, layer.wg_comm, layer.wg_size)


def _data(e: _Emitter, layers: list[Layer], h: list[_Handles]) -> None:
    fwd = None
    for i, layer in enumerate(layers):
        fwd = e.comp(layer, "FWD", layer.fwd_time, h[i - 1].fwd_comp if i else None, h[i].wg_comm)
        h[i].fwd_comp = fwd
    n = len(layers)
    for i in reversed(range(n)):
        layer = layers[i]
        parent = fwd if i == n - 1 else h[i + 1].ig_comp
        wg = e.comp(layer, "BWD_WG", layer.wg_time, parent)
        h[i].wg_comm = e.comm(layer.name, layer.wg_comm, layer.wg_size, wg)
        if i:
            h[i].ig_comp = e.comp(layer, "BWD_IG", layer.ig_time, wg)


def _model_like(e: _Emitter, layers: list[Layer], h: list[_Handles], wg_comm: bool, ig_label: str) -> None:
    """MODEL, and with ``wg_comm`` the two HYBRID policies (which add weight-gradient collectives)."""
    fwd_comm = None
    for i, layer in enumerate(layers):
        prev_comm = h[i - 1].fwd_comm if i else None
        deps = (h[i].wg_comm, prev_comm) if wg_comm else (prev_comm, h[i].wg_comp)
        fwd = e.comp(layer, "FWD", layer.fwd_time, *deps)
        h[i].fwd_comp = fwd
        fwd_comm = h[i].fwd_comm = e.comm(layer.name, layer.fwd_comm, layer.fwd_size, fwd)
    n, declared = len(layers), e.wl.declared_layers
    for idx, i in enumerate(reversed(range(n))):
        layer = layers[i]
        if idx == 0:
            ig = e.comp(layer, "BWD_IG", layer.ig_time, fwd_comm)
        else:
            above = h[i + 1]
            what = (
                f"layer {layers[i + 1].name}'s input-gradient collective (line 2 declares {declared} layers, "
                f"{n} follow)"
            )
            ig = e.comp(layer, "BWD_IG", layer.ig_time, above.wg_comp, e.need(above.ig_comm, what, 2))
        h[i].ig_comm = None  # never reuse a previous pass's node: upstream would crash there
        if idx != declared - 1:  # upstream counts with line 2's number, not the layer lines
            h[i].ig_comm = e.comm(layer.name + ig_label, layer.ig_comm, layer.ig_size, ig)
        wg = h[i].wg_comp = e.comp(layer, "BWD_WG", layer.wg_time, ig)
        if wg_comm:
            h[i].wg_comm = e.comm(layer.name, layer.wg_comm, layer.wg_size, wg)


def _dlrm(e: _Emitter, layers: list[Layer], h: list[_Handles]) -> None:
    lbl = e.wl.last_bottom_layer
    fwd = None
    for i, layer in enumerate(layers):
        deps = [h[i].wg_comm if h[i].wg_comm is not None else h[i].wg_comp, h[i - 1].fwd_comp if i else None]
        if i == lbl:
            deps.append(
                e.need(
                    h[0].fwd_comm,
                    f"layer {layers[0].name}'s forward ALLTOALL (last_bottom_layer {lbl})",
                    layers[0].line,
                )
            )
        fwd = h[i].fwd_comp = e.comp(layer, "FWD", layer.fwd_time, *deps)
        if layer.fwd_comm == "ALLTOALL":
            h[i].fwd_comm = e.comm(layer.name, layer.fwd_comm, layer.fwd_size, fwd)
    n = len(layers)
    for i in reversed(range(n)):
        layer = layers[i]
        if i == n - 1:
            wg = e.comp(layer, "BWD_WG", layer.wg_time, fwd)
        else:
            wg = e.comp(layer, "BWD_WG", layer.wg_time, h[i + 1].ig_comp, h[i].ig_comm)
        h[i].wg_comp = wg
        if layer.wg_comm != NONE:
            h[i].wg_comm = e.comm(layer.name, layer.wg_comm, layer.wg_size, wg)
        ig = None
        if i:
            ig = h[i].ig_comp = e.comp(layer, "BWD_IG", layer.ig_time, wg)
        if i == lbl + 1:  # type: ignore[operator]
            first = layers[0]
            parent = e.need(ig, f"an input-gradient node for last_bottom_layer {lbl}", 1)
            h[0].ig_comm = e.comm(first.name, first.ig_comm, first.ig_size, parent)


_POLICY = {
    "MICRO": _micro,
    "DATA": _data,
    "MODEL": lambda e, layers, h: _model_like(e, layers, h, wg_comm=False, ig_label=""),
    "HYBRID_DATA_MODEL": lambda e, layers, h: _model_like(e, layers, h, wg_comm=True, ig_label="_IG_COMM_"),
    "HYBRID_MODEL_DATA": lambda e, layers, h: _model_like(e, layers, h, wg_comm=True, ig_label=""),
    "HYBRID_DLRM": _dlrm,
    "HYBRID_DLRM_ENHANCED": _dlrm,
}


def convert_text(
    input_path: str | os.PathLike,
    npus: int,
    out_prefix: str | os.PathLike,
    num_passes: int = 1,
    skip_none: bool = False,
    *,
    allow_large: bool = False,
) -> list[Path]:
    """Write ``PREFIX.<npu>.et`` for ``npus`` NPUs from an ASTRA-sim 1.0 text workload."""
    if npus < 1:
        raise InputError(f"need at least 1 NPU, got {npus}", where="--npus")
    if num_passes < 1:
        raise InputError(f"need at least 1 pass, got {num_passes}", where="--passes")
    check_output(npus, npus * num_passes, "--npus" if npus >= num_passes else "--passes", allow_large=allow_large)
    wl = parse_text(input_path)
    metadata = schema.GlobalMetadata()
    set_attr(metadata, "schema", SCHEMA)
    set_attr(metadata, "input_file", wl.text)
    build = _POLICY[wl.policy]
    probe = _Emitter(wl, skip_none)  # one pass of one NPU sizes the whole job (a scratch emitter: ids go on)
    build(probe, wl.layers, [_Handles() for _ in wl.layers])
    check_output(
        npus,
        npus * num_passes * len(probe.nodes),
        "--npus" if npus >= num_passes else "--passes",
        allow_large=allow_large,
    )
    emitter = _Emitter(wl, skip_none)
    nodes_per_npu: list[list] = []
    for _ in range(npus):
        emitter.nodes = []
        handles = [_Handles() for _ in wl.layers]
        for _ in range(num_passes):
            build(emitter, wl.layers, handles)
        nodes_per_npu.append(emitter.nodes)
    clear_rank_set(out_prefix)
    for npu in write_order(npus):  # written only once every NPU converted cleanly
        write_trace(f"{out_prefix}.{npu}.et", metadata, nodes_per_npu[npu])
    return [Path(f"{out_prefix}.{npu}.et") for npu in range(npus)]
