"""The app factory: ``create_app(settings)`` builds the engine, sessions, routes and handlers.

Nothing is built at import. ``perfci serve`` runs :func:`create_app_from_env` through uvicorn's
``factory=True`` so that every worker process builds its own engine from the environment.
"""

from __future__ import annotations

import hmac
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio.to_thread
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, PlainTextResponse, Response
from fastapi.staticfiles import StaticFiles

from perfci import __version__
from perfci.core.errors import AuthError, NotFoundError
from perfci.core.settings import Settings
from perfci.server import api, pages
from perfci.server.deps import Limits
from perfci.server.errors import error_body, install_handlers
from perfci.server.metrics import CONTENT_TYPE, BodyLimitMiddleware, MetricsMiddleware, Registry
from perfci.server.parse_pool import Budget, ParsePool
from perfci.server.ratelimit import UploadRateLimit
from perfci.server.schemas import ErrorPublic, HealthPublic, RunCreate
from perfci.server.security import SecurityHeadersMiddleware
from perfci.server.served import served_settings
from perfci.usecases.admin.db import database_answers, read_engine, service_engine

STATIC = Path(__file__).parent / "static"


def create_app(
    settings: Settings, *, limits: Limits | None = None, database_url: str | None = None
) -> FastAPI:
    """The perfci service for ``settings`` (database, thresholds) and upload ``limits``."""
    limits = limits or limits_from(settings)
    engine, sessions = service_engine(database_url or settings.resolved_database_url())
    # History reads go to the read replica when there is one (issue 17, deps.get_read_session).
    replica = read_engine(settings.read_database_url) if settings.read_database_url else None

    registry = Registry()
    pool = ParsePool(
        Budget(
            cpu_seconds=limits.parse_cpu_seconds,
            cpu_seconds_per_mib=limits.parse_cpu_seconds_per_mib,
            memory_bytes=limits.parse_memory_bytes,
            max_input_bytes=max(limits.max_body_bytes, limits.max_inflated_bytes),
        ),
        observe=registry.observe_parse,
    )

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        # The forkserver imports the parsers once, now rather than on the first upload.
        await anyio.to_thread.run_sync(pool.warm)
        yield
        pool.stop()
        engine.dispose()
        if replica is not None:
            replica[0].dispose()

    # The interactive docs and the schema are off unless asked for (PERFCI_API_DOCS): they
    # describe every route to anyone, and docs/service.md documents the API anyway.
    docs = settings.api_docs
    app = FastAPI(
        title="perfci",
        version=__version__,
        lifespan=lifespan,
        summary="GPU performance-regression checks: upload runs, read comparisons and history.",
        docs_url="/docs" if docs else None,
        redoc_url="/redoc" if docs else None,
        openapi_url="/openapi.json" if docs else None,
    )
    app.state.settings = settings
    app.state.limits = limits
    app.state.engine = engine
    app.state.sessions = sessions
    app.state.read_sessions = replica[1] if replica is not None else None
    app.state.registry = registry
    app.state.parse_pool = pool
    app.state.rate_limit = UploadRateLimit(settings.upload_rate, settings.upload_burst)
    app.state.templates = pages.make_templates()
    install_handlers(app, render_html=pages.render_error)
    app.include_router(api.router)
    app.include_router(pages.router)
    _add_operational_routes(app)
    _document_upload_body(app)
    app.mount("/static", StaticFiles(directory=STATIC), name="static")
    app.add_middleware(BodyLimitMiddleware, max_bytes=limits.max_body_bytes)
    app.add_middleware(MetricsMiddleware, registry=app.state.registry)
    app.add_middleware(SecurityHeadersMiddleware)
    return app


def _add_operational_routes(app: FastAPI) -> None:
    @app.get(
        "/healthz",
        response_model=HealthPublic,
        tags=["operations"],
        responses={503: {"model": ErrorPublic, "description": "Database unreachable"}},
    )
    def healthz(request: Request) -> Response:
        """200 when the database answers ``SELECT 1``, else 503."""
        if not database_answers(request.app.state.engine):
            return JSONResponse(
                error_body("database_unavailable", "the database does not answer"), status_code=503
            )
        return JSONResponse({"status": "ok", "database": request.app.state.engine.dialect.name})

    @app.get(
        "/metrics",
        response_class=PlainTextResponse,
        tags=["operations"],
        responses={
            401: _json_error("Missing or wrong token"),
            404: _json_error("Metrics are off on this server"),
        },
    )
    def metrics(request: Request) -> Response:
        """Prometheus metrics of this worker process (off unless configured)."""
        _check_metrics_access(request)
        return PlainTextResponse(request.app.state.registry.render(), media_type=CONTENT_TYPE)


def _json_error(description: str) -> dict[str, Any]:
    """An error answer of a text/plain route: documented as the JSON it is."""
    return {
        "description": description,
        "content": {"application/json": {"schema": {"$ref": "#/components/schemas/ErrorPublic"}}},
    }


def _check_metrics_access(request: Request) -> None:
    """``/metrics`` is public only when ``public_metrics`` is set; with ``metrics_token`` it
    needs that bearer token; with neither it does not exist (404)."""
    settings: Settings = request.app.state.settings
    if settings.public_metrics:
        return
    if settings.metrics_token is None:
        raise NotFoundError("/metrics is off on this server (set PERFCI_METRICS_TOKEN)")
    expected = f"Bearer {settings.metrics_token.get_secret_value()}".encode()
    presented = request.headers.get("authorization", "").encode("utf-8", "replace")
    if not hmac.compare_digest(presented, expected):
        raise AuthError("/metrics needs `Authorization: Bearer <PERFCI_METRICS_TOKEN>`", status=401)


def _document_upload_body(app: FastAPI) -> None:
    """Add ``RunCreate`` (read by hand, so FastAPI does not see it) to the OpenAPI schemas."""
    generate = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            schema = generate()
            extra = RunCreate.model_json_schema(ref_template="#/components/schemas/{model}")
            components = schema.setdefault("components", {}).setdefault("schemas", {})
            for name, definition in extra.pop("$defs", {}).items():
                components.setdefault(name, definition)
            components["RunCreate"] = extra
            app.openapi_schema = schema
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]


def limits_from(settings: Settings) -> Limits:
    """Upload limits from the settings (``PERFCI_MAX_BODY_BYTES``, ``PERFCI_MAX_METRICS``, …)."""
    return Limits(
        max_body_bytes=settings.max_body_bytes,
        max_metrics=settings.max_metrics,
        max_samples=settings.max_samples,
        max_inflated_bytes=settings.max_inflated_bytes,
        max_inflation_ratio=settings.max_inflation_ratio,
        parse_cpu_seconds=settings.parse_cpu_seconds,
        parse_cpu_seconds_per_mib=settings.parse_cpu_seconds_per_mib,
        parse_memory_bytes=settings.parse_memory_bytes,
    )


def create_app_from_env() -> FastAPI:
    """The app from the settings ``perfci serve`` handed over (else the environment and the
    config file): uvicorn's factory."""
    return create_app(served_settings())
