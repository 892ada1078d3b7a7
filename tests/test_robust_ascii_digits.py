"""Unicode digits in trace and config text: refused with a one-line error, never a traceback.

``"²".isdigit()`` is true but ``int("²")`` raises, and ``int("٣")`` is 3 where ASTRA-sim reads no
number. Every reader that asks "is this a whole number?" goes through ``chakra_pipe.digits``, so
each place below refuses (or, for PyTorch group names, renames) such text instead of crashing or
silently reading a number the reference would not.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_et_process_groups import RING_SYSTEM, metadata_set, ring_hardware
from test_robust_support import assert_clean, call_cli

from chakra_pipe.convert.pytorch import ProcessGroups
from chakra_pipe.digits import is_int_text
from chakra_pipe.errors import ChakraPipeError, ConfigError, InputError
from chakra_pipe.et import TraceSet
from chakra_pipe.et.process_groups import parse_process_groups
from chakra_pipe.generate.sizes import parse_size
from chakra_pipe.launch.hostlist import expand
from chakra_pipe.replay.plan import build_plan
from chakra_pipe.sim import SystemConfig, simulate
from chakra_pipe.transform.compute import per_rank_factors

# Characters Python calls numeric (isdigit/isdecimal/isnumeric) that are not ASCII 0-9: "²", "٣", "½", "Ⅻ"...
_OTHER_DIGIT = st.characters(categories=("Nd", "No", "Nl"), max_codepoint=0x1FFFF).filter(lambda c: not c.isascii())
# Digit strings with at least one such character, possibly mixed with ASCII digits ("1²", "٣0").
UNICODE_DIGITS = (
    st.lists(st.sampled_from("0123456789") | _OTHER_DIGIT, min_size=1, max_size=6)
    .map("".join)
    .filter(lambda s: not s.isascii())
)


@given(st.text(max_size=8))
def test_is_int_text_is_isdigit_restricted_to_ascii(text):
    assert is_int_text(text) == (text.isascii() and text.isdigit())
    if is_int_text(text):
        assert int(text) >= 0
    assert is_int_text("-" + text, signed=True) == is_int_text(text)


@given(UNICODE_DIGITS)
def test_unicode_digit_text_is_not_a_number(text):
    assert text.isnumeric() and not is_int_text(text) and not is_int_text("+" + text, signed=True)


@given(UNICODE_DIGITS)
def test_process_group_table_refuses_unicode_digit_names(name):
    values = "['" + json.dumps([{"pg_name": name, "ranks": [0, 1]}]) + "']"
    assert parse_process_groups(values) == (
        {},
        f"process group pg_name {name!r} is not an integer of ASCII digits "
        "(ASTRA-sim numbers METADATA groups pg_name + 1)",
    )


@settings(max_examples=10, deadline=None)
@given(UNICODE_DIGITS)
def test_validate_simulate_and_replay_name_the_file_and_node(name):
    """The METADATA table reaches all three readers; each refuses it naming rank file and node."""
    values = "['" + json.dumps([{"pg_name": name, "ranks": [0, 1]}]) + "']"
    with tempfile.TemporaryDirectory() as tmp:
        prefix = metadata_set(Path(tmp) / "w", values, node_id=7)
        outcome = call_cli(["validate", prefix])
        assert_clean(outcome, allowed={1})
        assert f"{prefix}.0.et" in outcome.stdout and "node 7" in outcome.stdout
        assert "not an integer of ASCII digits" in outcome.stdout
        ts = TraceSet.load(prefix)
        for run in (lambda: simulate(ts, ring_hardware()), lambda: build_plan(ts)):
            with pytest.raises(ChakraPipeError) as exc:
                run()
            message = str(exc.value)
            assert exc.value.exit_code == 2 and "not an integer of ASCII digits" in message
            assert f"{prefix}.0.et" in message and "node 7" in message


@given(UNICODE_DIGITS)
def test_pytorch_group_with_a_unicode_digit_name_gets_the_next_free_id(name):
    """Any non-integer PyTorch group name is numbered after the integer ones (convert/pytorch.py)."""
    groups = ProcessGroups(members={"0": None, "3": [0, 1], name: [1, 2]}, world_size=4)
    assert groups.chakra_name(name) == "4" and groups.chakra_name("3") == "3"


@settings(max_examples=20, deadline=None)
@given(UNICODE_DIGITS, st.sampled_from(["count", "column"]))
def test_text_workload_refuses_unicode_digits_naming_the_line(digits, where):
    layer = "l0 -1 10 ALLREDUCE 64 11 NONE 0 12 NONE 0 5"
    text = f"DATA\n{digits}\n{layer}\n" if where == "count" else f"DATA\n1\n{layer.replace('64', digits)}\n"
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "w.txt"
        src.write_text(text, encoding="utf-8")
        outcome = call_cli(["convert", "text", src, "--npus", "1", "--out", Path(tmp) / "t"])
        assert_clean(outcome, allowed={2})
        if where == "count":
            assert f"{src}: line 2: expected the layer count" in outcome.stderr
        else:
            assert f"{src}: line 3: column 5 (forward comm size)" in outcome.stderr and repr(digits) in outcome.stderr
        assert not list(Path(tmp).glob("t*")), "a refused workload leaves no output"


def test_text_workload_refuses_a_doubled_sign():
    """``"+-5".lstrip("+-")`` is digits, but ``int("+-5")`` raises: one sign at most."""
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "w.txt"
        src.write_text("DATA\n1\nl0 -1 +-10 ALLREDUCE 64 11 NONE 0 12 NONE 0 5\n", encoding="utf-8")
        outcome = call_cli(["convert", "text", src, "--npus", "1", "--out", Path(tmp) / "t"])
        assert_clean(outcome, allowed={2})
        assert "line 3: column 3" in outcome.stderr and "'+-10'" in outcome.stderr


@given(UNICODE_DIGITS)
def test_per_rank_factor_keys_must_be_ascii_rank_numbers(key):
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "factors.json"
        path.write_text(json.dumps({"0": 1.5, key: 0.5}), encoding="utf-8")
        with pytest.raises(InputError) as exc:
            per_rank_factors(str(path))
        assert str(exc.value) == f"{path}: key {key!r} is not a rank number"


@given(UNICODE_DIGITS)
def test_direct_algorithm_width_must_be_ascii_digits(width):
    config = dict(RING_SYSTEM, **{"all-reduce-implementation": [f"direct{width}"]})
    with pytest.raises(ConfigError) as exc:
        SystemConfig.from_dict(config, source="system.json")
    assert str(exc.value) == f"system.json: all-reduce-implementation: unknown algorithm 'direct{width}'"


@given(UNICODE_DIGITS)
def test_slurm_host_list_ranges_must_be_ascii_digits(digits):
    for expr in (f"node[{digits}]", f"node[1-{digits}]"):
        with pytest.raises(InputError) as exc:
            expand(expr)
        item = expr[5:-1]
        assert str(exc.value) == f"SLURM_STEP_NODELIST: bad range {item!r} in host list {expr!r}"


@given(UNICODE_DIGITS)
def test_sizes_are_ascii_digits(digits):
    """``\\d`` matches "٣" and ``int`` reads it as 3: a size of "٣MiB" was 3 MiB, now it is refused."""
    with pytest.raises(InputError) as exc:
        parse_size(f"{digits}MiB", where="workloads.ar.size")
    assert str(exc.value).startswith(f"workloads.ar.size: cannot read size '{digits}MiB'")
    assert parse_size("3MiB") == 3 << 20
