"""Engines, sessions and migrations: how perfci opens its store.

SQLite (the embedded default, ``.perfci/perfci.db``) is migrated automatically on first use;
PostgreSQL never is: a missing or old schema is an error that says to run ``perfci db upgrade``,
because migrating a shared production database is an operator's decision.
"""

from __future__ import annotations

import importlib.util
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sqlalchemy import Engine, create_engine, event, inspect, text
from sqlalchemy.engine import URL, Connection, make_url
from sqlalchemy.exc import DBAPIError, DisconnectionError, SQLAlchemyError
from sqlalchemy.orm import Session, sessionmaker

from perfci.core.errors import ConfigError, StorageError
from perfci.core.settings import DEFAULT_DB_DIR, Settings, redact_url
from perfci.store import partitions
from perfci.store.partitions import Month

if TYPE_CHECKING:
    from alembic.config import Config

# The newest migration in migrations/versions (a test checks it against Alembic's head). Kept
# as a constant so that opening an up-to-date store never loads Alembic (slow to import).
HEAD_REVISION = "0009"

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


# --- migrations -------------------------------------------------------------------------------


def migrations_dir() -> Path:
    """The Alembic scripts: the ``perfci.migrations`` package when installed, else the checkout."""
    spec = importlib.util.find_spec("perfci.migrations")
    if spec is not None and spec.origin:
        return Path(spec.origin).parent
    return Path(__file__).resolve().parents[2] / "migrations"


def alembic_config(url: str | None = None, *, connection: Connection | None = None) -> Config:
    """An Alembic config for ``url`` (or an open ``connection``) with perfci's scripts."""
    from alembic.config import Config

    folder = migrations_dir()
    config = Config(str(folder / "alembic.ini"))
    config.set_main_option("script_location", str(folder))
    if url is not None:
        config.attributes["url"] = url
    if connection is not None:
        config.attributes["connection"] = connection
    return config


def head_revision() -> str:
    """The newest migration this perfci ships (read from the scripts, for tests and tools)."""
    from alembic.script import ScriptDirectory

    head = ScriptDirectory.from_config(alembic_config()).get_current_head()
    if head is None:  # pragma: no cover - the package always ships migrations
        raise StorageError("perfci ships no database migrations; the installation is broken")
    return head


def upgrade(url: str, revision: str = "head") -> str | None:
    """Migrate the database at ``url`` up to ``revision``; returns the revision reached."""
    from alembic import command

    with _migrating(url, "upgrade") as connection:
        command.upgrade(alembic_config(connection=connection), revision)
        return _current_of(connection)


def downgrade(url: str, revision: str) -> str | None:
    """Migrate the database at ``url`` down to ``revision`` (``base`` empties it)."""
    from alembic import command

    with _migrating(url, "downgrade") as connection:
        command.downgrade(alembic_config(connection=connection), revision)
        return _current_of(connection)


def make_partitions_ahead(url: str, now: datetime, ahead: int) -> list[Month]:
    """Make the sample partitions of ``now``'s month and ``ahead`` more; the months made.

    PostgreSQL at revision 0006 or later; nothing elsewhere (SQLite, older schemas).
    """
    if parse_database_url(url).get_backend_name() != "postgresql":
        return []
    with (
        _migrating(url, "make the sample partitions of") as connection,
        Session(bind=connection) as session,
    ):
        return partitions.ensure_ahead(session, now, ahead)


def current(url: str) -> str | None:
    """The schema revision of the database at ``url``; ``None`` when it has no perfci schema."""
    with _migrating(url, "read the schema revision of") as connection:
        return _current_of(connection)


def _current_of(connection: Connection) -> str | None:
    """Alembic's revision of the schema, read with plain SQL (perfci has one migration branch)."""
    if not inspect(connection).has_table("alembic_version"):
        return None
    return connection.execute(text("SELECT version_num FROM alembic_version")).scalar()


@contextmanager
def _migrating(url: str, action: str) -> Iterator[Connection]:
    """A committed-on-success connection; database errors become ``StorageError``."""
    engine = make_engine(url)
    try:
        with engine.begin() as connection:
            yield connection
    except DBAPIError as exc:
        raise StorageError(
            f"could not {action} database {redact_url(url)}: {error_reason(exc)}"
        ) from exc
    except Exception as exc:
        if _is_alembic_error(exc):
            raise StorageError(f"could not {action} database {redact_url(url)}: {exc}") from exc
        raise
    finally:
        engine.dispose()


def _is_alembic_error(exc: Exception) -> bool:
    from alembic.util import CommandError

    return isinstance(exc, CommandError)


def error_reason(exc: DBAPIError) -> str:
    """The driver's own first line of a database error, for a message a user reads."""
    return str(exc.orig).strip().splitlines()[0] if exc.orig else str(exc)


# --- opening the store ------------------------------------------------------------------------


@dataclass(slots=True)
class Store:
    """An open store: the engine and its session factory. ``close()`` releases connections."""

    url: str
    engine: Engine
    sessions: sessionmaker[Session]

    @property
    def dialect(self) -> str:
        return self.engine.dialect.name

    def close(self) -> None:
        self.engine.dispose()

    @contextmanager
    def rolled_back(self) -> Iterator[Session]:
        """A Session whose work is always rolled back: a look that must leave no trace.

        :meth:`tentative` that is never kept.
        """
        with self.tentative() as work:
            yield work.session

    @contextmanager
    def tentative(self) -> Iterator[Tentative]:
        """Work that is kept only if asked: ``work.keep = True`` commits it at the end.

        The Session joins an outer transaction on its own connection with
        ``join_transaction_mode="create_savepoint"`` (SQLAlchemy 2.0, "Joining a Session into
        an External Transaction"), so the commits of the code it is handed (an ingest, a saved
        comparison) only release SAVEPOINTs; at the end the outer transaction is committed
        when ``keep`` was set, else rolled back, and always rolled back after an exception.
        The adaptive repeats of ``perfci check`` look at a run this way: an intermediate look
        leaves no trace, the final one is kept. On SQLite the outer transaction holds the
        write lock (``BEGIN IMMEDIATE``) until the work ends: keep it short.
        """
        with self.engine.connect() as connection:
            outer = connection.begin()
            work = Tentative(
                Session(
                    bind=connection,
                    join_transaction_mode="create_savepoint",
                    expire_on_commit=False,
                )
            )
            try:
                yield work
            except BaseException:
                work.keep = False
                raise
            finally:
                work.session.close()
                if work.keep:
                    outer.commit()
                else:
                    outer.rollback()


@dataclass(slots=True)
class Tentative:
    """A Session inside :meth:`Store.tentative`; set ``keep`` to commit its work."""

    session: Session
    keep: bool = False


def open_store(settings: Settings, *, root: Path | None = None, create: bool = True) -> Store:
    """Open the store ``settings`` name, ready for use.

    SQLite is migrated to head here (creating ``.perfci/``); PostgreSQL must already be at
    head, else ``StorageError`` says to run ``perfci db upgrade``. With ``create=False`` (a
    command that only reads, such as ``perfci compare``), a SQLite file that does not exist is
    a ``StorageError`` naming it, and nothing is created (issue 36: ``perfci compare --run 42``
    in an empty folder made ``.perfci/perfci.db``).
    """
    url = settings.resolved_database_url(root)
    if not create:
        _refuse_missing_sqlite(url)
    engine = make_engine(url)
    try:
        if make_url(url).get_backend_name() == "sqlite" and _revision(engine, url) != HEAD_REVISION:
            upgrade(url)
        _check_schema(engine, url)
    except BaseException:
        engine.dispose()
        raise
    return Store(url=url, engine=engine, sessions=make_sessionmaker(engine))


def _refuse_missing_sqlite(url: str) -> None:
    parsed = make_url(url)
    database = parsed.database
    if parsed.get_backend_name() != "sqlite" or not database or database == ":memory:":
        return
    if not Path(database).is_file():
        raise StorageError(
            f"no perfci store at {database}: nothing was checked here yet (run `perfci check` "
            "in this project first, or give --database-url)"
        )


def _revision(engine: Engine, url: str) -> str | None:
    try:
        with engine.connect() as connection:
            return _current_of(connection)
    except SQLAlchemyError as exc:
        reason = error_reason(exc) if isinstance(exc, DBAPIError) else str(exc)
        raise StorageError(f"could not open database {redact_url(url)}: {reason}") from exc


def _check_schema(engine: Engine, url: str) -> None:
    found = _revision(engine, url)
    head = HEAD_REVISION
    if found == head:
        return
    fix = f"run `perfci db upgrade --database-url {redact_url(url)}`"
    if found is None:
        raise StorageError(f"database {redact_url(url)} has no perfci schema; {fix}")
    if found not in _known_revisions():
        raise StorageError(
            f"database {redact_url(url)} is at schema revision {found}, which this "
            f"perfci does not know (newer perfci?); upgrade perfci"
        )
    raise StorageError(
        f"database {redact_url(url)} is at schema revision {found}, this perfci needs {head}; {fix}"
    )


def _known_revisions() -> set[str]:
    from alembic.script import ScriptDirectory

    scripts = ScriptDirectory.from_config(alembic_config())
    return {script.revision for script in scripts.walk_revisions()}
