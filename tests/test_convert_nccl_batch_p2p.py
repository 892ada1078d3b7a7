"""``batch_isend_irecv`` on NCCL: several send/recv records coalesced into one NCCL group.

ProcessGroupNCCL runs a coalesced batch as one kernel at ``ncclGroupEnd`` and returns one work;
every record of the batch carries the batch's sequence number (a p2p batch bumps the p2p counter
once), and the work's ``wait`` names it. The records are kernel-less COMM nodes (the kernel is
launched after them, at the group's end): they run together, after the group's previous records,
and the wait waits for all of them. Before, they were chained on their group's stream, so a batch
that receives before it sends deadlocked the converted rank set, and the wait held only the last.
"""

from __future__ import annotations

import pytest
from nccl_traces import batch_p2p_rank, ring_hardware

from chakra_pipe.convert.pytorch import convert_trace
from chakra_pipe.convert.rankset import write_rank_set
from chakra_pipe.et import TraceSet, schema
from chakra_pipe.link.hostet import parse_host_trace
from chakra_pipe.sim import simulate


def _deps(rank: int, ops: tuple[str, ...]) -> dict[int, list[int]]:
    conv = convert_trace(parse_host_trace(batch_p2p_rank(rank, ops), f"r{rank}"), rank)
    return {n.id: list(n.data_deps) for n in conv.nodes}


def test_a_batchs_records_run_together_and_its_wait_waits_for_all():
    deps = _deps(0, ("recv", "send", "send"))
    # each record after its launch only (before: the recv, then each send after the one before)
    assert deps[5] == [4] and deps[7] == [6] and deps[9] == [8]
    assert deps[10] == [8, 5, 7, 9]  # the wait: every record of seq 3 (before: [8, 9])
    assert deps[13] == [12, 5, 7, 9]  # the group's next record follows the whole batch


def test_records_of_other_numbers_still_follow_one_another():
    deps = _deps(1, ("send",))
    assert deps[5] == [4]
    assert deps[9] == [8, 5]  # seq 4 after seq 3 on the group's stream


@pytest.mark.parametrize("ops", [("recv", "send"), ("send", "recv")])
def test_a_two_rank_exchange_finishes_in_one_transfer(tmp_path, ops):
    """Both ranks send 4 MiB to each other at once: 4 MiB at 10 GiB/s is 390,625 ns each way, both
    ways together, so the batch's records end 390,625 ns after their launches (the simulator's
    first ns); the seq-4 send of 4 MiB then takes another 390,625 ns. Receive-first used to stop
    the set (each rank's send waited for its receive, which waited for the peer's send)."""
    prefix = str(tmp_path / "b")
    ranks = [convert_trace(parse_host_trace(batch_p2p_rank(r, ops), f"r{r}"), r) for r in range(2)]
    assert {n.type for n in ranks[0].nodes if n.id in (5, 7)} == {schema.COMM_SEND_NODE, schema.COMM_RECV_NODE}
    write_rank_set(prefix, ranks)
    result = simulate(TraceSet.load(prefix), ring_hardware(10.0))
    for rank in (0, 1):
        ends = [c.end_ns for c in result.collectives if c.rank == rank]
        assert len(ends) == 3
        assert 0 <= max(ends[:2]) - 390_625 <= 2
        assert 0 <= result.finish_ns[rank] - max(ends[:2]) - 390_625 <= 3
