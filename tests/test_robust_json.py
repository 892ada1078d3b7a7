"""``dejsonize`` on hostile JSON: every refusal is one line naming the file and the JSON location."""

from __future__ import annotations

import pytest
from test_robust_support import assert_clean, call_cli, leftovers

CASES = [
    ("[", "line 1 column 2"),
    ('{"metadata": {}, "nodes": {}}', "top level"),
    ('{"metadata": {"attr": 5}, "nodes": []}', "metadata.attr"),
    ('{"metadata": {}, "nodes": [{"id": -1}]}', "nodes[0]"),
    ('{"metadata": {}, "nodes": [{"id": "x"}]}', "nodes[0]"),
    ('{"metadata": {}, "nodes": [{"id": 1, "type": "BOGUS"}]}', "nodes[0].type"),
    ('{"metadata": {}, "nodes": [{"id": 1, "data_deps": [1.5]}]}', "nodes[0].data_deps"),
    ('{"metadata": {}, "nodes": [{"id": 1, "attr": [{"name": "a", "int64_val": 1}]}]}', "nodes[0].attr[0]"),
    ('{"metadata": {}, "nodes": [{"id": 1, "name": "\\ud800"}]}', "nodes[0]"),
    ("[" * 100_000, "nested too deeply"),
]


@pytest.mark.parametrize("text,where", CASES, ids=[w for _, w in CASES])
def test_bad_json_trace_is_refused_with_its_location(tmp_path, text, where):
    src, out = tmp_path / "in.json", tmp_path / "out.et"
    src.write_text(text)
    outcome = call_cli(["dejsonize", src, out])
    assert_clean(outcome, allowed={2})
    assert f"{src}: " in outcome.stderr and where in outcome.stderr, outcome.stderr
    assert not out.exists() and not leftovers(tmp_path)


def test_binary_input_is_recognised_as_not_json(tmp_path):
    src = tmp_path / "trace.et"
    src.write_bytes(b"\xff\xfe\x00\x01")
    outcome = call_cli(["dejsonize", src, tmp_path / "out.et"])
    assert_clean(outcome, allowed={2})
    assert "not UTF-8" in outcome.stderr
