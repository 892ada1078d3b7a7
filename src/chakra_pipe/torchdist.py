"""torch.distributed choices shared by the stages that run ranks (capture and replay).

Imported only by code that already needs torch, so the rest of the package stays torch-free.
"""

from __future__ import annotations

from .errors import InputError


def resolve_backend(requested: str, world: int) -> tuple[str, str]:
    """``(backend, device)``: NCCL on one GPU per rank where there are enough GPUs, else gloo on CPU.

    ``auto`` picks NCCL only when every rank gets its own GPU; asking for ``nccl`` without them is an
    error naming ``--backend`` rather than a hang inside NCCL's initialisation.
    """
    import torch

    gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
    nccl_ok = gpus >= world and torch.distributed.is_nccl_available()
    if requested == "nccl" and not nccl_ok:
        raise InputError(f"nccl needs one GPU per rank: {world} ranks, {gpus} GPU(s) visible", where="--backend")
    if requested == "nccl" or (requested == "auto" and nccl_ok):
        return "nccl", "cuda"
    return "gloo", "cpu"
