"""Property tests: numeric extremes through every config reader give a clean error or the right value.

Huge integers, 2^63/2^64 boundaries, negative numbers, tiny and huge floats, ``inf``/``nan`` in every
spelling and 5,000-digit numbers are written as text into one numeric place of the network YAML,
system JSON, remote-memory JSON, comm-groups JSON and sweep hardware files. The reader must return
the number as written (where it accepts it) or raise a ``ChakraPipeError`` naming the file — never
another exception.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_robust_support import RING_SYSTEM

from chakra_pipe.errors import ChakraPipeError
from chakra_pipe.et.traceset import load_comm_groups
from chakra_pipe.sim.config import MemoryConfig, NetworkConfig, SystemConfig

BOUNDARIES = [
    0,
    1,
    -1,
    2**31 - 1,
    2**31,
    2**32,
    2**53 + 1,
    2**63 - 1,
    2**63,
    -(2**63),
    -(2**63) - 1,
    2**64 - 1,
    2**64,
    10**30,
    -(10**30),
]
JSON_ONLY = ["NaN", "Infinity", "-Infinity"]
YAML_ONLY = [".inf", "-.inf", ".nan", ".NaN", "1e308", "1.5e3"]
COMMON = [
    "1e999",
    "-1e999",
    "1e-400",
    "2.5e-320",
    "1.7976931348623157e308",
    "9" * 5000,
    "-" + "9" * 5000,
    "1" + "0" * 400,
    "-1" + "0" * 400,
    "0." + "1" * 5000,
    "1" * 5000 + ".5",
]
SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


def numbers(extra: list[str]):
    """Number tokens as they appear in a file."""
    return st.one_of(
        st.sampled_from(BOUNDARIES).map(str),
        st.integers(-(2**80), 2**80).map(str),
        st.floats(allow_nan=False, allow_infinity=False).map(repr),
        st.sampled_from(COMMON + extra),
    )


def _expected(token: str):
    """What the token means as a number (None: not a finite number Python can hold)."""
    try:
        value = json.loads(token)
    except ValueError:
        try:
            value = float(token)
        except ValueError:
            return None
    return value if isinstance(value, int) or math.isfinite(value) else None


def _check(read, path: Path, token: str, got) -> None:
    try:
        value = got(read(path))
    except ChakraPipeError as exc:
        assert exc.file and (str(path) in exc.line() or exc.file == str(path)), exc.line()
        assert "\n" not in exc.line() and len(exc.line()) < 1500
        return
    expected = _expected(token)
    assert expected is not None, f"{token[:40]} was accepted as {value!r}"
    assert value == expected or value == int(expected) or float(value) == float(expected), (token[:40], value)


SYSTEM_KEYS = {
    "endpoint-delay": "endpoint_delay",
    "active-chunks-per-dimension": "active_chunks_per_dimension",
    "preferred-dataset-splits": "preferred_dataset_splits",
    "local-mem-bw": "local_mem_bw",
    "peak-perf": "peak_perf",
}


@SETTINGS
@given(key=st.sampled_from(sorted(SYSTEM_KEYS)), token=numbers(JSON_ONLY))
def test_system_json_numbers(tmp_path, key, token):
    base = {**RING_SYSTEM, "roofline-enabled": 1}
    text = json.dumps(base).replace(f'"{key}": ', f'"{key}": @', 1)
    text = (
        text.replace("@" + json.dumps(base.get(key, 1)), token) if key in base else text[:-1] + f', "{key}": {token}}}'
    )
    path = tmp_path / "s.json"
    path.write_text(text)
    _check(SystemConfig.from_file, path, token, lambda c: getattr(c, SYSTEM_KEYS[key]))


@SETTINGS
@given(key=st.sampled_from(["npus_count", "bandwidth", "latency"]), token=numbers(YAML_ONLY))
def test_network_yaml_numbers(tmp_path, key, token):
    values = {"npus_count": "4", "bandwidth": "50.0", "latency": "500.0"}
    values[key] = token
    path = tmp_path / "n.yml"
    path.write_text("topology: [ Ring ]\n" + "".join(f"{k}: [ {v} ]\n" for k, v in values.items()))
    _check(NetworkConfig.from_file, path, token, lambda c: getattr(c, key)[0])


@SETTINGS
@given(
    key=st.sampled_from(["num-nodes", "num-npus-per-node", "remote-mem-latency", "remote-mem-bw"]),
    token=numbers(JSON_ONLY),
)
def test_remote_memory_json_numbers(tmp_path, key, token):
    values = {"num-nodes": "1", "num-npus-per-node": "4", "remote-mem-latency": "10", "remote-mem-bw": "100"}
    values[key] = token
    path = tmp_path / "m.json"
    path.write_text(
        '{"memory-type": "PER_NODE_MEMORY_EXPANSION", ' + ", ".join(f'"{k}": {v}' for k, v in values.items()) + "}"
    )
    _check(MemoryConfig.from_file, path, token, lambda c: getattr(c, key.replace("-", "_")))


@SETTINGS
@given(where=st.sampled_from(["key", "member"]), token=numbers(JSON_ONLY))
def test_comm_groups_json_numbers(tmp_path, where, token):
    path = tmp_path / "g.json"
    if where == "key":
        path.write_text('{"' + token + '": [0, 1]}')
        _check(load_comm_groups, path, token, lambda g: next(iter(g)))
    else:
        path.write_text('{"1": [0, ' + token + "]}")
        _check(load_comm_groups, path, token, lambda g: g[1][1])


@SETTINGS
@given(token=st.one_of(numbers(YAML_ONLY), st.sampled_from(["²", "٣", " 7", "+3", "0x10"])))
def test_comm_group_ids_are_ascii_decimal_integers(tmp_path, token):
    """Group ids are the decimal integers ASTRA-sim's reader takes (std::stoi on ASCII digits)."""
    path = tmp_path / "g.json"
    path.write_text(json.dumps({token: [0, 1]}))
    try:
        groups = load_comm_groups(path)
    except ChakraPipeError as exc:
        assert exc.file == str(path)
        return
    assert list(groups) == [int(token)] and token.isascii() and int(token) > 0


@SETTINGS
@given(token=numbers(YAML_ONLY))
def test_sweep_hardware_files_read_numbers_cleanly(tmp_path, token):
    from chakra_pipe.sweep.hardware import load_file, npus

    path = tmp_path / "n.yml"
    path.write_text(f"topology: [ Ring ]\nnpus_count: [ {token} ]\nbandwidth: [ 1 ]\nlatency: [ 1 ]\n")
    try:
        total = npus(load_file(path, "hardware.platforms.p.network"), "hardware.platforms.p.network")
    except ChakraPipeError as exc:
        assert exc.where == "hardware.platforms.p.network" and len(exc.line()) < 1500, exc.line()
        return
    assert total == int(token) and total > 0
