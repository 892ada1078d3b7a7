"""Every row of the ASTRA-sim conformance suite reproduces per rank to the ns.

The expected finish times are what ASTRA-sim's own analytical binaries printed for these inputs
(``tests/data/conformance/expected.csv``, vendored so every clone checks them); paths in the CSV are
relative to the conformance folder, whose ``generated/`` part our generator writes at test time.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import GENERATED_MICROBENCHMARK, conformance_rows, fixture_file

from chakra_pipe.et.traceset import TraceSet, load_comm_groups
from chakra_pipe.sim import load_hardware, simulate

ROWS = conformance_rows()
_TRACES: dict[str, TraceSet] = {}


def _traces(prefix: Path) -> TraceSet:
    key = str(prefix)
    if key not in _TRACES:
        _TRACES[key] = TraceSet.load(prefix)
    return _TRACES[key]


def test_the_suite_has_all_its_rows() -> None:
    assert len(ROWS) == 111
    assert sum(r["workload"] == GENERATED_MICROBENCHMARK for r in ROWS) == 36


def _run_row(base: Path, row: dict[str, str], fast: bool) -> list[int]:
    hw = load_hardware(
        base / row["system"],
        base / row["network"],
        base / row["remote_memory"] if row["remote_memory"] else None,
        backend=row["backend"],
    )
    groups = load_comm_groups(base / row["comm_groups"]) if row["comm_groups"] else {}
    return simulate(_traces(base / row["workload"]), hw, comm_groups=groups, fast=fast).finish_ns


def _expected(row: dict[str, str]) -> list[int]:
    expected = [int(x) for x in row["per_npu_finish_ns"].strip().split(";")]
    assert len(expected) == int(row["npus"])
    return expected


@pytest.mark.parametrize("row", [pytest.param(r, id=f"{r['case']}[{r['backend']}]") for r in ROWS])
def test_conformance_row(conformance_dir: Path, row: dict[str, str]) -> None:
    assert _run_row(conformance_dir, row, fast=True) == _expected(row)


@pytest.mark.parametrize("row", [pytest.param(r, id=r["case"]) for r in ROWS if r["backend"] == "congestion_aware"])
def test_conformance_aware_rows_message_by_message(conformance_dir: Path, row: dict[str, str]) -> None:
    """The aware rows that take the ring fast path above are ASTRA-sim's times on the message path too
    (the FIFO links' event order, which the fast path must reproduce, is checked against ASTRA-sim here)."""
    assert _run_row(conformance_dir, row, fast=False) == _expected(row)


def test_generated_microbenchmark_is_astra_sims_own(conformance_dir: Path, fixtures_dir: Path) -> None:
    """The rows that named ASTRA-sim's shipped all_reduce 8npus_1MB now read our generator's output:
    the same bytes, rank by rank."""
    upstream = fixture_file(fixtures_dir, "astra-sim/workload/microbenchmarks/all_reduce/8npus_1MB")
    for rank in range(8):
        ours = (conformance_dir / f"{GENERATED_MICROBENCHMARK}.{rank}.et").read_bytes()
        assert ours == (upstream / f"all_reduce.{rank}.et").read_bytes(), f"rank {rank}"
