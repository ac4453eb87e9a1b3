"""The API's path and query parameters, its error responses, and the checks several of its
routes share (``api`` puts the routes together)."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

from fastapi import Path, Query

from perfci.core.compat import UTC
from perfci.core.errors import ConfigError
from perfci.core.model import SeriesKey
from perfci.server import auth
from perfci.server.deps import SessionDep, TokenDep
from perfci.server.schemas import INT32, ErrorPublic, SeriesPublic
from perfci.usecases.browse import pages as browse

#: Where every route of the API lives; each ``api_*`` router carries it (and ``ERRORS``) itself
#: so that a matched route's path is the whole template (``/api/v1/runs/{run_id}``), which the
#: request metrics count by.
PREFIX = "/api/v1"

ERRORS: dict[int | str, dict[str, Any]] = {
    status: {"model": ErrorPublic, "description": description}
    for status, description in {
        400: "Malformed request",
        401: "Missing, wrong or revoked token",
        403: "Token of the project lacks the scope",
        404: "Not found (or not visible to this token)",
        413: "Request body, inflated file or metric count too large",
        415: "Unsupported content type",
        422: "Invalid request",
        503: "Database unavailable; retry",
    }.items()
}
NO_NUL = r"^[^\x00]*$"
ProjectName = Annotated[
    str,
    Path(
        min_length=1,
        max_length=200,
        pattern=NO_NUL,
        description="Project name, e.g. `owner/repo`.",
    ),
]
BenchmarkName = Annotated[str, Path(min_length=1, max_length=200, pattern=NO_NUL)]
RunId = Annotated[int, Path(ge=1, le=INT32)]
QueryText = Annotated[str | None, Query(max_length=1000, pattern=NO_NUL)]


def require_run(session: SessionDep, token: TokenDep, run_id: int) -> None:
    """Read access to run ``run_id``; a run the token may not see is "missing" (404)."""
    owner = auth.owner_of(lambda: browse.project_of_run(session, run_id), token, "read")
    auth.require_read(session, token, owner, missing=f"no run with id {run_id}")


def series_public(key: SeriesKey | None) -> SeriesPublic | None:
    return None if key is None else SeriesPublic.of(key)


def utc(moment: datetime | None, name: str) -> datetime | None:
    """``moment`` in UTC (naive means UTC); one that UTC cannot hold (``0001-01-01T00:00+14:00``
    is in the year 0) is a 422 naming the parameter, not an OverflowError in the store."""
    if moment is None:
        return None
    try:
        return moment.astimezone(UTC) if moment.tzinfo else moment.replace(tzinfo=UTC)
    except (OverflowError, ValueError):
        raise ConfigError(
            f"`{name}` {moment.isoformat()} is out of range: give a date between the years "
            "1 and 9999 in UTC"
        ) from None
