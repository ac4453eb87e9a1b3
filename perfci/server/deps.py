"""FastAPI dependencies: one Session per request (unit of work), settings, the caller's token.

Routes use the ``Annotated`` aliases (``SessionDep``, ``SettingsDep``, ``TokenDep``); the
engine and session factory live on ``app.state``, built by :func:`perfci.server.app.create_app`.
"""

from __future__ import annotations

import functools
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Annotated, Any, TypeVar

import anyio
import anyio.to_thread
from fastapi import Depends, Request
from sqlalchemy.orm import Session

from perfci.core import limits as defaults
from perfci.core.errors import AuthError
from perfci.core.settings import Settings
from perfci.server.metrics import Registry
from perfci.usecases.admin.tokens import TokenInfo, authenticate

T = TypeVar("T")

#: The dashboard's login cookie holds a read token.
TOKEN_COOKIE = "perfci_token"
_MAX_TOKEN_CHARS = 200


@dataclass(frozen=True, slots=True)
class Limits:
    """What one upload may hold; see ``perfci serve --help``. The defaults are the settings'."""

    max_body_bytes: int = defaults.MAX_BODY_BYTES
    max_metrics: int = defaults.MAX_METRICS
    max_files: int = 1000
    max_samples: int = defaults.MAX_SAMPLES
    max_inflated_bytes: int = defaults.MAX_INFLATED_BYTES
    max_inflation_ratio: int = defaults.MAX_INFLATION_RATIO
    parse_cpu_seconds: float = defaults.PARSE_CPU_SECONDS
    parse_cpu_seconds_per_mib: float = defaults.PARSE_CPU_SECONDS_PER_MIB
    parse_memory_bytes: int = defaults.PARSE_MEMORY_BYTES


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


@asynccontextmanager
async def upload_slot(request: Request) -> AsyncIterator[None]:
    """One of the ``upload_concurrency`` slots of this process, held while an upload is parsed
    (in a worker process), stored and compared; more uploads wait their turn here, holding
    nothing but their spooled body (no thread, no database connection)."""
    state = request.app.state
    if getattr(state, "upload_limiter", None) is None:  # a limiter belongs to its event loop
        settings: Settings = state.settings
        state.upload_limiter = anyio.CapacityLimiter(settings.upload_concurrency)
        state.upload_threads = anyio.CapacityLimiter(settings.upload_concurrency)
    async with state.upload_limiter:
        yield


async def run_upload_work(request: Request, function: Callable[..., T], *args: Any) -> T:
    """``function(*args)`` in a worker thread, inside :func:`upload_slot`.

    Waiting on a parse worker, storing and comparing take seconds: on the event loop they
    would stall every other client.
    """
    limiter: anyio.CapacityLimiter = request.app.state.upload_threads
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


def get_upload_token(request: Request) -> TokenInfo | None:
    """:func:`get_token` for uploads: its database session is closed before the route runs.

    An upload then waits for its body and for an upload slot; a session kept open meanwhile
    held a pooled connection, and 24 slow uploads left none for anyone, ``/healthz``
    included (issue 31). The upload opens a session again only to write.
    """
    token = bearer_token(request)
    if token is None:
        return None
    with request.app.state.sessions() as session:
        return authenticate(session, token)


TokenDep = Annotated[TokenInfo | None, Depends(get_token)]
UploadTokenDep = Annotated[TokenInfo | None, Depends(get_upload_token)]
CookieTokenDep = Annotated[TokenInfo | None, Depends(get_cookie_token)]
