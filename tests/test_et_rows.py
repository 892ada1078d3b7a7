"""``CsrRows`` (the simulator's children lists) and ``TraceGraph.index_of``'s id lookup table."""

from __future__ import annotations

import numpy as np
import pytest

from chakra_pipe.et import schema
from chakra_pipe.et.framing import frame
from chakra_pipe.et.graph import graph_from_bytes
from chakra_pipe.et.rows import CsrRows


def test_rows_are_the_slices_as_python_ints():
    rows = CsrRows(np.array([0, 2, 2, 5]), np.array([7, 3, 1, 2**40, 0], dtype=np.int64))
    assert len(rows) == 3
    assert rows[0] == [7, 3] and rows[1] == [] and rows[2] == [1, 2**40, 0]
    assert rows[-1] == [1, 2**40, 0]
    assert list(rows) == [[7, 3], [], [1, 2**40, 0]]
    assert rows[1:] == [[], [1, 2**40, 0]]
    assert all(type(v) is int for v in rows[2])
    with pytest.raises(IndexError):
        rows[3]


def _graph(ids: list[int]):
    md = frame(schema.GlobalMetadata(version="0.0.4").SerializeToString())
    return graph_from_bytes(md + b"".join(frame(schema.Node(id=i, name="n").SerializeToString()) for i in ids))


@pytest.mark.parametrize(
    "ids",
    [
        list(range(100)),  # consecutive from 0
        list(range(1000, 1300, 3)),  # ascending with gaps: the table
        [5, *range(1000, 1100)],  # ascending, span just within the table's limit
        [3, 1, 2, *range(10, 100)],  # not ascending: binary search
        [2**64 - 1, *range(60)],  # huge id: binary search
        [7, 7, *range(8, 80)],  # duplicate ids: first record wins
    ],
)
def test_index_of_same_answer_with_and_without_the_table(ids):
    g = _graph(ids)
    near = {*ids, 0, 4, 6, 999, 1301, 2**63, 2**64 - 1, *(i + 1 for i in ids[:20])}
    probe = np.array(sorted(q for q in near if q < 2**64), dtype=np.uint64)
    fast = g.index_of(probe)
    g._dense = False  # force the binary search
    slow = g.index_of(probe)
    assert fast.tolist() == slow.tolist()
    expected = [ids.index(int(q)) if int(q) in ids else -1 for q in probe]
    assert fast.tolist() == expected
