"""Shared test fixtures: where the read-only reference material lives.

Other projects' files (ASTRA-sim, Chakra, PyTorch traces) come from ``../shared/fixtures`` beside the
repository or ``$CHAKRA_PIPE_FIXTURES``; tests that need them skip with a reason naming that variable.
The ASTRA-sim conformance suite is ours and lives in the repository (``tests/data/conformance``), so it
runs in every clone.
"""

from __future__ import annotations

import csv
import os
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parent.parent
SHARED = REPO.parent / "shared"
CONFORMANCE = REPO / "tests" / "data" / "conformance"
# Conformance rows whose workload our generator writes at test time (see the suite's README).
GENERATED_MICROBENCHMARK = "generated/all_reduce_1MiB_8npus/all_reduce"
TORCH_EXTRA = 'needs PyTorch: pip install -e ".[torch]" (CI uses torch==2.13.0)'


def fixtures_path() -> Path:
    return Path(os.environ.get("CHAKRA_PIPE_FIXTURES", SHARED / "fixtures"))


def validated(config: dict[str, Any]) -> dict[str, Any]:
    """A campaign config as the Snakefile hands it to ``Campaign.from_config``: checked against the
    workflow's schema, with the schema's defaults filled in (the only defaults there are)."""
    from snakemake.utils import validate

    validate(config, str(REPO / "workflow" / "schemas" / "config.schema.yaml"))
    return config


def skip_reason(path: Path) -> str:
    return f"reference fixture {path} not found (set CHAKRA_PIPE_FIXTURES to the fixtures folder)"


@pytest.fixture(scope="session")
def fixtures_dir() -> Path:
    path = fixtures_path()
    if not path.is_dir():
        pytest.skip(skip_reason(path))
    return path


def fixture_file(fixtures_dir: Path, relative: str) -> Path:
    """A file inside the fixtures folder, skipping (naming CHAKRA_PIPE_FIXTURES) when it is absent."""
    path = fixtures_dir / relative
    if not path.exists():
        pytest.skip(skip_reason(path))
    return path


def conformance_rows() -> list[dict[str, str]]:
    with (CONFORMANCE / "expected.csv").open(newline="") as fh:
        return list(csv.DictReader(fh))


@pytest.fixture(scope="session")
def conformance_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The vendored suite as one folder: links to its committed parts plus ``generated/``, written here
    by ``generate collective`` (ASTRA-sim's all_reduce 8npus_1MB microbenchmark, byte for byte)."""
    from chakra_pipe.cli import main

    view = tmp_path_factory.mktemp("conformance")
    for entry in CONFORMANCE.iterdir():
        (view / entry.name).symlink_to(entry, target_is_directory=entry.is_dir())
    prefix = view / GENERATED_MICROBENCHMARK
    prefix.parent.mkdir(parents=True)
    rc = main(["generate", "collective", "--type", "all_reduce", "--npus", "8", "--size", "1MiB", "--out", str(prefix)])
    assert rc == 0, "generate collective failed for the conformance microbenchmark"
    return view


def run_campaign(folder: Path, config: dict[str, Any], name: str) -> None:
    """Run ``config`` through the workflow in ``folder`` (a copy of ``config/`` beside it, the checkout's
    Snakefile), as a user's ``snakemake --configfile config/NAME.yaml --cores 2`` would; fails the test
    with the end of Snakemake's log unless it succeeds."""
    import shutil
    import subprocess

    import yaml

    shutil.copytree(REPO / "config", folder / "config")
    (folder / "config" / f"{name}.yaml").write_text(yaml.safe_dump(config))
    from processes import snakemake_cmd, workflow_env

    cmd = snakemake_cmd(folder, f"config/{name}.yaml", "--cores", "2")
    run = subprocess.run(cmd, cwd=folder, env=workflow_env(), capture_output=True, text=True, timeout=600, check=False)
    assert run.returncode == 0, run.stderr[-3000:]
