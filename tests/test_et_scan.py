"""The vectorised record framing (``et.scan``) must frame every buffer exactly as the sequential
walk does, and hand every buffer it cannot prove to that walk (which raises the precise error)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from chakra_pipe.errors import TraceFormatError
from chakra_pipe.et import scan, schema
from chakra_pipe.et.framing import frame, scan_records
from chakra_pipe.et.scan import scan_array


@pytest.fixture(autouse=True)
def _vectorised_framing_on_small_buffers(monkeypatch):
    """These buffers are a few KB: without this they would be walked (``_WALK_BYTES``), not chained."""
    monkeypatch.setattr(scan, "_WALK_BYTES", 0)


def _padded(data: bytes) -> np.ndarray:
    arr = np.zeros(len(data) + 16, dtype=np.uint8)
    arr[: len(data)] = np.frombuffer(data, dtype=np.uint8)
    return arr


def _trace(ids, payload_bytes: int = 0) -> bytes:
    md = schema.GlobalMetadata(version="0.0.4")
    out = [frame(md.SerializeToString())]
    for i in ids:
        node = schema.Node(id=i, name="n" * payload_bytes, data_deps=[j for j in range(max(0, i - 3), i)])
        out.append(frame(node.SerializeToString()))
    return b"".join(out)


@pytest.mark.parametrize(
    "ids, name_len",
    [
        (range(500), 3),  # id 0 first: the head walk takes it
        (range(1, 300), 200),  # 2-byte prefixes
        (range(1, 40), 20000),  # 3-byte prefixes
        ([5, 0, *range(6, 100)], 5),  # an id-0 node mid-file: the chain leaves the candidates
        (range(1, 3), 1),
    ],
)
def test_same_records_as_the_sequential_walk(ids, name_len):
    data = _trace(list(ids), name_len)
    starts, lengths = scan_array(_padded(data), len(data), "t.et")
    ref_s, ref_l = scan_records(data)
    assert starts.tolist() == ref_s
    assert lengths.tolist() == ref_l


def test_a_record_with_a_tag_byte_inside_is_not_mistaken_for_a_start():
    """Names full of 0x08 bytes create many false candidates; the chain still follows the real ones."""
    md = frame(schema.GlobalMetadata().SerializeToString())
    nodes = [frame(schema.Node(id=i + 1, name="\x08\x01\x08" * 30).SerializeToString()) for i in range(200)]
    data = md + b"".join(nodes)
    starts, _ = scan_array(_padded(data), len(data), "t.et")
    assert starts.tolist() == scan_records(data)[0]


@pytest.mark.parametrize("cut", [1, 7, 100])
def test_truncated_file_raises_the_walks_error(cut):
    data = _trace(range(1, 200), 10)[:-cut]
    with pytest.raises(TraceFormatError) as got:
        scan_array(_padded(data), len(data), "t.et")
    with pytest.raises(TraceFormatError) as want:
        scan_records(data, "t.et")
    assert got.value.line() == want.value.line()


def test_empty_and_zero_length_node_records_are_refused():
    with pytest.raises(TraceFormatError, match="empty file"):
        scan_array(_padded(b""), 0, "t.et")
    data = _trace(range(1, 100), 4) + b"\x00" + _trace(range(100, 200), 4)[2:]
    with pytest.raises(TraceFormatError, match="zero-length node record"):
        scan_array(_padded(data), len(data), "t.et")


def test_a_buffer_dense_with_tag_bytes_falls_back_to_the_walk():
    """Records of a few bytes each (or a file of 0x08 bytes) would make candidates cost many
    times the file: the sequential walk frames them instead, with the same result."""
    md = frame(schema.GlobalMetadata().SerializeToString())
    data = md + b"".join(frame(schema.Node(id=i % 100 + 1).SerializeToString()) for i in range(5000))
    starts, lengths = scan_array(_padded(data), len(data), "t.et")
    assert (starts.tolist(), lengths.tolist()) == scan_records(data)
    junk = md + b"\x05" + b"\x08" * 100_000
    with pytest.raises(TraceFormatError) as got:
        scan_array(_padded(junk), len(junk), "t.et")
    with pytest.raises(TraceFormatError) as want:
        scan_records(junk, "t.et")
    assert got.value.line() == want.value.line()


def test_pruning_gives_up_on_long_runs_of_false_candidates():
    """Pruning drops one false candidate of a run a round; a run longer than its rounds is left
    to pointer doubling (``None``), and a chain it isolates is exactly the reachable one."""
    from chakra_pipe.et.scan import _PRUNE_ROUNDS, _pruned

    n_true, run = 5, _PRUNE_ROUNDS + 2
    # candidates 0..4 are real (each jumps to the next, the last to the end); 5.. are a run of
    # false ones each jumping to the next, the last of them onto real candidate 2
    bad, end = n_true + run, n_true + run + 1
    jump = np.array([1, 2, 3, 4, end, *range(n_true + 1, n_true + run), 2, bad, end])
    assert _pruned(jump, bad, end) is None
    short = np.array([1, 2, 3, 4, 8, 6, 2, 7, 8])  # a run of two: pruned in two rounds
    assert _pruned(short, 7, 8).tolist() == [0, 1, 2, 3, 4]
    assert _pruned(np.array([1, 3, 2, 3, 4]), 3, 4) is None  # the chain hits a bad candidate


def test_names_of_tag_and_length_bytes_frame_as_the_walk_does():
    """False candidates inside names that point at each other and at real records (many per
    record, chains of them): the pruned or doubled chain equals the sequential walk."""
    md = frame(schema.GlobalMetadata().SerializeToString())
    rng = np.random.default_rng(7)
    for trial in range(20):
        nodes = []
        for i in range(300):
            name = "".join(chr(c) for c in rng.choice([1, 2, 3, 8, 9, 0x12, 0x30], size=int(rng.integers(0, 40))))
            nodes.append(frame(schema.Node(id=i + 1, name=name, data_deps=[i]).SerializeToString()))
        data = md + b"".join(nodes)
        starts, lengths = scan_array(_padded(data), len(data), "t.et")
        assert (starts.tolist(), lengths.tolist()) == scan_records(data), trial


def test_a_batch_frames_each_file_as_alone_and_leaves_the_bad_ones_to_it():
    """``scan_arrays`` chains every file of a batch in one pass: each file's records are exactly its
    own walk's, relative to its own start; a file the batch cannot prove (truncated, an id-0 node
    mid-file, a record running into the next file) comes back None, for ``scan_array`` to walk."""
    good = [_trace(range(1, 120), 4), _trace(range(300), 30), _trace(range(1, 3), 1), _trace([], 0)]
    truncated = _trace(range(1, 80), 4)[:-5]
    id0 = _trace([5, 0, *range(6, 60)], 5)
    files = [good[0], truncated, good[1], id0, good[2], good[3]]
    arrays = [_padded(d) for d in files]
    bases = np.cumsum([0] + [len(a) for a in arrays[:-1]]).tolist()
    got = scan.scan_arrays(
        np.concatenate(arrays), [(b, len(d), f"r{i}.et") for i, (b, d) in enumerate(zip(bases, files))]
    )
    assert got[1] is None and got[3] is None
    for data, framed in zip(good, (got[0], got[2], got[4], got[5])):
        assert framed is not None
        assert framed[0].tolist() == scan_records(data)[0]
        assert framed[1].tolist() == scan_records(data)[1]
    with pytest.raises(TraceFormatError):
        scan_array(arrays[1], len(truncated), "r1.et")


@given(
    st.lists(st.integers(1, 40), min_size=1, max_size=200),
    st.lists(st.integers(-3, 60), min_size=1, max_size=200),
    st.randoms(use_true_random=False),
)
@settings(max_examples=300, deadline=None)
def test_successors_are_the_binary_search_of_every_candidate(gaps, steps, rnd):
    """``_successors`` searches only where neither of the next two candidates is the successor:
    the same indices as ``np.searchsorted`` of every successor, on starts with real records
    (successor = a later start), false candidates between them and successors past the end or
    between starts."""
    s = np.cumsum(np.array(gaps, dtype=np.int64))
    nxt = np.empty(len(s), dtype=np.int64)
    for i in range(len(s)):
        skip = rnd.choice([1, 1, 2, 2, 3, None])  # the next candidate, the one after, further, none
        at_start = skip is not None and i + skip < len(s)
        nxt[i] = s[i + skip] if at_start else s[i] + 1 + abs(steps[i % len(steps)])
    np.testing.assert_array_equal(scan._successors(s, nxt), np.searchsorted(s, nxt))
