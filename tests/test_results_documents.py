"""The readers of other stages' result documents: one clear error naming the file for every damage.

These files are read by ``report aggregate`` and ``compare``; before they went through the shared
JSON reader a duplicate key was silently resolved, a list or a string in place of the object raised
an AttributeError traceback, and a simulator result's negative finish time was passed on.
"""

from __future__ import annotations

import json

import pytest

from chakra_pipe.errors import InputError
from chakra_pipe.results.documents import capture_pass, read_replay, read_sim, replay_pass


def _write(path, text):
    path.write_text(text, encoding="utf-8")
    return path


@pytest.mark.parametrize(
    "text, needle",
    [
        ('{"step_time_ns": {"median": 5, "median": 7}}', "duplicate key"),
        ("[1, 2]", "not a replay result"),
        ('{"step_time_ns": 5}', "step_time_ns.median"),
        ('{"step_time_ns": {"median": true}}', "not a number"),
        ('{"step_time_ns": {"median": 5}', "invalid JSON"),
        (b"\xff\xfe", "UTF-8"),
    ],
)
def test_damaged_replay_document_names_the_file(tmp_path, text, needle):
    path = tmp_path / "RESULT.json"
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        _write(path, text)
    with pytest.raises(InputError, match=needle) as err:
        read_replay(path)
    assert str(path) in str(err.value)


def test_replay_pass_rounds_and_names_the_runtime(tmp_path):
    doc = {"step_time_ns": {"median": 1234.6}, "environment": {"backend": "gloo", "device": "cpu"}}
    path = _write(tmp_path / "RESULT.json", json.dumps(doc))
    assert replay_pass(path) == (1235, "gloo/cpu")
    path = _write(tmp_path / "RESULT.json", json.dumps({"step_time_ns": {"median": 10}, "environment": []}))
    assert replay_pass(path) == (10, "torch")


def test_capture_pass_is_untraced_step_times_steps(tmp_path):
    _write(tmp_path / "capture.json", json.dumps({"median_step_time_ms_untraced": 1.5, "steps": 3, "backend": "nccl"}))
    assert capture_pass(tmp_path) == (4_500_000, "nccl")


def test_capture_summary_that_is_not_an_object_is_refused(tmp_path):
    _write(tmp_path / "capture.json", '"done"')
    with pytest.raises(InputError, match="capture.json.*not a capture summary"):
        capture_pass(tmp_path)


@pytest.mark.parametrize("value", ["-1", '"1"', "1e300"])
def test_damaged_simulator_result_is_refused(tmp_path, value):
    path = _write(tmp_path / "sim.json", f'{{"max_finish_ns": {value}}}')
    with pytest.raises(InputError, match="max_finish_ns") as err:
        read_sim(path)
    assert str(path) in str(err.value)


def test_simulator_result_reads_the_last_finish(tmp_path):
    assert read_sim(_write(tmp_path / "sim.json", '{"max_finish_ns": 64440}')) == 64440.0
