"""The database itself: migrate its schema, read its revision, open it for a service.

The shells (``perfci db``, ``perfci serve``, the app factory) call these instead of the store,
so that where the database lives and how it is reached stays the store's business.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

from perfci.core.compat import UTC
from perfci.core.errors import StorageError
from perfci.core.settings import Settings, get_settings, redact_url
from perfci.store import db, engines, migrate
from perfci.store.health import ping

if TYPE_CHECKING:
    from perfci.store.work import Engine, SessionFactory


@dataclass(frozen=True, slots=True)
class SchemaState:
    """Where a database's schema stands: its URL (password hidden) and revisions.

    ``found`` is ``None`` when the database has no perfci schema; ``head`` is the newest
    revision this perfci ships; ``partitions_made`` the months whose sample partitions an
    upgrade made ahead (PostgreSQL).
    """

    url: str
    found: str | None
    head: str
    partitions_made: tuple[str, ...] = ()


def resolve_url(database_url: str | None) -> str:
    """The database URL a ``--database-url`` flag (or, without one, the settings) names."""
    return get_settings({"database_url": database_url}).resolved_database_url()


def upgrade_schema(database_url: str | None, revision: str = "head") -> SchemaState:
    """Migrate the database up to ``revision``, then make the sample partitions of the
    current month and ``partitions_ahead`` more (PostgreSQL); the state reached."""
    settings = get_settings({"database_url": database_url})
    url = settings.resolved_database_url()
    reached = migrate.upgrade(url, revision)
    made = migrate.make_partitions_ahead(url, datetime.now(UTC), settings.partitions_ahead)
    return SchemaState(
        url=redact_url(url),
        found=reached,
        head=migrate.head_revision(),
        partitions_made=tuple(str(month) for month in made),
    )


def downgrade_schema(database_url: str | None, revision: str) -> SchemaState:
    """Migrate the database down to ``revision`` (``base`` empties it); the state reached.

    A downgrade a migration refuses (one that would lose data it cannot hold) is a
    ``StorageError`` with the migration's reason; nothing was changed.
    """
    url = resolve_url(database_url)
    try:
        reached = migrate.downgrade(url, revision)
    except RuntimeError as exc:  # a migration's refusal (see migrations/versions)
        raise StorageError(f"could not downgrade database {redact_url(url)}: {exc}") from exc
    return SchemaState(url=redact_url(url), found=reached, head=migrate.head_revision())


def schema_state(database_url: str | None) -> SchemaState:
    """The database's schema revision beside the newest one this perfci ships."""
    url = resolve_url(database_url)
    return SchemaState(
        url=redact_url(url), found=migrate.current(url), head=migrate.head_revision()
    )


def check_ready(settings: Settings) -> str:
    """Open and close the store ``settings`` name; its URL (unredacted, for worker processes).

    Fails with perfci's ``StorageError`` on a missing or old schema; SQLite is migrated here,
    as every command that opens the embedded store does.
    """
    db.open_store(settings).close()
    return settings.resolved_database_url()


def service_engine(url: str) -> tuple[Engine, SessionFactory]:
    """The engine and session factory a service process works with, for ``url``."""
    engine = engines.make_engine(url)
    return engine, engines.make_sessionmaker(engine)


def read_engine(url: str) -> tuple[Engine, SessionFactory]:
    """The engine and sessions of a read replica at ``url`` (``read_database_url``): every
    transaction read-only, so a write sent there fails at once rather than on failover."""
    engine = engines.make_engine(url, read_only=True)
    return engine, engines.make_sessionmaker(engine)


def database_answers(engine: Engine) -> bool:
    """Whether the database behind ``engine`` answers a trivial query now."""
    try:
        ping(engine)
    except Exception:  # noqa: BLE001 - any failure means "not healthy"
        return False
    return True
