"""Records repeated across a batch's files are decoded once (et.dedupe): every file's graph must be
the one it gets alone, errors included, whether its records repeat, differ or are damaged."""

from __future__ import annotations

from pathlib import Path
from unittest import mock

import numpy as np
import pytest
from test_et_batch import assert_same_graph

from chakra_pipe.errors import TraceFormatError
from chakra_pipe.et import TraceSet, dedupe, load_graph, schema, write_trace
from chakra_pipe.et import graph as graph_module
from chakra_pipe.generate import Layout, TrainingSpec, generate_llm, resolve_model


class _Spy:
    """Counts the batches whose records were grouped and decoded per distinct record."""

    def __init__(self) -> None:
        self.grouped = 0
        self.decoded = 0

    def __enter__(self) -> _Spy:
        group, distinct = graph_module.group_records, graph_module._decode_distinct

        def grouping(*args):
            found = group(*args)
            self.grouped += found is not None and len(found.distinct) < len(found.rep)
            return found

        def decoding(*args):
            cols = distinct(*args)
            self.decoded += cols is not None
            return cols

        self.patches = [
            mock.patch.object(graph_module, "group_records", grouping),
            mock.patch.object(graph_module, "_decode_distinct", decoding),
        ]
        for patch in self.patches:
            patch.start()
        return self

    def __exit__(self, *exc) -> None:
        for patch in self.patches:
            patch.stop()


@pytest.fixture(scope="module")
def llm_set(tmp_path_factory) -> Path:
    """16 ranks (t2d4p2) of a small GPT step: 1,264 records, 534 distinct ones."""
    prefix = tmp_path_factory.mktemp("dedupe") / "w"
    model = resolve_model("gpt3-13b", layers=4, hidden=512, heads=8, ffn=1024, vocab=1000, seq=128)
    generate_llm(model, TrainingSpec(Layout(dp=4, tp=2, pp=2, moe=model.moe), microbatches=4, global_batch=16), prefix)
    return prefix


def _files(prefix: Path) -> list[Path]:
    return sorted(prefix.parent.glob(prefix.name + ".*.et"), key=lambda f: int(f.name.split(".")[-2]))


def _without_grouping(files: list[Path]):
    with mock.patch.object(graph_module, "group_records", lambda *args: None):
        return graph_module.load_graphs(files)


def _error_line(fn) -> str:
    with pytest.raises(TraceFormatError) as exc:
        fn()
    return exc.value.line()


@pytest.mark.parametrize("chunk", [1 << 15, 101])
def test_generated_set_decoded_per_distinct_record(llm_set, chunk):
    """Each file's columns (dtypes, attributes, pg_name, metadata) equal its load alone and the
    batch's load without grouping, also when the chunks of distinct records and of all records
    cut the files differently."""
    files = _files(llm_set)
    alone = [load_graph(f) for f in files]
    plain = _without_grouping(files)
    with _Spy() as spy, mock.patch.object(graph_module, "_CHUNK_RECORDS", chunk):
        got = graph_module.load_graphs(files)
    assert spy.grouped == spy.decoded == 1
    for g, a, p in zip(got, alone, plain):
        assert_same_graph(g, a)
        assert_same_graph(g, p)
        assert g.stored_kinds("comm_type") == a.stored_kinds("comm_type")
        assert np.array_equal(g.attr_parts.node, p.attr_parts.node) and np.array_equal(
            g.attr_parts.tag, p.attr_parts.tag
        )


def _trace(path: Path, nodes: list) -> Path:
    write_trace(path, schema.GlobalMetadata(version="0.0.4"), nodes)
    return path


def _node(i: int, *, dur: int = 5, pg: str = "1", dep_base: int = 0, attrs: bool = True):
    node = schema.Node(id=i, name=f"layer{i % 7}.op", type=5 if i % 3 else 7, duration_micros=dur)
    if i:
        node.data_deps.append(dep_base + i - 1)
    if attrs:
        node.attr.add(name="is_cpu_op", bool_val=False)
        node.attr.add(name="comm_size", int64_val=1 << (i % 20))
        if i % 3 == 0:
            node.attr.add(name="pg_name", string_val=pg)
            node.attr.add(name="involved_dim", bool_list=schema.CLASSES["BoolList"](values=[True, i % 2 == 0]))
    return node


def _mixed_set(tmp_path: Path) -> list[Path]:
    """Files sharing most records, some records of their own (other durations, other pg_name), one
    file whose records are all its own, one without attributes."""
    files = []
    for r in range(8):
        nodes = [_node(i, dur=5 + (r if i % 11 == 0 else 0), pg=f"{r % 2}") for i in range(120)]
        files.append(_trace(tmp_path / f"m.{r}.et", nodes))
    files.append(_trace(tmp_path / "m.8.et", [_node(i, dur=1000 + i) for i in range(120)]))
    files.append(_trace(tmp_path / "m.9.et", [_node(i, attrs=False) for i in range(120)]))
    return files


def test_mixed_set_equals_each_files_own_load(tmp_path):
    files = _mixed_set(tmp_path)
    alone = [load_graph(f) for f in files]
    plain = _without_grouping(files)
    with _Spy() as spy:
        got = graph_module.load_graphs(files)
    assert spy.decoded == 1
    for g, a, p in zip(got, alone, plain):
        assert_same_graph(g, a)
        assert_same_graph(g, p)


def test_wide_dependency_ids_fall_back_to_every_record(tmp_path):
    """Dependency ids of 2^28 and more make a chunk's ids uint64, and which files that reaches
    depends on the chunks: such a batch is decoded record by record, as before."""
    base = 1 << 30
    files = [
        _trace(tmp_path / f"w.{r}.et", [_node(i, dep_base=base if r == 3 else 0) for i in range(120)]) for r in range(6)
    ]
    with _Spy() as spy, mock.patch.object(graph_module, "_CHUNK_RECORDS", 200):
        got = graph_module.load_graphs(files)
        plain = _without_grouping(files)
    assert spy.grouped == 1 and spy.decoded == 0
    for g, p in zip(got, plain):
        assert_same_graph(g, p)
    assert [g.data_ids.dtype for g in got] == [np.uint32] * 3 + [np.uint64] * 2 + [np.uint32]  # chunks of 180 records


def test_chunk_with_few_attributes_falls_back(tmp_path):
    """A chunk of the batch holding 1 to _SMALL attributes leaves them to protobuf (slow records):
    the chunks of distinct records hold other counts, so such a batch is decoded as before."""
    nodes = [_node(i, attrs=i % 40 == 0) for i in range(200)]
    files = [_trace(tmp_path / f"f.{r}.et", nodes) for r in range(4)]
    alone = [load_graph(f) for f in files]
    with _Spy() as spy, mock.patch.object(graph_module, "_CHUNK_RECORDS", 200):
        got = graph_module.load_graphs(files)
    assert spy.grouped == 1 and spy.decoded == 0
    for g, a in zip(got, alone):
        assert_same_graph(g, a)
        assert g.slow.any()


def _damage_name(path: Path, node: int) -> None:
    """Make record ``node``'s name invalid UTF-8 (a record the bulk passes send to protobuf)."""
    at = int(load_graph(path).name_start[node])
    data = bytearray(path.read_bytes())
    data[at] = 0xFF
    path.write_bytes(bytes(data))


def test_damaged_repeated_record_names_the_first_file_holding_it(llm_set, tmp_path):
    """The same damaged record in files 9 and 13 (ranks of one stage: byte-identical records): the
    error names file 9 and its own offset, as loading file 9 alone does; damaged in file 13 only
    (so no longer file 9's twin), it names file 13."""
    for f in _files(llm_set):
        (tmp_path / f.name).write_bytes(f.read_bytes())
    first, later = tmp_path / "w.9.et", tmp_path / "w.13.et"
    ga, gb = load_graph(first), load_graph(later)

    def raw(g, i: int) -> bytes:
        return bytes(g.buf[int(g.rec_start[i]) : int(g.rec_start[i]) + int(g.rec_len[i])])

    record = {raw(ga, i): i for i in range(len(ga))}
    twins = [(record[b], j) for j in range(len(gb)) if (b := raw(gb, j)) in record]
    assert len(twins) > 10
    ia, ib = twins[len(twins) // 2]
    _damage_name(later, ib)
    want_later = _error_line(lambda: load_graph(later))
    with _Spy() as spy:
        assert _error_line(lambda: TraceSet.load(tmp_path / "w")) == want_later
    assert spy.decoded == 1
    _damage_name(first, ia)
    span = (int(ga.rec_start[ia]), int(gb.rec_start[ib]), int(ga.rec_len[ia]))
    assert first.read_bytes()[span[0] : span[0] + span[2]] == later.read_bytes()[span[1] : span[1] + span[2]]
    want = _error_line(lambda: load_graph(first))
    assert want.startswith(str(first) + ": ") and want != want_later
    with _Spy() as spy:
        assert _error_line(lambda: TraceSet.load(tmp_path / "w")) == want
    assert spy.decoded == 1


@pytest.mark.parametrize("seed", range(6))
def test_group_records_matches_exact_bytes(seed):
    """Against a dict of the records' bytes: every record's representative has its bytes, and
    records that differ only between the sampled words (byte 20 of 60) are never grouped."""
    rng = np.random.default_rng(seed)
    pool = [rng.integers(0, 256, int(rng.integers(0, 90)), dtype=np.uint8).tobytes() for _ in range(40)]
    pool += [b"\x08\x01" + bytes(18) + bytes([k]) + bytes(39) for k in range(8)]  # differ at byte 20 only
    picks = rng.integers(0, len(pool), 3000)
    picks[rng.random(3000) < 0.1] = -1  # about 10 % unrepeated records
    records = [pool[p] if p >= 0 else rng.integers(0, 256, 50, dtype=np.uint8).tobytes() for p in picks]
    blob = bytearray()
    starts = []
    for r in records:
        blob += bytes([len(r)])  # any byte between records: comparisons must not read past a record
        starts.append(len(blob))
        blob += r
    arr = np.zeros(len(blob) + 16, dtype=np.uint8)
    arr[: len(blob)] = np.frombuffer(bytes(blob), dtype=np.uint8)
    groups = dedupe.group_records(
        arr, np.array(starts, dtype=np.int64), np.array([len(r) for r in records], dtype=np.int64)
    )
    assert groups is not None
    assert np.all(groups.distinct[1:] > groups.distinct[:-1])
    for i, r in enumerate(records):
        assert records[groups.distinct[groups.rep[i]]] == r
    assert len(groups.distinct) < len(set(records)) + 0.05 * len(records)  # repeats are found


def test_group_records_gives_up_when_records_differ():
    """Records that all differ in their first word (a converted trace's) are not grouped."""
    records = [i.to_bytes(8, "little") * 10 for i in range(1000)]
    blob = b"".join(records)
    arr = np.zeros(len(blob) + 16, dtype=np.uint8)
    arr[: len(blob)] = np.frombuffer(blob, dtype=np.uint8)
    starts = np.arange(0, len(blob), 80, dtype=np.int64)
    assert dedupe.group_records(arr, starts, np.full(1000, 80, dtype=np.int64)) is None
