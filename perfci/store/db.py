"""Opening the store: a migrated database and its sessions, ready for use.

SQLite (the embedded default, ``.perfci/perfci.db``) is migrated automatically on first use;
PostgreSQL never is: a missing or old schema is an error that says to run ``perfci db upgrade``,
because migrating a shared production database is an operator's decision. Engines are made in
:mod:`perfci.store.engines`, migrations run in :mod:`perfci.store.migrate`.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from sqlalchemy import Engine
from sqlalchemy.engine import make_url
from sqlalchemy.exc import DBAPIError, SQLAlchemyError
from sqlalchemy.orm import Session, sessionmaker

from perfci.core.errors import StorageError
from perfci.core.settings import Settings, redact_url
from perfci.store.engines import error_reason, make_engine, make_sessionmaker
from perfci.store.migrate import HEAD_REVISION, current_of, known_revisions, upgrade

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
            return current_of(connection)
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
    if found not in known_revisions():
        raise StorageError(
            f"database {redact_url(url)} is at schema revision {found}, which this "
            f"perfci does not know (newer perfci?); upgrade perfci"
        )
    raise StorageError(
        f"database {redact_url(url)} is at schema revision {found}, this perfci needs {head}; {fix}"
    )
