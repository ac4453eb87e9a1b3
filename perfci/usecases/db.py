"""The database itself: migrate its schema, read its revision, open it for a service.

The shells (``perfci db``, ``perfci serve``, the app factory) call these instead of the store,
so that where the database lives and how it is reached stays the store's business.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from perfci.settings import Settings, get_settings, redact_url
from perfci.store import db

if TYPE_CHECKING:
    from sqlalchemy.engine import Engine
    from sqlalchemy.orm import Session, sessionmaker


@dataclass(frozen=True, slots=True)
class SchemaState:
    """Where a database's schema stands: its URL (password hidden) and revisions.

    ``found`` is ``None`` when the database has no perfci schema; ``head`` is the newest
    revision this perfci ships.
    """

    url: str
    found: str | None
    head: str


def resolve_url(database_url: str | None) -> str:
    """The database URL a ``--database-url`` flag (or, without one, the settings) names."""
    return get_settings({"database_url": database_url}).resolved_database_url()


def upgrade_schema(database_url: str | None, revision: str = "head") -> SchemaState:
    """Migrate the database up to ``revision``; the state reached."""
    url = resolve_url(database_url)
    reached = db.upgrade(url, revision)
    return SchemaState(url=redact_url(url), found=reached, head=db.head_revision())


def downgrade_schema(database_url: str | None, revision: str) -> SchemaState:
    """Migrate the database down to ``revision`` (``base`` empties it); the state reached."""
    url = resolve_url(database_url)
    reached = db.downgrade(url, revision)
    return SchemaState(url=redact_url(url), found=reached, head=db.head_revision())


def schema_state(database_url: str | None) -> SchemaState:
    """The database's schema revision beside the newest one this perfci ships."""
    url = resolve_url(database_url)
    return SchemaState(url=redact_url(url), found=db.current(url), head=db.head_revision())


def check_ready(settings: Settings) -> str:
    """Open and close the store ``settings`` name; its URL (unredacted, for worker processes).

    Fails with perfci's ``StorageError`` on a missing or old schema; SQLite is migrated here,
    as every command that opens the embedded store does.
    """
    db.open_store(settings).close()
    return settings.resolved_database_url()


def service_engine(url: str) -> tuple[Engine, sessionmaker[Session]]:
    """The engine and session factory a service process works with, for ``url``."""
    engine = db.make_engine(url)
    return engine, db.make_sessionmaker(engine)


def database_answers(engine: Engine) -> bool:
    """Whether the database behind ``engine`` answers a trivial query now."""
    from perfci.store.health import ping

    try:
        ping(engine)
    except Exception:  # noqa: BLE001 - any failure means "not healthy"
        return False
    return True
