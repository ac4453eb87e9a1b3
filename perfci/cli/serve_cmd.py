"""``perfci serve``: the HTTP API and dashboard, uvicorn over ``create_app``."""

from __future__ import annotations

import os

import typer


def serve_command(
    host: str = typer.Option("127.0.0.1", "--host", help="Address to listen on (0.0.0.0 in "
                                                          "a container)."),
    port: int = typer.Option(8000, "--port", min=0, max=65535, help="TCP port."),
    workers: int = typer.Option(1, "--workers", min=1, help="Worker processes."),
    database_url: str | None = typer.Option(None, "--database-url",
                                            help="Database URL (default: PERFCI_DATABASE_URL, "
                                                 "the config file, else the embedded SQLite "
                                                 "store)."),
    max_body_bytes: int | None = typer.Option(None, "--max-body-bytes", min=1,
                                              help="Largest request body accepted "
                                                   "(default 64 MiB)."),
    max_metrics: int | None = typer.Option(None, "--max-metrics", min=1,
                                           help="Most metrics per uploaded run "
                                                "(default 200,000)."),
    log_level: str = typer.Option("info", "--log-level", help="uvicorn log level."),
) -> None:
    """Serve the HTTP API (/api/v1), the dashboard (/), /healthz and /metrics."""
    import uvicorn

    from perfci.settings import get_settings, redact_url
    from perfci.store.db import open_store

    settings = get_settings({"database_url": database_url})
    url = settings.resolved_database_url()
    # Fail now, with perfci's message, on a missing or old schema (SQLite is migrated here).
    open_store(settings).close()
    # Workers are separate processes: they build the app from the environment.
    os.environ["PERFCI_DATABASE_URL"] = url
    for name, value in (("PERFCI_MAX_BODY_BYTES", max_body_bytes),
                        ("PERFCI_MAX_METRICS", max_metrics)):
        if value is not None:
            os.environ[name] = str(value)
    typer.echo(f"perfci serving {redact_url(url)} on http://{host}:{port}", err=True)
    uvicorn.run("perfci.server.app:create_app_from_env", factory=True, host=host, port=port,
                workers=workers, log_level=log_level, proxy_headers=True,
                server_header=False)


def register(app: typer.Typer) -> None:
    app.command("serve")(serve_command)
