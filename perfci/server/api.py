"""The HTTP API under ``/api/v1``: upload runs, read runs, comparisons, benchmarks, history.

Project names hold a slash (``owner/repo``), and benchmark names may, so both path parameters
use Starlette's ``path`` converter; send them as-is (``/api/v1/projects/acme/model/runs``) or
percent-encoded.

What a token may not see answers as if it did not exist (see :mod:`perfci.server.auth`).
"""

from __future__ import annotations

import dataclasses
import pathlib
import tempfile
from collections.abc import Callable
from contextlib import AsyncExitStack
from datetime import datetime, timedelta
from typing import Annotated, Any

from fastapi import APIRouter, Header, Path, Query, Request, Response
from sqlalchemy.orm import Session

from perfci.core.compat import UTC
from perfci.core.errors import ConfigError, NotFoundError
from perfci.core.model import Device, MetricKind, Profile, RunContext, RunInfo, SeriesKey, Verdict
from perfci.server import auth
from perfci.server.deps import (
    LimitsDep,
    ReadSessionDep,
    RegistryDep,
    SessionDep,
    SettingsDep,
    TokenDep,
    UploadTokenDep,
    run_upload_work,
    upload_slot,
)
from perfci.server.parse_pool import ParsePool
from perfci.server.receive import receive
from perfci.server.schemas import (
    INT32,
    AlertPublic,
    AlertsPublic,
    AlertUpdate,
    BenchmarkPublic,
    BenchmarksPublic,
    ComparisonPublic,
    ErrorPublic,
    HistoryPointPublic,
    ProjectPublic,
    ProjectsPublic,
    ProjectUpdate,
    RunCreated,
    RunDeleted,
    RunPublic,
    RunsPublic,
    SeriesHistoryPublic,
    SeriesPublic,
)
from perfci.usecases.admin import tokens
from perfci.usecases.browse import alerts, runs
from perfci.usecases.browse import pages as browse
from perfci.usecases.submit.run import SubmitResult, submit_run

_ERRORS: dict[int | str, dict[str, Any]] = {
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

router = APIRouter(prefix="/api/v1", responses=_ERRORS)

_NO_NUL = r"^[^\x00]*$"
ProjectName = Annotated[
    str,
    Path(
        min_length=1,
        max_length=200,
        pattern=_NO_NUL,
        description="Project name, e.g. `owner/repo`.",
    ),
]
BenchmarkName = Annotated[str, Path(min_length=1, max_length=200, pattern=_NO_NUL)]
RunId = Annotated[int, Path(ge=1, le=INT32)]
QueryText = Annotated[str | None, Query(max_length=1000, pattern=_NO_NUL)]

_UPLOAD_BODY = {
    "requestBody": {
        "required": True,
        "content": {
            "application/json": {"schema": {"$ref": "#/components/schemas/RunCreate"}},
            "multipart/form-data": {
                "schema": {
                    "type": "object",
                    "required": ["meta", "files"],
                    "properties": {
                        "meta": {
                            "type": "string",
                            "description": "RunMeta as JSON: benchmark, "
                            "context and an optional format name.",
                        },
                        "files": {
                            "type": "array",
                            "items": {"type": "string", "format": "binary"},
                            "description": "Profile files, one repeat per file.",
                        },
                    },
                }
            },
        },
    },
}


# --- upload -----------------------------------------------------------------------------------


@router.post(
    "/projects/{project:path}/runs",
    status_code=201,
    response_model=RunCreated,
    openapi_extra=_UPLOAD_BODY,
    tags=["runs"],
    responses={
        200: {"model": RunCreated, "description": "Already stored (a retry)"},
        409: {
            "model": ErrorPublic,
            "description": "The CI run is stored "
            "with other content; `error.run_id` is the stored run",
        },
    },
)
async def upload_run(
    project: ProjectName,
    request: Request,
    settings: SettingsDep,
    limits: LimitsDep,
    registry: RegistryDep,
    token: UploadTokenDep,
    idempotency_key: Annotated[str | None, Header(max_length=200, pattern=_NO_NUL)] = None,
) -> Response:
    """Store one run (JSON: a perfci document per repeat; multipart: one file per repeat),
    compare it with its baseline and return the comparison. A retry with the same
    ``Idempotency-Key`` (or the same CI run) returns the stored run with 200.

    In order, each step before the costlier next one: the token (its database session closed
    at once), the token's rate limit (429), the body spooled to disk, then an upload slot,
    within which a parse worker reads the body and the run is stored in a session of its own.
    """
    allowed = auth.require_scope(token, project, "upload")
    async with AsyncExitStack() as stack:
        try:
            request.app.state.rate_limit.check(allowed.id)
            folder = stack.enter_context(tempfile.TemporaryDirectory(prefix="perfci-upload-"))
            received = await receive(request, limits, pathlib.Path(folder))
            await stack.enter_async_context(upload_slot(request))
            pool: ParsePool = request.app.state.parse_pool
            benchmark, context_in, repeats = await run_upload_work(
                request, pool.run, received.job, received.args, received.size
            )
        except Exception:
            registry.count_upload("rejected")
            raise
        context = RunContext(project=project, **(received.context or context_in or {}))
        key = f"http:{idempotency_key}" if idempotency_key else None
        created, answer = await run_upload_work(
            request,
            _submit,
            request.app.state.sessions,
            project,
            context,
            received.benchmark or benchmark,
            repeats,
            settings,
            key,
        )
    registry.count_upload("created" if created else "duplicate")
    return Response(answer, status_code=201 if created else 200, media_type="application/json")


def _submit(
    sessions: Callable[[], Session],
    project: str,
    context: RunContext,
    benchmark: str,
    repeats: list[list[Profile]],
    settings: Any,
    key: str | None,
) -> tuple[bool, bytes]:
    """``submit_run`` (the client's Idempotency-Key is the run key when it sent one), and the
    answer as JSON: a comparison of many metrics takes seconds to serialise, which must not
    happen on the event loop."""
    with sessions() as session:  # opened only now: a connection only to write (issue 31)
        result: SubmitResult = submit_run(
            session,
            context=context,
            benchmark=benchmark,
            repeats=repeats,
            settings=settings,
            idempotency_key=key,
        )
    ingest = result.ingest
    answer = RunCreated(
        run_id=ingest.run_id,
        created=ingest.created,
        project=project,
        benchmark=benchmark,
        series=ingest.series,
        samples=ingest.samples,
        url=f"/runs/{ingest.run_id}",
        comparison=ComparisonPublic.of(result.comparison),
    )
    return ingest.created, answer.model_dump_json().encode()


# --- reads ------------------------------------------------------------------------------------


@router.get("/projects", response_model=ProjectsPublic, tags=["projects"])
def list_projects(session: SessionDep, token: TokenDep) -> ProjectsPublic:
    """The projects the caller may read: public ones and the token's own."""
    visible = [
        p
        for p in browse.list_projects(session)
        if p.public or (token is not None and token.project == p.name)
    ]
    return ProjectsPublic(projects=[ProjectPublic(**dataclasses.asdict(p)) for p in visible])


@router.patch("/projects/{project:path}", response_model=ProjectPublic, tags=["projects"])
def update_project(
    project: ProjectName, update: ProjectUpdate, session: SessionDep, token: TokenDep
) -> ProjectPublic:
    """Admin: make the project public (readable without a token) or private."""
    auth.require_scope(token, project, "admin")
    tokens.set_project_public(session, project=project, public=update.public)
    # list_projects counts the project's benchmarks and runs (get_project does not).
    found = [p for p in browse.list_projects(session) if p.name == project]
    if not found:
        raise NotFoundError(auth.missing_project(project))
    return ProjectPublic(**dataclasses.asdict(found[0]))


@router.get("/runs/{run_id}", response_model=RunPublic, tags=["runs"])
def get_run(run_id: RunId, session: SessionDep, token: TokenDep) -> RunPublic:
    """One stored run: commit, branch, CI, environment and its verdict."""
    _require_run(session, token, run_id)
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
    _require_run(session, token, run_id)
    detail = browse.run_detail(session, run_id)
    if detail.comparison is None:
        raise NotFoundError(f"run {run_id} has not been compared")
    comparison: ComparisonPublic = ComparisonPublic.of(detail.comparison)
    return comparison


@router.get(
    "/projects/{project:path}/benchmarks", response_model=BenchmarksPublic, tags=["benchmarks"]
)
def list_benchmarks(
    project: ProjectName, session: SessionDep, reads: ReadSessionDep, token: TokenDep
) -> BenchmarksPublic:
    """The project's benchmarks with their latest step time (ns per step)."""
    auth.require_read(session, token, project)
    found = browse.list_benchmarks(reads, project, trend_points=1)
    return BenchmarksPublic(
        project=project,
        benchmarks=[
            BenchmarkPublic(
                name=b.name,
                runs=b.runs,
                latest_run_id=b.latest_run_id,
                latest_at=b.latest_at,
                latest_step_ns=b.latest_step_ns,
                step_series=_series_public(b.step_series),
            )
            for b in found
        ],
    )


@router.get(
    "/projects/{project:path}/benchmarks/{benchmark:path}/series",
    response_model=SeriesHistoryPublic,
    tags=["benchmarks"],
)
def series_history(
    project: ProjectName,
    benchmark: BenchmarkName,
    session: SessionDep,
    reads: ReadSessionDep,
    settings: SettingsDep,
    token: TokenDep,
    kind: Annotated[MetricKind, Query()],
    name: Annotated[str, Query(min_length=1, max_length=1000, pattern=_NO_NUL)],
    device: Annotated[Device, Query()] = Device.GPU,
    scope: QueryText = None,
    section: QueryText = None,
    branch: Annotated[str | None, Query(max_length=255, pattern=_NO_NUL)] = None,
    since: datetime | None = None,
    until: datetime | None = None,
) -> SeriesHistoryPublic:
    """One metric's values per run on a branch (default: the baseline branch), oldest first."""
    auth.require_read(session, token, project)
    key = SeriesKey(kind=kind, name=name, device=device, scope=scope or "", section=section or "")
    chosen = branch or settings.baseline_branch
    points = browse.series_history(
        reads,
        project,
        benchmark,
        series=key,
        branch=chosen,
        since=_utc(since, "since"),
        until=_utc(until, "until"),
    )
    return SeriesHistoryPublic(
        project=project,
        benchmark=benchmark,
        branch=chosen,
        series=_series_public(key),  # type: ignore[arg-type]
        points=[HistoryPointPublic(**dataclasses.asdict(p)) for p in points],
    )


@router.get("/projects/{project:path}/runs", response_model=RunsPublic, tags=["runs"])
def list_runs(
    project: ProjectName,
    session: SessionDep,
    reads: ReadSessionDep,
    token: TokenDep,
    since: datetime | None = None,
    until: datetime | None = None,
    branch: Annotated[str | None, Query(max_length=255, pattern=_NO_NUL)] = None,
    benchmark: Annotated[str | None, Query(max_length=200, pattern=_NO_NUL)] = None,
) -> RunsPublic:
    """Runs stored in ``[since, until)`` (default: the last 30 days), oldest first."""
    auth.require_read(session, token, project)
    browse.get_project(session, project)
    start, end = _period(_utc(since, "since"), _utc(until, "until"))
    runs = browse.runs_between(
        reads, project, since=start, until=end, branch=branch, benchmark=benchmark
    )
    return RunsPublic(project=project, runs=[_run_public(r, v) for r, v in runs])


# --- alerts and weekly reports ----------------------------------------------------------------


@router.get("/projects/{project:path}/alerts", response_model=AlertsPublic, tags=["alerts"])
def list_alerts(
    project: ProjectName,
    session: SessionDep,
    token: TokenDep,
    status: Annotated[alerts.Status | None, Query()] = None,
    benchmark: Annotated[str | None, Query(max_length=200, pattern=_NO_NUL)] = None,
) -> AlertsPublic:
    """The project's change-point alerts, newest first."""
    auth.require_read(session, token, project)
    found = alerts.list_alerts(session, project=project, status=status, benchmark=benchmark)
    return AlertsPublic(project=project, alerts=[_alert_public(a) for a in found])


@router.patch("/alerts/{alert_id}", response_model=AlertPublic, tags=["alerts"])
def update_alert(
    alert_id: RunId, update: AlertUpdate, session: SessionDep, token: TokenDep
) -> AlertPublic:
    """Admin: acknowledge, dismiss or re-open an alert."""
    missing = f"no alert with id {alert_id}; `perfci alerts list` shows them"
    owner = auth.owner_of(lambda: alerts.get_alert(session, alert_id).project, token, "admin")
    auth.require_scope(token, owner, "admin", missing=missing)
    return _alert_public(
        alerts.set_alert_status(session, alert_id, update.status, note=update.note)
    )


@router.get("/projects/{project:path}/reports/weekly", tags=["reports"])
def weekly_report(
    project: ProjectName,
    session: SessionDep,
    reads: ReadSessionDep,
    token: TokenDep,
    week: Annotated[
        str, Query(pattern=r"^\d{4}-[Ww]\d{2}$", description="ISO week, e.g. 2026-W47.")
    ],
    branch: Annotated[str, Query(min_length=1, max_length=255, pattern=_NO_NUL)] = "main",
) -> dict[str, Any]:
    """The weekly trend report of ``branch`` (``perfci report --format json``'s document).

    Reading a report records nothing: alerts are recorded by ``perfci report``.
    """
    from perfci.usecases.weekly.report import build_weekly_report, report_to_dict, week_bounds

    auth.require_read(session, token, project)
    browse.get_project(session, project)
    since, until = week_bounds(week)
    report = build_weekly_report(
        reads, project=project, since=since, until=until, branch=branch, record=False
    )
    return report_to_dict(report)


def _require_run(session: SessionDep, token: TokenDep, run_id: int) -> None:
    """Read access to run ``run_id``; a run the token may not see is "missing" (404)."""
    owner = auth.owner_of(lambda: browse.project_of_run(session, run_id), token, "read")
    auth.require_read(session, token, owner, missing=f"no run with id {run_id}")


def _alert_public(alert: alerts.AlertInfo) -> AlertPublic:
    values = dataclasses.asdict(alert)
    values.pop("environment_id", None)
    return AlertPublic(**values)


def _run_public(run: RunInfo, verdict: str | None) -> RunPublic:
    public: RunPublic = RunPublic.of(run)
    public.verdict = Verdict(verdict) if verdict else None
    return public


def _series_public(key: SeriesKey | None) -> SeriesPublic | None:
    return None if key is None else SeriesPublic.of(key)


def _period(since: datetime | None, until: datetime | None) -> tuple[datetime, datetime]:
    try:
        end = until or datetime.now(UTC) + timedelta(minutes=1)
        start = since or end - timedelta(days=30)
    except OverflowError:
        raise ConfigError("`since`/`until` are out of range") from None
    if start >= end:
        raise ConfigError("`since` must be before `until`")
    return start, end


def _utc(moment: datetime | None, name: str) -> datetime | None:
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
