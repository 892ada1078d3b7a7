"""A damaged ``plan.json`` (hand-edited, merge-conflicted, from another version) stops ``sweep run`` and
``report aggregate`` with one line naming the field: never a traceback, never the wrong points."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_report_results import _plan, _write_shards
from test_robust_support import assert_clean, call_cli

from chakra_pipe.errors import InputError
from chakra_pipe.sweep.campaign import Campaign


@pytest.fixture
def plan_doc(tmp_path) -> tuple[Path, dict]:
    camp = _plan(tmp_path)
    camp.write()
    _write_shards(camp)
    return Path(camp.plan_path), json.loads(Path(camp.plan_path).read_text())


def _edit(doc: dict, path: tuple, value) -> dict:
    doc = copy.deepcopy(doc)
    node = doc
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    return doc


DAMAGE = [
    (("points",), {}, "points: damaged plan: expected a list of points, got dict"),
    (
        ("workloads", "ar", "shards", 0),
        7,
        "workloads.ar.shards[0]: damaged plan: expected a list of point ids, got int",
    ),
    (("workloads", "ar", "shards", 0, 0), "nowhere[x=1]", "workloads.ar.shards[0][0]: damaged plan: unknown point id"),
    (("workloads", "ar", "shards", 0, 0), 3, "workloads.ar.shards[0][0]: damaged plan: expected a point id, got int"),
    (("workloads", "ar", "npus"), "4", "workloads.ar.npus: damaged plan: expected an integer, got str"),
    (("workloads", "ar", "npus"), True, "workloads.ar.npus: damaged plan: expected an integer, got bool"),
    (("workloads", "ar", "npus"), 8, "has 4 NPUs, the workload 8"),
    (("workloads", "ar", "kind"), "magic", "workloads.ar.kind: damaged plan: unknown kind 'magic'"),
    (("workloads",), [], "workloads: damaged plan: expected an object of workloads, got list"),
    (("points", 0), 5, "points[0]: damaged plan: expected a point object, got int"),
    (("points", 1, "id"), "p[bandwidth=100]", "points[1].id: damaged plan: point id 'p[bandwidth=100]' appears twice"),
    (("baseline",), ["gone"], "baseline[0]: damaged plan: unknown point id 'gone'"),
    (("shard_size",), 0, "shard_size: damaged plan: must be >= 1, got 0"),
    (("points", 0, "cost"), "cheap", "points[0].cost: damaged plan: expected a number or null, got str"),
    # the campaign names reports/<campaign>/: a newline split the report's one-line error, a '/' moved it
    (("campaign",), "\n", "campaign: damaged plan: not a name of letters"),
    (("campaign",), "../c1", "campaign: damaged plan: not a name of letters"),
]


@pytest.mark.parametrize("path, value, message", DAMAGE)
def test_damaged_plan_is_refused_naming_the_field(plan_doc, path, value, message):
    plan, doc = plan_doc
    plan.write_text(json.dumps(_edit(doc, path, value)))
    with pytest.raises(InputError) as err:
        Campaign.load(plan)
    assert message in str(err.value) and str(plan) in str(err.value)
    for argv in (
        ["sweep", "run", "--plan", plan, "--workload", "ar", "--shard", 0, "--out", plan.parent / "x.csv"],
        ["report", "aggregate", "--plan", plan, "--out-dir", plan.parent / "out"],
    ):
        outcome = call_cli(argv)
        assert_clean(outcome, allowed={2})
        assert message in outcome.stderr


def test_a_missing_field_is_named(plan_doc):
    plan, doc = plan_doc
    del doc["workloads"]["ar"]["prefix"]
    plan.write_text(json.dumps(doc))
    with pytest.raises(InputError, match=r"workloads\.ar\.prefix: damaged plan: missing"):
        Campaign.load(plan)


def _paths(doc, prefix=()):
    """Every (path) to a value inside a plan document."""
    yield prefix
    if isinstance(doc, dict):
        for k, v in doc.items():
            yield from _paths(v, (*prefix, k))
    elif isinstance(doc, list):
        for i, v in enumerate(doc):
            yield from _paths(v, (*prefix, i))


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=6,
)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_any_single_edit_of_a_plan_gives_a_result_or_one_clean_error(plan_doc, data):
    plan, doc = plan_doc
    paths = [p for p in _paths(doc) if p]
    path = data.draw(st.sampled_from(paths))
    plan.write_text(json.dumps(_edit(doc, path, data.draw(JSON_VALUES))))
    out = plan.parent / "out"
    assert_clean(
        call_cli(["report", "aggregate", "--plan", plan, "--out-dir", out]), allowed={0, 2}, what=f"plan edit at {path}"
    )
    assert_clean(
        call_cli(["sweep", "run", "--plan", plan, "--workload", "ar", "--shard", 0, "--out", out / "s.csv"]),
        allowed={0, 2},
        what=f"plan edit at {path}",
    )


@pytest.mark.parametrize("median", ["-5", "Infinity", "NaN", "1e300", '"fast"'])
def test_damaged_replay_result_is_refused(tmp_path, median):
    from chakra_pipe.results.documents import read_replay

    path = tmp_path / "replay.json"
    path.write_text(f'{{"step_time_ns": {{"median": {median}}}}}')
    with pytest.raises(InputError) as err:
        read_replay(path)
    assert str(path) in str(err.value)


@pytest.mark.parametrize(
    "doc",
    [
        {"median_step_time_ms_untraced": -1.0, "steps": 2},
        {"median_step_time_ms_untraced": 1e300, "steps": 2},
        {"median_step_time_ms_untraced": 1.5, "steps": 0},
        {"median_step_time_ms_untraced": 1.5, "steps": True},
        {"median_step_time_ms_untraced": 1.5, "steps": "2"},
    ],
)
def test_damaged_capture_summary_is_refused(tmp_path, doc):
    from chakra_pipe.results.documents import read_capture

    (tmp_path / "capture.json").write_text(json.dumps(doc))
    with pytest.raises(InputError, match="capture.json"):
        read_capture(tmp_path)


def test_sound_capture_summary_reads(tmp_path):
    from chakra_pipe.results.documents import read_capture

    (tmp_path / "capture.json").write_text(json.dumps({"median_step_time_ms_untraced": 1.5, "steps": 2}))
    assert read_capture(tmp_path) == (1.5e6, 2)
