"""A `chakra-pipe capture --model` script: one training step of a 4-layer transformer (d_model 2048,
bf16 autocast, AdamW; BIG_D shrinks it for a CPU try). GPU-bound untraced, no collectives: the
common single-GPU post-execution trace. Used by benchmarks/gpu_fidelity.py."""

import os

import torch

_STATE = {}


def _setup():
    dev = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    torch.manual_seed(0)
    d = int(os.environ.get("BIG_D", "2048"))
    layer = lambda: torch.nn.TransformerEncoderLayer(d, 16, 4 * d, batch_first=True, device=dev)  # noqa: E731
    model = torch.nn.Sequential(*[layer() for _ in range(4)])
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    x = torch.randn(8, 512 if d >= 1024 else 32, d, device=dev)
    return dev, model, opt, x


def train_step(rank, world_size):
    if not _STATE:
        _STATE["s"] = _setup()
    dev, model, opt, x = _STATE["s"]
    with torch.autocast(dev.type, dtype=torch.bfloat16):
        loss = model(x).float().pow(2).mean()
    loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)
