"""Shared fixtures. Real inputs live in ../shared (seeds, corpus): tests that need them skip
when it is absent, so the suite still runs on a checkout without it."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("PERFCI_SHARED_DIR", REPO.parent / "shared"))

pytest_plugins = ["db_fixtures"]


def _need(path: Path) -> Path:
    if not path.exists():
        if os.environ.get("CI") == "true" and os.environ.get("PERFCI_REQUIRE_SHARED") == "1":
            pytest.fail(f"{path} is required in CI but absent")
        pytest.skip(f"{path} is absent (../shared not checked out beside the repo)")
    return path


@pytest.fixture(scope="session")
def shared_dir() -> Path:
    return _need(SHARED)


@pytest.fixture(scope="session")
def seeds_dir() -> Path:
    return _need(SHARED / "seeds")


@pytest.fixture(scope="session")
def corpus_dir() -> Path:
    return _need(SHARED / "corpus")


def seed(name_prefix: str) -> Path:
    """Path of the seed whose file name starts with ``name_prefix`` (skips when absent)."""
    folder = _need(SHARED / "seeds")
    matches = sorted(folder.glob(f"{name_prefix}*"))
    if not matches:
        pytest.skip(f"no seed {name_prefix}* in {folder}")
    return matches[0]
