"""The one comm-group JSON writer, checked against its parser (``load_comm_groups``) and ASTRA-sim's rules."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from chakra_pipe.errors import InputError
from chakra_pipe.et.traceset import load_comm_groups, write_comm_groups

groups_st = st.dictionaries(
    st.integers(1, 2**31 - 1),
    st.lists(st.integers(0, 4096), min_size=1, max_size=8, unique=True),
    max_size=6,
)


@settings(max_examples=200, deadline=None)
@given(groups=groups_st, as_text=st.booleans())
def test_what_is_written_reads_back_unchanged(tmp_path_factory, groups, as_text):
    path = tmp_path_factory.mktemp("cg") / "s.comm_groups.json"
    write_comm_groups(path, {str(k) if as_text else k: v for k, v in groups.items()})
    assert load_comm_groups(path) == groups
    assert list(load_comm_groups(path)) == sorted(groups)  # numeric id order, whatever the caller's


def test_bytes_do_not_depend_on_the_stage_or_key_type(tmp_path):
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    write_comm_groups(a, {"10": [2, 3], "2": [1, 0]})
    write_comm_groups(b, {2: (1, 0), 10: [2, 3]})
    assert a.read_bytes() == b.read_bytes() == b'{\n  "2": [\n    1,\n    0\n  ],\n  "10": [\n    2,\n    3\n  ]\n}\n'


@pytest.mark.parametrize(
    "groups, needle",
    [
        ({"0": [0, 1]}, "group id '0'"),
        ({"01": [0, 1]}, "group id '01'"),
        ({2**31: [0]}, "group id"),
        ({"x": [0]}, "group id 'x'"),
        ({"1": []}, "non-empty list"),
        ({"1": [0, -1]}, "non-empty list"),
        ({"1": [0, 0]}, "listed twice"),
    ],
)
def test_a_group_the_parser_would_refuse_is_not_written(tmp_path, groups, needle):
    path = tmp_path / "s.comm_groups.json"
    with pytest.raises(InputError, match=needle):
        write_comm_groups(path, groups)
    assert not path.exists()
