"""``perfci db``: create, migrate and inspect the store's schema (Alembic under the hood)."""

from __future__ import annotations

import typer

from perfci.cli import _options as opts

# Alembic, SQLAlchemy and pydantic load inside the commands: `perfci --help` stays fast.

db_app = typer.Typer(
    help="Create, migrate and inspect the perfci database schema.", no_args_is_help=True
)


@db_app.command("upgrade")
def upgrade_command(
    revision: str = typer.Argument("head", help="Target revision."),
    database_url: opts.DatabaseUrl = None,
) -> None:
    """Migrate the schema up to REVISION (default: the newest)."""
    from perfci.usecases.db import upgrade_schema

    state = upgrade_schema(database_url, revision)
    typer.echo(f"{state.url}: schema at revision {state.found or 'base (empty)'}")


@db_app.command("downgrade")
def downgrade_command(
    revision: str = typer.Argument(..., help="Target revision; `base` removes every table."),
    database_url: opts.DatabaseUrl = None,
) -> None:
    """Migrate the schema down to REVISION. Data in removed tables is lost."""
    from perfci.usecases.db import downgrade_schema

    state = downgrade_schema(database_url, revision)
    typer.echo(f"{state.url}: schema at revision {state.found or 'base (empty)'}")


@db_app.command("current")
def current_command(database_url: opts.DatabaseUrl = None) -> None:
    """Show the schema revision of the database and whether it is up to date."""
    from perfci.usecases.db import schema_state

    state = schema_state(database_url)
    if state.found is None:
        described = "no perfci schema (run `perfci db upgrade`)"
    elif state.found == state.head:
        described = f"{state.found} (head)"
    else:
        described = f"{state.found} (head is {state.head}: run `perfci db upgrade`)"
    typer.echo(f"{state.url}: {described}")


def register(app: typer.Typer) -> None:
    app.add_typer(db_app, name="db")
