"""Project API tokens: create (shown once), list, revoke, and authenticate a presented token.

A token reads ``pci_<43 url-safe characters>`` (256 random bits). Only its SHA-256 is stored,
with a short ``prefix`` that identifies it in listings; the token itself is never stored,
logged or shown again. Lookup is by hash (a unique index), and the stored hash is compared
with :func:`hmac.compare_digest`, so the comparison does not leak how much of a guess matched.

Scopes: ``upload`` (store runs), ``read`` (runs, comparisons, history of a private project)
and ``admin`` (everything, plus project settings and deleting runs). A token belongs to one
project. A token may expire (``expires_at``); an expired one is refused with 401 saying so.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
from dataclasses import dataclass
from datetime import datetime, timedelta

from perfci.core.compat import UTC, parse_iso_datetime
from perfci.core.errors import AuthError, ConfigError, NotFoundError
from perfci.store import access
from perfci.store.schema_service import ApiToken
from perfci.store.work import Session, unit_of_work

__all__ = [
    "SCOPES",
    "TokenInfo",
    "authenticate",
    "create_token",
    "hash_token",
    "list_tokens",
    "parse_expiry",
    "parse_scopes",
    "revoke_token",
    "set_project_public",
]

SCOPES = ("upload", "read", "admin")
TOKEN_PREFIX = "pci_"
_PREFIX_CHARS = 12  # "pci_" + 8 random characters: enough to tell tokens apart in a listing
#: ``last_used_at`` is written at most this often per token: a busy uploader must not turn
#: every request into an extra write.
LAST_USED_RESOLUTION = timedelta(seconds=60)


@dataclass(frozen=True, slots=True)
class TokenInfo:
    """A stored token as listings and the server see it (never the token itself)."""

    id: int
    project: str
    name: str
    prefix: str
    scopes: tuple[str, ...]
    created_at: datetime
    last_used_at: datetime | None = None
    revoked_at: datetime | None = None
    expires_at: datetime | None = None

    @property
    def revoked(self) -> bool:
        return self.revoked_at is not None

    def expired(self, now: datetime | None = None) -> bool:
        """Whether the token's expiry has passed (never, without one)."""
        return self.expires_at is not None and self.expires_at <= (now or datetime.now(UTC))

    def allows(self, scope: str) -> bool:
        """Whether this token grants ``scope`` (``admin`` grants every scope)."""
        return scope in self.scopes or "admin" in self.scopes


def hash_token(token: str) -> str:
    """The stored form of ``token``: its SHA-256 as 64 hex digits."""
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).hexdigest()


def parse_scopes(text: str | list[str] | tuple[str, ...]) -> tuple[str, ...]:
    """``"upload,read"`` as a sorted tuple of known scopes; unknown ones are a ConfigError."""
    items = text.split(",") if isinstance(text, str) else list(text)
    scopes = {item.strip().lower() for item in items if item.strip()}
    unknown = scopes - set(SCOPES)
    if unknown:
        raise ConfigError(
            f"unknown token scope(s) {', '.join(sorted(unknown))}; "
            f"expected some of {', '.join(SCOPES)}"
        )
    if not scopes:
        raise ConfigError(f"a token needs at least one scope of {', '.join(SCOPES)}")
    return tuple(s for s in SCOPES if s in scopes)


_DURATION = re.compile(r"^\s*(\d{1,6})\s*([hdwy])\s*$", re.IGNORECASE)
_UNIT = {
    "h": timedelta(hours=1),
    "d": timedelta(days=1),
    "w": timedelta(weeks=1),
    "y": timedelta(days=365),
}


def parse_expiry(text: str, *, now: datetime | None = None) -> datetime:
    """When a token made now with ``--expires TEXT`` expires.

    ``TEXT`` is a duration (``12h``, ``90d``, ``8w``, ``1y``) or an ISO date or time
    (``2027-01-31``, UTC unless it names a zone). A ConfigError when it is neither or past.
    """
    now = now or datetime.now(UTC)
    found = _DURATION.match(text)
    try:
        if found:
            moment = now + int(found[1]) * _UNIT[found[2].lower()]
        else:
            moment = parse_iso_datetime(text.strip())
            moment = moment if moment.tzinfo else moment.replace(tzinfo=UTC)
    except (ValueError, OverflowError):
        raise ConfigError(
            f"--expires {text!r} is neither a duration (12h, 90d, 8w, 1y) nor "
            "an ISO date (2027-01-31)"
        ) from None
    if moment <= now:
        raise ConfigError(f"--expires {text!r} is in the past")
    return moment


def create_token(
    session: Session,
    *,
    project: str,
    scopes: str | list[str] | tuple[str, ...],
    name: str | None = None,
    expires_at: datetime | None = None,
) -> tuple[str, TokenInfo]:
    """Create a token for ``project`` (created too when new); returns ``(token, info)``.

    The returned token is the only copy: show it once and forget it. ``expires_at``: when it
    stops working (default: never; see :func:`parse_expiry`).
    """
    wanted = parse_scopes(scopes)
    if not project.strip() or len(project) > 200:
        raise ConfigError("a project name must have 1 to 200 characters")
    token = TOKEN_PREFIX + secrets.token_urlsafe(32)
    with unit_of_work(session):
        row = access.add_token(
            session,
            ApiToken(
                project_id=access.project_id(session, project, create=True),
                name=(name or "token")[:200],
                prefix=token[:_PREFIX_CHARS],
                token_hash=hash_token(token),
                scopes=",".join(wanted),
                created_at=datetime.now(UTC),
                expires_at=expires_at,
            ),
        )
    return token, _info(row, project)


def list_tokens(session: Session, *, project: str) -> list[TokenInfo]:
    """The tokens of ``project``, oldest first, revoked ones included."""
    project_id = access.project_id(session, project, create=False)
    return [_info(row, project) for row in access.project_tokens(session, project_id)]


def revoke_token(session: Session, token_id: int) -> TokenInfo:
    """Revoke token ``token_id`` (idempotent: revoking twice keeps the first time)."""
    found = access.token_by_id(session, token_id)
    if found is None:
        raise NotFoundError(f"no token with id {token_id}")
    row, project = found
    if row.revoked_at is None:
        with unit_of_work(session):
            row.revoked_at = datetime.now(UTC)
    return _info(row, project)


def authenticate(session: Session, token: str) -> TokenInfo:
    """The token ``token`` names; ``AuthError`` (401) when unknown, revoked or expired.

    Records when it was last used (at most once per :data:`LAST_USED_RESOLUTION`).
    """
    presented = hash_token(token)
    found = access.token_by_hash(session, presented)
    # The index lookup finds the row; the constant-time compare is what decides.
    if found is None or not hmac.compare_digest(found[0].token_hash, presented):
        raise AuthError("invalid API token", status=401)
    row, project = found
    if row.revoked_at is not None:
        raise AuthError("this API token has been revoked", status=401)
    if row.expires_at is not None and row.expires_at <= datetime.now(UTC):
        raise AuthError(
            f"this API token expired on {row.expires_at:%Y-%m-%d %H:%M} UTC; "
            "create a new one (perfci token create)",
            status=401,
        )
    _touch(session, row)
    return _info(row, project)


def set_project_public(session: Session, *, project: str, public: bool) -> bool:
    """Make ``project``'s runs and dashboard readable without a token (or not again)."""
    with unit_of_work(session):
        access.set_project_public(
            session, access.project_id(session, project, create=False), public
        )
    return public


def _touch(session: Session, row: ApiToken) -> None:
    now = datetime.now(UTC)
    if row.last_used_at is not None and now - row.last_used_at < LAST_USED_RESOLUTION:
        return
    with unit_of_work(session):
        access.mark_token_used(session, row.id, now)
    row.last_used_at = now


def _info(row: ApiToken, project: str) -> TokenInfo:
    return TokenInfo(
        id=row.id,
        project=project,
        name=row.name,
        prefix=row.prefix,
        scopes=tuple(s for s in row.scopes.split(",") if s),
        created_at=row.created_at,
        last_used_at=row.last_used_at,
        revoked_at=row.revoked_at,
        expires_at=row.expires_at,
    )


def is_project_public(session: Session, project: str) -> bool:
    """Whether ``project`` exists and is readable without a token (a private or missing one
    is not)."""
    return access.project_is_public(session, project)
