"""torch.distributed choices shared by the stages that run ranks (capture and replay).

Imported only by code that already needs torch, so the rest of the package stays torch-free.
"""

from __future__ import annotations

from .errors import InputError


def resolve_backend(requested: str, ranks: int) -> tuple[str, str]:
    """``(backend, device)``: NCCL on one GPU per rank where there are enough GPUs, else gloo on CPU.

    ``ranks`` is how many ranks share the GPUs this process sees (``rankenv.device_sharers``).
    ``auto`` picks NCCL only when every one of them gets its own GPU; asking for ``nccl`` without
    them is an error naming ``--backend`` rather than a failure inside NCCL's initialisation.
    """
    import torch

    gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
    nccl_ok = gpus >= ranks and torch.distributed.is_nccl_available()
    if requested == "nccl" and not nccl_ok:
        raise InputError(f"nccl needs one GPU per rank: {ranks} ranks, {gpus} GPU(s) visible", where="--backend")
    if requested == "nccl" or (requested == "auto" and nccl_ok):
        return "nccl", "cuda"
    return "gloo", "cpu"


# The process group's keys live under this prefix of the rendezvous store, apart from the launcher's.
PG_STORE_PREFIX = "chakra-pipe/pg/"
_PEER_LOST = (
    "connection closed by peer",
    "connection reset by peer",
    "broken pipe",
    "gloo",
    "nccl",
    "socket timeout",
    "connection refused",
)


def cuda_device(torch, local_rank: int):
    """This rank's GPU: its local rank's, or the only one when the launcher bound one GPU per task."""
    index = local_rank if torch.cuda.device_count() > 1 else 0
    torch.cuda.set_device(index)
    return torch.device("cuda", index)


def lost_peer(exc: BaseException | None) -> bool:
    """Whether ``exc`` says only that a peer went away (a knock-on of another rank's failure).

    torch.distributed raises its own error classes for backend and network failures; older builds
    raise a RuntimeError whose text names gloo/NCCL or the dropped connection.
    """
    if exc is None:
        return False
    import torch.distributed as dist

    if isinstance(exc, getattr(dist, "DistError", ())):
        return True
    return isinstance(exc, RuntimeError) and any(s in str(exc).lower() for s in _PEER_LOST)
