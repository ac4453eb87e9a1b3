"""Every failure becomes ``{"error": {"code", "message"}}`` with the right status; no tracebacks.

The exception handlers are the HTTP boundary of :mod:`perfci.core.errors`: each ``PerfciError``
subclass has one status, database outages are 503 (clients retry), request validation is 422
with the offending fields named, and anything unexpected is a bare 500 whose details go to the
server log only. Dashboard pages get the same status with an HTML page instead of JSON.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from pydantic import ValidationError
from sqlalchemy import exc as sa_exc
from starlette.exceptions import HTTPException
from starlette.requests import ClientDisconnect

from perfci.core.errors import (
    AuthError,
    ConfigError,
    GitHubError,
    InputTooLarge,
    InvalidValue,
    NotFoundError,
    ParseError,
    PerfciError,
    RequestTooLarge,
    RunConflict,
    StorageError,
    UnknownFormatError,
    UnsupportedMediaType,
)

log = logging.getLogger("perfci.server")


class Refusal(PerfciError):
    """An error with its HTTP answer decided already: one raised in a parse worker
    (:mod:`perfci.server.parse_pool`), carried over to the server as status, code and text."""

    def __init__(self, message: str, *, status: int, code: str, cpu: float | None = None) -> None:
        self.status = status
        self.code = code
        #: CPU seconds the worker used before it refused, when it said.
        self.cpu = cpu
        super().__init__(message)


#: Status and code of each error class; the first match in MRO order wins.
_STATUS: dict[type[PerfciError], tuple[int, str]] = {
    InputTooLarge: (413, "payload_too_large"),
    ParseError: (422, "invalid_profile"),
    InvalidValue: (422, "invalid_value"),
    RunConflict: (409, "run_conflict"),
    UnknownFormatError: (422, "unknown_format"),
    ConfigError: (422, "invalid_request"),
    NotFoundError: (404, "not_found"),
    StorageError: (503, "database_unavailable"),
    GitHubError: (502, "github_error"),
}
_HTTP_CODES = {
    400: "bad_request",
    401: "unauthorized",
    403: "forbidden",
    404: "not_found",
    405: "method_not_allowed",
    408: "request_timeout",
    409: "conflict",
    413: "payload_too_large",
    415: "unsupported_media_type",
    422: "invalid_request",
    429: "too_many_requests",
    503: "unavailable",
}

#: Database errors that mean "not reachable right now": the client should retry.
_OUTAGES: tuple[type[Exception], ...] = (
    sa_exc.OperationalError,
    sa_exc.InterfaceError,
    sa_exc.DisconnectionError,
    sa_exc.TimeoutError,
)

#: Renders an error as an HTML page: (request, status, message) -> response.
HtmlRenderer = Callable[[Request, int, str], Response]


def error_body(code: str, message: str, **extra: Any) -> dict[str, Any]:
    """The JSON of every error; ``extra`` adds fields (a conflict's stored ``run_id``)."""
    return {"error": {"code": code, "message": message, **extra}}


def status_of(exc: PerfciError) -> tuple[int, str]:
    """The HTTP status and error code for ``exc``."""
    if isinstance(exc, Refusal):
        return exc.status, exc.code
    if isinstance(exc, AuthError):
        return exc.status, "forbidden" if exc.status == 403 else "unauthorized"
    if isinstance(exc, RequestTooLarge):
        return 413, "payload_too_large"
    if isinstance(exc, UnsupportedMediaType):
        return 415, "unsupported_media_type"
    for cls in type(exc).__mro__:
        if cls in _STATUS:
            return _STATUS[cls]
    return 400, "bad_request"


def validation_message(errors: list[Any]) -> str:
    """Pydantic/FastAPI errors as one line naming each field (without echoing the input)."""
    parts = []
    for error in errors[:5]:
        where = ".".join(str(p) for p in error.get("loc", ()) if p != "body") or "body"
        parts.append(f"{where}: {error.get('msg', 'invalid')}")
    more = f" (and {len(errors) - 5} more)" if len(errors) > 5 else ""
    return "invalid request: " + "; ".join(parts) + more


def install_handlers(app: FastAPI, render_html: HtmlRenderer | None = None) -> None:
    """Register the handlers on ``app``; pages get ``render_html`` instead of JSON."""

    def respond(
        request: Request,
        status: int,
        code: str,
        message: str,
        headers: dict[str, str] | None = None,
        **extra: Any,
    ) -> Response:
        if render_html is not None and _wants_html(request):
            return render_html(request, status, message)
        return JSONResponse(error_body(code, message, **extra), status_code=status, headers=headers)

    async def on_perfci(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, PerfciError)
        status, code = status_of(exc)
        if status >= 500:
            log.warning("%s %s: %s", request.method, request.url.path, exc)
        headers = {"WWW-Authenticate": "Bearer"} if status == 401 else None
        extra = {"run_id": exc.run_id} if isinstance(exc, RunConflict) else {}
        return respond(request, status, code, str(exc), headers, **extra)

    async def on_validation(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, RequestValidationError | ValidationError)
        return respond(request, 422, "invalid_request", validation_message(list(exc.errors())))

    async def on_http(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, HTTPException)
        code = _HTTP_CODES.get(exc.status_code, "error")
        return respond(
            request,
            exc.status_code,
            code,
            str(exc.detail),
            dict(exc.headers) if exc.headers else None,
        )

    async def on_database(request: Request, exc: Exception) -> Response:
        log.warning(
            "%s %s: database error: %s",
            request.method,
            request.url.path,
            str(exc).splitlines()[0] if str(exc) else type(exc).__name__,
        )
        return respond(
            request, 503, "database_unavailable", "the database is unavailable; retry later"
        )

    async def on_disconnect(request: Request, exc: Exception) -> Response:
        # The client went away (or was cut off for sending too slowly): nobody reads this.
        return Response(status_code=400)

    async def on_unexpected(request: Request, exc: Exception) -> Response:
        log.error("%s %s: unexpected error", request.method, request.url.path, exc_info=exc)
        return respond(request, 500, "internal_error", "internal server error")

    app.add_exception_handler(PerfciError, on_perfci)
    app.add_exception_handler(RequestValidationError, on_validation)
    app.add_exception_handler(ValidationError, on_validation)
    app.add_exception_handler(HTTPException, on_http)
    for outage in _OUTAGES:
        app.add_exception_handler(outage, on_database)
    app.add_exception_handler(ClientDisconnect, on_disconnect)
    app.add_exception_handler(Exception, on_unexpected)


def _wants_html(request: Request) -> bool:
    path = request.url.path
    if path.startswith("/api/") or path in {"/healthz", "/metrics", "/openapi.json"}:
        return False
    return "text/html" in request.headers.get("accept", "")
