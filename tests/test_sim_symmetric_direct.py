"""Direct phases in the proven-symmetric (quotient) run take the full engine's fast paths, exactly.

The quotient simulates one representative per class; a direct phase is evaluated over every member
of its group, each starting when its representative did — on the aware backend over the members'
real FIFO links loaded from their canonical links (``sim/symmetric.py``, *Direct phases*). Every
rank must equal the message-by-message full engine (``symmetric=False, fast=False``).
"""

from __future__ import annotations

import logging

import pytest
from test_sim_symmetric import hardware
from test_sim_symmetric_files import LOG, SETS, assert_full_engine_result, write_set

from chakra_pipe.et import schema
from chakra_pipe.et.traceset import TraceSet
from chakra_pipe.sim import simulate, symmetric

# (layout, npus_count, backend, topology): 1-D networks, where the aware direct fast path applies
CASES = [
    ("tp+dp", (8,), "congestion_aware", "Switch"),
    ("ep", (16,), "congestion_aware", "Switch"),
    ("ep", (16,), "congestion_aware", "FullyConnected"),
    ("tp+dp+pp zero", (64,), "congestion_aware", "Switch"),  # pipeline sends beside the batches
    ("tp+dp+pp", (8,), "congestion_unaware", "Switch"),
    ("ep+pp", (32,), "congestion_unaware", "Switch"),
]


def _quotient(ts, hw, caplog):
    with caplog.at_level(logging.INFO, logger=LOG):
        out = simulate(ts, hw)
    assert any("symmetric run of" in r.getMessage() for r in caplog.records), caplog.text
    return out


@pytest.mark.parametrize(("layout", "dims", "backend", "topology"), CASES, ids=[" ".join(map(str, c)) for c in CASES])
def test_direct_phases_of_the_quotient_run_on_the_fast_path_and_equal_the_message_path(
    tmp_path, caplog, monkeypatch, layout, dims, backend, topology
):
    ts = TraceSet.load(write_set(tmp_path, SETS[layout]))
    hw = hardware(dims, topology=[topology], algo="direct", backend=backend)
    quick = _quotient(ts, hw, caplog)
    assert "declined" not in caplog.text and "rerun" not in caplog.text
    pipeline = "pp" in layout  # pipeline sends go message by message
    assert quick.fast_messages > 0 and (pipeline or quick.fast_messages == quick.messages)
    assert_full_engine_result(quick, simulate(ts, hw, symmetric=False, fast=False), hw)
    if backend == "congestion_aware":  # the quotient's own message path: the same result and message count
        monkeypatch.setattr(symmetric, "_batches_exact", lambda hw: False)
        slow = _quotient(ts, hw, caplog)
        assert slow.fast_messages < quick.fast_messages
        assert (slow.to_dict(), slow.messages) == (quick.to_dict(), quick.messages)


def test_aware_direct_where_the_full_engine_sends_message_by_message_does_so_in_the_quotient(tmp_path, caplog):
    """Where the full engine's aware direct fast path does not apply (``simulate._batches_exact``:
    windows below the network's NPUs − 1), the quotient's direct phases go message by message too,
    though each group's window covers its peers."""
    ts = TraceSet.load(write_set(tmp_path, SETS["tp+dp"]))
    hw = hardware((8,), algo="direct4", backend="congestion_aware")
    quick = _quotient(ts, hw, caplog)
    assert quick.fast_messages == 0
    assert_full_engine_result(quick, simulate(ts, hw, symmetric=False, fast=False), hw)


def test_a_declined_direct_evaluation_reruns_the_quotient_with_direct_phases_message_by_message(
    tmp_path, caplog, monkeypatch
):
    """A same-time tie (``FastPathDeclined``) turns the direct fast path off for a rerun of the
    quotient, which stays exact; the quotient is not abandoned for the full engine."""
    from chakra_pipe.sim.system import direct_fast
    from chakra_pipe.sim.system.phase_fast import FastPathDeclined

    def tie(coord, algos):
        raise FastPathDeclined("a general at the last reduce-scatter receive's time")

    monkeypatch.setattr(direct_fast, "evaluate", tie)
    ts = TraceSet.load(write_set(tmp_path, SETS["ep"]))
    hw = hardware((16,), algo="direct", backend="congestion_aware")
    with caplog.at_level(logging.INFO, logger="chakra_pipe.sim.symmetric"):
        quick = _quotient(ts, hw, caplog)
    assert "direct fast path declined" in caplog.text
    assert quick.fast_messages == 0
    assert_full_engine_result(quick, simulate(ts, hw, symmetric=False, fast=False), hw)


@pytest.mark.parametrize(("layout", "dims"), [("tp+dp", (8,)), ("ep", (16,)), ("tp+dp+pp zero", (64,))])
def test_every_chunk_at_once_keeps_the_quotients_aware_ring_fast_path_and_equals_the_message_path(
    tmp_path, caplog, layout, dims
):
    """With every chunk of a collective active at once on a 1-D network the full engine evaluates the
    chunks' ring phases together (``RingCoordinator._flush``); the quotient does the same over
    canonical links instead of meeting a link conflict and rerunning message by message."""
    ts = TraceSet.load(write_set(tmp_path, SETS[layout]))
    hw = hardware(dims, algo="ring", backend="congestion_aware", chunks=4)
    with caplog.at_level(logging.INFO, logger="chakra_pipe.sim.symmetric"):
        quick = _quotient(ts, hw, caplog)
    assert "declined" not in caplog.text
    assert quick.fast_messages > 0 and ("pp" in layout or quick.fast_messages == quick.messages)
    assert_full_engine_result(quick, simulate(ts, hw, symmetric=False, fast=False), hw)


CHUNK_CASES = [
    ("tp+dp", (8,), "Switch"),
    ("ep", (16,), "Switch"),
    ("ep", (16,), "FullyConnected"),
    ("tp+dp+pp zero", (64,), "Switch"),  # pipeline sends beside the batches
    ("tp+dp+pp zero", (64,), "FullyConnected"),
]


STAGGERED_CASES = [("ep", (16,), "FullyConnected"), ("tp+dp+pp zero", (64,), "FullyConnected")]
QUOTIENT_CHUNK_CASES = [
    *((layout, dims, topology, chunks) for chunks in (4, 8) for layout, dims, topology in CHUNK_CASES),
    *((layout, dims, topology, chunks) for chunks in (2, 3) for layout, dims, topology in STAGGERED_CASES),
]


@pytest.mark.parametrize(
    ("layout", "dims", "topology", "chunks"),
    QUOTIENT_CHUNK_CASES,
    ids=[" ".join(map(str, c)) for c in QUOTIENT_CHUNK_CASES],
)
def test_direct_chunks_take_the_chunk_batch_in_the_quotient(tmp_path, caplog, layout, dims, topology, chunks):
    """Every collective direct, one queue, 1-D network, 4 splits: with 4 or 8 chunks active the
    quotient holds a collective's chunks as the full engine does (``PhaseCoordinator.hold``, one
    batch, ``direct_aware.outcome_chunks``); with 2 or 3 active (a queue admitting them one by one,
    fully connected) it holds each direct phase until the ns before its earliest exit (``stagger``),
    the chunks completing meanwhile joining it. Over every member's real links: every collective
    message evaluated, nothing redone, every rank equal to the full engine's fast and message paths."""
    ts = TraceSet.load(write_set(tmp_path, SETS[layout]))
    hw = hardware(dims, topology=[topology], algo="direct", backend="congestion_aware", chunks=chunks)
    with caplog.at_level(logging.INFO, logger="chakra_pipe.sim.symmetric"):
        quick = _quotient(ts, hw, caplog)
    assert "declined" not in caplog.text
    p2p = sum(int((g.types == schema.COMM_SEND_NODE).sum()) for g in ts.ranks) if "pp" in layout else 0
    assert quick.fast_messages > 0 and quick.messages - quick.fast_messages <= p2p
    assert_full_engine_result(quick, simulate(ts, hw, symmetric=False, fast=False), hw)
    assert_full_engine_result(quick, simulate(ts, hw, symmetric=False), hw)
