"""``/api/v1/projects/{project}/reports/weekly``: a branch's weekly trend report."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query

from perfci.server import auth
from perfci.server.api_params import ERRORS, NO_NUL, PREFIX, ProjectName
from perfci.server.deps import ReadSessionDep, SessionDep, TokenDep
from perfci.usecases.browse import pages as browse
from perfci.usecases.weekly.report import build_weekly_report
from perfci.usecases.weekly.report_json import report_to_dict
from perfci.usecases.weekly.weeks import week_bounds

router = APIRouter(prefix=PREFIX, responses=ERRORS)


@router.get("/projects/{project:path}/reports/weekly", tags=["reports"])
def weekly_report(
    project: ProjectName,
    session: SessionDep,
    reads: ReadSessionDep,
    token: TokenDep,
    week: Annotated[
        str, Query(pattern=r"^\d{4}-[Ww]\d{2}$", description="ISO week, e.g. 2026-W47.")
    ],
    branch: Annotated[str, Query(min_length=1, max_length=255, pattern=NO_NUL)] = "main",
) -> dict[str, Any]:
    """The weekly trend report of ``branch`` (``perfci report --format json``'s document).

    Reading a report records nothing: alerts are recorded by ``perfci report``.
    """
    auth.require_read(session, token, project)
    browse.get_project(session, project)
    since, until = week_bounds(week)
    report = build_weekly_report(
        reads, project=project, since=since, until=until, branch=branch, record=False
    )
    return report_to_dict(report)
