"""Read queries over the store; they return plain dataclasses, never ORM objects.

A run's *time* is its commit's time when known, else when it was stored: history is ordered by
what was measured (the commit), and re-runs of one commit by when they ran.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy import ColumnElement, Select, func, select, type_coerce
from sqlalchemy.dialects.postgresql import aggregate_order_by
from sqlalchemy.orm import Session

from perfci.errors import NotFoundError
from perfci.model import Device, MetricKind, SeriesKey
from perfci.store.schema import (
    Benchmark,
    Commit,
    Environment,
    Project,
    Run,
    Sample,
    Series,
    UTCDateTime,
    series_key_hash,
)

_CHUNK = 5000  # ids per IN (...) list


@dataclass(frozen=True, slots=True)
class RunInfo:
    """One stored run, as reports and comparisons need it."""

    id: int
    project: str
    benchmark: str
    environment_id: int
    created_at: datetime
    repeats: int
    commit: str | None = None
    commit_time: datetime | None = None
    branch: str | None = None
    base_branch: str | None = None
    merge_base: str | None = None
    pr_number: int | None = None
    ci_provider: str | None = None
    ci_run_id: str | None = None
    ci_run_attempt: int | None = None
    ci_url: str | None = None
    environment: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class HistoryPoint:
    """One run's values of one series (one per repeat, in repeat order)."""

    run_id: int
    commit: str | None
    commit_time: datetime | None
    created_at: datetime
    values: list[float]


def _run_time() -> ColumnElement[datetime]:
    return type_coerce(func.coalesce(Commit.committed_at, Run.created_at), UTCDateTime())


def _runs_of(project: str, benchmark: str | None = None) -> Select[Any]:
    query = (select(Run.id).join(Project, Project.id == Run.project_id)
             .outerjoin(Commit, Commit.id == Run.commit_id).where(Project.name == project))
    if benchmark is not None:
        query = query.join(Benchmark, Benchmark.id == Run.benchmark_id).where(
            Benchmark.name == benchmark)
    return query


def baseline_run_ids(session: Session, *, project: str, benchmark: str,
                     environment_id: int | None, branch: str, before: datetime | None = None,
                     limit: int = 30, exclude_run_ids: Collection[int] = ()) -> list[int]:
    """The most recent runs of ``benchmark`` on ``branch`` in one environment, newest first.

    Ordered by commit time (stored time when the commit's is unknown), then by when stored.
    ``before`` keeps runs strictly older than it; ``exclude_run_ids`` drops the candidate
    itself; ``environment_id=None`` accepts every environment.
    """
    when = _run_time()
    query = _runs_of(project, benchmark).where(Run.branch == branch)
    if environment_id is not None:
        query = query.where(Run.environment_id == environment_id)
    if before is not None:
        query = query.where(when < before)
    if exclude_run_ids:
        query = query.where(Run.id.not_in(list(exclude_run_ids)))
    query = query.order_by(when.desc(), Run.created_at.desc(), Run.id.desc()).limit(limit)
    return [int(run_id) for run_id in session.execute(query).scalars()]


def run_samples(session: Session,
                run_ids: Sequence[int]) -> dict[SeriesKey, dict[int, list[float]]]:
    """Per series: run id → that run's per-step values in repeat order.

    Runs appear in ascending id order; samples without a time (bytes only) are left out.
    """
    grouped: dict[int, dict[int, list[float]]] = {}
    ids = sorted(set(run_ids))
    collect = (_collect_aggregated if session.get_bind().dialect.name == "postgresql"
               else _collect_rows)
    for start in range(0, len(ids), _CHUNK):
        collect(session, ids[start:start + _CHUNK], grouped)
    keys = _series_keys(session, grouped)
    return {keys[series_id]: per_run for series_id, per_run in grouped.items()}


def _collect_aggregated(session: Session, run_ids: list[int],
                        grouped: dict[int, dict[int, list[float]]]) -> None:
    """PostgreSQL: one row per series with its values as arrays, ordered by run and repeat.

    A baseline is ~30,000 samples; fetched as rows they took longer than the whole 100 ms
    budget, as 1,000 pairs of arrays about a third of it.
    """
    sample = Sample.__table__.c  # Core columns: no ORM row processing
    order = (sample.run_id, sample.repeat)
    query = (select(sample.series_id, func.array_agg(aggregate_order_by(sample.run_id, *order)),
                    func.array_agg(aggregate_order_by(sample.value, *order)))
             .where(sample.run_id.in_(run_ids), sample.value.is_not(None))
             .group_by(sample.series_id))
    for series_id, runs, values in session.execute(query).all():
        per_run = grouped.setdefault(series_id, {})
        for run_id, value in zip(runs, values, strict=True):
            per_run.setdefault(run_id, []).append(value)


def _collect_rows(session: Session, run_ids: list[int],
                  grouped: dict[int, dict[int, list[float]]]) -> None:
    """SQLite (in-process, rows are cheap): one row per sample, ordered by run and repeat."""
    sample = Sample.__table__.c
    query = (select(sample.series_id, sample.run_id, sample.value)
             .where(sample.run_id.in_(run_ids), sample.value.is_not(None))
             .order_by(sample.run_id, sample.series_id, sample.repeat))  # primary key order
    for series_id, run_id, value in session.execute(query).all():
        grouped.setdefault(series_id, {}).setdefault(run_id, []).append(value)


def _series_keys(session: Session, series_ids: Collection[int]) -> dict[int, SeriesKey]:
    ids = sorted(series_ids)
    keys: dict[int, SeriesKey] = {}
    series = Series.__table__.c
    columns = (series.id, series.kind, series.name, series.device, series.scope, series.section)
    for start in range(0, len(ids), _CHUNK):
        query = select(*columns).where(series.id.in_(ids[start:start + _CHUNK]))
        for series_id, kind, name, device, scope, section in session.execute(query):
            keys[series_id] = SeriesKey(kind=MetricKind(kind), name=name, device=Device(device),
                                        scope=scope, section=section)
    return keys


def series_history(session: Session, *, project: str, benchmark: str, series: SeriesKey,
                   branch: str, since: datetime | None = None, until: datetime | None = None,
                   environment_id: int | None = None) -> list[HistoryPoint]:
    """The values of one series over the runs of ``branch``, oldest first.

    ``since`` is inclusive and ``until`` exclusive, both on the run's time (commit time,
    else stored time). Runs without a value for the series are left out.
    """
    when = _run_time()
    query = (_runs_of(project, benchmark)
             .add_columns(Commit.sha, Commit.committed_at, Run.created_at, Sample.value)
             .join(Sample, Sample.run_id == Run.id)
             .join(Series, Series.id == Sample.series_id)
             .where(Run.branch == branch, Series.benchmark_id == Run.benchmark_id,
                    Series.key_hash == series_key_hash(series), Sample.value.is_not(None)))
    if environment_id is not None:
        query = query.where(Run.environment_id == environment_id)
    if since is not None:
        query = query.where(when >= since)
    if until is not None:
        query = query.where(when < until)
    query = query.order_by(when, Run.created_at, Run.id, Sample.repeat)
    points: dict[int, HistoryPoint] = {}
    for run_id, sha, committed_at, created_at, value in session.execute(query):
        point = points.get(run_id)
        if point is None:
            point = points[run_id] = HistoryPoint(run_id=run_id, commit=sha,
                                                  commit_time=committed_at,
                                                  created_at=created_at, values=[])
        point.values.append(value)
    return list(points.values())


def runs_in_period(session: Session, *, project: str, since: datetime, until: datetime,
                   branch: str | None = None, benchmark: str | None = None) -> list[RunInfo]:
    """Runs stored in ``[since, until)``, oldest first (the weekly report's window)."""
    query = _run_info_query().where(Project.name == project, Run.created_at >= since,
                                     Run.created_at < until)
    if branch is not None:
        query = query.where(Run.branch == branch)
    if benchmark is not None:
        query = query.where(Benchmark.name == benchmark)
    query = query.order_by(Run.created_at, Run.id)
    return [_run_info(row) for row in session.execute(query)]


def get_run(session: Session, run_id: int) -> RunInfo:
    """The run with this id; ``NotFoundError`` when there is none."""
    row = session.execute(_run_info_query().where(Run.id == run_id)).first()
    if row is None:
        raise NotFoundError(f"no run with id {run_id}")
    return _run_info(row)


def environment_id(session: Session, fingerprint: str) -> int | None:
    """The id of the environment with this fingerprint hash, if any run has used it."""
    query = select(Environment.id).where(Environment.fingerprint == fingerprint)
    found = session.execute(query).scalar()
    return None if found is None else int(found)


def _run_info_query() -> Select[Any]:
    return (select(Run, Project.name, Benchmark.name, Commit.sha, Commit.committed_at,
                   Environment.values)
            .join(Project, Project.id == Run.project_id)
            .join(Benchmark, Benchmark.id == Run.benchmark_id)
            .join(Environment, Environment.id == Run.environment_id)
            .outerjoin(Commit, Commit.id == Run.commit_id))


def _run_info(row: Any) -> RunInfo:
    run, project, benchmark, sha, committed_at, environment = row
    return RunInfo(
        id=run.id, project=project, benchmark=benchmark, environment_id=run.environment_id,
        created_at=run.created_at, repeats=run.repeats, commit=sha, commit_time=committed_at,
        branch=run.branch, base_branch=run.base_branch, merge_base=run.merge_base,
        pr_number=run.pr_number, ci_provider=run.ci_provider, ci_run_id=run.ci_run_id,
        ci_run_attempt=run.ci_run_attempt, ci_url=run.ci_url,
        environment=_str_dict(environment))


def _str_dict(values: Mapping[str, Any] | None) -> dict[str, str]:
    return {str(k): str(v) for k, v in (values or {}).items()}


def commit_time(session: Session, *, project: str, sha: str) -> datetime | None:
    """When commit ``sha`` of ``project`` was made, if the store knows it (a merge base)."""
    query = (select(Commit.committed_at).join(Project, Project.id == Commit.project_id)
             .where(Project.name == project, Commit.sha == sha))
    return session.execute(query).scalar()
