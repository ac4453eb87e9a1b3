"""``perfci token``: create, list and revoke a project's API tokens (for ``perfci serve``)."""

# lazy: the imports inside functions load a command's work only when it runs, so that
# `perfci --help` and the short commands start fast (tests/test_cold_start.py).
from __future__ import annotations

import json
from datetime import datetime
from typing import TYPE_CHECKING

import typer

from perfci.cli import _console
from perfci.cli import _options as opts

if TYPE_CHECKING:  # the store loads when a command runs, not when the CLI is built
    from perfci.usecases.admin import tokens

token_app = typer.Typer(help="Create, list and revoke project API tokens.", no_args_is_help=True)


@token_app.command("create")
def create_command(
    project: str = typer.Option(..., "--project", help="Project the token belongs to."),
    scopes: str = typer.Option(
        "upload,read", "--scopes", help="Comma-separated scopes: upload, read, admin."
    ),
    name: str | None = typer.Option(None, "--name", help="A name to recognise it by."),
    expires: str | None = typer.Option(
        None,
        "--expires",
        help="When it stops working: a duration (12h, 90d, 8w, 1y) or an "
        "ISO date (2027-01-31). Default: never.",
    ),
    database_url: opts.DatabaseUrl = None,
) -> None:
    """Create a token and print it ONCE (only its hash is stored)."""
    from perfci.usecases.admin import tokens
    from perfci.usecases.stores import session_for

    expires_at = tokens.parse_expiry(expires) if expires else None
    with session_for(database_url) as session:
        token, info = tokens.create_token(
            session, project=project, scopes=scopes, name=name, expires_at=expires_at
        )
    until = f", expires {_when(info.expires_at)} UTC" if info.expires_at else ""
    _console.err_console.print(
        f"token {info.id} ({info.prefix}…) for {info.project}, scopes "
        f"{','.join(info.scopes)}{until}; store it now, it is not shown again:",
        highlight=False,
        markup=False,
    )
    typer.echo(token)


@token_app.command("list")
def list_command(
    project: str = typer.Option(..., "--project", help="Project whose tokens to list."),
    as_json: opts.Json = False,
    database_url: opts.DatabaseUrl = None,
) -> None:
    """List tokens: id, prefix, name, scopes, created, last used, expiry, revoked."""
    from perfci.usecases.admin import tokens
    from perfci.usecases.stores import session_for

    with session_for(database_url) as session:
        found = tokens.list_tokens(session, project=project)
    if as_json:
        typer.echo(json.dumps([_row(t) for t in found], indent=1))
        return
    typer.echo(
        f"{'id':>4}  {'prefix':<13} {'scopes':<18} {'created':<17} {'last used':<17} "
        f"{'expires':<17} {'revoked':<17} name"
    )
    for t in found:
        row = _row(t)
        expires = _when(t.expires_at) + (" (expired)" if t.expired() else "")
        typer.echo(
            f"{t.id:>4}  {t.prefix + '…':<13} {row['scopes']:<18} "
            f"{_when(t.created_at):<17} {_when(t.last_used_at):<17} "
            f"{expires:<17} {_when(t.revoked_at):<17} {t.name}"
        )


@token_app.command("revoke")
def revoke_command(
    token_id: int = typer.Argument(..., help="Token id (from `perfci token list`)."),
    database_url: opts.DatabaseUrl = None,
) -> None:
    """Revoke a token: requests with it get 401 from now on."""
    from perfci.usecases.admin import tokens
    from perfci.usecases.stores import session_for

    with session_for(database_url) as session:
        info = tokens.revoke_token(session, token_id)
    typer.echo(
        f"token {info.id} ({info.prefix}…) of {info.project} revoked at {_when(info.revoked_at)}"
    )


def _row(info: tokens.TokenInfo) -> dict[str, object]:
    return {
        "id": info.id,
        "project": info.project,
        "name": info.name,
        "prefix": info.prefix,
        "scopes": ",".join(info.scopes),
        "created_at": _iso(info.created_at),
        "last_used_at": _iso(info.last_used_at),
        "expires_at": _iso(info.expires_at),
        "revoked_at": _iso(info.revoked_at),
    }


def _iso(moment: datetime | None) -> str | None:
    return moment.isoformat() if moment else None


def _when(moment: datetime | None) -> str:
    return moment.strftime("%Y-%m-%d %H:%M") if moment else "—"


def register(app: typer.Typer) -> None:
    app.add_typer(token_app, name="token")
