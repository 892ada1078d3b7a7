"""Double binary tree all-reduce (§3.5): reduce the whole chunk up a tree, then broadcast down.

A direct port of ASTRA-sim's state machine (after the #306 fix): leaves send to their parent and
wait; intermediates reduce both children, forward up, wait for the parent and send to both children;
the root reduces its only child and sends back down. Successive chunks alternate the two trees.
"""

from __future__ import annotations

from typing import Any

from .stream import release_packet
from .topology import INTERMEDIATE, LEAF, ROOT

BEGIN, TO_PARENT, FROM_PARENT, END, TWO_CHILD, ONE_CHILD, TO_CHILDREN = range(7)
GENERAL, RECEIVED, INIT = range(3)


class DoubleBinaryTree:
    def __init__(self, sys, tree, data_size: int):
        self.sys = sys
        self.id = sys.id
        self.data_size = data_size
        self.final_data_size = data_size
        self.state = BEGIN
        self.reductions = 0
        self.parent = tree.parent(self.id)
        self.left = tree.left(self.id)
        self.right = tree.right(self.id)
        self.kind = tree.kind(self.id)
        self.stream: Any = None  # the Stream running this phase, set by Stream.__init__

    def start(self) -> None:
        self.run(INIT)

    def on_general(self) -> None:
        self.run(GENERAL)

    def on_received(self) -> None:
        self.run(RECEIVED)

    def _bundle(self, processed: bool) -> None:
        release_packet(self.sys, self.stream, processed, self.data_size, False)

    def _send(self, dst: int) -> None:
        self.sys.send(dst, self.data_size, self.stream.stream_id, None)

    def _recv(self, src: int) -> None:
        self.sys.recv(src, self.data_size, self.stream.stream_id, self.stream.consume)

    def run(self, event: int) -> None:
        s, k = self.state, self.kind
        if k == LEAF:
            if s == BEGIN:
                self._bundle(False)
                self.state = TO_PARENT
            elif s == TO_PARENT:
                self._send(self.parent)
                self._recv(self.parent)
                self.state = FROM_PARENT
            elif s == FROM_PARENT:
                self._bundle(False)
                self.state = END
            elif s == END:
                self.sys.proceed_to_next_phase(self.stream)
        elif k == INTERMEDIATE:
            if s == BEGIN:
                self.state = TWO_CHILD
                self._recv(self.left)
                self._recv(self.right)
            elif s == TWO_CHILD and event == RECEIVED:
                self._bundle(True)
                self.state = ONE_CHILD
            elif s == ONE_CHILD and event == RECEIVED:
                self._bundle(True)
                self.state = TO_PARENT
            elif self.reductions < 1 and event == GENERAL:
                self.reductions += 1
            elif s == TO_PARENT:
                self.state = FROM_PARENT
                self._send(self.parent)
                self._recv(self.parent)
            elif s == FROM_PARENT and event == RECEIVED:
                self._bundle(True)
                self.state = TO_CHILDREN
            elif s == TO_CHILDREN:
                self._send(self.left)
                self._send(self.right)
                self.sys.proceed_to_next_phase(self.stream)
        elif k == ROOT:
            only = self.left if self.left >= 0 else self.right
            if s == BEGIN:
                self.state = ONE_CHILD
                self._recv(only)
            elif s == ONE_CHILD:
                self._bundle(True)
                self.state = TO_CHILDREN
            elif s == TO_CHILDREN:
                self._send(only)
                self.sys.proceed_to_next_phase(self.stream)
