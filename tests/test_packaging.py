"""The wheel carries what `pip install perfci` users need: migrations, templates, the CLI."""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from perfci.store.migrate import HEAD_REVISION

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "-q",
            "-w",
            str(out),
            str(REPO),
        ],
        check=True,
        capture_output=True,
    )
    [found] = out.glob("perfci-*.whl")
    return found


def test_wheel_ships_migrations_templates_and_the_console_script(wheel: Path) -> None:
    names = set(zipfile.ZipFile(wheel).namelist())
    for expected in (
        "perfci/migrations/alembic.ini",
        "perfci/migrations/env.py",
        "perfci/migrations/script.py.mako",
        "perfci/migrations/versions/0001_initial.py",
        "perfci/report/templates/comment.md.j2",
        "perfci/server/templates/run.html",
        "perfci/server/static/style.css",
        "perfci/py.typed",
    ):
        assert expected in names, expected
    entry_points = next(n for n in names if n.endswith("entry_points.txt"))
    assert "perfci = perfci.cli.main:main" in zipfile.ZipFile(wheel).read(entry_points).decode()


def test_installed_wheel_migrates_a_database_on_its_own(wheel: Path, tmp_path: Path) -> None:
    target = tmp_path / "site"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--no-deps",
            "-q",
            "--target",
            str(target),
            str(wheel),
        ],
        check=True,
        capture_output=True,
    )
    code = (
        "import perfci, sys; from perfci.store import migrate; "
        f"assert perfci.__file__.startswith({str(target)!r}), perfci.__file__; "
        f"print(migrate.upgrade('sqlite:///{tmp_path / 'x.db'}'))"
    )
    # Run outside the checkout so that only the installed copy (and its migrations) is found.
    done = subprocess.run(
        [sys.executable, "-c", code],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(target)},
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == HEAD_REVISION  # the newest migration shipped in the wheel


def test_service_lock_is_the_pinned_closure_of_perfci_server() -> None:
    # The Docker image installs requirements/server.txt alone: it must hold everything
    # perfci[server] needs (from the installed metadata), pinned exactly as in lock.txt,
    # and none of the development tools.
    done = subprocess.run(
        [sys.executable, str(REPO / "scripts" / "server_lock.py"), "--check"],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    pins = {
        line
        for line in (REPO / "requirements" / "lock.txt").read_text().splitlines()
        if line and not line.startswith("#")
    }
    server = [
        line
        for line in (REPO / "requirements" / "server.txt").read_text().splitlines()
        if line and not line.startswith("#")
    ]
    assert set(server) <= pins
    names = {line.split("==")[0].lower() for line in server}
    assert {"fastapi", "uvicorn", "psycopg-binary", "sqlalchemy", "alembic", "scipy"} <= names
    assert not names & {"pytest", "mypy", "ruff", "hypothesis", "schemathesis", "torch"}
