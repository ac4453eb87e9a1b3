"""The container's entrypoint and Dockerfile, without a Docker engine.

docker/entrypoint.sh is run as the image runs it (``perfci`` on PATH, PERFCI_* set) against an
empty SQLite file and an empty PostgreSQL database: it must migrate, then serve /healthz. The
Dockerfile is checked statically for what the issue asks of it.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from db_fixtures import drop_postgres
from deadlines import Deadline, scaled
from server_process import free_port
from sqlalchemy import text

from perfci.store import migrate

REPO = Path(__file__).resolve().parents[1]
ENTRYPOINT = REPO / "docker" / "entrypoint.sh"
DOCKERFILE = REPO / "Dockerfile"


def _instructions() -> list[tuple[str, str]]:
    text = DOCKERFILE.read_text().replace("\\\n", " ")
    found = []
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            keyword, _, rest = line.partition(" ")
            found.append((keyword.upper(), rest.strip()))
    return found


def test_dockerfile_runs_as_non_root_with_a_healthcheck_and_cached_dependencies() -> None:
    steps = _instructions()
    keywords = [k for k, _ in steps]
    arg, base = steps[0], steps[1]
    assert arg[0] == "ARG" and re.fullmatch(
        r"PYTHON_IMAGE=python:3\.11-slim@sha256:[0-9a-f]{64}", arg[1]
    ), arg
    assert base == ("FROM", "${PYTHON_IMAGE} AS base")
    users = [rest for k, rest in steps if k == "USER"]
    assert users and users[-1] not in {"root", "0", "0:0"}
    health = [rest for k, rest in steps if k == "HEALTHCHECK"]
    assert len(health) == 1 and "/healthz" in health[0] and "urllib" in health[0]
    assert ("EXPOSE", "8000") in steps
    assert any(k == "ENTRYPOINT" and "entrypoint" in rest for k, rest in steps)
    copies = [(i, rest) for i, (k, rest) in enumerate(steps) if k == "COPY"]
    lock = next(i for i, rest in copies if "requirements/server-hashes.txt" in rest)
    source = next(i for i, rest in copies if rest.startswith("perfci "))
    install_deps = next(
        i
        for i, (k, rest) in enumerate(steps)
        if k == "RUN" and ("pip install --require-hashes -r requirements/server-hashes.txt" in rest)
    )
    install_pkg = next(
        i for i, (k, rest) in enumerate(steps) if k == "RUN" and "pip install --no-deps ." in rest
    )
    assert lock < install_deps < source < install_pkg
    assert keywords.index("USER") > install_pkg


def test_compose_has_postgres_the_service_and_healthchecks() -> None:
    compose = (REPO / "docker-compose.yml").read_text()
    assert "image: postgres:16" in compose
    assert compose.count("healthcheck:") == 2 and "/healthz" in compose
    assert re.search(r"condition: service_healthy", compose)


def test_compose_binds_loopback_and_requires_a_password() -> None:
    compose = (REPO / "docker-compose.yml").read_text()
    ports = re.findall(r'^\s*-\s*"([^"]+)"\s*$', compose, re.M)
    assert ports == ["127.0.0.1:8000:8000"]
    uses = re.findall(r"\$\{POSTGRES_PASSWORD([^}]*)\}", compose)
    assert len(uses) == 2 and all(use.startswith(":?") for use in uses), uses


def test_the_image_installs_hashed_pins_equal_to_the_server_lock() -> None:
    hashed = (REPO / "requirements" / "server-hashes.txt").read_text()
    plain = [
        line
        for line in (REPO / "requirements" / "server.txt").read_text().splitlines()
        if line and not line.startswith("#")
    ]
    entries = [e for e in hashed.replace("\\\n", " ").splitlines() if e and not e.startswith("#")]
    assert [e.split()[0] for e in entries] == plain
    assert all(re.search(r"--hash=sha256:[0-9a-f]{64}", e) for e in entries)


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def empty_database(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A database without any schema: a new SQLite path, or a new PostgreSQL database."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'data' / 'perfci.db'}"
        return
    admin = request.getfixturevalue("postgres_admin")
    name = f"perfci_entrypoint_{os.getpid()}"
    with admin.connect() as connection:
        connection.execute(text(f'DROP DATABASE IF EXISTS "{name}"'))
        connection.execute(text(f'CREATE DATABASE "{name}"'))
    url = admin.url.set(database=name).render_as_string(hide_password=False)
    assert migrate.current(url) is None
    yield url
    drop_postgres(admin, url)


def test_entrypoint_migrates_then_serves(empty_database: str, tmp_path: Path) -> None:
    port = free_port()
    path = os.environ.get("PATH", "")
    if shutil.which("perfci") is None:  # the virtualenv's console script, as in the image
        path = f"{Path(sys.executable).parent}{os.pathsep}{path}"
    env = {
        **os.environ,
        "PERFCI_DATABASE_URL": empty_database,
        "PERFCI_HOST": "127.0.0.1",
        "PERFCI_PORT": str(port),
        "PERFCI_WORKERS": "1",
        "PATH": path,
    }
    log = tmp_path / "entrypoint.log"
    with log.open("wb") as sink:
        process = subprocess.Popen(
            ["sh", str(ENTRYPOINT)],
            cwd=tmp_path,
            env=env,
            stdout=sink,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        health = _wait_healthy(f"http://127.0.0.1:{port}/healthz", process, log)
        assert health.json()["status"] == "ok"
        assert migrate.current(empty_database) == migrate.head_revision()
        assert "schema at revision" in log.read_text()
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGTERM)
        process.wait(timeout=scaled(20))
    assert process.returncode in (0, -signal.SIGTERM), log.read_text()


def _wait_healthy(url: str, process: subprocess.Popen[bytes], log: Path) -> httpx.Response:
    deadline = Deadline(90)
    while not deadline.expired():
        if process.poll() is not None:
            pytest.fail(f"entrypoint exited with {process.returncode}:\n{log.read_text()}")
        try:
            response = httpx.get(url, timeout=2)
            if response.status_code == 200:
                return response
        except httpx.HTTPError:
            pass
        time.sleep(0.3)
    pytest.fail(f"no healthy answer from {url} after {deadline.describe()}:\n{log.read_text()}")
