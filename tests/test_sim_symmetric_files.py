"""Symmetric runs of rank FILES (``sim/symmetric_files.py``): proven, then identical to the full engine.

Every case writes a generated step with ``generate llm``'s writer, loads it as ``chakra-pipe simulate``
does, and compares the default run (one representative per class where the set's symmetry is proven)
with ``symmetric=False`` (every rank on the full engine): every per-rank figure, every collective record,
the statistics lines and the timeline. A set with one rank's file edited, and one numbered otherwise
than Megatron, must run on the full engine and say why.
"""

from __future__ import annotations

import dataclasses
import json
import logging

import numpy as np
import pytest
from test_sim_symmetric import hardware

from chakra_pipe.et import schema
from chakra_pipe.et.attrs import get_int, set_attr
from chakra_pipe.et.framing import read_trace, write_trace
from chakra_pipe.et.traceset import TraceSet
from chakra_pipe.generate.llm import generate_llm
from chakra_pipe.generate.options import resolve_llm
from chakra_pipe.results.collectives import simulated_rows
from chakra_pipe.sim import simulate
from chakra_pipe.sim.config import SystemConfig
from chakra_pipe.sim.result import finished_line
from chakra_pipe.sim.stats import rank_statistics
from chakra_pipe.sim.timeline import FLOW_CATEGORY

TINY = {"model": "gpt3-13b", "layers": 2, "hidden": 128, "heads": 8, "ffn": 512, "vocab": 256, "seq": 64}
MOE = {"model": "mixtral-8x7b", "layers": 2, "hidden": 128, "heads": 8, "ffn": 256, "vocab": 256, "seq": 64}
LOG = "chakra_pipe.sim.symmetric_files"

SETS = {
    "tp+dp": {**TINY, "tp": 2, "dp": 4},
    "tp+dp+pp": {**TINY, "tp": 2, "dp": 2, "pp": 2, "microbatches": 2},
    "tp+dp+pp zero": {**TINY, "layers": 4, "tp": 4, "dp": 4, "pp": 4, "microbatches": 4, "zero": 1},
    "ep": {**MOE, "tp": 2, "dp": 8, "ep": 4},
    "ep+pp": {**MOE, "tp": 2, "dp": 8, "ep": 2, "pp": 2, "microbatches": 2},
}


def write_set(tmp_path, options: dict, name: str = "s", **extra) -> str:
    model, spec = resolve_llm({**options, **extra})
    generate_llm(model, spec, tmp_path / name)
    return str(tmp_path / name)


def assert_full_engine_result(quick, full, hw) -> None:
    """Every output of the two runs is the same: per-rank lists, records, statistics, printed lines,
    the per-collective rows (group sizes looked up by each rank's own group names)."""
    assert quick.to_dict() == full.to_dict()
    assert simulated_rows(quick, "c", "w", "p", hw.backend) == simulated_rows(full, "c", "w", "p", hw.backend)
    assert rank_statistics(quick, hw.system) == rank_statistics(full, hw.system)
    assert quick.timeline() == full.timeline()
    lines = [finished_line(r, t, x) for r, (t, x) in enumerate(zip(quick.finish_ns, quick.exposed_comm_ns))]
    assert lines == [finished_line(r, t, x) for r, (t, x) in enumerate(zip(full.finish_ns, full.exposed_comm_ns))]


CASES = [
    ("tp+dp", (8,), "congestion_unaware", "ring"),
    ("tp+dp", (2, 4), "congestion_aware", "ring"),
    ("tp+dp+pp", (8,), "congestion_aware", "ring"),
    ("tp+dp+pp", (2, 2, 2), "congestion_unaware", "direct"),
    ("tp+dp+pp zero", (64,), "congestion_unaware", "ring"),
    ("tp+dp+pp zero", (4, 16), "congestion_aware", "ring"),
    ("tp+dp+pp zero", (4, 16), "congestion_unaware", "direct"),
    ("ep", (16,), "congestion_aware", "direct"),
    ("ep", (2, 8), "congestion_unaware", "ring"),
    ("ep+pp", (32,), "congestion_unaware", "ring"),
    ("ep+pp", (2, 16), "congestion_aware", "ring"),
]


@pytest.mark.parametrize(("layout", "dims", "backend", "algo"), CASES, ids=[" ".join(map(str, c)) for c in CASES])
def test_a_proven_symmetric_file_set_runs_the_quotient_identical_to_the_full_engine(
    tmp_path, caplog, layout, dims, backend, algo
):
    ts = TraceSet.load(write_set(tmp_path, SETS[layout]))
    hw = hardware(dims, algo=algo, backend=backend)
    with caplog.at_level(logging.INFO, logger=LOG):
        quick = simulate(ts, hw)
    assert any("symmetric run of" in r.getMessage() for r in caplog.records), caplog.text
    full = simulate(ts, hw, symmetric=False)
    assert quick.messages < full.messages  # the representatives' messages only: the quotient ran
    assert_full_engine_result(quick, full, hw)


def _edit(path: str, change) -> None:
    """Rewrite one rank file with ``change(node)`` applied to every node."""
    metadata, nodes = read_trace(path)
    for n in nodes:
        change(n)
    write_trace(path, metadata, nodes)


def test_one_rank_file_edited_runs_on_the_full_engine_with_that_ranks_result(tmp_path, caplog):
    prefix = write_set(tmp_path, SETS["tp+dp+pp"])
    hw = hardware((8,))
    before = simulate(TraceSet.load(prefix), hw)
    edited = {"done": False}

    def longer_first_compute(n) -> None:
        if n.type == schema.COMP_NODE and not edited["done"]:
            n.duration_micros += 1000
            edited["done"] = True

    _edit(f"{prefix}.5.et", longer_first_compute)
    ts = TraceSet.load(prefix)
    with caplog.at_level(logging.INFO, logger=LOG):
        quick = simulate(ts, hw)
    assert "rank 5 differs from its representative 4: column duration_micros" in caplog.text
    full = simulate(ts, hw, symmetric=False)
    assert quick.messages == full.messages  # no quotient: the full engine ran
    assert_full_engine_result(quick, full, hw)
    assert quick.finish_ns[5] > before.finish_ns[5]  # the edit is simulated, not its representative's trace


def test_a_set_numbered_otherwise_than_megatron_runs_on_the_full_engine(tmp_path, caplog):
    """Ranks relabelled by x → 5x mod 16 (files, groups, peers): a valid set, but no tp/dp/pp layout
    of Megatron's numbering translates it, so the full engine runs and the log says why."""
    prefix = write_set(tmp_path, SETS["ep"], no_metadata_node=True)
    world = 16
    relabel = [(5 * x) % world for x in range(world)]
    renamed = tmp_path / "perm"
    for x in range(world):
        metadata, nodes = read_trace(f"{prefix}.{x}.et")
        for n in nodes:
            for attr in ("comm_src", "comm_dst"):
                peer = get_int(n, attr, -1)
                if peer is not None and peer >= 0:
                    set_attr(n, attr, relabel[peer])
        write_trace(f"{renamed}.{relabel[x]}.et", metadata, nodes)
    groups = json.loads((tmp_path / "s.comm_groups.json").read_text())
    (tmp_path / "perm.comm_groups.json").write_text(
        json.dumps({g: sorted(relabel[m] for m in members) for g, members in groups.items()})
    )
    ts = TraceSet.load(renamed)
    hw = hardware((16,))
    with caplog.at_level(logging.INFO, logger=LOG):
        quick = simulate(ts, hw)
    assert "full engine: no proven rank symmetry" in caplog.text
    full = simulate(ts, hw, symmetric=False)
    assert quick.messages == full.messages
    assert_full_engine_result(quick, full, hw)


def test_groups_from_metadata_nodes_alone_are_inferred_and_proven(tmp_path, caplog):
    """Without a comm-group file the METADATA nodes create the groups when they run: the layout comes
    from them and the representatives create theirs as the full engine's ranks do."""
    prefix = write_set(tmp_path, SETS["ep+pp"])
    (tmp_path / "s.comm_groups.json").unlink()
    ts = TraceSet.load(prefix)
    hw = hardware((32,), backend="congestion_aware")
    with caplog.at_level(logging.INFO, logger=LOG):
        quick = simulate(ts, hw)
    assert "symmetric run of tp 2 dp 8 pp 2 ep 2" in caplog.text
    full = simulate(ts, hw, symmetric=False)
    assert quick.messages < full.messages
    assert_full_engine_result(quick, full, hw)


@pytest.mark.parametrize(
    ("topology", "algo", "reason"),
    [
        (["Ring"], "ring", "network dimension 0 is a Ring"),
        (["Switch"], "halvingDoubling", "uses halvingDoubling"),
    ],
)
def test_hardware_the_quotient_is_not_exact_on_runs_the_full_engine_and_says_why(
    tmp_path, caplog, topology, algo, reason
):
    ts = TraceSet.load(write_set(tmp_path, SETS["tp+dp"]))
    hw = hardware((8,), topology=topology, algo=algo)
    with caplog.at_level(logging.INFO, logger=LOG):
        quick = simulate(ts, hw)
    assert "full engine: no proven rank symmetry" in caplog.text and reason in caplog.text, caplog.text
    assert quick.to_dict() == simulate(ts, hw, symmetric=False).to_dict()


def test_one_set_on_many_hardware_points_is_proven_once_and_exact_on_each(tmp_path, monkeypatch):
    """A sweep simulates one loaded set on many points: the proof is kept per set, group table and
    symmetry (``fit`` may change it per point), and each point still equals its full-engine run."""
    from chakra_pipe.sim import symmetric_files

    proofs = []
    prove = symmetric_files.trace_problem
    monkeypatch.setattr(symmetric_files, "trace_problem", lambda *a: proofs.append(a[2]) or prove(*a))
    ts = TraceSet.load(write_set(tmp_path, SETS["tp+dp+pp"]))
    points = [hardware((8,)), hardware((8,), bandwidth=(100.0,)), hardware((2, 4), backend="congestion_aware")]
    for hw in points:
        assert simulate(ts, hw).to_dict() == simulate(ts, hw, symmetric=False).to_dict()
    assert len(proofs) == len(set(proofs)) == 1


def _append_collective(path: str, **attrs) -> None:
    """Append an all-reduce of 1 MiB after the file's last node, with ``attrs`` (pg_name, involved_dim)."""
    metadata, nodes = read_trace(path)
    last = nodes[-1]
    node = type(last)()
    node.id, node.name, node.type = max(n.id for n in nodes) + 1, "world_all_reduce", schema.COMM_COLL_NODE
    node.data_deps.append(last.id)
    set_attr(node, "is_cpu_op", False)
    set_attr(node, "comm_type", schema.ALL_REDUCE, "int64_val")
    set_attr(node, "comm_size", 1 << 20, "int64_val")
    for name, value in attrs.items():
        set_attr(node, name, value)
    nodes.append(node)
    write_trace(path, metadata, nodes)


def _mixed_algorithms(hw, algos: list[str]):
    """``hw`` with the per-dimension algorithm list ``algos`` for every collective (``hardware``'s
    other system keys)."""
    keys = ("all-reduce", "all-gather", "reduce-scatter", "all-to-all")
    system = {
        "scheduling-policy": "LIFO",
        "collective-optimization": "localBWAware",
        "endpoint-delay": 10,
        "active-chunks-per-dimension": 1,
        "preferred-dataset-splits": 4,
        **{f"{k}-implementation": list(algos) for k in keys},
        "local-mem-bw": 3350,
        "peak-perf": 989,
        "roofline-enabled": 0,
    }
    return dataclasses.replace(hw, system=SystemConfig.from_dict(system, source="sys.json"))


WORLD_CASES = [
    ("no pg_name", {}, hardware((8,))),
    ("pg_name 0", {"pg_name": "0"}, hardware((8,), algo="direct")),
    ("no pg_name", {}, hardware((2, 4), backend="congestion_aware")),
    ("involved_dim", {"involved_dim": [True]}, hardware((8,))),
    ("per-dimension algorithms", {}, _mixed_algorithms(hardware((2, 4)), ["ring", "halvingDoubling"])),
    (
        "per-dimension algorithms involved_dim",
        {"involved_dim": [True, True]},
        _mixed_algorithms(hardware((2, 4), backend="congestion_aware"), ["ring", "halvingDoubling"]),
    ),
]


@pytest.mark.parametrize(("label", "attrs", "hw"), WORLD_CASES, ids=[f"{c[0]} {c[2].backend}" for c in WORLD_CASES])
def test_a_collective_over_every_rank_runs_on_the_full_engine(tmp_path, caplog, label, attrs, hw):
    """A world collective (no pg_name, a world name, or involved_dim) runs the global plan, which
    follows the physical dimensions (and any algorithm of a per-dimension list): the groups prove
    nothing about it, so the quotient is declined and every output is the full engine's (the quotient
    gave one finish time to four ranks whose world all-reduce ends at four, or crashed on a
    halving-doubling dimension)."""
    prefix = write_set(tmp_path, SETS["tp+dp+pp"])
    for x in range(8):
        _append_collective(f"{prefix}.{x}.et", **attrs)
    ts = TraceSet.load(prefix)
    with caplog.at_level(logging.INFO, logger=LOG):
        quick = simulate(ts, hw)
    assert "full engine: symmetric run declined" in caplog.text and "a collective over every rank" in caplog.text
    full = simulate(ts, hw, symmetric=False)
    assert quick.messages == full.messages
    assert_full_engine_result(quick, full, hw)


@dataclasses.dataclass
class _PeerColumns:
    """A rank's attribute columns as the peer check reads them (``attr_value`` / ``attr_kind``)."""

    attr_value: dict
    attr_kind: dict

    def __len__(self) -> int:
        return len(self.attr_kind["comm_src"])


@pytest.mark.parametrize("batch_nodes", [1, 1 << 16, 1 << 30])
def test_the_peer_check_finds_the_same_rank_whatever_its_batches(tmp_path, monkeypatch, batch_nodes):
    """The peer check runs over batches of ranks (its temporaries were the 1,024-rank command's
    peak): a rank whose receive names another peer is found, and named, however the ranks are cut."""
    from chakra_pipe.sim import symmetric_files
    from chakra_pipe.sim.symmetric import RankSymmetry

    monkeypatch.setattr(symmetric_files, "PEER_BATCH_NODES", batch_nodes)
    ranks = TraceSet.load(write_set(tmp_path, SETS["tp+dp+pp"])).ranks
    sym = RankSymmetry(2, 2, 2)
    reps = sym.rep(np.arange(8)).tolist()
    others = [x for x in range(8) if x != reps[x]]
    gr = [ranks[reps[x]] for x in others]
    assert symmetric_files._peer_values(sym, others, [ranks[x] for x in others], gr) is None
    src = ranks[6].attr_value["comm_src"].copy()
    received = np.flatnonzero((ranks[6].types == schema.COMM_RECV_NODE) & (ranks[6].attr_kind["comm_src"] != 0))
    assert src[received[-1]] == 2  # stage 1's rank 6 receives from stage 0's rank 2
    src[received[-1]] = 3
    edited = _PeerColumns({**ranks[6].attr_value, "comm_src": src}, ranks[6].attr_kind)
    gx = [edited if x == 6 else ranks[x] for x in others]
    why = symmetric_files._peer_values(sym, others, gx, gr)
    assert why == "rank 6 differs from its representative: attribute comm_src"


def test_the_analysis_keeps_equal_columns_of_consecutive_ranks_once_and_read_only(tmp_path):
    """``rankset.twins.SharedColumns``: a stage's ranks share one copy of each equal column (the
    memory of a 1,024-rank step), every value stays what the file says, and no one can write
    through one rank into the others."""
    from chakra_pipe.et.graph import INT_ATTRS
    from chakra_pipe.rankset import analyze

    prefix = write_set(tmp_path, SETS["tp+dp+pp"])
    ts, fresh = TraceSet.load(prefix), TraceSet.load(prefix)
    analyze(ts)
    first, peer = ts.ranks[0], ts.ranks[1]  # tensor-parallel peers: one program
    assert first.types is peer.types and first.data_ids is peer.data_ids
    assert first.attr_kind["comm_type"] is peer.attr_kind["comm_type"]
    with pytest.raises(ValueError, match="read-only"):
        peer.duration_micros[0] = 1
    for g, f in zip(ts.ranks, fresh.ranks):
        for name in ("ids", "types", "duration_micros", "data_ptr", "data_ids", "ctrl_ptr", "ctrl_ids", "rec_start"):
            assert np.array_equal(getattr(g, name), getattr(f, name)), name
        for a in INT_ATTRS:
            assert np.array_equal(g.attr_value[a], f.attr_value[a]) and np.array_equal(g.attr_kind[a], f.attr_kind[a])
        assert g.pg_name == f.pg_name and g.involved_dim == f.involved_dim


def test_a_rank_whose_pg_name_sits_on_other_records_is_not_its_representatives_translate(tmp_path):
    """The proof pairs group names by position when a rank's and its representative's pg_name
    records are the same; one whose records differ (a collective's pg_name dropped) is refused by
    name, and an unedited set is proven."""
    from chakra_pipe.rankset import analyze
    from chakra_pipe.sim.symmetric_files import find_symmetry, trace_problem

    prefix = write_set(tmp_path, SETS["tp+dp+pp"])
    hw = hardware((8,))

    def proof() -> str | None:
        ts = TraceSet.load(prefix)
        table = analyze(ts).groups
        sym, why = find_symmetry(table, len(ts.ranks), hw)
        assert sym is not None, why
        return trace_problem(ts, table, sym)[0]

    assert proof() is None
    dropped = {"done": False}

    def drop_first_pg_name(n) -> None:
        named = [a for a in n.attr if a.name == "pg_name"]
        if named and not dropped["done"]:
            n.attr.remove(named[0])
            dropped["done"] = True

    _edit(f"{prefix}.5.et", drop_first_pg_name)
    assert proof() == "rank 5 differs from its representative 4: which nodes carry a pg_name"


def test_pg_names_written_as_std_stoi_reads_them_run_as_their_group_ids(tmp_path):
    """Every named group's ``pg_name`` respelled (``"1"`` → ``"01"`` / ``"+1"``, as ASTRA-sim's
    ``std::stoi`` reads both): the run is the one of the set as generated, on either engine, and each
    collective record keeps its name as written."""
    prefix = write_set(tmp_path, SETS["tp+dp+pp"])
    hw = hardware((8,))
    before = simulate(TraceSet.load(prefix), hw)
    world = len(before.finish_ns)

    def respell(rank: int):
        def change(n) -> None:
            for a in n.attr:
                if a.name == "pg_name" and a.string_val not in ("", "0"):
                    a.string_val = ("0" if rank % 2 else "+") + a.string_val

        return change

    for rank in range(world):
        _edit(f"{prefix}.{rank}.et", respell(rank))
    ts = TraceSet.load(prefix)
    quick, full = simulate(ts, hw), simulate(ts, hw, symmetric=False)
    assert_full_engine_result(quick, full, hw)
    assert full.finish_ns == before.finish_ns and full.exposed_comm_ns == before.exposed_comm_ns
    respelled = [c for c in full.collectives if c.group not in ("", "0")]
    assert respelled and all(c.group[0] == ("0" if c.rank % 2 else "+") for c in respelled)
    assert [dataclasses.replace(c, group="") for c in full.collectives] == [
        dataclasses.replace(c, group="") for c in before.collectives
    ]
    # the per-collective rows size each group by its id, and the timeline joins ranks spelling it apart
    rows = [simulated_rows(r, "c", "w", "p", hw.backend) for r in (full, before)]
    assert [{**row, "group": ""} for row in rows[0]] == [{**row, "group": ""} for row in rows[1]]
    flows = [[e for e in r.timeline()["traceEvents"] if e.get("cat") == FLOW_CATEGORY] for r in (full, before)]
    assert len(flows[0]) == len(flows[1])
