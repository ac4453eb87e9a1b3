"""Alembic environment: the same database URL resolution as the app.

Order: a connection passed in ``config.attributes["connection"]`` (tests, ``perfci db``), a URL
in ``config.attributes["url"]``, ``sqlalchemy.url`` in the ini file, else the app's settings
(``PERFCI_DATABASE_URL``, config file, embedded SQLite). ``target_metadata`` is only used by
autogenerate and ``alembic check``; the migrations themselves never import perfci models.
"""

from __future__ import annotations

from alembic import context
from sqlalchemy.engine import Connection

from perfci.core.settings import get_settings

# schema_service adds the service's tables to Base.metadata: autogenerate must see them all.
from perfci.store import schema_service  # noqa: F401
from perfci.store.engines import make_engine
from perfci.store.schema import Base

config = context.config
target_metadata = Base.metadata


def _url() -> str:
    explicit = config.attributes.get("url") or config.get_main_option("sqlalchemy.url")
    return str(explicit) if explicit else get_settings().resolved_database_url()


def _configure(connection: Connection) -> None:
    context.configure(
        connection=connection,
        target_metadata=target_metadata,
        # SQLite cannot ALTER most things; batch mode rebuilds the table instead.
        render_as_batch=connection.dialect.name == "sqlite",
        compare_type=True,
    )


def run_migrations_offline() -> None:
    context.configure(
        url=_url(),
        target_metadata=target_metadata,
        literal_binds=True,
        dialect_opts={"paramstyle": "named"},
    )
    with context.begin_transaction():
        context.run_migrations()


def run_migrations_online() -> None:
    connection = config.attributes.get("connection")
    if connection is not None:
        _configure(connection)
        with context.begin_transaction():
            context.run_migrations()
        return
    engine = make_engine(_url())
    try:
        with engine.connect() as connection:
            _configure(connection)
            with context.begin_transaction():
                context.run_migrations()
    finally:
        engine.dispose()


if context.is_offline_mode():
    run_migrations_offline()
else:
    run_migrations_online()
