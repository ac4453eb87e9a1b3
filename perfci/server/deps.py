"""FastAPI dependencies: one Session per request (unit of work), settings, the caller's token.

Routes use the ``Annotated`` aliases (``SessionDep``, ``SettingsDep``, ``TokenDep``); the
engine and session factory live on ``app.state``, built by :func:`perfci.server.app.create_app`.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Annotated, Any, TypeVar

import anyio
import anyio.to_thread
from fastapi import Depends, Request
from sqlalchemy.orm import Session

from perfci.errors import AuthError
from perfci.limits import (
    MAX_BODY_BYTES,
    MAX_INFLATED_BYTES,
    MAX_INFLATION_RATIO,
    MAX_METRICS,
    MAX_SAMPLES,
)
from perfci.server.metrics import Registry
from perfci.settings import Settings
from perfci.usecases.tokens import TokenInfo, authenticate

T = TypeVar("T")

#: The dashboard's login cookie holds a read token.
TOKEN_COOKIE = "perfci_token"
_MAX_TOKEN_CHARS = 200


@dataclass(frozen=True, slots=True)
class Limits:
    """What one upload may hold; see ``perfci serve --help``. The defaults are the settings'."""

    max_body_bytes: int = MAX_BODY_BYTES
    max_metrics: int = MAX_METRICS
    max_files: int = 1000
    max_samples: int = MAX_SAMPLES
    max_inflated_bytes: int = MAX_INFLATED_BYTES
    max_inflation_ratio: int = MAX_INFLATION_RATIO


def get_session(request: Request) -> Iterator[Session]:
    """A Session for this request, closed (and rolled back if uncommitted) afterwards."""
    with request.app.state.sessions() as session:
        yield session


SessionDep = Annotated[Session, Depends(get_session)]


def get_read_session(request: Request, session: SessionDep) -> Iterator[Session]:
    """A Session for reading history: on the read replica when one is configured
    (``read_database_url``), else this request's own Session (one connection, not two).

    For the routes that only read what was stored a while ago (dashboard pages, series
    histories, run lists, weekly reports); a replica may lag a moment behind the primary.
    """
    sessions = request.app.state.read_sessions
    if sessions is None:
        yield session
        return
    with sessions() as read_session:
        yield read_session


def get_settings(request: Request) -> Settings:
    settings: Settings = request.app.state.settings
    return settings


def get_limits(request: Request) -> Limits:
    limits: Limits = request.app.state.limits
    return limits


async def run_upload_work(request: Request, function: Callable[..., T], *args: Any) -> T:
    """``function(*args)`` in a worker thread, at most ``upload_concurrency`` at once.

    Parsing, storing and comparing an upload take seconds of CPU: on the event loop they would
    stall every other client, and unbounded they would multiply the memory of a burst.
    """
    limiter: anyio.CapacityLimiter | None = getattr(request.app.state, "upload_limiter", None)
    if limiter is None:  # made on first use: a limiter belongs to the running event loop
        settings: Settings = request.app.state.settings
        limiter = request.app.state.upload_limiter = anyio.CapacityLimiter(
            settings.upload_concurrency
        )
    return await anyio.to_thread.run_sync(functools.partial(function, *args), limiter=limiter)


def get_registry(request: Request) -> Registry:
    registry: Registry = request.app.state.registry
    return registry


ReadSessionDep = Annotated[Session, Depends(get_read_session)]
SettingsDep = Annotated[Settings, Depends(get_settings)]
LimitsDep = Annotated[Limits, Depends(get_limits)]
RegistryDep = Annotated[Registry, Depends(get_registry)]


def bearer_token(request: Request) -> str | None:
    """The token of an ``Authorization: Bearer`` header; malformed headers are a 401."""
    header = request.headers.get("authorization")
    if header is None:
        return None
    scheme, _, token = header.strip().partition(" ")
    token = token.strip()
    if scheme.lower() != "bearer" or not token or len(token) > _MAX_TOKEN_CHARS:
        raise AuthError("the Authorization header must read `Bearer <token>`", status=401)
    return token


def get_token(request: Request, session: SessionDep) -> TokenInfo | None:
    """The caller's token (``None`` without one); a wrong or revoked token is a 401."""
    token = bearer_token(request)
    return None if token is None else authenticate(session, token)


def get_cookie_token(request: Request, session: SessionDep) -> TokenInfo | None:
    """The dashboard's token from the login cookie; a stale cookie counts as none."""
    token = request.cookies.get(TOKEN_COOKIE)
    if not token or len(token) > _MAX_TOKEN_CHARS:
        return None
    try:
        return authenticate(session, token)
    except AuthError:
        return None


TokenDep = Annotated[TokenInfo | None, Depends(get_token)]
CookieTokenDep = Annotated[TokenInfo | None, Depends(get_cookie_token)]
