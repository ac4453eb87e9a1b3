"""Read queries over the store; they return plain dataclasses, never ORM objects.

A run's *time* is its commit's time when known, else when it was stored: history is ordered by
what was measured (the commit), and re-runs of one commit by when they ran.

Samples are read through :func:`_value_rows` (issue 17): a run's per-repeat values from
``sample`` while it has them, else the one summary value (``sample_summary.median``) that
``perfci db prune`` kept of them. On PostgreSQL the reads of ``sample`` name the month of each
run (``run_day`` ranges, one arm per month), so that they touch only those months' partitions
whatever the size of the table.
"""

from __future__ import annotations

import heapq
import json
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from operator import itemgetter
from typing import Any

import numpy as np
from sqlalchemy import ColumnElement, Select, func, select, type_coerce
from sqlalchemy.orm import Session

from perfci.errors import NotFoundError
from perfci.model import Better, Device, MetricKind, SeriesKey
from perfci.model import RunInfo as RunInfo  # re-exported: older callers import it here
from perfci.store import _bulk
from perfci.store.partitions import Month, day_number
from perfci.store.schema import (
    Benchmark,
    Commit,
    Environment,
    ProfileRow,
    Project,
    Run,
    Series,
    UTCDateTime,
    series_key_hash,
)


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
    query = (
        select(Run.id)
        .join(Project, Project.id == Run.project_id)
        .outerjoin(Commit, Commit.id == Run.commit_id)
        .where(Project.name == project)
    )
    if benchmark is not None:
        query = query.join(Benchmark, Benchmark.id == Run.benchmark_id).where(
            Benchmark.name == benchmark
        )
    return query


def baseline_run_ids(
    session: Session,
    *,
    project: str,
    benchmark: str,
    environment_id: int | None,
    branch: str,
    before: datetime | None = None,
    limit: int = 30,
    exclude_run_ids: Collection[int] = (),
) -> list[int]:
    """The most recent runs of ``benchmark`` on ``branch`` in one environment, newest first.

    Ordered by commit time (stored time when the commit's is unknown), then by when stored.
    ``before`` keeps runs no newer than it (the merge base's commit time): the merge base's
    own runs, and every run of one commit (nightly jobs, retries), belong to the baseline
    (issue 12); ``exclude_run_ids`` drops the candidate itself; ``environment_id=None``
    accepts every environment.
    """
    when = _run_time()
    query = _runs_of(project, benchmark).where(Run.branch == branch)
    if environment_id is not None:
        query = query.where(Run.environment_id == environment_id)
    if before is not None:
        query = query.where(when <= before)
    if exclude_run_ids:
        query = query.where(Run.id.not_in(list(exclude_run_ids)))
    query = query.order_by(when.desc(), Run.created_at.desc(), Run.id.desc()).limit(limit)
    return [int(run_id) for run_id in session.execute(query).scalars()]


@dataclass(frozen=True, slots=True)
class CheckedSamples:
    """:func:`run_samples_checked`'s answer: the samples, and the runs left out of them."""

    samples: dict[SeriesKey, dict[int, list[float]]]
    #: Runs holding a value that is not a finite, non-negative number (stored by a perfci
    #: older than issue 13's checks), ascending; none of their values is in ``samples``.
    skipped: list[int] = field(default_factory=list)
    #: Runs read from their summaries (pruned, issue 17), ascending: one value per series,
    #: the median of the repeats they had.
    summarised: list[int] = field(default_factory=list)


def run_samples(
    session: Session, run_ids: Sequence[int]
) -> dict[SeriesKey, dict[int, list[float]]]:
    """Per series: run id → that run's per-step values in repeat order.

    Runs appear in ascending id order; samples without a time (bytes only) are left out, and
    so are runs holding a bad value (see :func:`run_samples_checked`, which says which). A
    pruned run has one value per series: the median of its repeats.
    """
    return run_samples_checked(session, run_ids).samples


def run_samples_checked(session: Session, run_ids: Sequence[int]) -> CheckedSamples:
    """:func:`run_samples`, and which runs were left out for a bad stored value.

    A run stored before values were checked at ingest may hold a negative, infinite or NaN
    value; one such run must not break every later comparison or chart of its benchmark
    (issue 13), so the whole run is left out (its other values are suspect too) and named.
    This is the baseline query (30 runs × 1,000 series): plain driver tuples, one parameter
    for all ids (an ``IN`` list would be a new statement for every baseline), one vectorised
    check of the values, and the rows grouped in one pass in the order the database sorted
    them.
    """
    ids = sorted(set(run_ids))
    if not ids:
        return CheckedSamples({})
    postgres = session.get_bind().dialect.name == "postgresql"
    with _bulk.driver_cursor(session) as cursor, _bulk.no_cycle_collection():
        found = _value_rows(cursor, ids, postgres=postgres)
        rows, skipped = _drop_bad_runs(found.rows)
        grouped = _group_samples(rows)
        if not grouped:
            return CheckedSamples({}, skipped, found.summarised)
        series_ids = list(grouped)
        if postgres:
            cursor.execute(_PG_SERIES, (series_ids,), binary=True)
        else:
            cursor.execute(_SQLITE_SERIES, (json.dumps(series_ids),))
        keys = {
            series_id: SeriesKey(
                kind=_KINDS[kind],
                name=name,
                device=_DEVICES[device],
                scope=scope,
                section=section,
                unit=unit,
                better=_BETTER[better],
            )
            for series_id, kind, name, device, scope, section, unit, better in cursor.fetchall()
        }
    samples = {keys[series_id]: per_run for series_id, per_run in grouped.items()}
    return CheckedSamples(samples, skipped, found.summarised)


@dataclass(frozen=True, slots=True)
class _Values:
    """(run, series, value) rows in (run, series, repeat) order, and the runs summarised."""

    rows: list[tuple[int, int, float]]
    summarised: list[int]


def _value_rows(
    cursor: Any,
    run_ids: list[int],
    *,
    postgres: bool,
    series_id: int | None = None,
    created: Mapping[int, datetime] | None = None,
) -> _Values:
    """The values of ``run_ids`` (ascending), raw samples and summaries of pruned runs.

    ``series_id`` keeps one series; ``created`` (run id → ``created_at``), when the caller
    has it, spares PostgreSQL's lookup of the runs' months. A run has samples or summaries,
    never both (the prune swaps them in one transaction), so the two reads merge without
    duplicates, and a run being pruned meanwhile is found in one or the other.
    """
    one = "" if series_id is None else f" AND series_id = {int(series_id)}"
    if postgres:
        arms = _month_arms(cursor, run_ids, created)
        raw: list[tuple[int, int, float]] = []
        if arms:
            sql, params = _pg_samples(arms, one)
            cursor.execute(sql, params, binary=True)
            raw = cursor.fetchall()
        cursor.execute(_PG_SUMMARIES.format(one), (run_ids,), binary=True)
    else:
        cursor.execute(_SQLITE_SAMPLES.format(one), (json.dumps(run_ids),))
        raw = cursor.fetchall()
        cursor.execute(_SQLITE_SUMMARIES.format(one), (json.dumps(run_ids),))
    summaries = cursor.fetchall()
    if not summaries:  # the common case: every run still has its samples
        return _Values(raw, [])
    merged = list(heapq.merge(raw, summaries, key=itemgetter(0, 1)))
    return _Values(merged, sorted({row[0] for row in summaries}))


def _month_arms(
    cursor: Any, run_ids: list[int], created: Mapping[int, datetime] | None
) -> list[tuple[Month, list[int]]]:
    """The runs grouped by the month of their samples' partition, oldest first."""
    if created is None:
        cursor.execute(_PG_RUN_TIMES, (run_ids,), binary=True)
        created = dict(cursor.fetchall())
    by_month: dict[Month, list[int]] = {}
    for run_id in run_ids:
        moment = created.get(run_id)
        if moment is not None:
            by_month.setdefault(Month.of_day(day_number(moment)), []).append(run_id)
    return sorted(by_month.items())


def _pg_samples(arms: list[tuple[Month, list[int]]], one: str) -> tuple[str, list[list[int]]]:
    """The samples of each month's runs, each arm on its month's partition alone.

    The month bounds are literals (numbers computed here), so the planner prunes at plan
    time; each arm probes only its own runs' ids, where one ``run_id = ANY(all ids)`` would
    probe every month's index with every id.
    """
    selects = [
        _PG_SAMPLES_ARM.format(lo=month.first_day, hi=month.end_day, one=one) for month, _ in arms
    ]
    params = [ids for _, ids in arms]
    if len(selects) == 1:
        return selects[0].replace(", repeat", "", 1) + _ORDER, params
    union = " UNION ALL ".join(selects)
    return f"SELECT run_id, series_id, value FROM ({union}) AS s{_ORDER}", params


def _drop_bad_runs(
    rows: list[tuple[int, int, float]],
) -> tuple[list[tuple[int, int, float]], list[int]]:
    """``rows`` without the runs holding a value that is not finite and non-negative."""
    values = np.fromiter(map(itemgetter(2), rows), dtype=np.float64, count=len(rows))
    bad = ~(values >= 0) | np.isinf(values)  # NaN fails ">= 0"
    if not bad.any():
        return rows, []
    skipped = sorted({int(rows[i][0]) for i in np.flatnonzero(bad)})
    drop = set(skipped)
    return [row for row in rows if row[0] not in drop], skipped


def drop_bad_points(points: Sequence[HistoryPoint]) -> tuple[list[HistoryPoint], list[int]]:
    """``points`` (a chart's history) without the runs holding a bad value, and their ids.

    For charts: a run stored with a negative or infinite value by an older perfci is left
    out with a note, never an error (issue 13).
    """
    kept: list[HistoryPoint] = []
    skipped: list[int] = []
    for point in points:
        values = np.asarray(point.values, dtype=np.float64)
        if values.size and not (np.isfinite(values).all() and values.min() >= 0):
            skipped.append(point.run_id)
        else:
            kept.append(point)
    return kept, skipped


# Primary key order: SQLite reads it straight off the key (ordering by series first costs a
# sort there), PostgreSQL sorts nearly sorted rows.
_ORDER = " ORDER BY run_id, series_id, repeat"
_PG_SAMPLES_ARM = (
    "SELECT run_id, series_id, repeat, value FROM sample "
    "WHERE run_day >= {lo} AND run_day < {hi} AND run_id = ANY(%s::int4[]){one} "
    "AND value IS NOT NULL"
)
_PG_RUN_TIMES = "SELECT id, created_at FROM run WHERE id = ANY(%s::int4[])"
_SQLITE_SAMPLES = (
    "SELECT run_id, series_id, value FROM sample "
    "WHERE run_id IN (SELECT value FROM json_each(?)){} AND value IS NOT NULL" + _ORDER
)
_SUMMARIES = (
    "SELECT run_id, series_id, median FROM sample_summary WHERE run_id {}{{}} "
    "ORDER BY run_id, series_id"
)
_PG_SUMMARIES = _SUMMARIES.format("= ANY(%s::int4[])")
_SQLITE_SUMMARIES = _SUMMARIES.format("IN (SELECT value FROM json_each(?))")
_SERIES = "SELECT id, kind, name, device, scope, section, unit, better FROM series WHERE id {}"
_PG_SERIES = _SERIES.format("= ANY(%s::int4[])")
_SQLITE_SERIES = _SERIES.format("IN (SELECT value FROM json_each(?))")
_KINDS = {kind.value: kind for kind in MetricKind}  # MetricKind(value) is a slow call
_DEVICES = {device.value: device for device in Device}
_BETTER = {better.value: better for better in Better}


def _group_samples(rows: Iterable[tuple[int, int, float]]) -> dict[int, dict[int, list[float]]]:
    """(run, series, value) rows in primary key order → series → run → values by repeat."""
    grouped: dict[int, dict[int, list[float]]] = {}
    values: list[float] = []
    last_run = last_series = None
    for run_id, series_id, value in rows:
        if series_id == last_series and run_id == last_run:
            values.append(value)  # the next repeat
            continue
        per_run = grouped.get(series_id)
        if per_run is None:
            per_run = grouped[series_id] = {}
        values = per_run[run_id] = [value]
        last_run, last_series = run_id, series_id
    return grouped


def series_history(
    session: Session,
    *,
    project: str,
    benchmark: str,
    series: SeriesKey,
    branch: str,
    since: datetime | None = None,
    until: datetime | None = None,
    environment_id: int | None = None,
) -> list[HistoryPoint]:
    """The values of one series over the runs of ``branch``, oldest first.

    ``since`` is inclusive and ``until`` exclusive, both on the run's time (commit time,
    else stored time). Runs without a value for the series are left out; a pruned run has
    one value, the median of its repeats.
    """
    when = _run_time()
    query = (
        _runs_of(project, benchmark)
        .add_columns(Commit.sha, Commit.committed_at, Run.created_at)
        .where(Run.branch == branch)
    )
    if environment_id is not None:
        query = query.where(Run.environment_id == environment_id)
    if since is not None:
        query = query.where(when >= since)
    if until is not None:
        query = query.where(when < until)
    runs = session.execute(query.order_by(when, Run.created_at, Run.id)).all()
    series_id = _series_id(session, project, benchmark, series) if runs else None
    if series_id is None:
        return []
    values = series_values(session, series_id, {row[0]: row[3] for row in runs})
    return [
        HistoryPoint(
            run_id=run_id,
            commit=sha,
            commit_time=committed_at,
            created_at=created_at,
            values=values[run_id],
        )
        for run_id, sha, committed_at, created_at in runs
        if run_id in values
    ]


def _series_id(session: Session, project: str, benchmark: str, series: SeriesKey) -> int | None:
    query = (
        select(Series.id)
        .join(Benchmark, Benchmark.id == Series.benchmark_id)
        .join(Project, Project.id == Benchmark.project_id)
        .where(
            Project.name == project,
            Benchmark.name == benchmark,
            Series.key_hash == series_key_hash(series),
        )
    )
    found = session.execute(query).scalar()
    return None if found is None else int(found)


def series_values(
    session: Session, series_id: int, created: Mapping[int, datetime]
) -> dict[int, list[float]]:
    """Run id → the values of series ``series_id`` in that run (repeat order; a pruned run's
    median alone), for the runs of ``created`` (run id → its ``created_at``) that have one."""
    if not created:
        return {}
    postgres = session.get_bind().dialect.name == "postgresql"
    with _bulk.driver_cursor(session) as cursor:
        found = _value_rows(
            cursor, sorted(created), postgres=postgres, series_id=series_id, created=created
        )
    values: dict[int, list[float]] = {}
    for run_id, _, value in found.rows:
        values.setdefault(run_id, []).append(value)
    return values


@dataclass(frozen=True, slots=True)
class RunValues:
    """One run's values of a series, with what a chart shows of the run."""

    run_id: int
    commit: str | None
    branch: str | None
    time: datetime  # the run's time: its commit's, else when it was stored
    created_at: datetime
    values: list[float]


def latest_values(
    session: Session,
    series_id: int,
    *,
    branch: str | None,
    limit: int,
    not_branch: str | None = None,
) -> list[RunValues]:
    """The last ``limit`` runs with a value of series ``series_id``, newest first.

    On ``branch`` and not on ``not_branch`` when given (a run without a branch is not on
    any). Runs are read newest first, a page at a time, from the runs of the series'
    benchmark (an index range), and their values by run: the query never scans ``sample``
    for the series.
    """
    benchmark_id = session.execute(
        select(Series.benchmark_id).where(Series.id == series_id)
    ).scalar()
    if benchmark_id is None or limit <= 0:
        return []
    when = _run_time()
    query = (
        select(Run.id, Commit.sha, Run.branch, when, type_coerce(Run.created_at, UTCDateTime()))
        .outerjoin(Commit, Commit.id == Run.commit_id)
        .where(Run.benchmark_id == benchmark_id)
    )
    if branch is not None:
        query = query.where(Run.branch == branch)
    if not_branch is not None:  # runs without a branch are "elsewhere" too
        query = query.where((Run.branch != not_branch) | Run.branch.is_(None))
    query = query.order_by(when.desc(), Run.id.desc())
    found: list[RunValues] = []
    offset, page = 0, max(limit, 16)
    while len(found) < limit:
        runs = session.execute(query.offset(offset).limit(page)).all()
        values = series_values(session, series_id, {row[0]: row[4] for row in runs})
        for run_id, sha, run_branch, moment, created_at in runs:
            if run_id in values and len(found) < limit:
                found.append(RunValues(run_id, sha, run_branch, moment, created_at, values[run_id]))
        if len(runs) < page:
            break
        offset, page = offset + page, page * 2
    return found


def runs_in_period(
    session: Session,
    *,
    project: str,
    since: datetime,
    until: datetime,
    branch: str | None = None,
    benchmark: str | None = None,
) -> list[RunInfo]:
    """Runs stored in ``[since, until)``, oldest first (the weekly report's window)."""
    query = _run_info_query().where(
        Project.name == project, Run.created_at >= since, Run.created_at < until
    )
    if branch is not None:
        query = query.where(Run.branch == branch)
    if benchmark is not None:
        query = query.where(Benchmark.name == benchmark)
    query = query.order_by(Run.created_at, Run.id)
    return [_run_info(row) for row in session.execute(query)]


def runs_by_time(
    session: Session,
    *,
    project: str,
    since: datetime,
    until: datetime,
    branch: str | None = None,
    benchmark: str | None = None,
) -> list[RunInfo]:
    """Runs whose run time (the commit's time, else when stored) is in ``[since, until)``.

    Oldest first. A branch's history by when its code was written: a run imported or stored
    late still belongs to its commit's week.
    """
    when = _run_time()
    query = _run_info_query().where(Project.name == project, when >= since, when < until)
    if branch is not None:
        query = query.where(Run.branch == branch)
    if benchmark is not None:
        query = query.where(Benchmark.name == benchmark)
    query = query.order_by(when, Run.created_at, Run.id)
    return [_run_info(row) for row in session.execute(query)]


def commit_shas(session: Session, run_ids: Collection[int]) -> dict[int, str | None]:
    """The commit sha of each run (``None`` for a run without one), in one query."""
    query = (
        select(Run.id, Commit.sha)
        .outerjoin(Commit, Commit.id == Run.commit_id)
        .where(Run.id.in_(list(run_ids)))
    )
    return {int(run_id): sha for run_id, sha in session.execute(query)}


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
    return (
        select(
            Run, Project.name, Benchmark.name, Commit.sha, Commit.committed_at, Environment.values
        )
        .join(Project, Project.id == Run.project_id)
        .join(Benchmark, Benchmark.id == Run.benchmark_id)
        .join(Environment, Environment.id == Run.environment_id)
        .outerjoin(Commit, Commit.id == Run.commit_id)
    )


def _run_info(row: Any) -> RunInfo:
    run, project, benchmark, sha, committed_at, environment = row
    return RunInfo(
        id=run.id,
        project=project,
        benchmark=benchmark,
        environment_id=run.environment_id,
        created_at=run.created_at,
        repeats=run.repeats,
        commit=sha,
        commit_time=committed_at,
        branch=run.branch,
        base_branch=run.base_branch,
        merge_base=run.merge_base,
        pr_number=run.pr_number,
        ci_provider=run.ci_provider,
        ci_run_id=run.ci_run_id,
        ci_run_attempt=run.ci_run_attempt,
        ci_url=run.ci_url,
        environment=_str_dict(environment),
    )


def _str_dict(values: Mapping[str, Any] | None) -> dict[str, str]:
    return {str(k): str(v) for k, v in (values or {}).items()}


def commit_time(session: Session, *, project: str, sha: str) -> datetime | None:
    """When commit ``sha`` of ``project`` was made, if the store knows it (a merge base)."""
    query = (
        select(Commit.committed_at)
        .join(Project, Project.id == Commit.project_id)
        .where(Project.name == project, Commit.sha == sha)
    )
    return session.execute(query).scalar()


def repeat_gpu_states(
    session: Session, run_ids: Collection[int]
) -> dict[int, dict[int, dict[str, Any]]]:
    """Per run: repeat → the GPU state sampled during it (profile metadata ``gpu_state``).

    Runs and repeats without one (no GPU, or stored by an older perfci) are absent. When a
    repeat has several profiles they carry the same state; the first is taken.
    """
    if not run_ids:
        return {}
    query = (
        select(ProfileRow.run_id, ProfileRow.repeat, ProfileRow.meta)
        .where(ProfileRow.run_id.in_(sorted(set(run_ids))))
        .order_by(ProfileRow.run_id, ProfileRow.repeat, ProfileRow.id)
    )
    found: dict[int, dict[int, dict[str, Any]]] = {}
    for run_id, repeat, meta in session.execute(query):
        state = meta.get("gpu_state") if isinstance(meta, Mapping) else None
        if isinstance(state, Mapping):
            found.setdefault(int(run_id), {}).setdefault(int(repeat), dict(state))
    return found
