"""The fast path's promise, checked one way everywhere: ``simulate`` equals ``simulate(fast=False)``.

Why one helper: the fast paths (ring, halving-doubling, direct, double-binary-tree, aware rings) are
exact by claim, and every test of one compares the same outputs with the message-by-message run.
"""

from __future__ import annotations

from chakra_pipe.sim import HardwareConfig, simulate


def assert_fast_equals_message_path(ts, hw: HardwareConfig) -> None:
    """Per-rank finish and exposed times, every collective record and the message count agree."""
    fast, slow = simulate(ts, hw, symmetric=False), simulate(ts, hw, fast=False)
    assert fast.finish_ns == slow.finish_ns
    assert fast.exposed_comm_ns == slow.exposed_comm_ns
    assert [c.__dict__ for c in fast.collectives] == [c.__dict__ for c in slow.collectives]
    assert fast.messages == slow.messages
    assert min(fast.finish_ns) > 0
