"""API tokens: created once, stored as SHA-256, scoped to a project, revocable; the CLI."""

from __future__ import annotations

import hashlib
import json
from datetime import UTC, datetime, timedelta

import pytest
import typer
from sqlalchemy import select
from sqlalchemy.orm import Session
from typer.testing import CliRunner

from perfci.cli import token_cmd
from perfci.core.errors import AuthError, ConfigError, NotFoundError
from perfci.store.schema import Project
from perfci.store.schema_service import ApiToken
from perfci.usecases.admin import tokens


def test_a_token_is_stored_only_as_its_hash_and_authenticates(session: Session) -> None:
    token, info = tokens.create_token(session, project="acme/a", scopes="read,upload", name="ci")
    assert token.startswith("pci_") and len(token) > 40
    row = session.execute(select(ApiToken).where(ApiToken.id == info.id)).scalar_one()
    assert row.token_hash == hashlib.sha256(token.encode()).hexdigest()
    assert token not in (row.prefix, row.name, row.scopes) and token.startswith(row.prefix)
    assert info.scopes == ("upload", "read")
    found = tokens.authenticate(session, token)
    assert found.id == info.id and found.project == "acme/a"
    assert found.last_used_at is not None
    assert found.allows("upload") and found.allows("read") and not found.allows("admin")


def test_admin_scope_grants_everything_and_creating_makes_the_project(session: Session) -> None:
    _, info = tokens.create_token(session, project="acme/new", scopes=["admin"])
    assert info.allows("read") and info.allows("upload")
    assert session.execute(select(Project.name).where(Project.name == "acme/new")).scalar()


@pytest.mark.parametrize("presented", ["", "pci_wrong", "x" * 300])
def test_unknown_tokens_are_401(session: Session, presented: str) -> None:
    tokens.create_token(session, project="acme/b", scopes="read")
    with pytest.raises(AuthError) as caught:
        tokens.authenticate(session, presented)
    assert caught.value.status == 401


def test_revoked_tokens_are_401_and_revoking_is_idempotent(session: Session) -> None:
    token, info = tokens.create_token(session, project="acme/c", scopes="upload")
    first = tokens.revoke_token(session, info.id)
    again = tokens.revoke_token(session, info.id)
    assert first.revoked and again.revoked_at == first.revoked_at
    with pytest.raises(AuthError, match="revoked"):
        tokens.authenticate(session, token)
    with pytest.raises(NotFoundError):
        tokens.revoke_token(session, 999_999)


@pytest.mark.parametrize("scopes", ["", "read,delete", " , "])
def test_bad_scopes_are_refused(session: Session, scopes: str) -> None:
    with pytest.raises(ConfigError):
        tokens.create_token(session, project="acme/d", scopes=scopes)


def test_the_cli_prints_the_token_once_lists_and_revokes(migrated_url: str) -> None:
    app = typer.Typer()
    token_cmd.register(app)
    app.command("noop")(lambda: None)
    runner = CliRunner()
    url = ["--database-url", migrated_url]
    created = runner.invoke(
        app,
        [
            "token",
            "create",
            "--project",
            "acme/cli",
            "--scopes",
            "upload,read",
            "--name",
            "ci-bot",
            *url,
        ],
    )
    assert created.exit_code == 0, created.output
    token = created.stdout.strip().splitlines()[-1]
    assert token.startswith("pci_")
    listed = runner.invoke(app, ["token", "list", "--project", "acme/cli", "--json", *url])
    assert listed.exit_code == 0, listed.output
    rows = json.loads(listed.stdout)
    assert token not in listed.stdout
    assert [(r["name"], r["scopes"], r["revoked_at"]) for r in rows] == [
        ("ci-bot", "upload,read", None)
    ]
    assert token.startswith(rows[0]["prefix"])
    table = runner.invoke(app, ["token", "list", "--project", "acme/cli", *url])
    assert "ci-bot" in table.stdout and token not in table.stdout
    revoked = runner.invoke(app, ["token", "revoke", str(rows[0]["id"]), *url])
    assert revoked.exit_code == 0 and "revoked" in revoked.stdout
    listed = json.loads(
        runner.invoke(app, ["token", "list", "--project", "acme/cli", "--json", *url]).stdout
    )
    assert listed[0]["revoked_at"] is not None


def test_an_expired_token_is_refused_saying_so(session: Session) -> None:
    now = datetime.now(UTC)
    token, info = tokens.create_token(
        session, project="acme/e", scopes="read", expires_at=now + timedelta(hours=1)
    )
    assert tokens.authenticate(session, token).expires_at == info.expires_at
    assert not info.expired() and info.expired(now + timedelta(hours=2))
    old, _ = tokens.create_token(
        session, project="acme/e", scopes="read", expires_at=now - timedelta(seconds=1)
    )
    with pytest.raises(AuthError, match="expired on") as caught:
        tokens.authenticate(session, old)
    assert caught.value.status == 401


@pytest.mark.parametrize(
    ("text", "delta"),
    [
        ("90d", timedelta(days=90)),
        ("12h", timedelta(hours=12)),
        ("2W", timedelta(weeks=2)),
        ("1y", timedelta(days=365)),
    ],
)
def test_expiry_durations(text: str, delta: timedelta) -> None:
    now = datetime(2026, 1, 1, tzinfo=UTC)
    assert tokens.parse_expiry(text, now=now) == now + delta


def test_expiry_dates_and_refusals() -> None:
    now = datetime(2026, 1, 1, tzinfo=UTC)
    assert tokens.parse_expiry("2027-01-31", now=now) == datetime(2027, 1, 31, tzinfo=UTC)
    for bad in ("soon", "-5d", "2025-12-31", "999999999d", "90 days"):
        with pytest.raises(ConfigError, match="--expires"):
            tokens.parse_expiry(bad, now=now)


def test_the_cli_creates_an_expiring_token_and_lists_expiry_and_last_use(migrated_url: str) -> None:
    app = typer.Typer()
    token_cmd.register(app)
    app.command("noop")(lambda: None)
    runner = CliRunner()
    url = ["--database-url", migrated_url]
    created = runner.invoke(
        app, ["token", "create", "--project", "acme/exp", "--expires", "90d", *url]
    )
    assert created.exit_code == 0, created.output
    token = created.stdout.strip().splitlines()[-1]
    refused = runner.invoke(
        app, ["token", "create", "--project", "acme/exp", "--expires", "yesterday", *url]
    )
    assert refused.exit_code != 0 and "--expires" in str(refused.exception or refused.output)
    from perfci.store import engines

    engine = engines.make_engine(migrated_url)
    with engines.make_sessionmaker(engine)() as session:
        tokens.authenticate(session, token)
    engine.dispose()
    rows = json.loads(
        runner.invoke(app, ["token", "list", "--project", "acme/exp", "--json", *url]).stdout
    )
    assert len(rows) == 1 and rows[0]["last_used_at"] is not None
    expires = datetime.fromisoformat(rows[0]["expires_at"])
    assert timedelta(days=89) < expires - datetime.now(UTC) <= timedelta(days=90)
    table = runner.invoke(app, ["token", "list", "--project", "acme/exp", *url]).stdout
    assert "expires" in table.splitlines()[0] and "last used" in table.splitlines()[0]
    assert f"{expires:%Y-%m-%d %H:%M}" in table
