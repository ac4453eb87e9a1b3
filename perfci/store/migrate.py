"""Migrations: Alembic's upgrade and downgrade of perfci's schema, and its revision.

PostgreSQL is migrated only by an operator (``perfci db upgrade``); SQLite by
:func:`perfci.store.db.open_store` on first use. Alembic is imported only when a migration
runs (slow to import): reading the revision is plain SQL.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

from sqlalchemy import inspect, text
from sqlalchemy.engine import Connection
from sqlalchemy.exc import DBAPIError
from sqlalchemy.orm import Session

from perfci.core.errors import StorageError
from perfci.core.settings import redact_url
from perfci.store import partitions
from perfci.store.engines import error_reason, make_engine, parse_database_url
from perfci.store.partitions import Month

if TYPE_CHECKING:
    from alembic.config import Config

# The newest migration in migrations/versions (a test checks it against Alembic's head). Kept
# as a constant so that opening an up-to-date store never loads Alembic (slow to import).
HEAD_REVISION = "0010"


def migrations_dir() -> Path:
    """The Alembic scripts: the ``perfci.migrations`` package when installed, else the checkout."""
    spec = importlib.util.find_spec("perfci.migrations")
    if spec is not None and spec.origin:
        return Path(spec.origin).parent
    return Path(__file__).resolve().parents[2] / "migrations"


def alembic_config(url: str | None = None, *, connection: Connection | None = None) -> Config:
    """An Alembic config for ``url`` (or an open ``connection``) with perfci's scripts."""
    # lazy: Alembic is slow to import and only migrations need it (module docstring)
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
    # lazy: Alembic is slow to import and only migrations need it (module docstring)
    from alembic.script import ScriptDirectory

    head = ScriptDirectory.from_config(alembic_config()).get_current_head()
    if head is None:  # pragma: no cover - the package always ships migrations
        raise StorageError("perfci ships no database migrations; the installation is broken")
    return head


def upgrade(url: str, revision: str = "head") -> str | None:
    """Migrate the database at ``url`` up to ``revision``; returns the revision reached."""
    # lazy: Alembic is slow to import and only migrations need it (module docstring)
    from alembic import command

    with _migrating(url, "upgrade") as connection:
        command.upgrade(alembic_config(connection=connection), revision)
        return current_of(connection)


def downgrade(url: str, revision: str) -> str | None:
    """Migrate the database at ``url`` down to ``revision`` (``base`` empties it)."""
    # lazy: Alembic is slow to import and only migrations need it (module docstring)
    from alembic import command

    with _migrating(url, "downgrade") as connection:
        command.downgrade(alembic_config(connection=connection), revision)
        return current_of(connection)


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
        return current_of(connection)


def current_of(connection: Connection) -> str | None:
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
    # lazy: Alembic is slow to import and only migrations need it (module docstring)
    from alembic.util import CommandError

    return isinstance(exc, CommandError)


def known_revisions() -> set[str]:
    # lazy: Alembic is slow to import and only migrations need it (module docstring)
    from alembic.script import ScriptDirectory

    scripts = ScriptDirectory.from_config(alembic_config())
    return {script.revision for script in scripts.walk_revisions()}
