"""The one JSON/YAML reader and the bounded decompression under every input.

Duplicate keys, non-finite or over-long numbers, alias bombs and gzip bombs are refused with one
clean line naming the file and the place; YAML numbers read as ASTRA-sim's yaml-cpp reads them.
"""

from __future__ import annotations

import gzip
import json
import zlib
from pathlib import Path

import pytest
from test_robust_support import RING_NETWORK, RING_SYSTEM, assert_clean, chain_bytes, run_cli

from chakra_pipe import decompress
from chakra_pipe.errors import ConfigError, InputError, TraceFormatError
from chakra_pipe.readfile import read_json, read_yaml


def _write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


# -- JSON ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text,what,where",
    [
        ('{"a": 1,\n "b": {"c": 2, "c": 3}}', "duplicate key 'c'", "line 2 column 16"),
        ('{"x": 1e999}', "overflows a double", "line 1 column 7"),
        ('{"x": [1, NaN]}', "NaN is not a finite number", "line 1 column 11"),
        ('{"x": -Infinity}', "-Infinity is not a finite number", "line 1 column 7"),
        ('{"x": ' + "9" * 5000 + "}", "more than 4,300 digits", "line 1 column 7"),
    ],
)
def test_json_values_read_silently_wrong_are_refused_with_their_place(tmp_path, text, what, where):
    path = _write(tmp_path / "c.json", text)
    with pytest.raises(ConfigError) as exc:
        read_json(path, error=ConfigError)
    assert what in exc.value.what and exc.value.where == where and exc.value.file == str(path)


def test_machine_written_traces_keep_json_module_semantics_but_not_its_tracebacks(tmp_path):
    """Kineto/host-ET readers pass strict=False: NaN/Infinity args and repeated keys read as Python's
    json reads them (as before), while a 5,000-digit integer is still a clean error."""
    path = _write(tmp_path / "k.json", '{"a": 1, "a": 2, "x": [NaN, -Infinity]}')
    doc = read_json(path, strict=False)
    assert doc["a"] == 2 and doc["x"][0] != doc["x"][0] and doc["x"][1] == float("-inf")
    with pytest.raises(InputError, match="4,300 digits"):
        read_json(_write(tmp_path / "d.json", '{"ts": ' + "1" * 5000 + "}"), strict=False)


def test_duplicate_comm_group_is_refused_by_simulate(tmp_path):
    """A comm-groups file naming group "1" twice is refused (exit 2) naming the key."""
    for rank in range(2):
        (tmp_path / f"t.{rank}.et").write_bytes(chain_bytes(3))
    _write(tmp_path / "t.comm_groups.json", '{"1": [0, 1], "1": [0]}')
    _write(tmp_path / "sys.json", json.dumps(RING_SYSTEM))
    _write(tmp_path / "net.yml", RING_NETWORK)
    outcome = run_cli(
        [
            "simulate",
            f"--workload-configuration={tmp_path / 't'}",
            f"--system-configuration={tmp_path / 'sys.json'}",
            f"--network-configuration={tmp_path / 'net.yml'}",
            f"--comm-group-configuration={tmp_path / 't.comm_groups.json'}",
        ]
    )
    assert_clean(outcome, allowed={2})
    assert "t.comm_groups.json: line 1 column 15: duplicate key '1'" in outcome.stderr, outcome.stderr


# -- YAML ----------------------------------------------------------------------------------------


def test_yaml_numbers_read_as_yaml_cpp_reads_them(tmp_path):
    """YAML 1.1 (PyYAML) reads 1e308 and 1.5e3 as strings; yaml-cpp, and so ASTRA-sim, as numbers."""
    path = _write(tmp_path / "n.yml", "a: 1e308\nb: 1.5e3\nc: -2E-3\nd: 7\ne: 1.0\nf: .inf\ng: 1e3x\n")
    assert read_yaml(path) == {"a": 1e308, "b": 1500.0, "c": -0.002, "d": 7, "e": 1.0, "f": float("inf"), "g": "1e3x"}


@pytest.mark.parametrize("text,value", [("010", 10), ("0x1F", 31), ("+3", 3), ("-0", 0), ("007", 7)])
def test_yaml_integers_read_as_yaml_cpp_reads_them(tmp_path, text, value):
    """YAML 1.1 reads 010 as octal 8; yaml-cpp (a C++ stream) as 10."""
    assert read_yaml(_write(tmp_path / "i.yml", f"a: {text}\n")) == {"a": value}


@pytest.mark.parametrize("text", ["0b101", "1_000", "1:30", "1_0.5", "190:20:30.15"])
def test_yaml_1_1_only_numbers_are_refused_not_read_differently(tmp_path, text):
    with pytest.raises(InputError, match="only in YAML 1.1") as exc:
        read_yaml(_write(tmp_path / "i.yml", f"a: {text}\n"))
    assert exc.value.where == "line 1 column 4"


def test_network_bandwidth_in_exponent_form_is_a_number(tmp_path):
    from chakra_pipe.sim.config import NetworkConfig

    net = NetworkConfig.from_file(_write(tmp_path / "n.yml", RING_NETWORK.replace("50.0", "5e1")))
    assert list(net.bandwidth) == [50.0]


@pytest.mark.parametrize(
    "text,what,where",
    [
        ("a: 1\nb: 2\na: 3\n", "duplicate key 'a'", "line 3 column 1"),
        ("a: {x: 1, x: 2}\n", "duplicate key 'x'", "line 1 column 11"),
        ("a: 1e999\n", "overflows a double", "line 1 column 4"),
        ("a: " + "9" * 5000 + "\n", "more than 4,300 digits", "line 1 column 4"),
        ("a: &a [*a]\n", "recursive alias", None),
    ],
)
def test_yaml_values_read_silently_wrong_are_refused_with_their_place(tmp_path, text, what, where):
    path = _write(tmp_path / "c.yml", text)
    with pytest.raises(InputError) as exc:
        read_yaml(path)
    assert what in exc.value.what and exc.value.file == str(path)
    if where:
        assert exc.value.where == where


def _alias_bomb(levels: int) -> str:
    lines = ["l0: &l0 [" + ", ".join(["x" * 50] * 10) + "]"]
    lines += [f"l{i}: &l{i} [" + ", ".join([f"*l{i - 1}"] * 10) + "]" for i in range(1, levels)]
    return "\n".join(lines) + f"\ntopology: *l{levels - 1}\nnpus_count: [ 2 ]\nbandwidth: [ 50 ]\nlatency: [ 1 ]\n"


@pytest.mark.parametrize("levels", [7, 9])
def test_yaml_alias_bomb_in_a_network_file_is_refused_in_bounded_time_and_memory(tmp_path, levels):
    """10^7 and 10^9 values from a few hundred bytes: refused from the alias graph, in a short line."""
    bomb = _write(tmp_path / "bomb.yml", _alias_bomb(levels))
    _write(tmp_path / "sys.json", json.dumps(RING_SYSTEM))
    for rank in range(2):
        (tmp_path / f"t.{rank}.et").write_bytes(chain_bytes(3))
    outcome = run_cli(
        [
            "simulate",
            f"--workload-configuration={tmp_path / 't'}",
            f"--system-configuration={tmp_path / 'sys.json'}",
            f"--network-configuration={bomb}",
        ],
        timeout=30,
    )
    assert_clean(outcome, allowed={2})
    assert "alias bomb" in outcome.stderr and len(outcome.stderr) < 500, outcome.stderr[:500]


def test_errors_never_echo_a_whole_huge_value(tmp_path):
    """A 100,000-element topology list is legal YAML; the error about it stays one short line."""
    from chakra_pipe.sim.config import NetworkConfig

    path = _write(
        tmp_path / "n.yml",
        "topology: [" + ", ".join(["Nope"] * 100_000) + "]\nnpus_count: [2]\nbandwidth: [1]\nlatency: [1]\n",
    )
    with pytest.raises(ConfigError) as exc:
        NetworkConfig.from_file(path)
    assert len(exc.value.line()) < 1200


# -- decompression -------------------------------------------------------------------------------


def _gzip_of(chunk: bytes, count: int) -> bytes:
    packer = zlib.compressobj(9, zlib.DEFLATED, 31)
    return b"".join(packer.compress(chunk) for _ in range(count)) + packer.flush()


def test_limits_are_absolute_and_overridable(monkeypatch):
    monkeypatch.delenv(decompress.ENV, raising=False)
    assert decompress.limit_for(100 << 20) == decompress.DEFAULT_LIMIT  # not ratio x input
    assert decompress.limit_for(1000) == decompress.RATIO_FLOOR
    monkeypatch.setenv(decompress.ENV, "3G")
    assert decompress.limit_for(1000) == 3 << 30
    monkeypatch.setenv(decompress.ENV, "lots")
    with pytest.raises(ConfigError, match=decompress.ENV):
        decompress.limit_for(1000)


def test_gzip_limit_refuses_a_valid_trace_past_it_and_reads_it_when_raised(tmp_path, monkeypatch):
    """A 200,000-node trace (3.4 MB) through info/validate, gzip-compressed: refused (exit 2, naming
    the file and the variable) with a 1 MiB limit, read with the default limit."""
    from chakra_pipe.et.graph import load_graph

    data = chain_bytes(200_000)
    for rank in range(2):
        (tmp_path / f"g.{rank}.et.gz").write_bytes(gzip.compress(data, mtime=0))
    monkeypatch.setenv(decompress.ENV, "1M")
    with pytest.raises(TraceFormatError, match="gzip bomb") as exc:
        load_graph(tmp_path / "g.0.et.gz")
    assert exc.value.where == f"byte {1 << 20}"
    for verb in ("info", "validate"):
        outcome = run_cli([verb, tmp_path / "g.0.et.gz"])
        assert_clean(outcome, allowed={2}, what=verb)
        assert "g.0.et.gz: byte " in outcome.stderr and decompress.ENV in outcome.stderr, outcome.stderr
    monkeypatch.delenv(decompress.ENV)
    assert len(load_graph(tmp_path / "g.0.et.gz")) == 200_000


def test_gzip_bomb_in_json_inputs_is_refused_in_bounded_memory(tmp_path):
    """200 MB of gzip whitespace as the system file and as a Kineto trace: refused at the ratio limit
    under the 3 GiB address-space bound of run_cli (JSON inputs once had no guard at all)."""
    bomb = tmp_path / "sys.json.gz"
    bomb.write_bytes(_gzip_of(b" " * (1 << 20), 200))
    _write(tmp_path / "net.yml", RING_NETWORK)
    for rank in range(2):
        (tmp_path / f"t.{rank}.et").write_bytes(chain_bytes(3))
    outcome = run_cli(
        [
            "simulate",
            f"--workload-configuration={tmp_path / 't'}",
            f"--system-configuration={bomb}",
            f"--network-configuration={tmp_path / 'net.yml'}",
        ]
    )
    assert_clean(outcome, allowed={2})
    assert f"{bomb}: byte " in outcome.stderr and "gzip bomb" in outcome.stderr, outcome.stderr
    with pytest.raises(InputError, match="gzip bomb"):
        read_json(bomb)
