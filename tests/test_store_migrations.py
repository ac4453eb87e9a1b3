"""Alembic is the only source of the schema: upgrade, downgrade and no drift from the models."""

from __future__ import annotations

import ast

from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import inspect

# schema_service adds the service's tables to Base.metadata: autogenerate must see them all.
from perfci.store import engines, migrate, schema_service  # noqa: F401
from perfci.store.schema import Base

TABLES = {"project", "environment", "commit", "benchmark", "run", "profile", "series", "sample"}


def _tables(url: str) -> set[str]:
    engine = engines.make_engine(url)
    try:
        return set(inspect(engine).get_table_names())
    finally:
        engine.dispose()


def test_upgrade_head_on_empty_then_downgrade_base(empty_url: str) -> None:
    assert migrate.current(empty_url) is None
    assert migrate.upgrade(empty_url) == migrate.head_revision()
    assert migrate.current(empty_url) == migrate.head_revision()
    assert _tables(empty_url) >= TABLES
    assert migrate.upgrade(empty_url) == migrate.head_revision()  # idempotent

    assert migrate.downgrade(empty_url, "base") is None
    assert migrate.current(empty_url) is None
    assert _tables(empty_url) - {"alembic_version"} == set()


def test_models_match_migrations(empty_url: str) -> None:
    """What `alembic check` does: autogenerate finds nothing to change after upgrade head."""
    migrate.upgrade(empty_url)
    engine = engines.make_engine(empty_url)
    try:
        with engine.connect() as connection:
            context = MigrationContext.configure(connection, opts={"compare_type": True})
            assert compare_metadata(context, Base.metadata) == []
    finally:
        engine.dispose()


def test_migrations_never_import_perfci() -> None:
    """Migrations describe schema only (STYLE.md §7): old ones must not change with the models."""
    scripts = sorted(migrate.migrations_dir().joinpath("versions").glob("*.py"))
    assert scripts
    for script in scripts:
        tree = ast.parse(script.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            names = (
                [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else [node.module or ""]
                if isinstance(node, ast.ImportFrom)
                else []
            )
            assert not any(n.split(".")[0] == "perfci" for n in names), script.name


def test_head_revision_constant_matches_the_migration_scripts() -> None:
    # open_store compares against the constant so that it never loads Alembic when up to date.
    assert migrate.head_revision() == migrate.HEAD_REVISION
