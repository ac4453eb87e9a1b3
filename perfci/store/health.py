"""Whether the database answers: the service's health check."""

from __future__ import annotations

from sqlalchemy import Engine, text


def ping(engine: Engine) -> None:
    """Run ``SELECT 1``; raises the driver's error when the database does not answer."""
    with engine.connect() as connection:
        connection.execute(text("SELECT 1"))
