"""Upstream Chakra flag spellings work as aliases (chakra_jsonizer, chakra_converter, chakra_visualizer,
chakra_trace_link), and the two spellings cannot silently disagree."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from chakra_pipe import cli
from chakra_pipe.et import schema, write_trace


@pytest.fixture
def trace(tmp_path: Path) -> Path:
    path = tmp_path / "t.et"
    write_trace(
        path,
        schema.GlobalMetadata(version="1.0.0"),
        [schema.Node(id=1, name="a", type=schema.COMP_NODE, duration_micros=3)],
    )
    return path


@pytest.mark.parametrize(
    "flags",
    [("--input_filename", "--output_filename"), ("--input-filename", "--output-filename"), ("--input", "--output")],
)
def test_jsonize_and_dejsonize_take_upstream_flags(trace: Path, tmp_path: Path, flags) -> None:
    out, back = tmp_path / "t.json", tmp_path / "back.et"
    assert cli.main(["jsonize", flags[0], str(trace), flags[1], str(out)]) == 0
    assert json.loads(out.read_text())["nodes"][0]["name"] == "a"
    assert cli.main(["dejsonize", flags[0], str(out), flags[1], str(back)]) == 0
    assert back.read_bytes() == trace.read_bytes()


def test_mixed_spellings_and_conflicts(trace: Path, tmp_path: Path, capsys) -> None:
    out = tmp_path / "t.json"
    assert cli.main(["jsonize", str(trace), "--output_filename", str(out)]) == 0 and out.is_file()
    assert cli.main(["jsonize", str(trace), str(out), "--input_filename", str(tmp_path / "other.et")]) == 2
    assert "IN.et given twice with different values" in capsys.readouterr().err
    assert cli.main(["jsonize", "--output_filename", str(out)]) == 2
    assert "missing IN.et (positional, or --input_filename" in capsys.readouterr().err


def test_convert_text_takes_upstream_flags(tmp_path: Path) -> None:
    src = tmp_path / "w.txt"
    src.write_text("DATA\n1\nconv1 -1 5 NONE 0 5 NONE 0 5 ALLREDUCE 1024 10\n")
    assert (
        cli.main(
            [
                "convert",
                "text",
                "--input",
                str(src),
                "--output",
                str(tmp_path / "w"),
                "--num-npus",
                "2",
                "--num-passes",
                "1",
            ]
        )
        == 0
    )
    assert sorted(p.name for p in tmp_path.glob("w.*.et")) == ["w.0.et", "w.1.et"]


def test_convert_pytorch_accepts_input_and_output_flags() -> None:
    args = cli.build_parser().parse_args(["convert", "pytorch", "--input", "x.json", "--output", "y.0.et"])
    cli.resolve_aliases(args)
    assert (str(args.input), args.out) == ("x.json", "y.0.et")


def test_trace_link_takes_upstream_flags() -> None:
    args = cli.build_parser().parse_args(
        ["link", "--chakra-host-trace", "h.json", "--chakra-device-trace", "k.json", "--output-file", "o.json"]
    )
    assert (str(args.host), str(args.device), str(args.out)) == ("h.json", "k.json", "o.json")
