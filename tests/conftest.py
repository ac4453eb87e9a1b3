"""Shared fixtures. Real inputs live in ../shared (seeds, corpus, changepoint-data): every test
that needs them goes through :func:`shared_path` (or the fixtures and :data:`requires_shared`
built on it), so that without ../shared they all skip with the one reason
:data:`SHARED_ABSENT` and the suite passes on a fresh clone."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("PERFCI_SHARED_DIR", REPO.parent / "shared"))

#: The one skip reason of every test that needs ../shared (``pytest -rs`` groups them under it).
SHARED_ABSENT = (
    f"needs ../shared (real profiles: seeds, corpus, changepoint-data), absent at {SHARED}"
)

#: For a test (or module, as ``pytestmark``) that reads ../shared at collection time.
requires_shared = pytest.mark.skipif(not SHARED.is_dir(), reason=SHARED_ABSENT)

pytest_plugins = ["db_fixtures"]

#: Chromium for the browser tests (marker ``browser``): ``$PERFCI_CHROMIUM``, else ``chromium``
#: on the PATH, else Debian's ``/usr/bin/chromium``.
CHROMIUM = os.environ.get("PERFCI_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"

#: The one skip reason of every browser test (``pytest -rs`` groups them under it).
CHROMIUM_ABSENT = (
    f"browser test: needs Chromium, absent at {CHROMIUM} (scripts/test installs it when run as "
    "root with apt-get; else `sudo apt-get install chromium`, or set PERFCI_CHROMIUM)"
)


def chromium_or_skip() -> str:
    """The Chromium executable; skips the test without one (fails in CI: ``CI=true``)."""
    if not Path(CHROMIUM).exists():
        if os.environ.get("CI") == "true":
            pytest.fail(f"Chromium is required in CI but {CHROMIUM} is absent")
        pytest.skip(CHROMIUM_ABSENT)
    return CHROMIUM


def shared_path(*parts: str) -> Path:
    """``../shared/<parts>``: skips the test when ../shared is absent, fails when it is there
    but lacks the path (an incomplete checkout of it is a real error, not a reason to skip).

    CI can insist on ../shared with ``CI=true PERFCI_REQUIRE_SHARED=1``: then its absence fails.
    """
    if not SHARED.is_dir():
        if os.environ.get("CI") == "true" and os.environ.get("PERFCI_REQUIRE_SHARED") == "1":
            pytest.fail(f"{SHARED} is required in CI but absent")
        pytest.skip(SHARED_ABSENT)
    path = SHARED.joinpath(*parts)
    if not path.exists():
        pytest.fail(f"{path} is missing: ../shared is there but incomplete")
    return path


def _need(path: Path) -> Path:
    """:func:`shared_path` for a path already joined onto :data:`SHARED`."""
    return shared_path(*path.relative_to(SHARED).parts)


@pytest.fixture(scope="session")
def shared_dir() -> Path:
    return shared_path()


@pytest.fixture(scope="session")
def seeds_dir() -> Path:
    return shared_path("seeds")


@pytest.fixture(scope="session")
def corpus_dir() -> Path:
    return shared_path("corpus")


def seed(name_prefix: str) -> Path:
    """Path of the seed whose file name starts with ``name_prefix`` (skips without ../shared)."""
    folder = shared_path("seeds")
    matches = sorted(folder.glob(f"{name_prefix}*"))
    if not matches:
        pytest.fail(f"no seed {name_prefix}* in {folder}: ../shared is incomplete")
    return matches[0]


#: CI and perfci variables a test of the CLI must not inherit from the job running the suite.
CI_VARIABLES = (
    "GITHUB_ACTIONS",
    "GITHUB_REF",
    "GITHUB_REF_NAME",
    "GITHUB_HEAD_REF",
    "GITHUB_BASE_REF",
    "GITHUB_SHA",
    "GITHUB_EVENT_PATH",
    "GITHUB_REPOSITORY",
    "GITHUB_OUTPUT",
    "GITHUB_STEP_SUMMARY",
    "PERFCI_DATABASE_URL",
    "PERFCI_PROJECT",
)


@pytest.fixture
def outside_git(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A working directory that is no git checkout, with no CI variables."""
    for name in CI_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    folder = tmp_path / "work"
    folder.mkdir()
    monkeypatch.chdir(folder)
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path))  # no repository above it
    return folder
