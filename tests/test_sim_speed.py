"""Simulator cost guards that do not time anything: what the CLI imports, and that work scales.

Wall-clock figures live in ``benchmarks/startup.py`` and ``benchmarks/simulator.py``; here the
properties behind them are asserted exactly (modules loaded, finish times of huge-but-trivial graphs).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"
# Stacks a simulation never needs; each verb's own ``cli`` module (flags only) is allowed.
HEAVY = ("pandas", "matplotlib", "snakemake", "torch", "chakra_pipe.report.build", "chakra_pipe.report.aggregate",
         "chakra_pipe.sweep.shard", "chakra_pipe.sweep.campaign", "chakra_pipe.validate.validator",
         "chakra_pipe.replay.launcher", "chakra_pipe.replay.worker", "numpy.ma")


def _loaded_after(code: str, timeout: int = 120) -> set[str]:
    """Top-level module names loaded in a fresh interpreter after running ``code``."""
    probe = code + "\nimport json, sys\nprint(json.dumps(sorted(sys.modules)))\n"
    env = dict(os.environ, PYTHONPATH=str(SRC))
    out = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True, timeout=timeout,
                         check=True).stdout
    return set(json.loads(out.splitlines()[-1]))


def _heavy(mods: set[str]) -> list[str]:
    return sorted(m for m in mods if any(m == h or m.startswith(h + ".") for h in HEAVY))


def test_cli_parser_imports_no_numpy_protobuf_or_heavy_stacks() -> None:
    mods = _loaded_after("from chakra_pipe import cli\ncli.build_parser()")
    assert _heavy(mods) == []
    assert not {"numpy", "google", "yaml"} & {m.split(".")[0] for m in mods}


def test_simulate_run_imports_nothing_it_does_not_need(tmp_path: Path) -> None:
    prefix = tmp_path / "ar"
    sysf, netf = tmp_path / "sys.json", tmp_path / "net.yml"
    sysf.write_text(json.dumps({"scheduling-policy": "LIFO", "endpoint-delay": 10, "active-chunks-per-dimension": 1,
                                "preferred-dataset-splits": 4, "collective-optimization": "localBWAware",
                                "local-mem-bw": 1600, "all-reduce-implementation": ["ring"]}))
    netf.write_text("topology: [Ring]\nnpus_count: [4]\nbandwidth: [50]\nlatency: [500]\n")
    code = (f"from chakra_pipe.cli import main\n"
            f"assert main(['generate', 'collective', '--type', 'all_reduce', '--npus', '4', '--size', '1MiB', "
            f"'--out', {str(prefix)!r}]) == 0\n"
            f"import sys\nbefore = set(sys.modules)\n"
            f"assert main(['simulate', '--workload-configuration', {str(prefix)!r}, '--system-configuration', "
            f"{str(sysf)!r}, '--network-configuration', {str(netf)!r}]) == 0\n")
    assert _heavy(_loaded_after(code)) == []
