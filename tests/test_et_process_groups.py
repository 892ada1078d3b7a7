"""One reading of METADATA process-group tables: what validate accepts, simulate and replay accept."""

from __future__ import annotations

from pathlib import Path

import pytest

from chakra_pipe.errors import ChakraPipeError
from chakra_pipe.et import TraceSet, schema, set_attr, write_trace
from chakra_pipe.et.process_groups import parse_process_groups
from chakra_pipe.replay.plan import build_plan
from chakra_pipe.sim import HardwareConfig, NetworkConfig, SystemConfig, simulate
from chakra_pipe.validate import validate_set

GOOD = '[\'[{"pg_name": "1", "ranks": [0, 1]}, {"pg_name": "0", "ranks": []}]\']'
BAD = {
    "not the ['<json>'] shape": ('[{"pg_name": "1", "ranks": [0]}]', "ASTRA-sim needs"),
    "not JSON": ("['{not json']", "does not hold JSON"),
    "not a list": ('[\'{"pg_name": "1"}\']', "not a list"),
    "name not an integer": ('[\'[{"pg_name": "tp", "ranks": [0]}]\']', "not an integer"),
    "ranks not a list": ('[\'[{"pg_name": "1", "ranks": 3}]\']', "non-negative integer ranks"),
    "listed twice": (
        '[\'[{"pg_name": "1", "ranks": [0]}, {"pg_name": "1", "ranks": [1]}]\']',
        "listed twice with different ranks",
    ),
    "nested too deeply": ("['" + "[" * 50_000 + "]" * 50_000 + "']", "nested too deeply"),
}


def metadata_set(prefix: Path, values: str, node_id: int = 0) -> Path:
    """A 2-rank set whose ranks hold a METADATA node ``node_id`` carrying ``values`` and one COMP node."""
    for rank in range(2):
        meta = schema.Node(id=node_id, name="## process_group:init ##", type=schema.METADATA_NODE)
        meta.inputs.values = values
        comp = schema.Node(id=node_id + 1, name="c", type=schema.COMP_NODE, duration_micros=1)
        set_attr(comp, "is_cpu_op", False)
        write_trace(f"{prefix}.{rank}.et", schema.GlobalMetadata(version="0.0.4"), [meta, comp])
    return prefix


RING_SYSTEM = {
    "scheduling-policy": "LIFO",
    "collective-optimization": "localBWAware",
    "preferred-dataset-splits": 1,
    "local-mem-bw": 50,
    "all-reduce-implementation": ["ring"],
}


def ring_hardware() -> HardwareConfig:
    """A 2-NPU ring: enough for the simulator to read the METADATA node before it runs anything."""
    network = {"topology": ["Ring"], "npus_count": [2], "bandwidth": [50], "latency": [500]}
    return HardwareConfig(
        SystemConfig.from_dict(RING_SYSTEM, source="sys"), NetworkConfig.from_dict(network, source="net")
    )


def test_good_table():
    assert parse_process_groups(GOOD) == ({"1": [0, 1], "0": []}, "")


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_tables_are_refused_alike_by_validate_simulate_and_replay(case, tmp_path):
    values, needle = BAD[case]
    assert needle in parse_process_groups(values)[1]
    prefix = metadata_set(tmp_path / "w", values)
    report = validate_set(prefix)
    assert [f.rule for f in report.findings if f.is_error] == ["metadata-pg", "metadata-pg"]
    ts = TraceSet.load(prefix)
    for run in (lambda: simulate(ts, ring_hardware()), lambda: build_plan(ts)):
        with pytest.raises(ChakraPipeError) as exc:
            run()
        assert exc.value.exit_code == 2 and needle in str(exc.value)
