"""Generated workloads run in the simulator: microbenchmarks match the fixtures and the spec's
closed forms (astra-sim-semantics.md §7.3), and LLM steps finish on a 2-D topology."""

from __future__ import annotations

import json

import pytest

from chakra_pipe import sim
from chakra_pipe.et import TraceSet
from chakra_pipe.generate import CollectiveSpec, Layout, TrainingSpec, generate_collective, generate_llm, resolve_model

RING_4CHUNKS = "astra-sim/system/native_collectives/Ring_4chunks.json"
MICRO = "astra-sim/workload/microbenchmarks"

# astra-sim-semantics.md §7.3: Ring 50 GB/s, 500 ns, Ring_4chunks.json, comm_size 1 MiB.
EXPECTED_NS = {
    ("all_reduce", 4): 43_000,
    ("all_reduce", 8): 64_440,
    ("all_reduce", 16): 99_640,
    ("reduce_scatter", 4): 22_240,
    ("reduce_scatter", 8): 33_080,
    ("reduce_scatter", 16): 50_740,
    ("all_gather", 4): 64_744,
    ("all_gather", 8): 151_016,
    ("all_gather", 16): 323_560,
    ("all_to_all", 4): 41_560,
    ("all_to_all", 8): 125_480,
    ("all_to_all", 16): 391_240,
}


@pytest.mark.parametrize("coll,npus", sorted(EXPECTED_NS))
def test_generated_microbenchmarks_simulate_like_the_fixtures(fixtures_dir, tmp_path, coll, npus):
    hw = sim.load_hardware(
        fixtures_dir / RING_4CHUNKS, fixtures_dir / f"astra-sim/network/analytical/Ring_{npus}npus.yml"
    )
    generate_collective(CollectiveSpec(coll, npus, 1 << 20), tmp_path / coll)
    ours = sim.simulate(TraceSet.load(tmp_path / coll), hw).finish_ns
    assert ours == [EXPECTED_NS[coll, npus]] * npus
    fixture = fixtures_dir / MICRO / coll / f"{npus}npus_1MB" / coll
    if (fixture.parent / f"{coll}.0.et").is_file():
        assert sim.simulate(TraceSet.load(fixture), hw).finish_ns == ours


def write_2d_hardware(tmp_path, dims=(4, 4), roofline=0):
    net = tmp_path / "net.yml"
    net.write_text(
        f"topology: [ Ring, Ring ]\nnpus_count: [ {dims[0]}, {dims[1]} ]\n"
        "bandwidth: [ 200.0, 50.0 ]\nlatency: [ 500.0, 1000.0 ]\n"
    )
    system = tmp_path / "sys.json"
    system.write_text(
        json.dumps(
            {
                "scheduling-policy": "LIFO",
                "endpoint-delay": 10,
                "active-chunks-per-dimension": 1,
                "preferred-dataset-splits": 4,
                "all-reduce-implementation": ["ring", "ring"],
                "all-gather-implementation": ["ring", "ring"],
                "reduce-scatter-implementation": ["ring", "ring"],
                "all-to-all-implementation": ["ring", "ring"],
                "collective-optimization": "localBWAware",
                "local-mem-bw": 1600,
                "roofline-enabled": roofline,
                "peak-perf": 900,
            }
        )
    )
    return sim.load_hardware(system, net)


@pytest.mark.parametrize(
    "case",
    [
        dict(model="llama3-8b", dp=2, tp=4, pp=2),
        dict(model="llama3-8b", dp=4, tp=2, pp=2, zero=1, metadata_node=False),
        dict(model="mixtral-8x7b", dp=4, tp=2, pp=2, ep=2),
        dict(model="gpt3-13b", dp=4, tp=2, pp=2, roofline=1),
    ],
)
def test_llm_step_simulates_to_completion_on_2d_topology(tmp_path, case):
    hw = write_2d_hardware(tmp_path, roofline=case.pop("roofline", 0))
    model = resolve_model(case.pop("model"), layers=2, hidden=512, heads=8, ffn=1024, vocab=1000, seq=128)
    layout = Layout(dp=case.pop("dp"), tp=case.pop("tp"), pp=case.pop("pp"), ep=case.pop("ep", 1), moe=model.moe)
    spec = TrainingSpec(layout, microbatches=2, global_batch=2 * layout.dp, **case)
    generate_llm(model, spec, tmp_path / "w")
    result = sim.simulate(TraceSet.load(tmp_path / "w"), hw)
    assert len(result.finish_ns) == 16
    assert all(f >= c > 0 for f, c in zip(result.finish_ns, result.compute_ns))
    # Every rank of a stage runs the same program on symmetric groups; the step ends on the first stage,
    # which waits for the last gradient to come back through the pipeline.
    assert max(result.finish_ns) == max(result.finish_ns[:8])
    assert result.collectives and all(r.end_ns >= r.start_ns for r in result.collectives)
