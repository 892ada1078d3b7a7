"""The committed corpus of broken rank sets (``tests/data/robust``) through ``validate``, ``info``, ``simulate``.

Each case has one defect and an expected exit code per verb, justified in ``make_corpus.py`` from the
spec. Every run must also be clean: one ``error:`` line naming the file (and the byte offset for framing
errors), no traceback, within a time bound.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import skip_reason
from test_robust_support import CORPUS, assert_clean, assert_no_partial_output, call_cli, run_cli

MANIFEST = json.loads((CORPUS / "MANIFEST.json").read_text())
FRAMING_CASES = [name for name, case in MANIFEST.items() if case["expect"]["info"] == 2]  # undecodable files


@pytest.fixture(scope="module")
def hardware(tmp_path_factory, fixtures_dir) -> list[str]:
    """ASTRA-sim flags for a 2-NPU ring (the corpus sets have two ranks)."""
    system = fixtures_dir / "astra-sim" / "system" / "native_collectives" / "Ring_4chunks.json"
    if not system.is_file():
        pytest.skip(skip_reason(system))
    net = tmp_path_factory.mktemp("net") / "ring2.yml"
    net.write_text("topology: [ Ring ]\nnpus_count: [ 2 ]\nbandwidth: [ 50.0 ]\nlatency: [ 500.0 ]\n")
    return [f"--system-configuration={system}", f"--network-configuration={net}"]


def _argv(verb: str, prefix: Path, hardware: list[str] | None) -> list[str]:
    if verb == "simulate":
        return ["simulate", f"--workload-configuration={prefix}", *hardware]
    return [verb, str(prefix)]


@pytest.mark.parametrize(
    "name,verb",
    [pytest.param(name, verb, id=f"{name}-{verb}") for name in MANIFEST for verb in ("validate", "info", "simulate")],
)
def test_corpus_case_ends_cleanly_with_the_documented_code(name, verb, request):
    hw = request.getfixturevalue("hardware") if verb == "simulate" else None
    prefix = CORPUS / "traces" / name
    outcome = call_cli(_argv(verb, prefix, hw), timeout=30)
    assert_clean(outcome, what=f"{verb} {name}")
    expected = MANIFEST[name]["expect"][verb]
    if expected is not None:
        assert outcome.code == expected, (
            f"{verb} {name}: exit {outcome.code}, expected {expected} "
            f"({MANIFEST[name]['reason']}); stderr: {outcome.stderr.strip()}"
        )


@pytest.mark.parametrize("name", FRAMING_CASES)
def test_framing_errors_name_the_rank_file_and_byte_offset(name):
    outcome = call_cli(["validate", CORPUS / "traces" / name])
    line = outcome.stderr.strip()
    assert f"{CORPUS / 'traces' / name}.0.et: " in line, line
    if name != "bad_gzip":  # a corrupt gzip stream has no meaningful byte offset in the trace
        assert ": byte " in line, line


@pytest.mark.parametrize("verb", ["validate", "simulate", "jsonize"])
def test_huge_length_prefix_is_refused_without_allocating_it(verb, hardware, tmp_path):
    """A 4 GiB length prefix through the real entry point, under a 3 GiB address-space limit: the bulk
    loader (validate, simulate) and the streaming reader (jsonize; it once asked for the claimed 4 GiB
    in one read and died with MemoryError) must both refuse it from the bytes actually present."""
    prefix = CORPUS / "traces" / "huge_length"
    argv = ["jsonize", f"{prefix}.0.et", tmp_path / "out.json"] if verb == "jsonize" else _argv(verb, prefix, hardware)
    outcome = run_cli(argv, timeout=60)
    assert_clean(outcome, allowed={2})
    assert "record length 4294967295" in outcome.stderr


def _failing_run(verb: str, out: Path, hardware: list[str]) -> tuple[list, list[Path]]:
    """argv of a run of ``verb`` that must fail, and the outputs it declares."""
    broken = CORPUS / "traces" / "truncated_record"
    if verb == "validate":
        return ["validate", broken, "--json", out / "findings.json"], [out / "findings.json"]
    if verb == "simulate":  # reads fine, then cannot finish (exit 3)
        outputs = [out / "sim.json", out / "timeline.json"]
        return (
            [
                "simulate",
                f"--workload-configuration={CORPUS / 'traces' / 'missing_collective'}",
                *hardware,
                f"--output-json={outputs[0]}",
                f"--timeline={outputs[1]}",
            ],
            outputs,
        )
    target = out / ("t.json" if verb == "jsonize" else "t.graphml")
    return [verb, f"{broken}.0.et", target], [target]


@pytest.mark.parametrize("verb", ["validate", "simulate", "jsonize", "visualize"])
def test_failed_verb_leaves_no_output_file(verb, hardware, tmp_path):
    """A verb refusing a corrupt trace (or a stuck rank set) writes none of its declared outputs."""
    argv, outputs = _failing_run(verb, tmp_path, hardware)
    outcome = call_cli(argv)
    assert_clean(outcome, allowed={2, 3})
    assert_no_partial_output(tmp_path, outcome, outputs)
