"""The cross-rank rules' bulk paths: what they skip as clean and what they share between ranks.

``check_point_to_point`` walks only the channels its one sort finds unclean, and
``check_collective_order`` computes a group's result once per rank shape; each finding must still
name its own file, node, group and sizes, in the order validate has always listed them.
"""

from __future__ import annotations

from pathlib import Path

from test_rankset import coll, node, write_set

from chakra_pipe.et import schema
from chakra_pipe.et.traceset import TraceSet
from chakra_pipe.rankset import analyze


def msg(nid: int, send: bool, me: int, peer: int, tag: int, size: int, data=()):
    t = schema.COMM_SEND_NODE if send else schema.COMM_RECV_NODE
    src, dst = (me, peer) if send else (peer, me)
    return node(nid, t, data=data, comm_src=src, comm_dst=dst, comm_tag=tag, comm_size=size)


def checked(prefix: str, rules: set[str]) -> list[tuple[str, int | None, str, str]]:
    a = analyze(TraceSet.load(prefix))
    return [(Path(f.file).name, f.node, f.rule, f.message) for f in a.checked if f.rule in rules]


def test_unclean_channels_among_clean_ones_are_reported_in_channel_order(tmp_path):
    r0 = [
        msg(1, True, 0, 5, 0, 8),  # peer outside the set
        msg(2, True, 0, 2, 0, 8),
        msg(3, True, 0, 2, 0, 8),  # rank 2 receives only one of the two
        msg(4, True, 0, 1, 1, 64),  # received as 128 B
        msg(5, True, 0, 1, 0, 64),  # clean
    ]
    r1 = [msg(1, False, 1, 0, 0, 64), msg(2, False, 1, 0, 1, 128), msg(3, False, 1, 2, 3, 16)]  # 3: never sent
    r2 = [msg(7, False, 2, 0, 0, 8), msg(8, True, 2, 1, 9, 32), node(9)]
    r1.append(msg(4, False, 1, 2, 9, 32))  # pairs with rank 2's send: clean
    prefix = write_set(tmp_path, [r0, r1, r2])
    assert checked(prefix, {"p2p-unmatched", "p2p-peer"}) == [
        ("w.0.et", 4, "p2p-unmatched", "send to rank 1 (tag 1) of 64 B is received there as 128 B (node 2)"),
        ("w.0.et", 3, "p2p-unmatched", "send to rank 2 (tag 0, 8 B) has no matching recv there"),
        (
            "w.0.et",
            1,
            "p2p-peer",
            "send to rank 5 (tag 0, 8 B): rank 5 is not in the 3-rank set "
            "(NPUs 0..2; ASTRA-sim's network asserts on it)",
        ),
        ("w.1.et", 3, "p2p-unmatched", "recv from rank 2 (tag 3, 16 B) has no matching send there"),
    ]


def test_ranks_of_one_shape_in_different_groups_each_report_their_own_collective_order(tmp_path):
    # every rank: a message, an all-reduce behind it, an all-gather behind nothing; ranks 0 and 2
    # (senders) and ranks 1 and 3 (receivers) have one structure, in groups '1' and '2'
    def rank(me: int, peer: int, pg: str, send: bool):
        return [msg(1, send, me, peer, 0, 64), coll(2, pg, data=[1]), node(3, data=[2]), gather(4, pg)]

    ranks = [rank(0, 1, "1", True), rank(1, 0, "1", False), rank(2, 3, "2", True), rank(3, 2, "2", False)]
    prefix = write_set(tmp_path, ranks, {"1": [0, 1], "2": [2, 3]})
    text = (
        "group '{}': ALL_GATHER of 4096 B (node 4) does not depend on ALL_REDUCE of 1024 B (node 2), issued "
        "before it here; which of the two is issued first depends on timing, so members can pair them "
        "differently and hang (order them with a ctrl dependency)"
    )
    assert checked(prefix, {"collective-order"}) == [
        (f"w.{r}.et", 4, "collective-order", text.format(pg)) for r, pg in enumerate("1122")
    ]


def gather(nid: int, pg: str, data=()):
    return node(nid, schema.COMM_COLL_NODE, data=data, comm_type=schema.ALL_GATHER, comm_size=4096, pg_name=pg)
