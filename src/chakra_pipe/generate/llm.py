"""One training step of a transformer LLM as a Chakra rank set (Megatron-style 3-D parallelism).

Per rank the trace is the program a Megatron worker runs, in order:

* **1F1B pipeline schedule** per stage ``s`` of ``pp``: ``min(pp - s - 1, M)`` warm-up forwards,
  then alternating forward/backward, then the remaining backwards. Stage boundaries exchange
  activations (forward, tag ``2m``) and activation gradients (backward, tag ``2m + 1``) with
  ``COMM_SEND``/``COMM_RECV`` to the rank of the same (tp_i, dp_i) in the neighbouring stage.
* **Per layer**: attention then MLP, each a forward ``COMP_NODE`` followed by a tensor-parallel
  all-reduce of the activations (Megatron's ``g`` operator); in backward the MLP then the attention
  ``COMP_NODE`` (2× the forward FLOPs) each followed by the TP all-reduce of the input gradient
  (Megatron's ``f``). MoE layers wrap the experts in an all-to-all dispatch and combine over the
  ``ep`` group (forward and backward).
* **Data parallelism**: gradients accumulate over microbatches; during the last microbatch's
  backward they fill buckets (``bucket_mb`` MiB, in backward order, as DDP/Megatron do) and each
  full bucket is all-reduced over the ``dp`` group while backward continues (``zero=1``:
  reduce-scatter now, all-gather of the updated shard after the step). MoE expert gradients use
  their own buckets over the ``edp`` group.

Execution order is made explicit so ASTRA-sim cannot hang: each rank's program is one dependency
chain, and every collective and send additionally depends on the previous one, so all members of a
group issue the same collectives in the same order, one at a time (ASTRA-sim has one comm slot).
Gradient buckets hang off the chain (only the next communication waits for them), which is where
their overlap with backward compute comes from.

Compute nodes carry ``num_ops`` (FLOPs, see :mod:`.models`), ``tensor_size`` (bytes touched:
weights + input + output + inner activations, doubled in backward) and ``duration_micros`` from a
roofline device model: ``ceil(max(num_ops / peak, tensor_size / mem_bw))`` µs, at least 1.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path

from ..atomic import atomic_open
from ..console import track
from ..errors import InputError
from ..et import schema
from ..et.attrs import set_attr
from ..et.process_groups import format_process_groups
from ..et.traceset import COMM_GROUPS_SUFFIX, WORLD_PG, clear_rank_set, write_comm_groups, write_order
from .encode import attr_record, framed
from .layout import Layout
from .limits import check_output
from .models import DTYPE_BYTES, ModelSpec

GENERATOR_VERSION = "1.0.0"
BACKEND = "cuda:nccl"


@dataclass(frozen=True)
class TrainingSpec:
    """Everything that shapes the generated step besides the model."""

    layout: Layout
    microbatches: int
    global_batch: int
    dtype: str = "bf16"
    zero: int = 0
    peak_tflops: float = 989.0  # H100 SXM dense BF16
    mem_bw_gbps: float = 3350.0  # H100 SXM HBM3, decimal GB/s (ASTRA-sim's local-mem-bw unit)
    bucket_mb: float = 25.0  # PyTorch DDP's default bucket cap, MiB
    metadata_node: bool = True
    recompute: bool = False  # full activation recomputation: each layer's forward re-runs before its backward

    def __post_init__(self) -> None:
        if self.microbatches < 1:
            raise InputError(f"microbatches must be >= 1, got {self.microbatches}", where="--microbatches")
        per_replica = self.layout.dp * self.microbatches
        if self.global_batch < 1 or self.global_batch % per_replica:
            raise InputError(
                f"global batch {self.global_batch} is not a positive multiple of dp × microbatches = {per_replica}",
                where="--global-batch",
            )
        if self.dtype not in DTYPE_BYTES:
            raise InputError(f"unknown dtype {self.dtype!r} (choose from {', '.join(DTYPE_BYTES)})", where="--dtype")
        if self.zero not in (0, 1):
            raise InputError(f"zero must be 0 or 1, got {self.zero}", where="--zero")
        for key, flag in (("peak_tflops", "--peak-tflops"), ("mem_bw_gbps", "--mem-bw"), ("bucket_mb", "--bucket-mb")):
            if not (getattr(self, key) > 0 and math.isfinite(getattr(self, key))):
                raise InputError(f"must be a positive number, got {getattr(self, key)}", where=flag)

    @property
    def micro_batch_size(self) -> int:
        return self.global_batch // (self.layout.dp * self.microbatches)

    @property
    def dtype_bytes(self) -> int:
        return DTYPE_BYTES[self.dtype]

    def duration_micros(self, flops: int, nbytes: int) -> int:
        seconds = max(flops / (self.peak_tflops * 1e12), nbytes / (self.mem_bw_gbps * 1e9))
        return max(1, math.ceil(seconds * 1e6))


# --------------------------------------------------------------------------------------------
# Stage templates: the nodes of one pipeline stage with rank-dependent attributes left symbolic.
# --------------------------------------------------------------------------------------------


@dataclass
class TemplateNode:
    """A node serialized without its trailing rank-dependent attributes.

    ``late`` lists ``(attribute, symbol)`` pairs appended per rank: symbols are a group role
    (``tp``, ``dp``, ``ep``, ``edp`` → that rank's ``pg_name``) or ``self``/``prev``/``next``
    (→ a rank number for send/recv peers).
    """

    body: bytes
    late: tuple[tuple[str, str], ...] = ()

    def __post_init__(self) -> None:
        # A rank-independent node is framed once and reused for every rank of the stage.
        self.whole = None if self.late else framed(self.body)


@dataclass
class _Buckets:
    """Gradient buckets of one reduction group, filled in backward order."""

    role: str
    group_size: int
    cap: int
    pending: int = 0
    sizes: list[int] = field(default_factory=list)

    def padded(self, nbytes: int) -> int:
        """Bucket bytes rounded up to a multiple of the group size, so a ZeRO shard is whole."""
        return -(-nbytes // self.group_size) * self.group_size


class StageBuilder:
    """Builds the node template of one pipeline stage (shared by all its tp × dp ranks)."""

    def __init__(self, model: ModelSpec, spec: TrainingSpec, stage: int, first_layer: int, n_layers: int):
        self.model, self.spec, self.stage = model, spec, stage
        self.layers = range(first_layer, first_layer + n_layers)
        lay = spec.layout
        self.first, self.last = stage == 0, stage == lay.pp - 1
        self.tp, self.ep = lay.tp, lay.ep
        self.expert_parallel = model.moe and lay.ep > 1
        self.tokens = spec.micro_batch_size * model.seq
        self.b = spec.dtype_bytes
        self.act_bytes = self.tokens * model.hidden * self.b  # activations of a microbatch
        self.a2a_bytes = self.tokens * model.top_k * model.hidden * self.b  # MoE token copies
        self.nodes: list[TemplateNode] = []
        self.next_id = 1 if spec.metadata_node else 0
        self.tail: int | None = None  # last node of the program chain
        self.last_comm: int | None = None  # last collective or send (they share ASTRA-sim's comm slot)
        self.comm_off_chain = False  # whether last_comm hangs off the program chain
        self.flops = 0  # num_ops written for one rank of this stage
        self._tails: dict[tuple, bytes] = {}  # (duration, attributes) → their serialized fields
        self._group_sizes: dict[str, int] = {}
        cap = max(1, int(spec.bucket_mb * (1 << 20)))
        self.buckets = {"dp": _Buckets("dp", lay.dp, cap)}
        if self.expert_parallel and lay.dp // lay.ep > 1:
            self.buckets["edp"] = _Buckets("edp", lay.dp // lay.ep, cap)

    # -- node emission ----------------------------------------------------------------------------
    def _emit(
        self,
        name: str,
        ntype: int,
        attrs: list[tuple[str, object]],
        late: tuple = (),
        extra_deps: tuple[int | None, ...] = (),
        chain: bool = True,
        comm: bool = False,
        duration: int = 0,
    ) -> int:
        nid = self.next_id
        self.next_id += 1
        # A communication waits for the previous one; when that one is on the program chain it is
        # already an ancestor of ``tail`` and the edge would be redundant.
        comm_dep = self.last_comm if comm and (self.comm_off_chain or not chain) else None
        deps: list[int] = []
        for dep in ((self.tail,) if chain else ()) + extra_deps + (comm_dep,):
            if dep is not None and dep not in deps:
                deps.append(dep)
        # Serialized in field-number pieces (id, name + type, data_deps, duration + attributes), each the
        # protobuf runtime's own bytes, so their concatenation is the whole node's canonical form. The
        # last piece repeats for every microbatch and is built once: setting attributes was most of a
        # 1,024-GPU layout's generation time in a search.
        tail_key = (duration, tuple(attrs))
        tail = self._tails.get(tail_key)
        if tail is None:
            node = schema.Node(duration_micros=duration)
            for key, value in attrs:
                set_attr(node, key, value)
            tail = self._tails[tail_key] = node.SerializeToString()
        head = schema.Node(id=nid, name=name, type=ntype, data_deps=deps).SerializeToString()
        self.nodes.append(TemplateNode(head + tail, late))
        if chain:
            self.tail = nid
        if comm:
            self.last_comm, self.comm_off_chain = nid, not chain
        return nid

    def comp(self, name: str, flops: int, nbytes: int) -> int:
        self.flops += flops
        return self._emit(
            name,
            schema.COMP_NODE,
            [("is_cpu_op", False), ("num_ops", flops), ("tensor_size", nbytes)],
            duration=self.spec.duration_micros(flops, nbytes),
        )

    def coll(
        self,
        name: str,
        comm_type: int,
        size: int,
        role: str,
        chain: bool = True,
        extra_deps: tuple[int | None, ...] = (),
    ) -> int | None:
        """A collective over ``role``'s group; skipped when the group is a single rank."""
        if role not in self._group_sizes:  # a layout method that builds the member list: once per role
            self._group_sizes[role] = self.spec.layout.group_size(role)
        if self._group_sizes[role] == 1:
            return None
        return self._emit(
            name,
            schema.COMM_COLL_NODE,
            [("is_cpu_op", False), ("comm_type", comm_type), ("comm_size", size)],
            late=(("pg_name", role),),
            chain=chain,
            comm=True,
            extra_deps=extra_deps,
        )

    def send(self, name: str, peer: str, tag: int, size: int) -> int:
        return self._emit(
            name,
            schema.COMM_SEND_NODE,
            [("is_cpu_op", False), ("comm_size", size), ("comm_tag", tag)],
            late=(("comm_src", "self"), ("comm_dst", peer)),
            comm=True,
        )

    def recv(self, name: str, peer: str, tag: int, size: int) -> int:
        return self._emit(
            name,
            schema.COMM_RECV_NODE,
            [("is_cpu_op", False), ("comm_size", size), ("comm_tag", tag)],
            late=(("comm_src", peer), ("comm_dst", "self")),
        )

    # -- sizes ----------------------------------------------------------------------------------
    def _split(self, n: int) -> int:
        """This rank's share of a tensor-parallel quantity."""
        return n // self.tp

    def _attn_cost(self) -> tuple[int, int]:
        m, t = self.model, self.tokens
        weights = self._split(m.attn_params)
        touched = weights + 2 * t * m.hidden + self._split(t * m.qkv_out + t * m.hidden)
        return self._split(m.attn_flops(t)), touched * self.b

    def _mlp_cost(self) -> tuple[int, int]:
        m, t = self.model, self.tokens
        experts_here = m.experts // self.ep if m.moe else 1
        weights = self._split(experts_here * m.expert_params + m.router_params)
        inner = t * m.ffn * m.mlp_mats * (m.top_k if m.moe else 1)
        touched = weights + 2 * t * m.hidden + self._split(inner)
        return self._split(m.mlp_flops(t)), touched * self.b

    def _head_cost(self) -> tuple[int, int]:
        m, t = self.model, self.tokens
        touched = self._split(m.embedding_params) + t * m.hidden + self._split(t * m.vocab)
        return self._split(m.head_flops(t)), touched * self.b

    # -- gradient buckets -----------------------------------------------------------------------
    def _grads(self, role: str, nbytes: int, producer: int) -> None:
        """Add ``nbytes`` of ready gradients; launch the bucket's reduction once it is full."""
        buckets = self.buckets.get(role)
        if buckets is None or buckets.group_size == 1:
            return
        buckets.pending += nbytes
        if buckets.pending >= buckets.cap:
            self._reduce(buckets, producer)

    def _reduce(self, buckets: _Buckets, producer: int) -> None:
        if not buckets.pending:
            return
        size = buckets.padded(buckets.pending) if self.spec.zero else buckets.pending
        index = len(buckets.sizes)
        buckets.sizes.append(size)
        buckets.pending = 0
        kind = schema.REDUCE_SCATTER if self.spec.zero else schema.ALL_REDUCE
        verb = "reduce_scatter" if self.spec.zero else "all_reduce"
        self.coll(
            f"grad.{buckets.role}.bucket{index}.{verb}", kind, size, buckets.role, chain=False, extra_deps=(producer,)
        )

    def _weight_grads(self, producer: int, dense: int, expert: int = 0) -> None:
        """Route a sub-layer's gradients: expert weights to the edp buckets when EP splits them."""
        b = self.b
        if self.expert_parallel:  # experts live on one EP rank: reduce them over edp only
            self._grads("edp", expert * b, producer)
            self._grads("dp", dense * b, producer)
        else:
            self._grads("dp", (dense + expert) * b, producer)

    # -- the program ----------------------------------------------------------------------------
    def schedule(self) -> list[tuple[str, int]]:
        """1F1B order of ``("F"|"B", microbatch)`` for this stage."""
        m, pp = self.spec.microbatches, self.spec.layout.pp
        warmup = min(pp - self.stage - 1, m)
        order = [("F", i) for i in range(warmup)]
        for i in range(m - warmup):
            order += [("F", warmup + i), ("B", i)]
        order += [("B", i) for i in range(m - warmup, m)]
        return order

    def build(self) -> list[TemplateNode]:
        last_mb = self.spec.microbatches - 1
        for phase, mb in self.schedule():
            if phase == "F":
                self.forward(mb)
            else:
                self.backward(mb, grads=mb == last_mb)
        if self.spec.zero:
            for buckets in self.buckets.values():
                for i, size in enumerate(buckets.sizes):
                    self.coll(
                        f"param.{buckets.role}.bucket{i}.all_gather",
                        schema.ALL_GATHER,
                        size // buckets.group_size,
                        buckets.role,
                        chain=False,
                    )
        return self.nodes

    def _layer_forward(self, p: str, phase: str) -> None:
        """One layer's forward (``phase`` "fwd", or "recompute" when re-run before its backward)."""
        act, a2a = self.act_bytes, self.a2a_bytes
        self.comp(f"{p}.attn.{phase}", *self._attn_cost())
        self.coll(f"{p}.attn.{phase}.tp_all_reduce", schema.ALL_REDUCE, act, "tp")
        if self.expert_parallel:
            self.coll(f"{p}.moe.{phase}.dispatch", schema.ALL_TO_ALL, a2a, "ep")
            self.comp(f"{p}.mlp.{phase}", *self._mlp_cost())
            self.coll(f"{p}.moe.{phase}.combine", schema.ALL_TO_ALL, a2a, "ep")
        else:
            self.comp(f"{p}.mlp.{phase}", *self._mlp_cost())
        self.coll(f"{p}.mlp.{phase}.tp_all_reduce", schema.ALL_REDUCE, act, "tp")

    def forward(self, mb: int) -> None:
        act = self.act_bytes
        if not self.first:
            self.recv(f"mb{mb}.fwd.recv_activation", "prev", 2 * mb, act)
        for layer in self.layers:
            self._layer_forward(f"mb{mb}.layer{layer}", "fwd")
        if self.last:
            self.comp(f"mb{mb}.head.fwd", *self._head_cost())
        else:
            self.send(f"mb{mb}.fwd.send_activation", "next", 2 * mb, act)

    def backward(self, mb: int, grads: bool) -> None:
        m, tp, act, a2a = self.model, self.tp, self.act_bytes, self.a2a_bytes
        if self.last:
            flops, nbytes = self._head_cost()
            head = self.comp(f"mb{mb}.head.bwd", 2 * flops, 2 * nbytes)
            if grads:
                self._weight_grads(head, m.embedding_params // tp)
        else:
            self.recv(f"mb{mb}.bwd.recv_gradient", "next", 2 * mb + 1, act)
        for layer in reversed(self.layers):
            p = f"mb{mb}.layer{layer}"
            if self.spec.recompute:
                self._layer_forward(p, "recompute")
            flops, nbytes = self._mlp_cost()
            if self.expert_parallel:
                self.coll(f"{p}.moe.bwd.combine", schema.ALL_TO_ALL, a2a, "ep")
                mlp = self.comp(f"{p}.mlp.bwd", 2 * flops, 2 * nbytes)
                self.coll(f"{p}.moe.bwd.dispatch", schema.ALL_TO_ALL, a2a, "ep")
            else:
                mlp = self.comp(f"{p}.mlp.bwd", 2 * flops, 2 * nbytes)
            self.coll(f"{p}.mlp.bwd.tp_all_reduce", schema.ALL_REDUCE, act, "tp")
            if grads:
                experts = m.experts // self.ep * m.expert_params // tp if m.moe else 0
                dense = m.router_params // tp if m.moe else m.expert_params // tp
                self._weight_grads(mlp, dense, experts)
            flops, nbytes = self._attn_cost()
            attn = self.comp(f"{p}.attn.bwd", 2 * flops, 2 * nbytes)
            self.coll(f"{p}.attn.bwd.tp_all_reduce", schema.ALL_REDUCE, act, "tp")
            if grads:
                self._weight_grads(attn, m.attn_params // tp)
        if not self.first:
            self.send(f"mb{mb}.bwd.send_gradient", "prev", 2 * mb + 1, act)
        if grads:
            if self.first:
                self._weight_grads(self.tail, m.embedding_params // tp)  # type: ignore[arg-type]
            for buckets in self.buckets.values():
                self._reduce(buckets, self.tail)  # type: ignore[arg-type]


# --------------------------------------------------------------------------------------------
# Rank files.
# --------------------------------------------------------------------------------------------


def stage_layers(layers: int, pp: int) -> list[tuple[int, int]]:
    """``(first layer, count)`` per stage: an even split, earlier stages taking the remainder."""
    if layers < pp:
        raise InputError(f"{layers} layers cannot fill {pp} pipeline stages", where="--pp")
    base, extra = divmod(layers, pp)
    out, first = [], 0
    for s in range(pp):
        count = base + (1 if s < extra else 0)
        out.append((first, count))
        first += count
    return out


def process_group_table(layout: Layout, rank: int) -> list[dict]:
    """The PyTorch ``## process_group:init ##`` list for ``rank``: the default group + its own groups."""
    groups = [
        {
            "pg_name": WORLD_PG,
            "pg_desc": "default_pg",
            "backend_config": BACKEND,
            "ranks": [],
            "group_size": layout.world,
        }
    ]
    seen = {WORLD_PG}
    for role in layout.active_roles():
        pg = layout.pg_name(role, rank)
        if pg is None or pg in seen:
            continue
        seen.add(pg)
        members = list(layout.members(role, rank))
        groups.append(
            {"pg_name": pg, "pg_desc": role, "backend_config": BACKEND, "ranks": members, "group_size": len(members)}
        )
    for g in groups:
        g["group_count"] = len(layout.group_ids) + 1
    return groups


def metadata_node(layout: Layout, rank: int) -> bytes:
    """Serialized METADATA node (id 0, no deps, no children) that ASTRA-sim parses for groups.

    ASTRA-sim strips two characters from each end of ``inputs.values`` and JSON-parses the rest,
    so the value must be exactly ``['<json>']`` with no quote or backslash inside the JSON.
    """
    node = schema.Node(id=0, name="## process_group:init ##", type=schema.METADATA_NODE)
    node.inputs.values = format_process_groups(process_group_table(layout, rank), compact=True)
    node.inputs.shapes = "[[]]"
    node.inputs.types = "['String']"
    return node.SerializeToString()


def global_metadata(model: ModelSpec, spec: TrainingSpec) -> bytes:
    """GlobalMetadata with the generator's parameters as provenance (no timestamps: reproducible)."""
    md = schema.GlobalMetadata(version=GENERATOR_VERSION)
    set_attr(md, "generator", "chakra-pipe generate llm")
    # ``recompute`` is recorded only when on, so traces generated before it existed keep their bytes.
    params = {
        "model": asdict(model),
        **{k: v for k, v in asdict(spec).items() if k != "layout" and (k != "recompute" or v)},
        "dp": spec.layout.dp,
        "tp": spec.layout.tp,
        "pp": spec.layout.pp,
        "ep": spec.layout.ep,
    }
    set_attr(md, "config", json.dumps(params, sort_keys=True))
    return framed(md.SerializeToString())


def rank_records(template: list[TemplateNode], layout: Layout, rank: int) -> Iterator[bytes]:
    """The framed node records of ``rank``: template bodies + its pg names and peers."""
    values: dict[str, object] = {"self": rank, "prev": rank - layout.stage_stride, "next": rank + layout.stage_stride}
    for role in layout.active_roles():
        values[role] = layout.pg_name(role, rank)
    suffixes: dict[tuple[tuple[str, str], ...], bytes] = {}  # a rank has few distinct late-attribute lists
    for tn in template:
        if tn.whole is not None:
            yield tn.whole
            continue
        suffix = suffixes.get(tn.late)
        if suffix is None:
            suffix = suffixes[tn.late] = b"".join([attr_record(name, values[sym]) for name, sym in tn.late])
        yield framed(tn.body + suffix)


@dataclass
class GeneratedSet:
    """What :func:`generate_llm` wrote and the totals a caller may report."""

    files: list[Path]
    comm_groups_file: Path
    nodes: int
    bytes: int
    flops: int


def check_llm(model: ModelSpec, spec: TrainingSpec, *, allow_large: bool = False, in_memory: bool = False) -> str:
    """The checks ``generate_llm`` makes before writing (the workflow makes them at plan time): a lower
    bound of the output size, then the shape. Returns the option to name if the exact node count, known
    once the templates are built, is too large."""
    layout = spec.layout
    # Every layer of a stage has at least a forward and a backward node per microbatch: a lower bound
    # checked before the templates (whose size grows with it) are built; the exact count after.
    option = "--microbatches" if spec.microbatches > model.layers else "--layers"
    check_output(
        layout.world,
        layout.world * spec.microbatches * 2 * (model.layers // layout.pp),
        option,
        allow_large=allow_large,
        in_memory=in_memory,
    )
    check_shape(model, layout)
    return option


def check_shape(model: ModelSpec, layout: Layout) -> None:
    """Refuse a layout the model cannot be split over (before any work, so planners can ask too)."""
    if model.moe and model.experts % layout.ep:
        raise InputError(f"ep {layout.ep} must divide the {model.experts} experts", where="--ep")
    # Megatron splits attention by heads and the MLP by columns: both must divide evenly over TP.
    for what, value in (("heads", model.heads), ("ffn", model.ffn)):
        if value % layout.tp:
            raise InputError(
                f"tp {layout.tp} must divide the model's {value} {what} (Megatron splits them over TP)", where="--tp"
            )
    stage_layers(model.layers, layout.pp)  # layers must fill every pipeline stage


def build_templates(model: ModelSpec, spec: TrainingSpec) -> tuple[bytes, list[list[TemplateNode]], list[int]]:
    """The GlobalMetadata record, each pipeline stage's node template and its FLOPs."""
    check_shape(model, spec.layout)
    templates: list[list[TemplateNode]] = []
    stage_flops: list[int] = []
    for stage, (first, count) in enumerate(stage_layers(model.layers, spec.layout.pp)):
        builder = StageBuilder(model, spec, stage, first, count)
        templates.append(builder.build())
        stage_flops.append(builder.flops)
    return global_metadata(model, spec), templates, stage_flops


def rank_bytes(header: bytes, templates: list[list[TemplateNode]], spec: TrainingSpec, rank: int) -> bytes:
    """One rank's whole ``.et`` file content."""
    layout = spec.layout
    records = [header]
    if spec.metadata_node:
        records.append(framed(metadata_node(layout, rank)))
    records.extend(rank_records(templates[layout.coords(rank)[2]], layout, rank))
    return b"".join(records)


def generate_llm(
    model: ModelSpec, spec: TrainingSpec, out_prefix: str | os.PathLike, *, allow_large: bool = False
) -> GeneratedSet:
    """Write ``PREFIX.<rank>.et`` for every rank and ``PREFIX.comm_groups.json``."""
    option = check_llm(model, spec, allow_large=allow_large)
    layout = spec.layout
    header, templates, stage_flops = build_templates(model, spec)
    per_rank = [len(templates[layout.coords(r)[2]]) for r in range(layout.world)]
    check_output(layout.world, sum(per_rank), option, allow_large=allow_large)
    clear_rank_set(out_prefix)
    groups_path = write_comm_groups(f"{out_prefix}{COMM_GROUPS_SUFFIX}", layout.comm_groups())
    total_nodes, total_bytes, total_flops = 0, 0, 0
    for rank in track(write_order(layout.world), "generate llm", layout.world, "ranks"):
        stage = layout.coords(rank)[2]
        data = rank_bytes(header, templates, spec, rank)
        path = Path(f"{out_prefix}.{rank}.et")
        with atomic_open(path, "wb", gzip_output=False) as f:
            f.write(data)
        total_nodes += len(templates[stage]) + int(spec.metadata_node)
        total_bytes += len(data)
        total_flops += stage_flops[stage]
    files = [Path(f"{out_prefix}.{rank}.et") for rank in range(layout.world)]
    return GeneratedSet(files, groups_path, total_nodes, total_bytes, total_flops)
