"""Read-side use cases for the HTTP API and the dashboard: projects, benchmarks, histories, runs.

Everything returns plain dataclasses (or the stored comparison dict), never ORM objects, so
that the server's schemas and templates depend on this module and not on the tables.

A benchmark's *step time* is its primary step series: the first ``step`` series stored for it
at top level (no scope), else the first one at all; a run's value is the median of its
repeats (ns per step).
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

from perfci.analysis.steps import primary_step
from perfci.core.errors import NotFoundError
from perfci.core.model import SeriesKey
from perfci.store import dashboard, queries
from perfci.store.comparisons import latest_comparison_document
from perfci.store.queries import HistoryPoint, RunInfo
from perfci.store.samples import series_values
from perfci.store.work import Session

if TYPE_CHECKING:
    from typing_extensions import Unpack  # typing's own from Python 3.11

__all__ = [
    "BenchmarkSummary",
    "ProjectSummary",
    "RunDetail",
    "StepPoint",
    "benchmark_runs",
    "get_project",
    "list_benchmarks",
    "list_projects",
    "project_of_run",
    "run_detail",
    "runs_between",
    "series_history",
    "step_history",
    "verdicts",
]


@dataclass(frozen=True, slots=True)
class ProjectSummary:
    name: str
    public: bool
    benchmarks: int = 0
    runs: int = 0
    last_run_at: datetime | None = None


@dataclass(frozen=True, slots=True)
class StepPoint:
    """One run's step time (median of its repeats, ns per step) at ``time``, its commit's time
    (else when it was stored, ``stored_at``)."""

    run_id: int
    commit: str | None
    branch: str | None
    time: datetime
    value_ns: float
    stored_at: datetime | None = None


@dataclass(frozen=True, slots=True)
class BenchmarkSummary:
    """A benchmark at a glance.

    With a ``branch`` (the base branch), ``latest_step`` is that branch's newest run, the one
    its trend ends on, and ``latest_elsewhere`` the newest run of any other branch (a pull
    request) when there is one: the two are never mixed up (issue 16). Without a branch,
    ``latest_step`` is the newest run of any branch and ``latest_elsewhere`` is ``None``.
    """

    name: str
    runs: int
    latest_run_id: int | None = None
    latest_at: datetime | None = None
    step_series: SeriesKey | None = None
    latest_step_ns: float | None = None
    trend_ns: list[float] = field(default_factory=list)
    branch: str | None = None
    latest_step: StepPoint | None = None
    latest_elsewhere: StepPoint | None = None


@dataclass(frozen=True, slots=True)
class RunDetail:
    run: RunInfo
    comparison: dict[str, Any] | None


def list_projects(session: Session) -> list[ProjectSummary]:
    """Every project with its benchmark and run counts, by name."""
    return [
        ProjectSummary(name=name, public=public, benchmarks=n, runs=runs, last_run_at=last)
        for name, public, n, runs, last in dashboard.projects(session)
    ]


def get_project(session: Session, name: str) -> ProjectSummary:
    """The project called ``name``; ``NotFoundError`` when there is none."""
    found = dashboard.project(session, name)
    if found is None:
        raise NotFoundError(f"no project named {name!r}")
    return ProjectSummary(name=found[0], public=found[1])


def project_of_run(session: Session, run_id: int) -> str:
    """The project a run belongs to (for access checks before reading it)."""
    found = dashboard.project_of_run(session, run_id)
    if found is None:
        raise NotFoundError(f"no run with id {run_id}")
    return found


def list_benchmarks(
    session: Session, project: str, *, branch: str | None = None, trend_points: int = 30
) -> list[BenchmarkSummary]:
    """The benchmarks of ``project`` with their latest step time and recent trend.

    The trend is the last ``trend_points`` runs on ``branch`` (every branch when ``None``, or
    when ``branch`` has no runs).
    """
    get_project(session, project)
    return [
        _summary(session, bid, name, runs, latest, branch, trend_points)
        for bid, name, runs, latest in dashboard.benchmark_run_counts(session, project)
    ]


def _summary(
    session: Session,
    benchmark_id: int,
    name: str,
    runs: int,
    latest: int | None,
    branch: str | None,
    trend_points: int,
) -> BenchmarkSummary:
    series_id, key = _primary_step(session, benchmark_id)
    latest_at = dashboard.run_created_at(session, latest) if latest is not None else None
    if series_id is None:
        return BenchmarkSummary(name=name, runs=runs, latest_run_id=latest, latest_at=latest_at)
    trend = _step_points(session, series_id, branch=branch, limit=trend_points)
    if not trend and branch is not None:
        branch = None  # nothing on the base branch yet: show what there is
        trend = _step_points(session, series_id, branch=None, limit=trend_points)
    newest = (
        trend[-1:] if branch is not None else _step_points(session, series_id, branch=None, limit=1)
    )
    elsewhere = (
        _step_points(session, series_id, branch=None, limit=1, not_branch=branch)
        if branch is not None
        else []
    )
    return BenchmarkSummary(
        name=name,
        runs=runs,
        latest_run_id=latest,
        latest_at=latest_at,
        step_series=key,
        latest_step_ns=newest[-1].value_ns if newest else None,
        trend_ns=[p.value_ns for p in trend],
        branch=branch,
        latest_step=newest[-1] if newest else None,
        latest_elsewhere=elsewhere[-1] if elsewhere else None,
    )


def step_history(
    session: Session, project: str, benchmark: str, *, branch: str | None, limit: int = 500
) -> tuple[SeriesKey | None, list[StepPoint]]:
    """The primary step series of ``benchmark`` and its last ``limit`` runs, oldest first."""
    benchmark_id = _benchmark_id(session, project, benchmark)
    series_id, key = _primary_step(session, benchmark_id)
    if series_id is None:
        return None, []
    return key, _step_points(session, series_id, branch=branch, limit=limit)


def series_history(
    session: Session, project: str, benchmark: str, **query: Unpack[queries.HistoryQuery]
) -> list[HistoryPoint]:
    """One series' values per run of ``branch``, oldest first (``NotFoundError`` if unknown)."""
    _benchmark_id(session, project, benchmark)
    points = queries.series_history(session, project=project, benchmark=benchmark, **query)
    return queries.drop_bad_points(points)[0]


def benchmark_runs(
    session: Session, project: str, benchmark: str, *, limit: int = 50
) -> list[RunInfo]:
    """The newest ``limit`` runs of ``benchmark``, newest first."""
    benchmark_id = _benchmark_id(session, project, benchmark)
    ids = dashboard.newest_run_ids(session, benchmark_id, limit)
    return [queries.get_run(session, run_id) for run_id in ids]


def runs_between(
    session: Session,
    project: str,
    *,
    since: datetime,
    until: datetime,
    **only: Unpack[queries.RunFilter],
) -> list[tuple[RunInfo, str | None]]:
    """Runs stored in ``[since, until)``, oldest first, each with its latest verdict."""
    runs = queries.runs_in_period(session, project=project, since=since, until=until, **only)
    found = verdicts(session, [r.id for r in runs])
    return [(run, found.get(run.id)) for run in runs]


def verdicts(session: Session, run_ids: list[int]) -> dict[int, str]:
    """The verdict of each run's latest comparison (runs never compared are left out)."""
    return dashboard.latest_verdicts(session, run_ids)


def run_detail(session: Session, run_id: int) -> RunDetail:
    """Run ``run_id`` and its latest stored comparison (as the pull request was told)."""
    run = queries.get_run(session, run_id)
    return RunDetail(run=run, comparison=latest_comparison_document(session, run_id))


def _benchmark_id(session: Session, project: str, benchmark: str) -> int:
    found = dashboard.benchmark_id(session, project, benchmark)
    if found is None:
        get_project(session, project)
        raise NotFoundError(f"project {project!r} has no benchmark named {benchmark!r}")
    return found


#: Runs whose step values say how long each step series typically is (the longest is the step).
_TYPICAL_RUNS = 20


def _primary_step(session: Session, benchmark_id: int) -> tuple[int | None, SeriesKey | None]:
    """The step series the comment judges (:func:`perfci.analysis.steps.primary_step`: the
    longest, then the one seen in more runs), by its recent runs' values.

    Not the first one stored: a benchmark that reports an iteration and its forward step
    would otherwise chart the forward step while the comment judged the iteration (issue 36).
    """
    # By age: the tie-break of primary_step sees the series in the order they were stored.
    keys = dict(sorted(dashboard.step_series(session, benchmark_id)))
    if len(keys) <= 1:
        return next(iter(keys.items()), (None, None))
    candidates: list[tuple[SeriesKey, float | None, int]] = []
    for series_id, key in keys.items():
        found = queries.latest_values(session, series_id, branch=None, limit=_TYPICAL_RUNS)
        medians = [statistics.median(r.values) for r in found if r.values]
        candidates.append((key, statistics.median(medians) if medians else None, len(medians)))
    chosen = primary_step(candidates)
    if chosen is None:
        return None, None
    return next(i for i, k in keys.items() if k == chosen), chosen


def step_times(
    session: Session, project: str, benchmark: str, run_ids: list[int]
) -> dict[int, float]:
    """Run id → the primary step's time (median of the run's repeats) for ``run_ids``, on
    any branch: a benchmark's runs table lists pull-request runs beside the base branch's."""
    benchmark_id = _benchmark_id(session, project, benchmark)
    series_id, _ = _primary_step(session, benchmark_id)
    if series_id is None or not run_ids:
        return {}
    values = series_values(session, series_id, dashboard.runs_created_at(session, run_ids))
    return {
        run_id: statistics.median(found)
        for run_id, found in values.items()
        if found and all(math.isfinite(v) and v >= 0 for v in found)
    }


def _step_points(
    session: Session, series_id: int, **which: Unpack[queries.LatestQuery]
) -> list[StepPoint]:
    """The last ``limit`` runs with a value of ``series_id`` (on ``branch``, and not on
    ``not_branch``, when given), oldest first."""
    found = queries.latest_values(session, series_id, **which)
    values = {r.run_id: r.values for r in found}
    meta = {r.run_id: (r.commit, r.branch, r.time, r.created_at) for r in found}
    # A run stored by an older perfci with a negative or infinite value is left off the chart.
    points = [
        StepPoint(
            run_id=r,
            commit=meta[r][0],
            branch=meta[r][1],
            time=meta[r][2],
            value_ns=statistics.median(values[r]),
            stored_at=meta[r][3],
        )
        for r in values
        if all(math.isfinite(v) and v >= 0 for v in values[r])
    ]
    return sorted(points, key=lambda p: (p.time, p.run_id))


@dataclass(frozen=True, slots=True)
class StepChanges:
    """The change points of a step-time history: each segment's level (one value per point)
    and, for each change, the first point after it and its relative change."""

    levels: list[float]
    changes: list[tuple[StepPoint, float]]


def step_changes(points: list[StepPoint]) -> StepChanges:
    """Where the level of ``points`` (oldest first) changes, as the dashboard's chart marks it."""
    # lazy: numpy/scipy only for the step chart; `perfci runs` and the listings load none
    from perfci.analysis.changepoints import detect_change_points, segment_levels

    if not points:
        return StepChanges(levels=[], changes=[])
    values = [p.value_ns for p in points]
    found = detect_change_points(values)
    return StepChanges(
        levels=segment_levels(values, found), changes=[(points[c.index], c.change) for c in found]
    )
