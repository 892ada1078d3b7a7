"""Built-in capture workloads (torch imported here, so only capture pulls it in).

Each model is tiny on purpose: a CPU capture of 2 ranks must take seconds, and what we test is the
trace structure (DDP gradient all-reduces, explicit collectives, p2p), not the arithmetic.
No normalisation layers with buffers: DDP would broadcast them every forward and blur the
one-to-one match between issued and converted collectives.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable

import torch
import torch.distributed as dist
from torch import nn

from .plan import BUILTIN_MODELS, PG_LABEL_PREFIX, PlannedCall, explicit_calls, sub_group_ranks

BATCH = 8


class _ResBlock(nn.Module):
    def __init__(self, ch: int):
        super().__init__()
        self.conv1 = nn.Conv2d(ch, ch, 3, padding=1)
        self.conv2 = nn.Conv2d(ch, ch, 3, padding=1)

    def forward(self, x):
        return torch.relu(x + self.conv2(torch.relu(self.conv1(x))))


class ResNetTiny(nn.Module):
    """Stem conv, one residual block, global pool, classifier (16x16 RGB input)."""

    def __init__(self, ch: int = 8, classes: int = 10):
        super().__init__()
        self.stem = nn.Conv2d(3, ch, 3, padding=1)
        self.block = _ResBlock(ch)
        self.head = nn.Linear(ch, classes)

    def forward(self, x):
        x = self.block(torch.relu(self.stem(x)))
        return self.head(x.mean(dim=(2, 3)))


class GPTTiny(nn.Module):
    """Token + position embedding, one pre-norm transformer block, tied-free LM head."""

    def __init__(self, vocab: int = 64, dim: int = 32, heads: int = 2, seq: int = 16):
        super().__init__()
        self.tok = nn.Embedding(vocab, dim)
        self.pos = nn.Parameter(torch.zeros(seq, dim))
        self.ln1 = nn.LayerNorm(dim)
        self.attn = nn.MultiheadAttention(dim, heads, batch_first=True)
        self.ln2 = nn.LayerNorm(dim)
        self.mlp = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))
        self.head = nn.Linear(dim, vocab)
        self.seq = seq
        self.vocab = vocab

    def forward(self, idx):
        x = self.tok(idx) + self.pos[: idx.shape[1]]
        h = self.ln1(x)
        x = x + self.attn(h, h, h, need_weights=False)[0]
        x = x + self.mlp(self.ln2(x))
        return self.head(x)


def build_model(name: str) -> nn.Module:
    """A fresh, deterministically initialised model (same weights on every rank)."""
    torch.manual_seed(0)
    if name == "mlp":
        return nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 16))
    if name == "resnet-tiny":
        return ResNetTiny()
    if name == "gpt-tiny":
        return GPTTiny()
    raise ValueError(f"unknown built-in model {name!r}; choose one of {', '.join(BUILTIN_MODELS)}")


def gradient_bytes(name: str) -> int:
    """Bytes of all trainable parameters: what DDP all-reduces per step."""
    model = build_model(name)
    return sum(p.numel() * p.element_size() for p in model.parameters() if p.requires_grad)


def _batch(name: str, model: nn.Module, rank: int) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(1000 + rank)
    if name == "mlp":
        return torch.randn(BATCH, 64, generator=g), torch.randn(BATCH, 16, generator=g)
    if name == "resnet-tiny":
        return torch.randn(BATCH, 3, 16, 16, generator=g), torch.randint(0, 10, (BATCH,), generator=g)
    seq, vocab = model.seq, model.vocab
    tokens = torch.randint(0, vocab, (BATCH, seq + 1), generator=g)
    return tokens[:, :-1], tokens[:, 1:]


def _loss(name: str, out: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    if name == "mlp":
        return nn.functional.mse_loss(out, target)
    if name == "resnet-tiny":
        return nn.functional.cross_entropy(out, target)
    return nn.functional.cross_entropy(out.reshape(-1, out.shape[-1]), target.reshape(-1))


def group_name(group) -> str:
    """PyTorch's name of a process group ("0" for the default one), as in ``process_group:init``."""
    return dist.distributed_c10d._get_process_group_name(group or dist.group.WORLD)


def run_call(call: PlannedCall, rank: int, world_size: int, sub_group, device: torch.device) -> None:
    """Execute one planned call inside a ``chakra_pipe.pg:<name>`` label naming its group."""
    group = sub_group if call.group == "sub" else None
    w = world_size
    x = torch.full((call.numel,), float(rank + 1), device=device)
    with torch.profiler.record_function(PG_LABEL_PREFIX + group_name(group)), warnings.catch_warnings():
        # torch 2.13 deprecates the *_tensor names in favour of *_single; older torch lacks those.
        warnings.simplefilter("ignore", FutureWarning)
        if call.kind == "all_reduce":
            dist.all_reduce(x, group=group)
        elif call.kind == "all_gather_into_tensor":
            dist.all_gather_into_tensor(torch.empty(call.numel * w, device=device), x)
        elif call.kind == "reduce_scatter_tensor":
            dist.reduce_scatter_tensor(torch.empty(call.numel // w, device=device), x)
        elif call.kind == "all_to_all_single":
            dist.all_to_all_single(torch.empty_like(x), x)
        elif call.kind == "broadcast":
            dist.broadcast(x, src=call.peer)
        elif call.kind == "send":
            dist.send(x, dst=call.peer, tag=call.tag)
        elif call.kind == "recv":
            dist.recv(x, src=call.peer, tag=call.tag)
        else:
            raise ValueError(f"unknown planned call {call.kind!r}")


def _labelled_allreduce_hook(process_group, bucket):
    """DDP's default all-reduce hook, inside a label naming its process group (see plan.py)."""
    from torch.distributed.algorithms.ddp_comm_hooks.default_hooks import allreduce_hook

    with torch.profiler.record_function(PG_LABEL_PREFIX + group_name(process_group)):
        return allreduce_hook(process_group, bucket)


def make_builtin_step(
    name: str, rank: int, world_size: int, device: torch.device, bucket_mb: float | None = None
) -> Callable[[], None]:
    """Build model, DDP wrapper, optimiser, data and sub-group; return one training step.

    ``bucket_mb`` is DDP's ``bucket_cap_mb`` (None: its default, one bucket for these models); a
    small cap yields several gradient all-reduces per step, enqueued back to back by the hooks.
    With it we also pass ``find_unused_parameters=True``: otherwise DDP starts with one bucket and
    torch 2.13's rebuild after the first step merged these models' gradients back into one (seen
    with 2 gloo ranks); the unused-parameter search only adds a graph walk to each forward.
    """
    from torch.nn.parallel import DistributedDataParallel as DDP

    model = build_model(name).to(device)
    caps = {} if bucket_mb is None else {"bucket_cap_mb": bucket_mb, "find_unused_parameters": True}
    ddp = DDP(model, device_ids=[device.index] if device.type == "cuda" else None, **caps)
    ddp.register_comm_hook(None, _labelled_allreduce_hook)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.01)
    inputs, target = (t.to(device) for t in _batch(name, model, rank))
    # new_group is collective: every rank calls it, members or not.
    sub_group = dist.new_group(sub_group_ranks(world_size))
    calls = explicit_calls(rank, world_size)

    def step() -> None:
        opt.zero_grad(set_to_none=True)
        _loss(name, ddp(inputs), target).backward()
        opt.step()
        for call in calls:
            run_call(call, rank, world_size, sub_group, device)

    return step
