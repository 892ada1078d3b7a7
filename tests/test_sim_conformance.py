"""Every row of the ASTRA-sim conformance suite reproduces per rank to the ns.

The expected finish times are what ASTRA-sim's own analytical binaries printed for these inputs
(``shared/conformance/expected.csv``); paths in the CSV are relative to the conformance folder.
"""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from chakra_pipe.et.traceset import TraceSet, load_comm_groups
from chakra_pipe.sim import load_hardware, simulate

CONFORMANCE = Path(__file__).resolve().parent.parent.parent / "shared" / "conformance"


def _rows() -> list:
    path = CONFORMANCE / "expected.csv"
    if not path.is_file():
        return [pytest.param(None, marks=pytest.mark.skip(reason=f"conformance suite not found at {CONFORMANCE}"))]
    with open(path, newline="") as fh:
        rows = list(csv.DictReader(fh))
    return [pytest.param(r, id=f"{r['case']}[{r['backend']}]") for r in rows]


_TRACES: dict[str, TraceSet] = {}


def _traces(prefix: Path) -> TraceSet:
    key = str(prefix)
    if key not in _TRACES:
        _TRACES[key] = TraceSet.load(prefix)
    return _TRACES[key]


@pytest.mark.parametrize("row", _rows())
def test_conformance_row(row: dict) -> None:
    base = CONFORMANCE
    hw = load_hardware(base / row["system"], base / row["network"],
                       base / row["remote_memory"] if row["remote_memory"] else None, backend=row["backend"])
    groups = load_comm_groups(base / row["comm_groups"]) if row["comm_groups"] else {}
    res = simulate(_traces(base / row["workload"]), hw, comm_groups=groups)
    expected = [int(x) for x in row["per_npu_finish_ns"].strip().split(";")]
    assert len(expected) == int(row["npus"])
    assert res.finish_ns == expected
