"""``perfci serve``: the HTTP API and dashboard, uvicorn over ``create_app``."""

# lazy: the imports inside functions load a command's work only when it runs, so that
# `perfci --help` and the short commands start fast (tests/test_cold_start.py).
from __future__ import annotations

import os

import typer

from perfci.cli import _options as opts
from perfci.core.limits import MAX_BODY_BYTES, MAX_METRICS


def serve_command(
    host: str = typer.Option(
        "127.0.0.1", "--host", help="Address to listen on (0.0.0.0 in a container)."
    ),
    port: int = typer.Option(8000, "--port", min=0, max=65535, help="TCP port."),
    workers: int = typer.Option(1, "--workers", min=1, help="Worker processes."),
    database_url: opts.DatabaseUrl = None,
    max_body_bytes: int | None = typer.Option(
        None,
        "--max-body-bytes",
        min=1,
        help=f"Largest request body accepted (default {MAX_BODY_BYTES >> 20} MiB).",
    ),
    max_metrics: int | None = typer.Option(
        None,
        "--max-metrics",
        min=1,
        help=f"Most metrics per uploaded run (default {MAX_METRICS:,}).",
    ),
    log_level: str = typer.Option("info", "--log-level", help="uvicorn log level."),
    header_timeout: float | None = typer.Option(
        None,
        "--header-timeout",
        min=0.1,
        help="Seconds a client may take to send a "
        "request's headers before its connection is closed (default 10).",
    ),
    body_timeout: float | None = typer.Option(
        None,
        "--body-timeout",
        min=0.1,
        help="Seconds a client may take to send a request body (default 120).",
    ),
    keep_alive_timeout: float | None = typer.Option(
        None,
        "--keep-alive-timeout",
        min=0.1,
        help="Seconds an idle keep-alive connection stays open (default 5).",
    ),
    api_docs: bool | None = typer.Option(
        None,
        "--api-docs/--no-api-docs",
        help="Serve /docs, /redoc and /openapi.json (default: off).",
    ),
) -> None:
    """Serve the HTTP API (/api/v1), the dashboard (/), /healthz and /metrics."""
    _require_server_extra()
    import uvicorn

    from perfci.core.settings import get_settings, redact_url
    from perfci.core.settings_handover import HANDED_OVER_ENV, settings_to_json
    from perfci.usecases.admin.db import check_ready

    flags = {
        "database_url": database_url,
        "max_body_bytes": max_body_bytes,
        "max_metrics": max_metrics,
        "api_docs": api_docs,
        "header_timeout": header_timeout,
        "body_timeout": body_timeout,
        "keep_alive_timeout": keep_alive_timeout,
    }
    settings = get_settings(flags)
    # Fail now, with perfci's message, on a missing or old schema (SQLite is migrated here).
    url = check_ready(settings)
    settings = settings.model_copy(update={"database_url": url})
    # Workers are separate processes: they get this one object, whole (perfci.server.served).
    os.environ[HANDED_OVER_ENV] = settings_to_json(settings)
    typer.echo(f"perfci serving {redact_url(url)} on http://{host}:{port}", err=True)
    uvicorn.run(
        "perfci.server.app:create_app_from_env",
        factory=True,
        host=host,
        port=port,
        workers=workers,
        log_level=log_level,
        proxy_headers=True,
        server_header=False,
        # By name, as the app: the CLI and the service stay independent shells.
        http="perfci.server.protocol:TimedH11Protocol",
        timeout_keep_alive=int(max(1, round(settings.keep_alive_timeout))),
    )


#: The modules of the ``server`` extra that ``perfci serve`` imports, with their packages.
SERVER_MODULES = (
    ("fastapi", "fastapi"),
    ("uvicorn", "uvicorn"),
    ("python_multipart", "python-multipart"),
)


def _require_server_extra() -> None:
    """A ``ConfigError`` saying to install ``perfci[server]`` when part of it is missing.

    Imported, not looked up: a module that is present but broken is just as missing, and the
    service would fail with a traceback on its first request instead (issue 13).
    """
    import importlib

    from perfci.core.errors import ConfigError

    for module, package in SERVER_MODULES:
        try:
            importlib.import_module(module)
        except ImportError:
            raise ConfigError(
                f"perfci serve needs the server extra, and {package} is not "
                f"installed: install perfci[server] (pip install "
                f"'perfci[server]')"
            ) from None


def register(app: typer.Typer) -> None:
    app.command("serve")(serve_command)
