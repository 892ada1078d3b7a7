"""ASTRA-sim's remote-memory API: the time of a MEM_LOAD / MEM_STORE node (spec §5.2).

Each access costs ``remote-mem-latency + ⌊tensor_size / remote-mem-bw⌋`` ns. Per NPU the accesses are
independent; ``PER_NODE_MEMORY_EXPANSION`` (one port per ``num-npus-per-node`` NPUs) and
``MEMORY_POOL`` (one port for all) serve one access at a time, in issue order.
"""

from __future__ import annotations


class FifoServer:
    """A remote-memory port that serves one access at a time (PER_NODE and MEMORY_POOL models)."""

    __slots__ = ("free_at",)

    def __init__(self) -> None:
        self.free_at = 0


class RemoteMemory:
    """One NPU's view of the remote memory: its config and, when shared, the port it queues on."""

    __slots__ = ("cfg", "server")

    def __init__(self, cfg, server: FifoServer | None):
        self.cfg, self.server = cfg, server

    @property
    def enabled(self) -> bool:
        return self.cfg is not None and self.cfg.memory_type != "NO_MEMORY_EXPANSION"

    def access_ns(self, now: int, tensor_size: int) -> int:
        """ns from ``now`` until an access of ``tensor_size`` bytes issued at ``now`` completes."""
        access = self.cfg.remote_mem_latency + tensor_size // self.cfg.remote_mem_bw
        if self.server is None:
            return access
        start = max(now, self.server.free_at)
        self.server.free_at = start + access
        return self.server.free_at - now


def remote_memories(mem, npus: int) -> list[RemoteMemory]:
    """One :class:`RemoteMemory` per NPU, sharing ports as the memory type says."""
    if mem is None or mem.memory_type in ("NO_MEMORY_EXPANSION", "PER_NPU_MEMORY_EXPANSION"):
        return [RemoteMemory(mem, None) for _ in range(npus)]
    if mem.memory_type == "MEMORY_POOL":
        pool = FifoServer()
        return [RemoteMemory(mem, pool) for _ in range(npus)]
    servers: dict[int, FifoServer] = {}
    return [RemoteMemory(mem, servers.setdefault(r // mem.num_npus_per_node, FifoServer())) for r in range(npus)]
