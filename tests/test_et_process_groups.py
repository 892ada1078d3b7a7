"""One reading of METADATA process-group tables: what validate accepts, simulate and replay accept."""

from __future__ import annotations

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


def test_good_table():
    assert parse_process_groups(GOOD) == ({"1": [0, 1], "0": []}, "")


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_tables_are_refused_alike_by_validate_simulate_and_replay(case, tmp_path):
    values, needle = BAD[case]
    assert needle in parse_process_groups(values)[1]
    prefix = tmp_path / "w"
    for rank in range(2):
        meta = schema.Node(id=0, name="## process_group:init ##", type=schema.METADATA_NODE)
        meta.inputs.values = values
        comp = schema.Node(id=1, name="c", type=schema.COMP_NODE, duration_micros=1)
        set_attr(comp, "is_cpu_op", False)
        write_trace(f"{prefix}.{rank}.et", schema.GlobalMetadata(version="0.0.4"), [meta, comp])
    report = validate_set(prefix)
    assert [f.rule for f in report.findings if f.is_error] == ["metadata-pg", "metadata-pg"]
    ts = TraceSet.load(prefix)
    system = SystemConfig.from_dict(
        {
            "scheduling-policy": "LIFO",
            "collective-optimization": "localBWAware",
            "preferred-dataset-splits": 1,
            "local-mem-bw": 50,
            "all-reduce-implementation": ["ring"],
        },
        source="sys",
    )
    net = NetworkConfig.from_dict(
        {"topology": ["Ring"], "npus_count": [2], "bandwidth": [50], "latency": [500]}, source="net"
    )
    for run in (lambda: simulate(ts, HardwareConfig(system, net)), lambda: build_plan(ts)):
        with pytest.raises(ChakraPipeError) as exc:
            run()
        assert exc.value.exit_code == 2 and needle in str(exc.value)
