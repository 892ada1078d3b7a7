"""Names and paths from a config are data in the workflow: a trace prefix, trace folder or report folder
holding ``$(...)``, backquotes, quotes or spaces (all legal file names) must reach the jobs as one
argument each, never be run by the shell, and leave no stray file behind."""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from processes import cli, generate_collective_args, run_bounded, snakemake_cmd, workflow_env

REPO = Path(__file__).resolve().parent.parent
RULES = sorted((REPO / "workflow" / "rules").glob("*.smk"))

# A field of a Snakemake format string: {name}, {name.attr}, {name:q} (doubled braces are literal).
FIELD = re.compile(r"(?<!\{)\{([A-Za-z_][\w.\[\]]*)(:[^{}]*)?\}(?!\})")


def _shell_strings(text: str) -> list[str]:
    """The string literals of every ``shell:`` directive of a rules file."""
    out = []
    for block in re.findall(r"^    shell:\n((?:        .*\n?)+)", text, re.M):
        out.append("".join(re.findall(r'"((?:[^"\\]|\\.)*)"', block)))
    return out


def test_every_interpolated_value_in_every_shell_command_is_quoted():
    unquoted = []
    for path in RULES:
        for cmd in _shell_strings(path.read_text()):
            unquoted += [f"{path.name}: {{{m.group(1)}}}" for m in FIELD.finditer(cmd) if m.group(2) != ":q"]
    assert RULES and not unquoted, "shell values interpolated without :q:\n" + "\n".join(unquoted)


def test_the_quoting_check_flags_a_bare_value():
    text = '    shell:\n        "tool {input:q} --out {output} --n {{literal}}"\n'
    found = [m.group(1) for cmd in _shell_strings(text) for m in FIELD.finditer(cmd) if m.group(2) != ":q"]
    assert found == ["output"]


class _Everywhere:
    """A rule namespace (input, output, params, log, wildcards) whose every field is ``value``."""

    def __init__(self, value: str):
        self.value = value

    def __getattr__(self, name: str) -> str:
        return self.value

    def __str__(self) -> str:
        return self.value


# bash functions standing in for the programs the rules call: each records its arguments, NUL-separated
_RECORDERS = "".join(
    f'{name}() {{ printf \'%s\\0\' {name} "$@" >> "$ARGS"; }}; ' for name in ("chakra-pipe", "mkdir", "cp", "mv")
)


@pytest.mark.skipif(importlib.util.find_spec("snakemake") is None, reason="snakemake is not installed")
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    name=st.text(st.characters(blacklist_categories=("Cs", "Cc")), min_size=1, max_size=20)
    .map(lambda t: t.replace("/", "_"))
    .filter(lambda t: t not in (".", ".."))
)
def test_any_name_reaches_every_command_as_one_argument(name):
    """Every rule's command, rendered as Snakemake renders it with ``name`` in every field and run by
    bash: no command substitution, globbing or word splitting touches the name."""
    from snakemake.utils import format as render

    with tempfile.TemporaryDirectory() as tmp:
        args = Path(tmp) / "ARGS.bin"
        for path in RULES:
            for cmd in _shell_strings(path.read_text()):
                ns = _Everywhere(name)
                line = render(cmd, input=ns, output=ns, params=ns, log=ns, wildcards=ns, threads=1)
                args.write_bytes(b"")
                run = subprocess.run(
                    ["bash", "-c", _RECORDERS + line.replace("$(seq 0 ", "$(seq 0 0*")],
                    cwd=tmp,
                    env={**os.environ, "ARGS": str(args)},
                    capture_output=True,
                    timeout=30,
                )
                recorded = args.read_bytes().split(b"\0")
                assert name.encode() in recorded or any(a.startswith(name.encode() + b"/") for a in recorded), (
                    f"{path.name}: {name!r} did not arrive whole: {recorded[:12]} ({run.stderr[-300:]!r})"
                )
                stray = sorted(set(os.listdir(tmp)) - {"ARGS.bin", name})
                assert not stray, f"{path.name}: {name!r} left {stray}"


HOSTILE = "we ird $(touch INJECTED_A) `touch INJECTED_B` 'q\" $HOME"


@pytest.mark.slow
@pytest.mark.skipif(importlib.util.find_spec("snakemake") is None, reason="snakemake is not installed")
def test_hostile_names_run_as_data_through_the_whole_workflow(tmp_path):
    shutil.copytree(REPO / "config", tmp_path / "config")
    prefix = f"inputs/{HOSTILE}/ar"
    gen = run_bounded(cli(*generate_collective_args(tmp_path / prefix, 8, "1MiB")), timeout=120)
    assert gen.returncode == 0, gen.stderr
    config = {
        "campaign": "names",
        "tracedir": f"traces {HOSTILE}",
        "outdir": f"reports {HOSTILE}",
        "shard_size": 1,
        "capture": "never",
        "replay": "never",
        "workloads": {
            "given": {"kind": "trace", "prefix": prefix, "npus": 8},
            # keep_traces: the generate rule writes the rank files under the hostile tracedir
            "made": {"kind": "collective", "type": "all_reduce", "npus": 8, "size": "1MiB", "keep_traces": True},
        },
        "hardware": {
            "platforms": {
                "hgx": {
                    "network": "config/hardware/hgx_h100/network.yml",
                    "system": "config/hardware/hgx_h100/system.json",
                }
            }
        },
    }
    (tmp_path / "names.yaml").write_text(yaml.safe_dump(config))
    before = set(os.listdir(tmp_path))
    run = subprocess.run(
        snakemake_cmd(tmp_path, "names.yaml", "--cores", "2"),
        cwd=tmp_path,
        env=workflow_env(),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    injected = [str(p) for p in tmp_path.rglob("INJECTED*")] + [str(p) for p in REPO.glob("INJECTED*")]
    assert not injected, f"the shell ran a name: {injected}"
    # nothing beside what the config names: no half-parsed path pieces ("we", "ird", ...) as stray files
    assert set(os.listdir(tmp_path)) - before == {f"traces {HOSTILE}", f"reports {HOSTILE}", ".snakemake"}
    with open(tmp_path / f"reports {HOSTILE}" / "names" / "results.csv") as fh:
        rows = fh.read().splitlines()
    assert sum(",ok," in r and "55222" in r for r in rows) == 2  # both workloads: the spec's 55,222 ns
