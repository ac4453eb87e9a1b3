"""``/api/v1/projects/{project}/benchmarks``: a project's benchmarks, and one metric's history."""

from __future__ import annotations

import dataclasses
from datetime import datetime
from typing import Annotated

from fastapi import APIRouter, Query

from perfci.core.model import Device, MetricKind, SeriesKey
from perfci.server import auth
from perfci.server.api_params import (
    ERRORS,
    NO_NUL,
    PREFIX,
    BenchmarkName,
    ProjectName,
    QueryText,
    series_public,
    utc,
)
from perfci.server.deps import ReadSessionDep, SessionDep, SettingsDep, TokenDep
from perfci.server.schemas import (
    BenchmarkPublic,
    BenchmarksPublic,
    HistoryPointPublic,
    SeriesHistoryPublic,
)
from perfci.usecases.browse import pages as browse

router = APIRouter(prefix=PREFIX, responses=ERRORS)


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
                step_series=series_public(b.step_series),
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
    name: Annotated[str, Query(min_length=1, max_length=1000, pattern=NO_NUL)],
    device: Annotated[Device, Query()] = Device.GPU,
    scope: QueryText = None,
    section: QueryText = None,
    branch: Annotated[str | None, Query(max_length=255, pattern=NO_NUL)] = None,
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
        since=utc(since, "since"),
        until=utc(until, "until"),
    )
    return SeriesHistoryPublic(
        project=project,
        benchmark=benchmark,
        branch=chosen,
        series=series_public(key),  # type: ignore[arg-type]
        points=[HistoryPointPublic(**dataclasses.asdict(p)) for p in points],
    )
