"""``/api/v1/runs/{run_id}`` and ``/api/v1/projects/{project}/runs``: a stored run, its deletion,
its comparison, and a project's runs over a period."""

from __future__ import annotations

import dataclasses
from datetime import datetime, timedelta
from typing import Annotated

from fastapi import APIRouter, Query

from perfci.core.compat import UTC
from perfci.core.errors import ConfigError, NotFoundError
from perfci.core.model import RunInfo, Verdict
from perfci.server import auth
from perfci.server.api_params import ERRORS, NO_NUL, PREFIX, ProjectName, RunId, require_run, utc
from perfci.server.deps import ReadSessionDep, SessionDep, TokenDep
from perfci.server.schemas import ComparisonPublic, RunDeleted, RunPublic, RunsPublic
from perfci.usecases.browse import pages as browse
from perfci.usecases.browse import runs

router = APIRouter(prefix=PREFIX, responses=ERRORS)


@router.get("/runs/{run_id}", response_model=RunPublic, tags=["runs"])
def get_run(run_id: RunId, session: SessionDep, token: TokenDep) -> RunPublic:
    """One stored run: commit, branch, CI, environment and its verdict."""
    require_run(session, token, run_id)
    detail = browse.run_detail(session, run_id)
    verdict = detail.comparison.get("verdict") if detail.comparison else None
    return _run_public(detail.run, verdict)


@router.delete("/runs/{run_id}", response_model=RunDeleted, tags=["runs"])
def delete_run(run_id: RunId, session: SessionDep, token: TokenDep) -> RunDeleted:
    """Admin: delete a run with its samples, profiles, comparison and alerts (audited).

    Later comparisons no longer count it in their baselines; the comparisons already
    reported keep their numbers.
    """
    missing = f"no run with id {run_id}"
    owner = auth.owner_of(lambda: browse.project_of_run(session, run_id), token, "admin")
    admin = auth.require_scope(token, owner, "admin", missing=missing)
    deleted = runs.delete_run(
        session,
        run_id=run_id,
        project=owner,
        actor=f"token {admin.id} ({admin.prefix}…, {admin.name})",
    )
    return RunDeleted(**dataclasses.asdict(deleted))


@router.get("/runs/{run_id}/comparison", response_model=ComparisonPublic, tags=["runs"])
def get_comparison(run_id: RunId, session: SessionDep, token: TokenDep) -> ComparisonPublic:
    """The run's comparison with its baseline, as it was reported."""
    require_run(session, token, run_id)
    detail = browse.run_detail(session, run_id)
    if detail.comparison is None:
        raise NotFoundError(f"run {run_id} has not been compared")
    comparison: ComparisonPublic = ComparisonPublic.of(detail.comparison)
    return comparison


@router.get("/projects/{project:path}/runs", response_model=RunsPublic, tags=["runs"])
def list_runs(
    project: ProjectName,
    session: SessionDep,
    reads: ReadSessionDep,
    token: TokenDep,
    since: datetime | None = None,
    until: datetime | None = None,
    branch: Annotated[str | None, Query(max_length=255, pattern=NO_NUL)] = None,
    benchmark: Annotated[str | None, Query(max_length=200, pattern=NO_NUL)] = None,
) -> RunsPublic:
    """Runs stored in ``[since, until)`` (default: the last 30 days), oldest first."""
    auth.require_read(session, token, project)
    browse.get_project(session, project)
    start, end = _period(utc(since, "since"), utc(until, "until"))
    runs = browse.runs_between(
        reads, project, since=start, until=end, branch=branch, benchmark=benchmark
    )
    return RunsPublic(project=project, runs=[_run_public(r, v) for r, v in runs])


def _run_public(run: RunInfo, verdict: str | None) -> RunPublic:
    public: RunPublic = RunPublic.of(run)
    public.verdict = Verdict(verdict) if verdict else None
    return public


def _period(since: datetime | None, until: datetime | None) -> tuple[datetime, datetime]:
    try:
        end = until or datetime.now(UTC) + timedelta(minutes=1)
        start = since or end - timedelta(days=30)
    except OverflowError:
        raise ConfigError("`since`/`until` are out of range") from None
    if start >= end:
        raise ConfigError("`since` must be before `until`")
    return start, end
