"""Cross-stage agreement (issue #13): ``validate`` passes a rank set exactly when ``simulate`` and the
replay plan accept it, and when one refuses they name the same rule, file and node.

The workflow runs ``validate`` first so that a set that validates will simulate and replay; this test
holds the stages to that promise over every rank set we have: the robust corpus, generated sets
(``generate collective`` / ``generate llm``), captured ones from the fixtures, and 500 hypothesis sets
(``ranksets.py``: process groups in a comm-group file and/or METADATA, agreeing or not, collective and
p2p sequences that match or not, ``is_cpu_op`` flags, missing dependency targets...).

What each stage says is read from what a user sees: ``validate --json`` findings (file, node, rule,
severity), and the ``{file}: node {node}: error: {rule}: {message}`` lines ``simulate`` (exit 2 on bad
input, 3 when the set cannot finish) prints and the replay plan raises. The replay *plan* is built
in-process (``replay.plan.build_plan``): everything it refuses, it refuses before launching a rank.
Rules:

* validate reports an error  <=>  simulate or the replay plan refuses (bad input or cannot finish);
* every problem simulate or the plan names is one of validate's errors (same rule, file, node);
* when simulate cannot finish, validate reports the deadlock with the same stuck nodes (rule
  ``set-deadlock``, one finding per stuck node).
"""

from __future__ import annotations

import json
import re
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from conftest import CONFORMANCE, conformance_rows, fixtures_path, skip_reason
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from ranksets import RankSetSpec, rank_sets
from test_robust_support import CORPUS, RING_SYSTEM, call_cli

from chakra_pipe.errors import ChakraPipeError
from chakra_pipe.et.traceset import TraceSet, find_rank_files
from chakra_pipe.rankset.analysis import SIMULATE_RUNS_DESPITE

DEADLOCK_RULE = "set-deadlock"
# the ring system of the robust tests, with no rule that depends on the splits (validate runs without it)
SYSTEM = RING_SYSTEM | {"preferred-dataset-splits": 1}
# ``FILE: node N: error: RULE: message`` (validate's Finding.line()), after an optional CLI prefix.
_CLI_PREFIX = re.compile(r"^chakra-pipe [a-z-]+(?: [a-z-]+)?: error: ")
_FINDING = re.compile(r"^(?P<file>\S+?): (?:node (?P<node>-?\d+): )?error: (?P<rule>[a-z][a-z0-9-]*): ")
_WARNING = re.compile(r"^chakra-pipe [a-z-]+(?: [a-z-]+)?: warning: ")
_LEGACY = re.compile(r"^(?P<file>\S+?): (?:node (?P<node>-?\d+)\b)?")
_WAITS = re.compile(r"rank (\d+) waits on node\(s\) \[([-\d, ]*)\]")


@dataclass(frozen=True)
class Problem:
    """What a stage blames: the rule (None when the stage names none), the file and the node id."""

    rule: str | None
    file: str
    node: int | None

    def __str__(self) -> str:
        node = f" node {self.node}" if self.node is not None else ""
        return f"{self.rule or '<no rule>'} @ {self.file}{node}"


@dataclass
class Verdict:
    """One stage on one set: ``ok``, ``input`` (refused as bad input), ``stuck`` or ``crash``."""

    stage: str
    status: str
    problems: list[Problem] = field(default_factory=list)
    text: str = ""
    deadlock_lines: set[str] = field(default_factory=set)  # its ``set-deadlock`` lines, messages and all


def parse_problems(text: str) -> list[Problem]:
    """Every problem ``text`` names, as rule/file/node.

    Lines in the agreed ``FILE: node N: error: RULE: ...`` form are the problems; a heading (``the
    rank set has 2 problem(s):``) or a ``... N more`` count beside them is not. Text with no such line
    is an old-style message: its first line is the problem, with ``rule=None``.
    """
    lines = [_CLI_PREFIX.sub("", raw.strip()) for raw in text.splitlines() if not _WARNING.match(raw.strip())]
    found = [m for m in map(_FINDING.match, lines) if m is not None]
    if not found:
        first = next((line for line in lines if line), "")
        m = _LEGACY.match(first)
        return [Problem(None, m.group("file"), _int(m.group("node")))] if m else [Problem(None, "", None)]
    return [Problem(m.group("rule"), m.group("file"), _int(m.group("node"))) for m in found]


def _int(text: str | None) -> int | None:
    return int(text) if text else None


def stuck_nodes(text: str, files: list[str]) -> set[tuple[str, int]]:
    """(file, node) simulate says are stuck: its set-deadlock lines, or ``rank R waits on node(s) [..]``."""
    found = {(p.file, p.node) for p in parse_problems(text) if p.rule == DEADLOCK_RULE and p.node is not None}
    for rank, ids in _WAITS.findall(text):
        found |= {(files[int(rank)], int(x)) for x in ids.split(",") if x.strip()}
    return found


def _line(finding: dict) -> str:
    """A ``--json`` finding as validate prints it (Finding.line())."""
    where = "" if finding["node"] is None else f"node {finding['node']}: "
    return f"{finding['file']}: {where}{finding['severity']}: {finding['rule']}: {finding['message']}"


def run_validate(prefix: Path, out: Path, extra: list[str]) -> Verdict:
    report = out / "findings.json"
    report.unlink(missing_ok=True)
    outcome = call_cli(["validate", str(prefix), "--json", str(report), *extra], timeout=60)
    if outcome.code == 2:  # unreadable input: the error line is the finding
        return Verdict("validate", "input", parse_problems(outcome.stderr), outcome.stderr)
    if outcome.code not in (0, 1) or "Traceback" in outcome.stderr:
        return Verdict("validate", "crash", text=f"exit {outcome.code}: {outcome.stderr[-1500:]}")
    findings = json.loads(report.read_text())["findings"]
    errors = sorted((Problem(f["rule"], f["file"], f["node"]) for f in findings if f["severity"] == "error"), key=str)
    deadlocks = {_line(f) for f in findings if f["severity"] == "error" and f["rule"] == DEADLOCK_RULE}
    text = "\n".join(outcome.stdout.splitlines()[-30:])
    return Verdict("validate", "input" if errors else "ok", errors, text, deadlocks)


@dataclass(frozen=True)
class Hardware:
    """The simulated machine: a ring of the set's size. Input checks must not depend on it; a timed
    deadlock the untimed proof misses could, so the hypothesis sets vary backend and policy."""

    backend: str = "congestion_unaware"
    policy: str = "LIFO"
    system: str | None = None  # an ASTRA-sim system / network file instead of the ring above
    network: str | None = None


def run_simulate(prefix: Path, out: Path, world: int, extra: list[str], hw: Hardware = Hardware()) -> Verdict:
    system, network = out / "system.json", out / f"ring{world}.yml"
    system.write_text(json.dumps(SYSTEM | {"scheduling-policy": hw.policy}))
    network.write_text(f"topology: [ Ring ]\nnpus_count: [ {world} ]\nbandwidth: [ 50.0 ]\nlatency: [ 5 ]\n")
    system, network = Path(hw.system or system), Path(hw.network or network)
    argv = [
        "simulate",
        f"--workload-configuration={prefix}",
        f"--system-configuration={system}",
        f"--network-configuration={network}",
        f"--backend={hw.backend}",
        *extra,
    ]
    outcome = call_cli(argv, timeout=60)
    status = {0: "ok", 2: "input", 3: "stuck"}.get(outcome.code, "crash")
    if "Traceback" in outcome.stderr:
        status = "crash"
    if status == "ok":
        return Verdict("simulate", status, text=outcome.stderr)
    lines = {_CLI_PREFIX.sub("", line.strip()) for line in outcome.stderr.splitlines()}
    deadlocks = {line for line in lines if (m := _FINDING.match(line)) and m.group("rule") == DEADLOCK_RULE}
    return Verdict("simulate", status, parse_problems(outcome.stderr), outcome.stderr, deadlocks)


def run_plan(prefix: Path, comm_groups: str | None) -> Verdict:
    from chakra_pipe.errors import StuckError
    from chakra_pipe.replay.plan import build_plan

    try:
        build_plan(TraceSet.load(prefix, comm_groups))
    except StuckError as exc:
        return Verdict("replay plan", "stuck", parse_problems(str(exc)), str(exc))
    except ChakraPipeError as exc:
        return Verdict("replay plan", "input", parse_problems(str(exc)), str(exc))
    except Exception as exc:  # noqa: BLE001 - a traceback a user would see is a disagreement too
        return Verdict("replay plan", "crash", text=f"{type(exc).__name__}: {exc}")
    return Verdict("replay plan", "ok")


def named_by(problem: Problem, errors: set[Problem]) -> bool:
    """Whether validate reports ``problem`` as an error: same rule, file and node."""
    return problem in errors


def disagreements(prefix: Path, work: Path, comm_groups: str | None = None, hw: Hardware = Hardware()) -> list[str]:
    """Every way the three stages disagree on the set at ``prefix`` (empty: they agree)."""
    world = len(find_rank_files(prefix)) or 1
    cg = [f"--comm-group-configuration={comm_groups}"] if comm_groups else []
    v = run_validate(prefix, work, cg + ([f"--system-configuration={hw.system}"] if hw.system else []))
    s = run_simulate(prefix, work, world, cg, hw)
    p = run_plan(prefix, comm_groups)
    out = [f"{x.stage} crashed: {x.text}" for x in (v, s, p) if x.status == "crash"]
    if out:
        return out
    if v.status == "ok":
        return [
            f"validate: 0 errors, but {x.stage} refuses ({x.status}): {x.text.strip()}"
            for x in (s, p)
            if x.status != "ok"
        ]
    if s.status == "ok" and p.status == "ok":
        return [f"validate reports {', '.join(map(str, v.problems))}, but simulate and the replay plan accept the set"]
    errors = set(v.problems)
    # Errors simulate leaves to its timed run, as ASTRA-sim runs such sets: it finishes, or stops where
    # its timing and message matching decide, which the untimed proof cannot know.
    timed = any(q.rule in SIMULATE_RUNS_DESPITE for q in v.problems)
    for x in (s, p):
        # What the stage blames must be one of validate's errors. Simulate's deadlock report is
        # compared below, node for node; the plan's deadlock only when simulate finishes (its static
        # comm order may block where simulate's timing does not).
        if x.status == "ok" or (x.status == "stuck" and (x is s or s.status == "stuck") and _only_deadlock(x)):
            continue
        blamed = [q for q in x.problems if not (x is s and timed and q.rule == DEADLOCK_RULE)]
        missing = [q for q in blamed if not named_by(q, errors)]
        if missing or not x.problems:
            out.append(
                f"{x.stage} names {', '.join(map(str, x.problems)) or 'nothing'} ({x.text.strip()}); "
                f"validate's errors: {', '.join(sorted(map(str, errors)))}"
            )
    # Stuck nodes are compared for sets whose only verdict is "cannot finish"; a set whose collective
    # order depends on timing (`collective-order`), or whose messages or collectives differ in size
    # between peers (`p2p-unmatched`, `collective-mismatch`), is refused by validate and replay, and
    # simulate, as ASTRA-sim, runs it: it finishes or deadlocks as its timing and matching decide.
    if s.status == "stuck" and not timed:
        out += _compare_stuck(s, v, [str(f) for f in TraceSet.load(prefix).files])
    return out


def _only_deadlock(x: Verdict) -> bool:
    return all(q.rule in (DEADLOCK_RULE, None) for q in x.problems)


def _compare_stuck(s: Verdict, v: Verdict, files: list[str]) -> list[str]:
    """Simulate's stuck nodes against validate's deadlock findings.

    In the agreed form simulate prints validate's ``set-deadlock`` lines (one per stuck rank, naming
    its stuck nodes): the lines must be equal, messages and all. The old form, ``rank R waits on
    node(s) [..]`` for the first stuck rank only, must name the nodes validate reports for that rank.
    """
    if s.deadlock_lines:
        if s.deadlock_lines != v.deadlock_lines:
            return [
                f"simulate's {DEADLOCK_RULE} lines:\n  "
                + "\n  ".join(sorted(s.deadlock_lines))
                + "\nvalidate's:\n  "
                + ("\n  ".join(sorted(v.deadlock_lines)) or "none")
            ]
        return []
    said = stuck_nodes(s.text, files)
    claimed = {(q.file, q.node) for q in v.problems if q.rule == DEADLOCK_RULE}
    if not said:
        return [f"simulate cannot finish but prints no stuck node: {s.text.strip()}"]
    complete = any(q.rule == DEADLOCK_RULE for q in s.problems)
    printed = {f for f, _ in said}
    compared = claimed if complete else {c for c in claimed if c[0] in printed}
    if compared != said or not claimed:
        return [
            f"simulate is stuck at {sorted(said)} ({s.text.strip()}); validate's {DEADLOCK_RULE} findings: "
            f"{sorted(claimed)}"
        ]
    return []


def assert_agree(
    prefix: Path, work: Path, comm_groups: str | None = None, what: str = "", hw: Hardware = Hardware()
) -> None:
    found = disagreements(prefix, work, comm_groups, hw)
    assert not found, f"{what or prefix}: the stages disagree:\n" + "\n".join(f"- {d}" for d in found)


# -- the robust corpus ----------------------------------------------------------------------------

CORPUS_CASES = sorted(json.loads((CORPUS / "MANIFEST.json").read_text()))


@pytest.mark.parametrize("name", CORPUS_CASES)
def test_robust_corpus_sets_get_one_verdict(name, tmp_path):
    assert_agree(CORPUS / "traces" / name, tmp_path, what=f"robust corpus {name}")


# -- generated sets -------------------------------------------------------------------------------

GENERATED = {
    "all_reduce_4": ["collective", "--type", "all_reduce", "--npus", "4", "--size", "1MiB", "--iterations", "2"],
    "all_to_all_3": ["collective", "--type", "all_to_all", "--npus", "3", "--size", "96KiB"],
    "reduce_scatter_2": ["collective", "--type", "reduce_scatter", "--npus", "2", "--size", "64KiB"],
    "llm_tp2_dp2": ["llm", "--model", "llama3-8b", "--layers", "1", "--tp", "2", "--dp", "2", "--seq", "128"],
    "llm_pp2": ["llm", "--model", "llama3-8b", "--layers", "2", "--pp", "2", "--seq", "128"],
    "llm_zero_dp2": ["llm", "--model", "llama3-8b", "--layers", "1", "--dp", "2", "--zero", "1", "--seq", "128"],
}


@pytest.mark.parametrize("name", sorted(GENERATED))
def test_generated_sets_get_one_verdict(name, tmp_path):
    prefix = tmp_path / name
    outcome = call_cli(["generate", *GENERATED[name], "--out", str(prefix)], timeout=60)
    assert outcome.code == 0, outcome.stderr
    assert_agree(prefix, tmp_path, what=f"generate {' '.join(GENERATED[name])}")


# -- the conformance suite's workloads with process groups, p2p, DAG shapes and rooflines ------------

CONFORMANCE_SETS = {
    (row["workload"], row["comm_groups"]): row
    for row in reversed(conformance_rows())
    if not row["workload"].startswith(("gen/md/", "generated/"))  # plain collectives: generate's above
}


@pytest.mark.parametrize("key", sorted(CONFORMANCE_SETS), ids=lambda key: key[0].rpartition("/")[2])
def test_conformance_workloads_get_one_verdict(key, tmp_path):
    """On the hardware of their conformance case (so validate also sees the system file)."""
    row = CONFORMANCE_SETS[key]
    hw = Hardware(row["backend"], system=str(CONFORMANCE / row["system"]), network=str(CONFORMANCE / row["network"]))
    groups = str(CONFORMANCE / row["comm_groups"]) if row["comm_groups"] else None
    assert_agree(CONFORMANCE / row["workload"], tmp_path, groups, what=f"conformance {row['case']}", hw=hw)


# -- captured sets (reference fixtures) -----------------------------------------------------------

CAPTURED = {
    "astra-sim all_reduce 4npus": "astra-sim/workload/microbenchmarks/all_reduce/4npus_1MB/all_reduce",
    "astra-sim all_gather 4npus": "astra-sim/workload/microbenchmarks/all_gather/4npus_1MB/all_gather",
    "astra-sim all_to_all 4npus": "astra-sim/workload/microbenchmarks/all_to_all/4npus_1MB/all_to_all",
    "chakra converter output": "chakra/chakra",
}


@pytest.mark.parametrize("name", sorted(CAPTURED))
def test_captured_sets_get_one_verdict(name, tmp_path):
    prefix = fixtures_path() / CAPTURED[name]
    first = Path(f"{prefix}.0.et")
    if not first.is_file():
        pytest.skip(skip_reason(first))
    assert_agree(prefix, tmp_path, what=f"captured {name}")


def test_converted_pytorch_capture_gets_one_verdict(tmp_path):
    host = fixtures_path() / "pytorch" / "linear_et.json.gz"
    if not host.is_file():
        pytest.skip(skip_reason(host))
    prefix = tmp_path / "linear"
    outcome = call_cli(["convert", "pytorch", str(host), "--out", f"{prefix}.0.et"], timeout=60)
    assert outcome.code == 0, outcome.stderr
    assert_agree(prefix, tmp_path, what="converted linear_et.json.gz")


# -- hypothesis sets ------------------------------------------------------------------------------


@settings(
    max_examples=500,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(
    spec=rank_sets(),
    hw=st.builds(
        Hardware,
        backend=st.sampled_from(("congestion_unaware", "congestion_aware")),
        policy=st.sampled_from(("LIFO", "FIFO")),
    ),
)
def test_generated_small_rank_sets_get_one_verdict(spec: RankSetSpec, hw: Hardware):
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        prefix = spec.write(work)
        assert_agree(prefix, work, what=f"{spec.describe()}\non {hw}", hw=hw)


# -- the comm-groups option -----------------------------------------------------------------------


def _grouped_set(directory: Path) -> Path:
    """Two ranks all-reducing in group 1, which only ``PREFIX.comm_groups.json`` declares."""
    from ranksets import NodeSpec

    from chakra_pipe.et import schema

    node = NodeSpec(1, schema.COMM_COLL_NODE, comm_type=schema.ALL_REDUCE, comm_size=4096, pg_name="1")
    return RankSetSpec(((node,), (node,)), comm_groups=(("1", (0, 1)),)).write(directory)


@pytest.mark.parametrize("option", [None, "explicit", "empty"])
def test_every_stage_reads_the_comm_groups_option_the_same_way(option, tmp_path):
    """The default (``PREFIX.comm_groups.json``), an explicit file, and ``empty`` (no groups, so group 1
    is unknown): one verdict from every stage each time."""
    prefix = _grouped_set(tmp_path)
    cg = None
    if option == "explicit":
        cg = str(tmp_path / "groups.json")
        Path(f"{prefix}.comm_groups.json").rename(cg)
    elif option == "empty":
        cg = "empty"
    assert_agree(prefix, tmp_path, cg, what=f"comm groups {option or 'default'}")
    verdict = run_validate(prefix, tmp_path, [f"--comm-group-configuration={cg}"] if cg else [])
    assert (verdict.status == "ok") == (option != "empty"), verdict


# -- the harness itself ---------------------------------------------------------------------------


def test_problem_lines_are_read_as_rule_file_and_node():
    text = (
        "chakra-pipe simulate: warning: --comm-scale=2 has no effect\n"
        "chakra-pipe simulate: error: /d/set.1.et: node 3: error: dangling-data-dep: data dependency on 99\n"
        "/d/set.comm_groups.json: error: group-members: NPU 5 is not a rank\n"
        "/d/set.1.et: ... 4 more dangling-data-dep findings (node 4-7)\n"
    )
    assert parse_problems(text) == [
        Problem("dangling-data-dep", "/d/set.1.et", 3),
        Problem("group-members", "/d/set.comm_groups.json", None),
    ]
    legacy = "chakra-pipe simulate: error: /d/set.0.et: node 7: a message without a rule\nmore detail\n"
    assert parse_problems(legacy) == [Problem(None, "/d/set.0.et", 7)]
    assert parse_problems("the rank set has 1 problem(s):\n") == [Problem(None, "", None)]


def test_stuck_nodes_must_be_the_ones_validate_reports():
    files = ["/d/set.0.et", "/d/set.1.et"]
    line = f"{files[0]}: node 4: error: {DEADLOCK_RULE}: rank 0 stops at node(s) 4, 5"
    v = Verdict("validate", "input", [Problem(DEADLOCK_RULE, files[0], 4)], deadlock_lines={line})
    agreed = Verdict("simulate", "stuck", parse_problems(line), line, {line})
    assert _compare_stuck(agreed, v, files) == []
    fewer = line.replace("4, 5", "4")
    other = Verdict("simulate", "stuck", parse_problems(fewer), fewer, {fewer})
    assert _compare_stuck(other, v, files), "a different list of stuck nodes must be a disagreement"
    legacy = Verdict("simulate", "stuck", text="/d/set: 1 rank(s) cannot finish; rank 0 waits on node(s) [4, 5]")
    assert _compare_stuck(legacy, v, files), "validate misses node 5"
