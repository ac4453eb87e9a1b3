"""``perfci db``: create, migrate and inspect the store's schema (Alembic under the hood)."""

from __future__ import annotations

import typer

# Alembic, SQLAlchemy and pydantic load inside the commands: `perfci --help` stays fast.

db_app = typer.Typer(help="Create, migrate and inspect the perfci database schema.",
                     no_args_is_help=True)

_URL_HELP = ("Database URL (default: PERFCI_DATABASE_URL, the config file, else the embedded "
             "SQLite store .perfci/perfci.db). The password is never printed.")


def _resolve(database_url: str | None) -> str:
    from perfci.settings import get_settings

    return get_settings({"database_url": database_url}).resolved_database_url()


@db_app.command("upgrade")
def upgrade_command(
    revision: str = typer.Argument("head", help="Target revision."),
    database_url: str | None = typer.Option(None, "--database-url", help=_URL_HELP),
) -> None:
    """Migrate the schema up to REVISION (default: the newest)."""
    from perfci.settings import redact_url
    from perfci.store import db

    url = _resolve(database_url)
    reached = db.upgrade(url, revision)
    typer.echo(f"{redact_url(url)}: schema at revision {reached or 'base (empty)'}")


@db_app.command("downgrade")
def downgrade_command(
    revision: str = typer.Argument(..., help="Target revision; `base` removes every table."),
    database_url: str | None = typer.Option(None, "--database-url", help=_URL_HELP),
) -> None:
    """Migrate the schema down to REVISION. Data in removed tables is lost."""
    from perfci.settings import redact_url
    from perfci.store import db

    url = _resolve(database_url)
    reached = db.downgrade(url, revision)
    typer.echo(f"{redact_url(url)}: schema at revision {reached or 'base (empty)'}")


@db_app.command("current")
def current_command(
    database_url: str | None = typer.Option(None, "--database-url", help=_URL_HELP),
) -> None:
    """Show the schema revision of the database and whether it is up to date."""
    from perfci.settings import redact_url
    from perfci.store import db

    url = _resolve(database_url)
    found, head = db.current(url), db.head_revision()
    if found is None:
        state = "no perfci schema (run `perfci db upgrade`)"
    elif found == head:
        state = f"{found} (head)"
    else:
        state = f"{found} (head is {head}: run `perfci db upgrade`)"
    typer.echo(f"{redact_url(url)}: {state}")


def register(app: typer.Typer) -> None:
    app.add_typer(db_app, name="db")
