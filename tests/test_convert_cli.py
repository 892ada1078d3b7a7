"""The ``convert`` verb's sub-commands as a user runs them (text delegates to convert/text.py)."""

from __future__ import annotations

from pathlib import Path

from chakra_pipe.cli import main
from chakra_pipe.et import read_trace, schema

WORKLOAD = "DATA\n2\nl0 -1 10 NONE 0 11 NONE 0 12 ALLREDUCE 400 5\nl1 -1 20 NONE 0 21 NONE 0 22 ALLREDUCE 800 5\n"


def test_convert_text_writes_one_file_per_npu(tmp_path: Path, capsys):
    src = tmp_path / "wl.txt"
    src.write_text(WORKLOAD)
    assert main(["convert", "text", str(src), "--npus", "2", "--out", str(tmp_path / "t")]) == 0
    assert "2 rank file(s)" in capsys.readouterr().out
    for rank in (0, 1):
        _, nodes = read_trace(tmp_path / f"t.{rank}.et")
        sizes = sorted(
            a.int64_val for n in nodes if n.type == schema.COMM_COLL_NODE for a in n.attr if a.name == "comm_size"
        )
        assert sizes == [400, 800]


def test_convert_text_skip_none_and_bad_npus(tmp_path: Path, capsys):
    src = tmp_path / "wl.txt"
    src.write_text("DATA\n1\nl0 -1 10 ALLREDUCE 64 11 NONE 0 12 NONE 0 5\n")
    assert main(["convert", "text", str(src), "--npus", "1", "--out", str(tmp_path / "a")]) == 0
    assert main(["convert", "text", str(src), "--npus", "1", "--skip-none", "--out", str(tmp_path / "b")]) == 0
    _, with_none = read_trace(tmp_path / "a.0.et")
    _, skipped = read_trace(tmp_path / "b.0.et")
    assert len(skipped) < len(with_none)
    capsys.readouterr()
    assert main(["convert", "text", str(src), "--npus", "0", "--out", str(tmp_path / "c")]) == 2
    assert "--npus" in capsys.readouterr().err


def test_convert_pytorch_needs_exactly_one_input(tmp_path: Path, capsys):
    assert main(["convert", "pytorch", "--out", str(tmp_path / "x")]) == 2
    assert "exactly one of INPUT or --ranks-dir" in capsys.readouterr().err
    assert main(["convert", "pytorch", "--ranks-dir", str(tmp_path), "--out", str(tmp_path / "x")]) == 2
    assert "no rank{r}.linked.json" in capsys.readouterr().err
