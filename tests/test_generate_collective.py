"""Collective microbenchmarks: byte parity with ASTRA-sim's shipped examples, sizes, CLI."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import skip_reason

from chakra_pipe.cli import main
from chakra_pipe.errors import InputError
from chakra_pipe.et import TraceSet, read_trace, schema
from chakra_pipe.generate.collective import CollectiveSpec, generate_collective
from chakra_pipe.generate.sizes import parse_size, size_label

MICRO = Path("astra-sim/workload/microbenchmarks")


@pytest.mark.parametrize("coll", ["all_reduce", "all_gather", "all_to_all"])
@pytest.mark.parametrize("npus", [4, 8, 16])
def test_byte_identical_to_astra_sim_fixtures(fixtures_dir, tmp_path, coll, npus):
    folder = fixtures_dir / MICRO / coll / f"{npus}npus_1MB"
    if not folder.is_dir():
        pytest.skip(skip_reason(folder))
    assert (
        main(
            [
                "generate",
                "collective",
                "--type",
                coll,
                "--npus",
                str(npus),
                "--size",
                "1MB",
                "--out",
                str(tmp_path / coll),
            ]
        )
        == 0
    )
    for rank in range(npus):
        ours = (tmp_path / f"{coll}.{rank}.et").read_bytes()
        assert ours == (folder / f"{coll}.{rank}.et").read_bytes(), f"rank {rank} differs"
    assert not (tmp_path / f"{coll}.{npus}.et").exists()


def test_spellings_of_one_mebibyte_give_the_same_files(tmp_path):
    outputs = []
    for i, text in enumerate(["1MiB", "1MB", "1048576", "1024KiB"]):
        generate_collective(CollectiveSpec("all_gather", 2, parse_size(text)), tmp_path / f"s{i}")
        outputs.append((tmp_path / f"s{i}.1.et").read_bytes())
    assert len(set(outputs)) == 1


def test_canonical_attribute_kinds_and_layout(tmp_path):
    generate_collective(CollectiveSpec("reduce_scatter", 3, 64 << 10), tmp_path / "rs")
    md, nodes = read_trace(tmp_path / "rs.2.et")
    assert md.version == "0.0.4" and not md.attr
    (node,) = nodes
    assert (node.id, node.name, node.type) == (2, "reduce_scatter_3npus_64KB", schema.COMM_COLL_NODE)
    got = [(a.name, a.WhichOneof("value")) for a in node.attr]
    assert got == [("is_cpu_op", "bool_val"), ("comm_type", "int64_val"), ("comm_size", "int64_val")]
    assert node.attr[1].int64_val == schema.REDUCE_SCATTER and node.attr[2].int64_val == 65536


def test_iterations_are_chained_by_data_deps(tmp_path):
    generate_collective(CollectiveSpec("broadcast", 4, 4096, iterations=3), tmp_path / "b")
    ts = TraceSet.load(tmp_path / "b")
    assert len(ts) == 4
    g = ts.ranks[1]
    assert g.ids.tolist() == [1, 5, 9]
    assert [g.data_deps(i).tolist() for i in range(3)] == [[], [1], [5]]
    assert g.int_attr("comm_type").tolist() == [schema.BROADCAST] * 3
    assert g.int_attr("comm_size").tolist() == [4096] * 3


@pytest.mark.parametrize(
    "text,expected",
    [("1MiB", 1 << 20), ("64KiB", 65536), ("1MB", 1 << 20), ("4096", 4096), ("2 GiB", 2 << 30), ("7b", 7)],
)
def test_parse_size(text, expected):
    assert parse_size(text) == expected


@pytest.mark.parametrize("text", ["", "1.5MB", "-4", "1XB", "MB", str(1 << 64)])
def test_parse_size_rejects(text):
    with pytest.raises(InputError, match="--size"):
        parse_size(text)


def test_size_label():
    assert [size_label(n) for n in (1 << 20, 65536, 1000, 3 << 30, 0)] == ["1MB", "64KB", "1000B", "3GB", "0B"]


def test_cli_rejects_bad_values_with_one_line(tmp_path, capsys):
    assert (
        main(
            [
                "generate",
                "collective",
                "--type",
                "all_reduce",
                "--npus",
                "0",
                "--size",
                "1MB",
                "--out",
                str(tmp_path / "x"),
            ]
        )
        == 2
    )
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "--npus" in err
    assert not list(tmp_path.iterdir())
