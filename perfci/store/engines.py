"""Engines and sessions: how perfci connects to SQLite and PostgreSQL.

Per-dialect settings (SQLite's WAL, busy timeout and immediate transactions; PostgreSQL's
pings of idle pooled connections), the database URLs perfci accepts, and the driver's message
of a database error. Opening a migrated store is :mod:`perfci.store.db`.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, create_engine, event
from sqlalchemy.engine import URL, Connection, make_url
from sqlalchemy.exc import DBAPIError, DisconnectionError
from sqlalchemy.orm import Session, sessionmaker

from perfci.core.errors import ConfigError, StorageError
from perfci.core.settings import DEFAULT_DB_DIR, redact_url
from perfci.store.json_text import json_text

# Seconds a SQLite writer waits for another one before giving up ("database is locked").
SQLITE_BUSY_TIMEOUT_S = 30
# A pooled PostgreSQL connection idle longer than this is pinged before use.
PING_AFTER_IDLE_S = 1.0


def make_engine(url: str, *, read_only: bool = False, **kwargs: Any) -> Engine:
    """An engine for ``url`` with perfci's per-dialect settings.

    ``read_only`` (a read replica's engine, issue 17): every transaction is read-only, as on a
    hot standby, so that a write sent there by mistake fails at once on any database
    (PostgreSQL ``SET TRANSACTION READ ONLY``; SQLite ``PRAGMA query_only`` and deferred
    transactions).

    SQLite: WAL (readers never block the writer), foreign keys on, a busy timeout, and
    ``BEGIN IMMEDIATE`` for every transaction: a deferred transaction that reads and then
    writes fails at once with "database is locked" when another writer committed meanwhile,
    whereas an immediate one waits its turn. It also makes SAVEPOINTs work under pysqlite.
    PostgreSQL: connections idle in the pool for more than ``PING_AFTER_IDLE_S`` are pinged on
    checkout, so that ones dropped by the server meanwhile are replaced.
    """
    parsed = parse_database_url(url)
    kwargs.setdefault("json_serializer", json_text)  # no NaN in a JSON column, on any store
    if parsed.get_backend_name() == "sqlite":
        _ensure_sqlite_directory(parsed.database)
        connect_args = {"timeout": SQLITE_BUSY_TIMEOUT_S, **kwargs.pop("connect_args", {})}
        engine = create_engine(parsed, connect_args=connect_args, **kwargs)
        _configure_sqlite(engine, read_only=read_only)
        return engine
    if read_only:
        kwargs["execution_options"] = {
            **kwargs.get("execution_options", {}),
            "postgresql_readonly": True,
        }
    engine = create_engine(parsed, **kwargs)
    _ping_idle_connections(engine)
    return engine


def sqlite_file(url: str) -> Path | None:
    """The file of a SQLite store ``url`` names; None for another database or one in memory."""
    parsed = make_url(url)
    if parsed.get_backend_name() != "sqlite" or not parsed.database:
        return None
    return None if parsed.database == ":memory:" else Path(parsed.database)


#: The database URLs perfci accepts, as its error messages name them.
ACCEPTED_URLS = (
    "sqlite:///PATH (the embedded store)",
    "postgresql://USER@HOST[:PORT]/DBNAME (postgresql+psycopg://)",
)


def parse_database_url(url: str) -> URL:
    """``url`` parsed, PostgreSQL on the psycopg driver perfci ships; else ``ConfigError``.

    A malformed or foreign URL (``foo://bar``, ``mysql://…``, no scheme, an unclosed IPv6
    bracket) used to end in a traceback from deep inside SQLAlchemy (issue 13); the message
    names the accepted schemes and never the URL's password.
    """
    scheme, has_scheme, _ = url.partition("://")
    try:
        parsed: URL | None = make_url(url)
    except Exception:  # noqa: BLE001 - ArgumentError, or ValueError for a bad port or bracket
        parsed = None
    if parsed is not None:
        backend, _, driver = parsed.drivername.partition("+")
        if backend == "sqlite" and driver in ("", "pysqlite"):
            return parsed
        if backend in ("postgresql", "postgres") and driver in ("", "psycopg"):
            return parsed.set(drivername="postgresql+psycopg")
        problem = f"perfci cannot store runs in {parsed.drivername!r} databases"
    elif not has_scheme or not scheme:
        problem = "it has no scheme (such as sqlite:/// or postgresql://)"
    else:
        problem = "it is malformed (check the port, and the [brackets] around an IPv6 address)"
    shown = redact_url(url) if parsed is not None else (f"{scheme}://***" if has_scheme else "***")
    raise ConfigError(
        f"database URL {shown} cannot be used: {problem}; expected {' or '.join(ACCEPTED_URLS)}"
    )


def _ensure_sqlite_directory(database: str | None) -> None:
    """Create the folder of a SQLite file only inside ``.perfci/`` (the embedded default's).

    Any other missing folder is a mistyped URL (issue 16: ``sqlite:////nonexistent/dir/x.db``
    stored a run and made ``/nonexistent/dir``), refused before anything is written.
    """
    if not database or database == ":memory:" or database.startswith("file:"):
        return
    folder = Path(database).expanduser().parent
    if folder.is_dir():
        return
    existing = next((p for p in folder.parents if p.is_dir()), Path())
    first_missing = folder.relative_to(existing).parts[0]
    if first_missing != DEFAULT_DB_DIR and DEFAULT_DB_DIR not in existing.parts:
        raise StorageError(
            f"the folder {folder} of the SQLite database {database} does not exist: create it "
            f"first (perfci creates only its default {DEFAULT_DB_DIR}/ folder), or leave out "
            f"--database-url for the default {DEFAULT_DB_DIR}/perfci.db"
        )
    folder.mkdir(parents=True, exist_ok=True)


def _configure_sqlite(engine: Engine, *, read_only: bool = False) -> None:
    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: Any) -> None:
        # Hand transaction control to SQLAlchemy (pysqlite's own BEGIN handling is broken).
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute("PRAGMA synchronous=NORMAL")  # durable on crash under WAL, faster
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.execute(f"PRAGMA busy_timeout={SQLITE_BUSY_TIMEOUT_S * 1000}")
        if read_only:
            cursor.execute("PRAGMA query_only=ON")
        cursor.close()

    # A reader's transaction is deferred: it takes no write lock (and query_only refuses one).
    begin = "BEGIN" if read_only else "BEGIN IMMEDIATE"

    @event.listens_for(engine, "begin")
    def _on_begin(connection: Connection) -> None:
        connection.exec_driver_sql(begin)


def _ping_idle_connections(engine: Engine) -> None:
    """``pool_pre_ping``, except for connections used within the last ``PING_AFTER_IDLE_S``.

    A ping is a round trip and a statement on every checkout, a noticeable share of an
    ingest's CPU (benchmarks/store_speed.py). A connection that was working a second ago is
    not worth checking; a failure in that window is a disconnect error like any other, after
    which SQLAlchemy replaces the pool's connections. This is the checkout-event recipe of
    SQLAlchemy's "Disconnect Handling - Pessimistic", which retries with a new connection.
    """

    @event.listens_for(engine, "connect")
    def _on_connect(_dbapi_connection: Any, record: Any) -> None:
        record.info["idle_since"] = time.monotonic()

    @event.listens_for(engine, "checkin")
    def _on_checkin(_dbapi_connection: Any, record: Any) -> None:
        if record is not None:
            record.info["idle_since"] = time.monotonic()

    @event.listens_for(engine, "checkout")
    def _on_checkout(dbapi_connection: Any, record: Any, _proxy: Any) -> None:
        idle_since = record.info.pop("idle_since", None)
        if idle_since is not None and time.monotonic() - idle_since < PING_AFTER_IDLE_S:
            return
        try:
            engine.dialect.do_ping(dbapi_connection)
        except engine.dialect.loaded_dbapi.Error as exc:
            raise DisconnectionError(f"connection lost while idle: {exc}") from exc


def make_sessionmaker(engine: Engine) -> sessionmaker[Session]:
    """Sessions for units of work; objects stay readable after commit."""
    return sessionmaker(bind=engine, expire_on_commit=False)


def error_reason(exc: DBAPIError) -> str:
    """The driver's own first line of a database error, for a message a user reads."""
    return str(exc.orig).strip().splitlines()[0] if exc.orig else str(exc)
