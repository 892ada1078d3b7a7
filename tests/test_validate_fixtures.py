"""Validator acceptance on the shared fixtures (chakra-format.md §8, §9; conformance suite)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import fixture_file, fixtures_path, skip_reason

from chakra_pipe import cli
from chakra_pipe.et import load_graph
from chakra_pipe.validate import validate_set


@pytest.fixture(scope="session")
def chakra0(fixtures_dir: Path) -> Path:
    return fixture_file(fixtures_dir, "chakra/chakra.0.et")


def run(capsys, *argv: str) -> tuple[int, list[str]]:
    rc = cli.main(list(argv))
    return rc, capsys.readouterr().out.splitlines()


def test_legacy_trace_errors_are_the_14_cpu_side_collectives_and_its_dangling_ctrl_deps(chakra0, capsys):
    rc, lines = run(capsys, "validate", str(chakra0))
    assert rc == 1
    errors, warnings = lines[-1].split(", ")
    assert errors == "1291 errors" and warnings.endswith(" warnings") and warnings.split()[0].isdigit()
    report = validate_set(chakra0)
    graph = load_graph(chakra0)
    names = {int(graph.ids[i]): graph.name(i) for i in range(len(graph))}
    errs = [f for f in report.findings if f.is_error and f.rule != "dangling-ctrl-dep"]
    # §8.1: 14 CPU-side c10d::* COMM_COLL nodes with is_cpu_op true and no comm attributes.
    assert {f.rule for f in errs} == {"comm-node"}
    assert all(names[f.node].startswith("c10d::") for f in errs) and len({f.node for f in errs}) == 14
    assert all(
        "is_cpu_op is true" in f.message and "comm_type missing" in f.message and "comm_size missing" in f.message
        for f in errs
    )
    # §8.1: 1,277 ctrl_deps point at absent ids — errors, one per node (one ctrl dep each): ASTRA-sim
    # refuses the file ("not found in index"), and so do simulate and replay.
    assert report.count("dangling-ctrl-dep", "error") == 1277
    assert int(warnings.split()[0]) == report.warnings


def test_strict_is_accepted_and_changes_nothing(chakra0, capsys):
    rc, lines = run(capsys, "validate", "--strict", str(chakra0))
    assert rc == 1
    assert lines[-1].startswith("1291 errors, ")


def test_printing_is_capped_but_json_has_every_finding(chakra0, capsys, tmp_path):
    out = tmp_path / "findings.json"
    rc, lines = run(capsys, "validate", str(chakra0), "--json", str(out))
    dangling_lines = [ln for ln in lines if ": dangling-ctrl-dep: " in ln]
    assert 0 < len(dangling_lines) <= 25
    assert any("1257 more dangling-ctrl-dep findings" in ln for ln in lines)
    doc = json.loads(out.read_text())
    assert doc["errors"] == 1291 and len(doc["findings"]) == doc["errors"] + doc["warnings"]
    assert sum(1 for f in doc["findings"] if f["rule"] == "dangling-ctrl-dep") == 1277
    first = doc["findings"][0]
    assert set(first) == {"file", "node", "rule", "severity", "message"}


def test_output_is_deterministic(chakra0, tmp_path, capsys):
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    run(capsys, "validate", str(chakra0), "--json", str(a))
    run(capsys, "validate", str(chakra0), "--json", str(b))
    assert a.read_bytes() == b.read_bytes()


def _microbenchmark_prefixes() -> list:
    root = fixtures_path() / "astra-sim" / "workload" / "microbenchmarks"
    found = sorted(f.with_name(f.name[: -len(".0.et")]) for f in root.glob("*/*/*.0.et"))
    return found or [pytest.param(root / "x/0npus/x", marks=pytest.mark.skip(reason=skip_reason(root)))]


@pytest.mark.parametrize("prefix", _microbenchmark_prefixes(), ids=lambda p: f"{p.parent.parent.name}/{p.parent.name}")
def test_astra_sim_microbenchmarks_have_no_errors(prefix, capsys):
    rc, lines = run(capsys, "validate", str(prefix))
    assert rc == 0 and lines[-1].startswith("0 errors, ")
    assert len(validate_set(prefix).files) == int(prefix.parent.name.split("npus")[0])


def _conformance_rows() -> list[tuple[str, str]]:
    from conftest import conformance_rows

    return sorted({(row["workload"], row["comm_groups"]) for row in conformance_rows()})


@pytest.mark.parametrize("workload,comm_groups", _conformance_rows())
def test_conformance_workloads_have_no_errors(conformance_dir, workload, comm_groups, capsys):
    argv = ["validate", str(conformance_dir / workload)]
    if comm_groups:
        argv += ["--comm-group-configuration", str(conformance_dir / comm_groups)]
    rc, lines = run(capsys, *argv)
    assert rc == 0 and lines[-1].startswith("0 errors, "), "\n".join(lines[-5:])


def test_every_conformance_workload_is_covered(conformance_dir):
    """Each rank set under gen/ appears in expected.csv, so the parametrized test checks all of them."""
    listed = {w for w, _ in _conformance_rows()}
    found = {
        str(p.relative_to(conformance_dir)).removesuffix(".0.et") for p in (conformance_dir / "gen").glob("**/*.0.et")
    }
    assert found and found <= listed


def test_group_workload_without_its_comm_groups_is_an_error(conformance_dir, capsys):
    """pg_name "1" only exists in the comm-group file the conformance row names."""
    prefix = conformance_dir / "gen/cg/all_reduce_1MiB_pg_rows4/all_reduce_1MiB_pg_rows4"
    rc, lines = run(capsys, "validate", str(prefix))
    assert rc == 1 and any(": pg-name: " in ln for ln in lines)
