"""Shared test fixtures: where the read-only reference material lives.

Fixtures come from ``../shared`` beside the repository (or ``$CHAKRA_PIPE_FIXTURES`` for the
fixtures folder); tests that need them skip with a clear reason when they are absent.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
SHARED = REPO.parent / "shared"


def fixtures_path() -> Path:
    return Path(os.environ.get("CHAKRA_PIPE_FIXTURES", SHARED / "fixtures"))


def shared_path() -> Path:
    return SHARED


@pytest.fixture(scope="session")
def fixtures_dir() -> Path:
    path = fixtures_path()
    if not path.is_dir():
        pytest.skip(f"reference fixtures not found at {path} (set CHAKRA_PIPE_FIXTURES)")
    return path


@pytest.fixture(scope="session")
def shared_dir() -> Path:
    if not SHARED.is_dir():
        pytest.skip(f"shared reference folder not found at {SHARED}")
    return SHARED


@pytest.fixture(scope="session")
def conformance_dir(shared_dir: Path) -> Path:
    path = shared_dir / "conformance"
    if not (path / "expected.csv").is_file():
        pytest.skip(f"conformance suite not found at {path}")
    return path
