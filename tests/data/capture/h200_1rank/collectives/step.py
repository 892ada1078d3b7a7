"""A one-step user script for `chakra-pipe capture --model`: every NCCL collective kind plus a GEMM."""

import torch
import torch.distributed as dist


def train_step(rank, world_size):
    dev = torch.device("cuda", torch.cuda.current_device()) if dist.get_backend() == "nccl" else torch.device("cpu")
    a = torch.randn(1024, 1024, device=dev)
    b = a @ a
    x = torch.ones(1 << 18, device=dev)  # 1 MiB
    dist.all_reduce(x)
    out = torch.empty(world_size * (1 << 16), device=dev)
    dist.all_gather_into_tensor(out, torch.ones(1 << 16, device=dev))
    rs = torch.empty(1 << 14, device=dev)
    dist.reduce_scatter_tensor(rs, torch.ones(world_size * (1 << 14), device=dev))
    a2a = torch.empty(world_size * 1024, device=dev)
    dist.all_to_all_single(a2a, torch.ones(world_size * 1024, device=dev))
    dist.broadcast(b, src=0)
