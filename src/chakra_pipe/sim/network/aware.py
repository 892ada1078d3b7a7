"""Congestion-aware backend: directed links as FIFO store-and-forward servers (spec §4.2).

A message that finds its link free holds it for ``floor(S / B')`` ns and reaches the next device at
``t + floor(L + S / B')``; messages that find it busy wait in FIFO order and start when the link
frees. Upstream supports one dimension only; here a multi-dimensional network routes dimension by
dimension (lowest differing dimension first), each dimension with its own links — this extension is
documented in the README because ASTRA-sim itself would refuse such a run.
"""

from __future__ import annotations

from collections import deque

import numpy as np

from .common import Network, bytes_per_ns
from .topology import route


class _Link:
    """One directed link: FIFO, store-and-forward. ``times`` is the link model, used by both paths."""

    __slots__ = ("latency", "bw", "busy", "pending", "free_at")

    def __init__(self, latency: float, bw: float):
        self.latency, self.bw = latency, bw
        self.busy = False  # message path
        self.pending: deque | None = None  # made on first wait: a deque per link cost 0.7 MiB at 1,024 NPUs
        self.free_at = 0  # ring fast path (FifoRingLinks): when the link takes its next message

    def times(self, size: int) -> tuple[int, int]:
        """(ns until a message of ``size`` bytes reaches the next device, ns it holds the link)."""
        return int(self.latency + size / self.bw), int(size / self.bw)


class FifoRingLinks:
    """The hops of one ring phase on FIFO links, for every member at once (the fast path's recurrence).

    Member ``i``'s message crosses its path's links in order; on each ``start = max(ready, free_at)``,
    the link is busy until ``start + hold`` and the message reaches the next device at
    ``start + latency``. Exact when each link carries the messages of one sender only, in its phase
    order — no two members' paths share a link (checked here) and the run uses no link from two
    senders (``simulate.aware_fast_path_is_exact``). Paths may differ in length (a sub-group ring on
    a Ring topology). Link free times carry over from phase to phase through the links themselves.
    """

    def __init__(self, paths: list[list[_Link]], size: int):
        every = [link for path in paths for link in path]
        if len(set(map(id, every))) != len(every):
            raise RuntimeError("ring fast path on paths that share a link (not exact)")
        hops = max(map(len, paths), default=0)
        # hop j: the members whose path has a j-th link, and those links
        self._who = [
            np.asarray([i for i, path in enumerate(paths) if len(path) > j], dtype=np.int64) for j in range(hops)
        ]
        self._hops = [[path[j] for path in paths if len(path) > j] for j in range(hops)]
        times = [[link.times(size) for link in hop] for hop in self._hops]
        self._latency = [np.asarray([t[0] for t in hop], dtype=np.int64) for hop in times]
        self._hold = [np.asarray([t[1] for t in hop], dtype=np.int64) for hop in times]
        self._free: list[np.ndarray] = []

    def begin(self) -> None:
        self._free = [np.asarray([link.free_at for link in hop], dtype=np.int64) for hop in self._hops]

    def arrive(self, sent: np.ndarray) -> np.ndarray:
        """Arrival time at each member of the messages its predecessor sent at ``sent``."""
        t = sent.copy()
        for j, free in enumerate(self._free):
            who = self._who[j]
            start = np.maximum(t[who], free)
            self._free[j] = start + self._hold[j]
            t[who] = start + self._latency[j]
        return t

    def end(self) -> None:
        for hop, free in zip(self._hops, self._free):
            for link, f in zip(hop, free.tolist()):
                link.free_at = f


class CongestionAwareNetwork(Network):
    def __init__(self, cfg, queue):
        super().__init__(cfg, queue)
        self._bw = [bytes_per_ns(b) for b in cfg.bandwidth]
        self._links: dict[tuple, _Link] = {}
        self._paths: dict[tuple[int, int], list[_Link]] = {}

    def _path(self, src: int, dst: int) -> list[_Link]:
        path = self._paths.get((src, dst))
        if path is None:
            path = self._paths[(src, dst)] = self._route(src, dst)
        return path

    def _route(self, src: int, dst: int) -> list[_Link]:
        cur = self.coords(src)
        target = self.coords(dst)
        links: list[_Link] = []
        for d, p in enumerate(self.dims):
            if cur[d] == target[d]:
                continue
            group = tuple(c if i != d else None for i, c in enumerate(cur))
            devs = route(self.cfg.topology[d], p, cur[d], target[d])
            links.extend(self._link((d, group, a, b)) for a, b in zip(devs, devs[1:]))
            cur[d] = target[d]
        return links

    def _link(self, key: tuple) -> _Link:
        """The link of ``key`` = (dimension, the other coordinates, from device, to device), made on first
        use. The one place a route becomes links: the symmetric engine maps ``key`` to its orbit's
        canonical link here (``sim/symmetric.py``)."""
        link = self._links.get(key)
        if link is None:
            d = key[0]
            link = self._links[key] = _Link(self.cfg.latency[d], self._bw[d])
        return link

    def one_sender_per_link(self, pairs: list[tuple[int, int]]) -> bool:
        """True when no link lies on the paths of two different senders among ``pairs`` (src, dst)."""
        sender_of: dict[int, int] = {}
        for src, dst in pairs:
            for link in self._path(src, dst):
                if sender_of.setdefault(id(link), src) != src:
                    return False
        return True

    def ring_links(self, senders: list[int], receivers: list[int], size: int) -> FifoRingLinks:
        return FifoRingLinks([self._path(s, r) for s, r in zip(senders, receivers)], size)

    def _transmit(self, src: int, dst: int, size: int, full: tuple) -> None:
        path = self._path(src, dst)
        if not path:
            self.queue.schedule(self.queue.now, self._arrive, full)
            return
        self._offer(path[0], [size, path, 0, full])

    def _offer(self, link: _Link, msg: list) -> None:
        if link.busy:
            if link.pending is None:
                link.pending = deque()
            link.pending.append(msg)
        else:
            self._start(link, msg)

    def _start(self, link: _Link, msg: list) -> None:
        link.busy = True
        q = self.queue
        arrive, hold = link.times(msg[0])
        q.schedule(q.now + arrive, self._hop_done, msg)
        q.schedule(q.now + hold, self._free, link)

    def _free(self, link: _Link) -> None:
        link.busy = False
        if link.pending:
            self._start(link, link.pending.popleft())

    def _hop_done(self, msg: list) -> None:
        msg[2] += 1
        path = msg[1]
        if msg[2] == len(path):
            self._arrive(msg[3])
        else:
            self._offer(path[msg[2]], msg)
