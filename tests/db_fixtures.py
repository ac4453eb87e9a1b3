"""Database fixtures (a pytest plugin, loaded from conftest.py).

- ``store_url``: a database migrated once per test session and xdist worker, parametrized over
  ``sqlite`` (a temp file) and ``postgres`` (a fresh database on the ``PERFCI_TEST_POSTGRES_URL``
  server, dropped at the end; skipped when that variable is unset or the server is unreachable).
- ``session``: a Session on ``store_url`` whose work is rolled back after each test; commits
  inside the code under test only release a SAVEPOINT (``join_transaction_mode``).
- ``migrated_url``: a clean migrated database per test, for tests that need real commits
  (concurrency, subprocesses, the CLI).
- ``postgres_admin``: an autocommit engine on the test server, for tests that manage their own
  databases with :func:`create_postgres` / :func:`drop_postgres` (and :func:`create_sqlite`).

Test modules import the public helpers (``from db_fixtures import create_sqlite``); the
fixtures need no import.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import Engine, create_engine, text
from sqlalchemy.engine import make_url
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.orm import Session

from perfci.core.model import Metric, MetricKind, Profile, RunContext
from perfci.store import engines, migrate

POSTGRES_ENV = "PERFCI_TEST_POSTGRES_URL"
DIALECTS = ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]
_counter = itertools.count()


def _worker() -> str:
    return os.environ.get("PYTEST_XDIST_WORKER", "main")


@pytest.fixture(scope="session")
def postgres_admin() -> Iterator[Engine]:
    """An autocommit engine on the test server's own database, for CREATE/DROP DATABASE."""
    url = os.environ.get(POSTGRES_ENV)
    if not url:
        pytest.skip(f"{POSTGRES_ENV} is not set")
    engine = create_engine(url, isolation_level="AUTOCOMMIT", connect_args={"connect_timeout": 3})
    try:
        with engine.connect() as connection:
            connection.execute(text("SELECT 1"))
    except SQLAlchemyError as exc:
        engine.dispose()
        pytest.skip(f"PostgreSQL at {POSTGRES_ENV} is unreachable: {exc.__class__.__name__}")
    yield engine
    engine.dispose()


def create_postgres(admin: Engine) -> str:
    """A fresh database on the test server, migrated to head; its URL."""
    name = f"perfci_t_{_worker()}_{os.getpid()}_{next(_counter)}".lower()
    with admin.connect() as connection:
        connection.execute(text(f'DROP DATABASE IF EXISTS "{name}"'))
        connection.execute(text(f'CREATE DATABASE "{name}"'))
    url = admin.url.set(database=name).render_as_string(hide_password=False)
    migrate.upgrade(url)
    return url


def drop_postgres(admin: Engine, url: str) -> None:
    """Drop the database :func:`create_postgres` made, even with connections still open."""
    name = make_url(url).database
    with admin.connect() as connection:
        connection.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))


def create_sqlite(folder: Path) -> str:
    """A fresh SQLite file in ``folder``, migrated to head; its URL."""
    url = f"sqlite:///{folder / f'perfci-{next(_counter)}.db'}"
    migrate.upgrade(url)
    return url


@pytest.fixture(scope="session", params=DIALECTS)
def store_url(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[str]:
    """A migrated database shared by the whole test session (use ``session`` for isolation)."""
    if request.param == "sqlite":
        yield create_sqlite(tmp_path_factory.mktemp("store"))
        return
    admin = request.getfixturevalue("postgres_admin")
    url = create_postgres(admin)
    yield url
    drop_postgres(admin, url)


@pytest.fixture(scope="session")
def _store_engines() -> Iterator[dict[str, Engine]]:
    engines: dict[str, Engine] = {}
    yield engines
    for engine in engines.values():
        engine.dispose()


@pytest.fixture
def store_engine(store_url: str, _store_engines: dict[str, Engine]) -> Engine:
    if store_url not in _store_engines:
        _store_engines[store_url] = engines.make_engine(store_url)
    return _store_engines[store_url]


@pytest.fixture
def session(store_engine: Engine) -> Iterator[Session]:
    """A Session inside an outer transaction that is rolled back after the test."""
    with store_engine.connect() as connection:
        transaction = connection.begin()
        session = Session(
            bind=connection, join_transaction_mode="create_savepoint", expire_on_commit=False
        )
        try:
            yield session
        finally:
            session.close()
            transaction.rollback()


@pytest.fixture(params=DIALECTS)
def migrated_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A clean, migrated database of its own for this test; commits are real."""
    if request.param == "sqlite":
        yield create_sqlite(tmp_path)
        return
    admin = request.getfixturevalue("postgres_admin")
    url = create_postgres(admin)
    yield url
    drop_postgres(admin, url)


@pytest.fixture(params=DIALECTS)
def empty_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A clean database with no schema at all (migration tests)."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'empty.db'}"
        return
    admin = request.getfixturevalue("postgres_admin")
    name = f"perfci_t_{_worker()}_{os.getpid()}_{next(_counter)}_empty"
    with admin.connect() as connection:
        connection.execute(text(f'DROP DATABASE IF EXISTS "{name}"'))
        connection.execute(text(f'CREATE DATABASE "{name}"'))
    url = admin.url.set(database=name).render_as_string(hide_password=False)
    yield url
    drop_postgres(admin, url)


# --- helpers for store tests (import them: `from db_fixtures import make_context, ...`) ------


def make_context(project: str = "acme/model", **overrides: object) -> RunContext:
    """A run context with fixed defaults; no git, no CI, a fixed environment."""
    values: dict[str, object] = {
        "commit": "c0ffee",
        "branch": "main",
        "environment": {"gpu": "H100", "torch": "2.4.0"},
    }
    values.update(overrides)
    return RunContext(project=project, **values)  # type: ignore[arg-type]


def make_profile(
    values_ns: dict[str, float],
    *,
    label: str = "p",
    steps: int | None = None,
    kind: MetricKind = MetricKind.KERNEL,
) -> Profile:
    """A profile whose metrics are ``name → total ns`` (one call each)."""
    metrics = [
        Metric(kind=kind, name=name, calls=1, total_ns=value, avg_ns=value)
        for name, value in values_ns.items()
    ]
    return Profile(
        label=label, format="synthetic", source=f"{label}.txt", metrics=metrics, steps=steps
    )
