"""A rank set's files are decoded in batches: the result must be each file's own load, errors included."""

from __future__ import annotations

from pathlib import Path
from unittest import mock

import numpy as np
import pytest

from chakra_pipe.errors import TraceFormatError
from chakra_pipe.et import TraceSet, load_graph, schema, write_trace
from chakra_pipe.et import graph as graph_module
from chakra_pipe.generate import Layout, TrainingSpec, generate_llm, resolve_model

COLUMNS = (
    "ids",
    "types",
    "duration_micros",
    "start_time_micros",
    "rec_start",
    "rec_len",
    "name_start",
    "name_len",
    "ctrl_ptr",
    "ctrl_ids",
    "data_ptr",
    "data_ids",
    "slow",
)


@pytest.fixture(scope="module")
def llm_set(tmp_path_factory) -> Path:
    """16 ranks (t2d4p2) of a small GPT step: 75-83 record files with every attribute kind the generator writes."""
    prefix = tmp_path_factory.mktemp("batch") / "w"
    model = resolve_model("gpt3-13b", layers=4, hidden=512, heads=8, ffn=1024, vocab=1000, seq=128)
    layout = Layout(dp=4, tp=2, pp=2, moe=model.moe)
    generate_llm(model, TrainingSpec(layout, microbatches=4, global_batch=16, zero=1), prefix)
    return prefix


def assert_same_graph(got, want) -> None:
    assert got.path == want.path and got.metadata == want.metadata and bytes(got.buf) == bytes(want.buf)
    for name in COLUMNS:
        a, b = getattr(got, name), getattr(want, name)
        assert a.dtype == b.dtype and np.array_equal(a, b), name
    for name in want.attr_kind:
        assert np.array_equal(got.attr_kind[name], want.attr_kind[name]), name
    for name in want.attr_value:
        assert np.array_equal(got.attr_value[name], want.attr_value[name]), name
    assert got.pg_name == want.pg_name and got.involved_dim == want.involved_dim
    assert [got.name(i) for i in range(len(got))] == [want.name(i) for i in range(len(want))]
    assert got.node(len(got) - 1) == want.node(len(want) - 1)


# (batch bytes, chunk records): one batch of all files; a batch a file or two; chunks that start
# and end inside files, so a file's columns come from several chunks and a chunk holds several files.
@pytest.mark.parametrize("batch_bytes, chunk", [(1 << 23, 1 << 13), (20_000, 1 << 13), (1 << 23, 37)])
def test_batched_load_gives_each_files_own_columns(llm_set, batch_bytes, chunk):
    files = sorted(llm_set.parent.glob("w.*.et"), key=lambda f: int(f.name.split(".")[1]))
    alone = [load_graph(f) for f in files]
    assert all(len(g) > graph_module._SMALL for g in alone)  # the per-file load took the bulk path too
    with (
        mock.patch.object(graph_module, "_BATCH_BYTES", batch_bytes),
        mock.patch.object(graph_module, "_CHUNK_RECORDS", chunk),
    ):
        ts = TraceSet.load(llm_set)
    assert [str(f) for f in ts.files] == [str(f) for f in files]
    for got, want in zip(ts.ranks, alone):
        assert_same_graph(got, want)


def _corrupt_copy(src: Path, dst: Path, edit) -> None:
    for f in src.parent.glob(src.name + ".*"):
        data = bytearray(f.read_bytes())
        (dst.parent / f.name.replace(src.name, dst.name, 1)).write_bytes(edit(f.name, data))


def _error_line(fn) -> str:
    with pytest.raises(TraceFormatError) as exc:
        fn()
    return exc.value.line()


def _copy_with_bad_name(llm_set, dest: Path, rank: int, node: int) -> None:
    """A copy of the set whose ``rank``'s ``node`` has a name that is not UTF-8 (a byte 0xFF): a
    record the bulk passes send to protobuf."""
    at = int(load_graph(Path(f"{llm_set}.{rank}.et")).name_start[node])

    def edit(name: str, data: bytearray) -> bytes:
        if name == f"{dest.name}.{rank}.et":
            data[at] = 0xFF
        return bytes(data)

    _corrupt_copy(llm_set, dest, edit)


def test_bad_record_inside_a_batch_names_its_own_file_and_offset(llm_set, tmp_path):
    """A record the bulk passes send to protobuf (a name that is not UTF-8) in the 6th file."""
    _copy_with_bad_name(llm_set, tmp_path / "w", rank=5, node=40)
    want = _error_line(lambda: load_graph(tmp_path / "w.5.et"))
    assert want.startswith(str(tmp_path / "w.5.et") + ": ")
    assert _error_line(lambda: TraceSet.load(tmp_path / "w")) == want


def test_first_bad_file_in_order_is_reported(llm_set, tmp_path):
    """File 3 has a bad record, file 9 a broken frame: the batch reports file 3, as a file-by-file load does."""
    at = int(load_graph(Path(f"{llm_set}.3.et")).name_start[60])

    def edit(name: str, data: bytearray) -> bytes:
        if name == "w.3.et":
            data[at] = 0xC3  # a lone UTF-8 lead byte
        if name == "w.9.et":
            return bytes(data[:-3])  # the last record runs past the end
        return bytes(data)

    _corrupt_copy(llm_set, tmp_path / "w", edit)
    want3 = _error_line(lambda: load_graph(tmp_path / "w.3.et"))
    want9 = _error_line(lambda: load_graph(tmp_path / "w.9.et"))
    assert want3.startswith(str(tmp_path / "w.3.et") + ": ") and want9.startswith(str(tmp_path / "w.9.et") + ": ")
    assert _error_line(lambda: TraceSet.load(tmp_path / "w")) == want3
    (tmp_path / "w.3.et").write_bytes(Path(f"{llm_set}.3.et").read_bytes())
    assert _error_line(lambda: TraceSet.load(tmp_path / "w")) == want9


def test_bad_record_before_an_unreadable_file_is_reported_first(llm_set, tmp_path):
    """File 2 has a bad record and file 4 is not a file at all: file 2's error comes first."""
    _copy_with_bad_name(llm_set, tmp_path / "w", rank=2, node=10)
    want = _error_line(lambda: load_graph(tmp_path / "w.2.et"))
    (tmp_path / "w.4.et").unlink()
    (tmp_path / "w.4.et").mkdir()
    assert _error_line(lambda: TraceSet.load(tmp_path / "w")) == want


def test_an_unreadable_first_file_is_reported(tmp_path):
    (tmp_path / "w.0.et").mkdir()
    with pytest.raises(Exception) as alone:
        load_graph(tmp_path / "w.0.et")
    with pytest.raises(type(alone.value)) as batched:
        TraceSet.load(tmp_path / "w")
    assert str(batched.value) == str(alone.value)


@pytest.mark.parametrize("chunk", [1 << 13, 37])
def test_each_file_of_a_batch_keeps_its_own_column_widths(tmp_path, chunk):
    """Columns are decoded batch-wide and split per file: a file whose ids, times or durations need
    64, 32 or 16 bits must not widen its neighbours' columns, nor be narrowed to theirs."""

    def trace(name: str, id_base: int, dur: int, start: int) -> Path:
        nodes = [
            schema.Node(id=id_base + i, name=f"n{i}", type=4, duration_micros=dur + i, start_time_micros=start + i)
            for i in range(90)
        ]
        for i, node in enumerate(nodes[1:], 1):
            node.data_deps.append(id_base + i - 1)
        path = tmp_path / name
        write_trace(path, schema.GlobalMetadata(version="0.0.4"), nodes)
        return path

    files = [
        trace("a.et", 1, 3, 5),
        trace("b.et", (1 << 33) + 1, 70_000, 1 << 40),
        trace("c.et", 7, 100, 200),
        trace("d.et", 70_000, 300, 1 << 20),
    ]
    alone = [load_graph(f) for f in files]
    assert [g.ids.dtype for g in alone] == [np.uint32, np.uint64, np.uint32, np.uint32]
    assert [g.duration_micros.dtype for g in alone] == [np.uint8, np.uint32, np.uint8, np.uint16]
    with mock.patch.object(graph_module, "_CHUNK_RECORDS", chunk):
        batched = graph_module.load_graphs(files)
    for got, want in zip(batched, alone):
        for name in ("ids", "duration_micros", "start_time_micros", "name_start", "name_len", "rec_start"):
            a, b = getattr(got, name), getattr(want, name)
            assert a.dtype == b.dtype and np.array_equal(a, b), name
        assert np.array_equal(got.data_ptr, want.data_ptr) and np.array_equal(got.data_ids, want.data_ids)


@pytest.mark.parametrize("parts", [1, 2, 3, 5])
def test_attribute_decode_groups_are_equal_shares_of_the_batch(llm_set, parts):
    """A batch's attributes are decoded in ``ceil(total / _ATTR_DECODE_GROUP)`` groups of about
    equal shares (each file once, in order), not full groups and a small remainder: a group's
    fixed cost is paid as few times as the bound allows. Each file still reads as its own load."""
    files = sorted(llm_set.parent.glob("w.*.et"), key=lambda f: int(f.name.split(".")[1]))
    graphs = graph_module.load_graphs(files)
    sizes = [len(g.attr_parts.node) for g in graphs]
    bound = -(-sum(sizes) // parts)  # exactly ``parts`` groups
    seen: list[list[int]] = []
    decode_group = graph_module._decode_group

    def spy(group, arr, shared=None):
        seen.append([graphs.index(g) for g, _ in group])
        decode_group(group, arr, shared)

    with (
        mock.patch.object(graph_module, "_ATTR_DECODE_GROUP", bound),
        mock.patch.object(graph_module, "_decode_group", spy),
    ):
        _ = graphs[0].attr_value  # the first use decodes the whole batch
    assert [i for group in seen for i in group] == list(range(len(files)))
    assert len(seen) == parts
    for group in seen:
        assert abs(sum(sizes[i] for i in group) - sum(sizes) / parts) <= max(sizes)
    for got, f in zip(graphs, files):
        assert_same_graph(got, load_graph(f))


class _RecordingLibc:
    """Stands in for glibc in :mod:`chakra_pipe.heap`: records the heap-policy calls."""

    def __init__(self) -> None:
        self.calls: list[tuple] = []

    def mallopt(self, param: int, value: int) -> int:
        self.calls.append(("mallopt", param, value))
        return 1

    def malloc_trim(self, pad: int) -> int:
        self.calls.append(("malloc_trim", pad))
        return 1


@pytest.mark.parametrize("bad", [False, True])
def test_large_load_keeps_freed_heap_until_it_ends(llm_set, tmp_path, bad):
    """A batch of _KEEP_HEAP_BYTES or more sets glibc's thresholds once before it is decoded, and the
    load ends the keeping (trim threshold down, free pages released) also when a file is refused,
    so the phases after a load do not run with 16 MiB kept free (L8's command peak 78 -> 88 MB)."""
    from chakra_pipe import heap

    prefix = llm_set
    if bad:
        _copy_with_bad_name(llm_set, tmp_path / "w", rank=9, node=10)
        prefix = tmp_path / "w"
    libc = _RecordingLibc()
    with (
        mock.patch.object(heap, "_LIBC", [libc]),
        mock.patch.object(heap, "_KEPT", []),
        mock.patch.object(graph_module, "_BATCH_BYTES", 1 << 16),  # several batches of a few files
        mock.patch.object(graph_module, "_KEEP_HEAP_BYTES", 1 << 14),
    ):
        if bad:
            with pytest.raises(TraceFormatError):
                TraceSet.load(prefix)
        else:
            TraceSet.load(prefix)
    mmap, trim = heap._M_MMAP_THRESHOLD, heap._M_TRIM_THRESHOLD
    assert libc.calls == [
        ("mallopt", mmap, 1 << 16),
        ("mallopt", trim, 1 << 17),
        ("malloc_trim", 0),
        ("mallopt", trim, 1 << 15),
    ]


def test_small_load_leaves_the_heap_policy_alone(llm_set):
    from chakra_pipe import heap

    libc = _RecordingLibc()
    with mock.patch.object(heap, "_LIBC", [libc]), mock.patch.object(heap, "_KEPT", []):
        TraceSet.load(llm_set)  # 16 files of ~10 KB: below _KEEP_HEAP_BYTES
    assert libc.calls == []
