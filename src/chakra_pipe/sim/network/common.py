"""Send/receive matching of ASTRA-sim's analytical front end (spec §4.3).

A send and a receive match on ``(tag, src, dst, size, k)`` where ``k`` counts earlier sends (or
receives) with the same first four values. When the message arrives the sender's callback runs, then
the receiver's if it is posted; a receive posted after arrival is called back at the current time
through a fresh event (delay 0). Sends never wait for receives.
"""

from __future__ import annotations

from collections.abc import Callable

from ..engine import EventQueue

GB = 1 << 30


def bytes_per_ns(gbps: float) -> float:
    """Network GB/s (GB = 2^30 bytes) to bytes per ns, computed in ASTRA-sim's operand order."""
    return gbps * GB / 1_000_000_000


class LinkConflict(Exception):
    """A fast ring phase's messages would reach a link out of the order the phases are evaluated in.

    The recurrence gives each link its messages phase by phase; when another sender's messages reach
    the link before the link's last evaluated message has left it (or the same sender's before its
    last evaluated one), their FIFO order is a matter of event order the recurrence does not see.
    ``simulate`` then reruns the whole run message by message (exact or not used)."""


class _Entry:
    __slots__ = ("send_cb", "recv_cb", "arrived")

    def __init__(self) -> None:
        self.send_cb: Callable[[], None] | None = None
        self.recv_cb: Callable[[], None] | None = None
        self.arrived = False


class Network:
    """Matching and delivery; subclasses decide when a message arrives (``_transmit``)."""

    def __init__(self, cfg, queue: EventQueue):
        self.cfg = cfg
        self.queue = queue
        self.dims = cfg.npus_count
        self._send_seq: dict[tuple, int] = {}
        self._recv_seq: dict[tuple, int] = {}
        self._entries: dict[tuple, _Entry] = {}

    def coords(self, npu: int) -> list[int]:
        """Address decode: dimension 0 varies fastest."""
        out = []
        for p in self.dims:
            out.append(npu % p)
            npu //= p
        return out

    def send(self, src: int, dst: int, size: int, tag: int, on_arrival: Callable[[], None] | None) -> None:
        key = (tag, src, dst, size)
        seq = self._send_seq
        k = seq[key] = seq.get(key, -1) + 1
        full = (tag, src, dst, size, k)
        entry = self._entries.get(full)
        if entry is None:
            entry = self._entries[full] = _Entry()
        entry.send_cb = on_arrival
        self._transmit(src, dst, size, full)

    def recv(self, dst: int, src: int, size: int, tag: int, on_arrival: Callable[[], None]) -> None:
        key = (tag, src, dst, size)
        seq = self._recv_seq
        k = seq[key] = seq.get(key, -1) + 1
        full = (tag, src, dst, size, k)
        entry = self._entries.get(full)
        if entry is not None and entry.arrived:
            del self._entries[full]
            self.queue.schedule(self.queue.now, on_arrival)
            return
        if entry is None:
            entry = self._entries[full] = _Entry()
        entry.recv_cb = on_arrival

    def _arrive(self, full: tuple) -> None:
        entry = self._entries[full]
        if entry.recv_cb is not None:
            del self._entries[full]
            if entry.send_cb is not None:
                entry.send_cb()
            entry.recv_cb()
        else:
            if entry.send_cb is not None:
                entry.send_cb()
            entry.arrived = True

    def ring_links(self, senders: list[int], receivers: list[int], size: int):  # pragma: no cover - abstract
        """The recurrence of one ring phase's hops (``senders[i]`` -> ``receivers[i]``, ``size`` bytes each):
        an object with ``begin()``, ``arrive(sent) -> arrivals`` per step, ``end()``. The system
        layer's fast path asks for it instead of modelling links itself."""
        raise TypeError("Network is abstract")

    def _transmit(self, src: int, dst: int, size: int, full: tuple) -> None:  # pragma: no cover - abstract
        raise TypeError("Network is abstract")
