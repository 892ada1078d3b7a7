"""The tables of collective and backend names, against the proto, the config schema and the spellings
each outside tool uses."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
import yaml

from chakra_pipe.cli import main as cli_main
from chakra_pipe.convert.collectives import normalise_collective
from chakra_pipe.convert.text import COMM_TYPES as TEXT_COMM_TYPES
from chakra_pipe.et import schema
from chakra_pipe.et.collectives import ASTRA_SIM, BY_KEY, BY_NAME, BY_TYPE, COLLECTIVES, name_of
from chakra_pipe.results.collectives import frame, replayed_rows
from chakra_pipe.sim.backends import DEFAULT, NAMES
from chakra_pipe.sim.config import IMPL_KEYS


def test_table_is_the_proto_enum():
    """Stdlib-only copy of et_def.proto's CollectiveCommType: same numbers, same names, all of them."""
    assert {c.comm_type: c.name for c in COLLECTIVES} == schema.COMM_TYPE_NAMES
    assert len(BY_TYPE) == len(BY_NAME) == len(BY_KEY) == len(COLLECTIVES)


def test_astra_sim_spellings():
    # ASTRA-sim's system file keys and 1.0 text workload comm types (astra-sim-semantics.md)
    assert (
        sorted(c.impl_key for c in ASTRA_SIM)
        == sorted(IMPL_KEYS.values())
        == [
            "all-gather-implementation",
            "all-reduce-implementation",
            "all-to-all-implementation",
            "reduce-scatter-implementation",
        ]
    )
    assert TEXT_COMM_TYPES == {
        "ALLREDUCE": schema.ALL_REDUCE,
        "ALLGATHER": schema.ALL_GATHER,
        "REDUCESCATTER": schema.REDUCE_SCATTER,
        "ALLTOALL": schema.ALL_TO_ALL,
    }
    assert name_of(schema.BROADCAST) == "BROADCAST" and name_of(42) == "42"


@pytest.mark.parametrize(
    "recorded, kind",
    [
        ("allreduce", "all_reduce"),
        ("allreduce_coalesced", "all_reduce"),
        ("_allgather_base", "all_gather"),
        ("all_gather_into_tensor_coalesced", "all_gather"),
        ("_reduce_scatter_base", "reduce_scatter"),
        ("reduce_scatter_tensor_coalesced", "reduce_scatter"),
        ("reduce", "reduce"),
        ("alltoall_base", "all_to_all"),
        ("broadcast", "broadcast"),
        ("gather", "gather"),
        ("scatter", "scatter"),
        ("barrier", "barrier"),
        ("send", "send"),
        ("recv", "recv"),
        ("nccl:all_reduce", None),
        ("wait", None),
    ],
)
def test_record_param_comms_names(recorded, kind):
    assert normalise_collective(recorded) == kind


def test_replayed_gather_and_barrier_bandwidths_follow_nccl_tests():
    """The per-collective table rates every collective a replay records as RESULT.json does: gather
    moves P x comm_size with busbw factor (P-1)/P; a barrier has no bandwidth."""
    doc = {
        "collectives": [
            {
                "rank": 0,
                "node": 1,
                "comm_type": "GATHER",
                "group": "0",
                "group_size": 4,
                "comm_size": 1000,
                "median_time_ns": 2000,
            },
            {
                "rank": 0,
                "node": 2,
                "comm_type": "BARRIER",
                "group": "0",
                "group_size": 4,
                "comm_size": 0,
                "median_time_ns": 500,
            },
        ]
    }
    df = frame(replayed_rows(doc, "c", "w"))
    gather, barrier = df.iloc[0], df.iloc[1]
    assert (gather["nccl_size_bytes"], gather["algbw_GBps"], gather["busbw_GBps"]) == (4000, 2.0, 1.5)
    assert pd.isna(barrier["nccl_size_bytes"]) and pd.isna(barrier["busbw_GBps"])


def test_config_schema_backends_are_the_simulators():
    """The workflow's config schema (YAML, cannot import the table) lists exactly the backends."""
    root = Path(__file__).resolve().parents[1]
    schema_doc = yaml.safe_load((root / "workflow/schemas/config.schema.yaml").read_text())
    assert schema_doc["$defs"]["backend"]["enum"] == list(NAMES)
    assert DEFAULT == "congestion_unaware"  # ASTRA-sim's analytical default


def test_unknown_backend_is_refused_by_the_simulator_cli(capsys):
    with pytest.raises(SystemExit) as err:
        cli_main(["simulate", "--backend", "congestion-aware"])
    assert err.value.code == 2
    assert "congestion_aware" in capsys.readouterr().err
