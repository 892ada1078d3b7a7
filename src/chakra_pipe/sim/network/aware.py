"""Congestion-aware backend: directed links as FIFO store-and-forward servers (spec §4.2).

A message that finds its link free holds it for ``floor(S / B')`` ns and reaches the next device at
``t + floor(L + S / B')``; messages that find it busy wait in FIFO order and start when the link
frees. Upstream supports one dimension only; here a multi-dimensional network routes dimension by
dimension (lowest differing dimension first), each dimension with its own links — this extension is
documented in the README because ASTRA-sim itself would refuse such a run.
"""

from __future__ import annotations

from collections import deque

from .common import Network, bytes_per_ns
from .topology import route


class _Link:
    __slots__ = ("latency", "bw", "busy", "pending")

    def __init__(self, latency: float, bw: float):
        self.latency, self.bw = latency, bw
        self.busy = False
        self.pending: deque = deque()


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
        links = []
        for d, p in enumerate(self.dims):
            if cur[d] == target[d]:
                continue
            group = tuple(c if i != d else None for i, c in enumerate(cur))
            devs = route(self.cfg.topology[d], p, cur[d], target[d])
            for a, b in zip(devs, devs[1:]):
                key = (d, group, a, b)
                link = self._links.get(key)
                if link is None:
                    link = self._links[key] = _Link(self.cfg.latency[d], self._bw[d])
                links.append(link)
            cur[d] = target[d]
        return links

    def _transmit(self, src: int, dst: int, size: int, full: tuple) -> None:
        path = self._path(src, dst)
        if not path:
            self.queue.schedule(self.queue.now, self._arrive, full)
            return
        self._offer(path[0], [size, path, 0, full])

    def _offer(self, link: _Link, msg: list) -> None:
        if link.busy:
            link.pending.append(msg)
        else:
            self._start(link, msg)

    def _start(self, link: _Link, msg: list) -> None:
        link.busy = True
        q = self.queue
        size = msg[0]
        q.schedule(q.now + int(link.latency + size / link.bw), self._hop_done, msg)
        q.schedule(q.now + int(size / link.bw), self._free, link)

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
