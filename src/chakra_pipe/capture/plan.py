"""The explicit collectives a built-in capture issues each step, as plain data.

Why a plan instead of inline calls: the same list drives the capture (what each rank executes) and
the acceptance tests (what conversion must recover: kinds, counts, peers, bytes). Keeping it free
of torch lets tests and ``capture.json`` describe it without importing torch.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

BUILTIN_MODELS = ("mlp", "resnet-tiny", "gpt-tiny")
# Process-group name of the default group in PyTorch traces (``process_group:init``).
# A record_function label ``chakra_pipe.pg:<pg_name>`` around a collective tells convert its process
# group; gloo traces carry no per-op PG information otherwise (pytorch-traces.md §7.2).
PG_LABEL_PREFIX = "chakra_pipe.pg:"
P2P_TAG = 7


@dataclass(frozen=True)
class PlannedCall:
    """One explicit call: ``kind`` is the ``torch.distributed`` function name.

    ``numel`` is the element count of the *input* tensor of this rank (float32 everywhere);
    ``peer`` is the global peer rank for send/recv and the root for broadcast (-1 otherwise);
    ``group`` is "default" or "sub" (the capture's one sub-group).
    """

    kind: str
    numel: int
    peer: int = -1
    group: str = "default"
    tag: int = 0

    def to_json(self) -> dict:
        return asdict(self)


def sub_group_ranks(world_size: int) -> list[int]:
    """Members of the capture's sub-group: the first half of the ranks, at least two."""
    return list(range(min(world_size, max(2, world_size // 2))))


def explicit_calls(rank: int, world_size: int, base: int = 256) -> list[PlannedCall]:
    """The explicit calls rank ``rank`` issues after each training step, in issue order.

    One of each collective kind ASTRA-sim simulates (all_reduce, all_gather, reduce_scatter,
    all_to_all) plus broadcast, an all_reduce on the sub-group, and a send/recv pair between
    neighbouring even/odd ranks (an odd world leaves the last rank out of the pair).
    Sizes are multiples of ``world_size`` so scatter/all-to-all splits are even.
    """
    w = world_size
    calls = [
        PlannedCall("all_reduce", base * w),
        PlannedCall("all_gather_into_tensor", base),
        PlannedCall("reduce_scatter_tensor", base * w),
        PlannedCall("all_to_all_single", base * w),
        PlannedCall("broadcast", base, peer=0),
    ]
    if rank in sub_group_ranks(w):
        calls.append(PlannedCall("all_reduce", base // 2 * w, group="sub"))
    if rank % 2 == 0 and rank + 1 < w:
        calls.append(PlannedCall("send", base // 4, peer=rank + 1, tag=P2P_TAG))
    elif rank % 2 == 1:
        calls.append(PlannedCall("recv", base // 4, peer=rank - 1, tag=P2P_TAG))
    return calls
