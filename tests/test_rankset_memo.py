"""Per-file rules memoised on the identity of their inputs (``FileChecker.memoised``, ``SameInputs``).

After ``SharedColumns.share`` the ranks of a pipeline stage hold the very same column arrays, so a
rule whose inputs are all the same objects (and whose parameters are equal) reuses an earlier
rank's findings, renamed to this file. These tests hold the memoised analysis to running every rule
on every file: same findings (file, node, rule, severity, message, order) and same results, on
random damaged sets and on sets whose ranks differ in exactly one rule's input.
"""

from __future__ import annotations

import tempfile
from collections import Counter
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from ranksets import RankSetSpec, rank_sets
from test_rankset import coll, node, write_set

from chakra_pipe.et import schema
from chakra_pipe.et.attrs import make_attr
from chakra_pipe.et.traceset import TraceSet
from chakra_pipe.rankset import analyze, twins
from chakra_pipe.rankset.analysis import file_results
from chakra_pipe.rankset.comm import CommSpecs, canonical_group, comm_specs
from chakra_pipe.rankset.set_rules import _ranked


def per_file(prefix: Path | str, full: bool, memo: bool, splits: int = 1):
    ts = TraceSet.load(prefix)  # a fresh load: the memoised pass shares (and freezes) columns
    files = [str(f) for f in ts.files]
    names = [str(k) for k in ts.comm_groups] if ts.comm_groups else []
    return file_results(ts.ranks, files, names, splits, full, memo=memo)


def assert_same_as_every_rule_on_every_file(prefix: Path | str, full: bool, splits: int = 1) -> None:
    results, slots, _ = per_file(prefix, full, True, splits)
    plain, plain_slots, _ = per_file(prefix, full, False, splits)
    assert [f for r in results for f in r.findings] == [f for r in plain for f in r.findings]
    assert slots == plain_slots
    for got, want in zip(results, plain):
        assert got.comm_ok == want.comm_ok
        assert got.metadata_tables == want.metadata_tables
        assert np.array_equal(got.issue_order, want.issue_order)
        assert np.array_equal(got.stuck, want.stuck)
        assert np.array_equal(got.parents.ptr, want.parents.ptr)
        assert np.array_equal(got.parents.parents, want.parents.parents)


@settings(
    max_examples=150,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(spec=rank_sets(), full=st.booleans(), splits=st.sampled_from((1, 3)))
def test_random_damaged_sets_get_the_findings_of_every_rule_on_every_file(spec: RankSetSpec, full: bool, splits: int):
    with tempfile.TemporaryDirectory() as tmp:
        assert_same_as_every_rule_on_every_file(spec.write(Path(tmp)), full, splits)


def _ranks(odd: dict) -> list[list]:
    """Four ranks of one shape (compute, all-reduce, compute), whose bytes differ only in node
    names (so none are twins, and every rule input is shared), except rank 2's ``odd`` changes."""
    ranks = []
    for r in range(4):
        first = node(1, dur=5, num_ops=10, tensor_size=64)
        last = node(3, data=[2], dur=7)
        comm = coll(2, data=[1], size=4096)
        if r == 2:
            first, comm, last = odd.get("first", first), odd.get("comm", comm), odd.get("last", last)
        for n in (first, comm, last):
            n.name = f"r{r}.n{n.id}"
        ranks.append([first, comm, last])
    return ranks


ODD = {
    "times": ("zero-duration", {"last": node(3, data=[2], dur=0)}),
    "comm-nodes": ("comm-node", {"comm": coll(2, data=[1], size=-4)}),
    "structure": ("dangling-data-dep", {"last": node(3, data=[2, 99], dur=7)}),
    "mem-roofline": ("roofline-inputs", {"first": node(1, dur=5, num_ops=10, tensor_size=0)}),
    "pg-names": ("pg-name", {"comm": coll(2, data=[1], size=4096, pg="7")}),
}


def _served(monkeypatch) -> Counter[str]:
    """Per rule name, how many results the memo served instead of running the rule."""
    served: Counter[str] = Counter()
    get = twins.SameInputs.get

    def counted(self, name, inputs, params=()):
        key, hit = get(self, name, inputs, params)
        served[name] += hit is not None
        return key, hit

    monkeypatch.setattr(twins.SameInputs, "get", counted)
    return served


@pytest.mark.parametrize("rule", sorted(ODD))
def test_a_rank_differing_in_one_rule_input_gets_that_rules_finding(rule, tmp_path, monkeypatch):
    finding, odd = ODD[rule]
    prefix = write_set(tmp_path, _ranks(odd))
    served = _served(monkeypatch)
    results, _, _ = per_file(prefix, False, True)
    found = [(Path(f.file).name, f.rule) for r in results for f in r.findings if f.rule == finding]
    assert found == [("w.2.et", finding)]
    # ranks 1 and 3 reused rank 0's results of the rules rank 2's change does not touch
    assert served["times"] >= 1 and served["structure"] >= 1 and served["comm-nodes"] >= 1
    monkeypatch.undo()
    for full in (False, True):
        assert_same_as_every_rule_on_every_file(prefix, full)


def test_each_rank_is_checked_against_its_own_rank_when_it_has_sends(tmp_path):
    """A send's ``comm_src`` is checked against the file's rank: the rank is a parameter of the
    comm-node rule for files with sends or receives, so equal columns on two ranks do not share a
    result (both name comm_src 0: right on rank 0, wrong on rank 1)."""
    send = dict(comm_src=0, comm_dst=1, comm_tag=5, comm_size=64)
    ranks = [[node(1, schema.COMM_SEND_NODE, **send)] for _ in range(2)]
    results, _, _ = per_file(write_set(tmp_path, ranks), False, True)
    assert [(Path(f.file).name, f.rule) for r in results for f in r.findings if f.rule == "comm-node"] == [
        ("w.1.et", "comm-node")
    ]


def test_ranks_whose_sends_name_themselves_share_the_comm_node_result(tmp_path, monkeypatch):
    """A ring of sends and receives: every rank's comm_src / comm_dst columns differ (they hold
    the rank), yet each names its own rank, so the comm-node rule runs once for the shape; a rank
    whose receive names another rank as comm_dst still gets its own finding."""
    world = 4
    ranks = []
    for r in range(world):
        send = node(1, schema.COMM_SEND_NODE, comm_src=r, comm_dst=(r + 1) % world, comm_tag=5, comm_size=64)
        dst = 0 if r == 3 else r  # rank 3's receive claims to be rank 0's
        recv = node(2, schema.COMM_RECV_NODE, comm_src=(r - 1) % world, comm_dst=dst, comm_tag=5, comm_size=64)
        ranks.append([send, recv])
    prefix = write_set(tmp_path, ranks)
    served = _served(monkeypatch)
    results, _, _ = per_file(prefix, False, True)
    assert served["comm-nodes"] == 2  # ranks 1 and 2 reuse rank 0's; rank 3 is checked itself
    found = [(Path(f.file).name, f.rule, f.message) for r in results for f in r.findings if f.rule == "comm-node"]
    assert found == [("w.3.et", "comm-node", "COMM_RECV_NODE 'n2': comm_dst 0 is not this file's rank 3")]
    monkeypatch.undo()
    assert_same_as_every_rule_on_every_file(prefix, False)


def assert_same_specs(got: CommSpecs, want: CommSpecs) -> None:
    for name in ("index", "kind", "comm_type", "nbytes", "group", "channel", "pos"):
        a, b = getattr(got, name), getattr(want, name)
        assert a.dtype == b.dtype and a.shape == b.shape and np.array_equal(a, b), name
    assert (got.names, got.members) == (want.names, want.members)


@settings(
    max_examples=80,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(spec=rank_sets())
def test_comm_specs_shared_between_ranks_are_each_ranks_own(spec: RankSetSpec):
    """``comm_specs`` with the analysis' memo (columns shared by ranks with the same inputs) gives
    every rank the specs it gets alone: its own group numbers, peers and channels; and its collective
    sequences (named by its own groups, in their order) and p2p issue order are those it gets alone."""
    with tempfile.TemporaryDirectory() as tmp:
        ts = TraceSet.load(spec.write(Path(tmp)))
        a = analyze(ts)
        for v in a.ranks:
            assert_same_specs(v.specs, comm_specs(v.graph, v.rank, v.result.comm_ok, a.groups.members))
            alone = replace(v, shared=None)
            assert list(v.sequences) == list(alone.sequences)
            for name, seq in v.sequences.items():
                own = alone.sequences[name]
                assert np.array_equal(seq.records, own.records) and seq.signature == own.signature
                assert np.array_equal(seq.change, own.change)
            assert np.array_equal(v.p2p_in_order, alone.p2p_in_order)


def test_a_ring_shares_its_spec_columns_but_each_rank_has_its_own_channels(tmp_path):
    """Ranks of one shape keep one copy of the records, kinds, sizes and positions of their comm
    specs (read-only: shared), while each rank's channels name its own peers."""
    world = 4
    ranks = []
    for r in range(world):
        send = node(1, schema.COMM_SEND_NODE, comm_src=r, comm_dst=(r + 1) % world, comm_tag=5, comm_size=64)
        recv = node(2, schema.COMM_RECV_NODE, comm_src=(r - 1) % world, comm_dst=r, comm_tag=5, comm_size=64)
        ranks.append([send, recv, coll(3, data=[1, 2], size=4096)])
    a = analyze(TraceSet.load(write_set(tmp_path, ranks)))
    first, last = a.ranks[0].specs, a.ranks[-1].specs
    assert first.index is last.index and first.nbytes is last.nbytes and first.pos is last.pos
    with pytest.raises(ValueError, match="read-only"):
        last.nbytes[0] = 1
    assert [s.channel for s in (first[0], first[1], last[0], last[1])] == [(0, 1, 5), (3, 0, 5), (3, 0, 5), (2, 3, 5)]


def assert_specs_are_the_definition(v, members: dict[str, tuple[int, ...]]) -> None:
    """A rank's spec columns read straight off its graph: a send or receive's channel is the
    ``int_attr`` of ``comm_src`` / ``comm_dst`` (default: the rank) and ``comm_tag`` at its record,
    a collective's ``(-1, -1, 0)`` and group number that of its ``pg_name`` (the world's where none);
    int32 channels exactly when every value fits."""
    g, specs = v.graph, v.specs
    defaults = (("comm_src", v.rank), ("comm_dst", v.rank), ("comm_tag", 0))
    peer = [g.int_attr(name, default) for name, default in defaults]
    number = {name: k for k, name in enumerate(members)}
    want_channel, want_group = [], []
    for i, kind in zip(specs.index.tolist(), specs.kind.tolist()):
        coll = kind == 0
        want_channel.append((-1, -1, 0) if coll else tuple(int(c[i]) for c in peer))
        want_group.append(number[canonical_group(g.pg_name.get(i, ""))] if coll else -1)
    fits = all(-(2**31) <= x < 2**31 for row in want_channel for x in row)
    assert specs.channel.dtype == (np.int32 if fits and want_channel else np.int64)
    assert [tuple(row) for row in specs.channel.tolist()] == want_channel
    assert specs.group.tolist() == want_group


@settings(
    max_examples=60,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(spec=rank_sets())
def test_comm_spec_channels_and_groups_are_read_off_each_ranks_records(spec: RankSetSpec):
    with tempfile.TemporaryDirectory() as tmp:
        a = analyze(TraceSet.load(spec.write(Path(tmp))))
        for v in a.ranks:
            assert_specs_are_the_definition(v, a.groups.members)


@pytest.mark.parametrize(("peer", "kind"), [(-3, None), (2**40, "int64_val"), (2**63 + 5, "uint64_val"), (None, None)])
def test_channels_with_negative_huge_or_absent_peers_are_read_as_int_attr_reads_them(peer, kind, tmp_path):
    """The gathered channel path against the definition where a value is negative (``int_attr``
    may saturate), does not fit int32 (the channels widen), or is absent (the rank)."""
    world = 4
    ranks = []
    for r in range(world):
        send = node(1, schema.COMM_SEND_NODE, comm_tag=5, comm_size=64)
        if peer is not None:
            send.attr.append(make_attr("comm_dst", peer, kind))
        recv = node(2, schema.COMM_RECV_NODE, comm_src=(r - 1) % world, comm_tag=7, comm_size=64)
        ranks.append([send, recv, coll(3, pg="0", data=[1, 2], size=4096)])
    a = analyze(TraceSet.load(write_set(tmp_path, ranks)))
    for v in a.ranks:
        assert_specs_are_the_definition(v, a.groups.members)


@settings(max_examples=200, deadline=None, derandomize=True, database=None)
@given(group=st.lists(st.integers(min_value=-1, max_value=40), max_size=60))
def test_group_labels_by_counting_are_np_uniques(group: list[int]):
    """The sequences' group labels (``set_rules._ranked``) are ``np.unique``'s codes and inverse."""
    codes, labels = _ranked(np.asarray(group, dtype=np.int32))
    want_codes, want_labels = np.unique(np.asarray(group, dtype=np.int32), return_inverse=True)
    assert codes.tolist() == want_codes.tolist() and labels.tolist() == want_labels.tolist()
