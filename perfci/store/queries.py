"""Read queries over the store; they return plain dataclasses, never ORM objects.

Which runs a baseline is drawn from, a series' history for charts, the runs of a period, and
what is known of a run (commit, environment, GPU state). The values themselves are read by
:mod:`perfci.store.samples`.

A run's *time* is its commit's time when known, else when it was stored: history is ordered by
what was measured (the commit), and re-runs of one commit by when they ran.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, fields
from datetime import datetime
from typing import TYPE_CHECKING, Any, TypedDict

import numpy as np
from sqlalchemy import ColumnElement, ScalarSelect, Select, select, type_coerce
from sqlalchemy.orm import Session

from perfci.core.errors import NotFoundError
from perfci.core.model import MetricKind, SeriesKey
from perfci.core.model import RunInfo as RunInfo  # re-exported: older callers import it here
from perfci.store.samples import series_values
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

if TYPE_CHECKING:
    from typing_extensions import Unpack  # typing's own from Python 3.11


@dataclass(frozen=True, slots=True)
class HistoryPoint:
    """One run's values of one series (one per repeat, in repeat order)."""

    run_id: int
    commit: str | None
    commit_time: datetime | None
    created_at: datetime
    values: list[float]


def _run_time() -> ColumnElement[datetime]:
    # Stored at ingest (issue 35): coalesce(commit.committed_at, run.created_at), indexed;
    # never NULL (nullable only for SQLite's sake, migration 0008).
    return type_coerce(Run.ordered_at, UTCDateTime())


def _project_id(project: str) -> ScalarSelect[int]:
    """The project's id as a scalar subquery: the planner then reads ``run`` by an index
    range on the id, in the index's order (a join would read it in the join's order and sort)."""
    return select(Project.id).where(Project.name == project).scalar_subquery()


def _benchmark_id(project: str, benchmark: str) -> ScalarSelect[int]:
    return (
        select(Benchmark.id)
        .join(Project, Project.id == Benchmark.project_id)
        .where(Project.name == project, Benchmark.name == benchmark)
        .scalar_subquery()
    )


def _runs_of(project: str, benchmark: str | None = None) -> Select[Any]:
    query = select(Run.id).outerjoin(Commit, Commit.id == Run.commit_id)
    if benchmark is None:
        return query.where(Run.project_id == _project_id(project))
    return query.where(Run.benchmark_id == _benchmark_id(project, benchmark))


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
    query = select(Run.id).where(
        Run.benchmark_id == _benchmark_id(project, benchmark), Run.branch == branch
    )
    if environment_id is not None:
        query = query.where(Run.environment_id == environment_id)
    if before is not None:
        query = query.where(when <= before)
    if exclude_run_ids:
        query = query.where(Run.id.not_in(list(exclude_run_ids)))
    query = query.order_by(when.desc(), Run.created_at.desc(), Run.id.desc()).limit(limit)
    return [int(run_id) for run_id in session.execute(query).scalars()]


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


class _SeriesOnBranch(TypedDict):
    series: SeriesKey
    branch: str


class HistoryQuery(_SeriesOnBranch, total=False):
    """Which values of a benchmark :func:`series_history` reads: one series on one branch,
    from ``since`` (inclusive) until ``until`` (exclusive)."""

    since: datetime | None
    until: datetime | None


def series_history(
    session: Session,
    *,
    project: str,
    benchmark: str,
    environment_id: int | None = None,
    **query: Unpack[HistoryQuery],
) -> list[HistoryPoint]:
    """The values of one series over the runs of ``branch``, oldest first.

    ``since`` is inclusive and ``until`` exclusive, both on the run's time (commit time,
    else stored time). Runs without a value for the series are left out; a pruned run has
    one value, the median of its repeats.
    """
    when = _run_time()
    found = (
        _runs_of(project, benchmark)
        .add_columns(Commit.sha, Commit.committed_at, Run.created_at)
        .where(Run.branch == query["branch"])
    )
    if environment_id is not None:
        found = found.where(Run.environment_id == environment_id)
    if (since := query.get("since")) is not None:
        found = found.where(when >= since)
    if (until := query.get("until")) is not None:
        found = found.where(when < until)
    runs = session.execute(found.order_by(when, Run.created_at, Run.id)).all()
    series_id = _series_id(session, project, benchmark, query["series"]) if runs else None
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


def series_ids_of_kinds(
    session: Session, *, project: str, benchmark: str, kinds: Collection[MetricKind]
) -> list[int]:
    """The ids of ``benchmark``'s series of those kinds (its step times, say), ascending."""
    query = (
        select(Series.id)
        .where(
            Series.benchmark_id == _benchmark_id(project, benchmark),
            Series.kind.in_(sorted(kind.value for kind in kinds)),
        )
        .order_by(Series.id)
    )
    return [int(i) for i in session.execute(query).scalars()]


@dataclass(frozen=True, slots=True)
class RunValues:
    """One run's values of a series, with what a chart shows of the run."""

    run_id: int
    commit: str | None
    branch: str | None
    time: datetime  # the run's time: its commit's, else when it was stored
    created_at: datetime
    values: list[float]


class _LatestRuns(TypedDict):
    branch: str | None
    limit: int


class LatestQuery(_LatestRuns, total=False):
    """Which runs :func:`latest_values` reads, for callers that pass it on."""

    not_branch: str | None


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


class RunFilter(TypedDict, total=False):
    """The optional filters of :func:`runs_in_period`, for callers that pass them on."""

    branch: str | None
    benchmark: str | None


def runs_in_period(
    session: Session,
    *,
    project: str,
    since: datetime,
    until: datetime,
    by_run_time: bool = False,
    **only: Unpack[RunFilter],
) -> list[RunInfo]:
    """Runs stored in ``[since, until)``, oldest first (the weekly report's window).

    ``by_run_time``: the runs whose run time (the commit's time, else when stored) is in
    ``[since, until)``, ordered by it: a branch's history by when its code was written, where
    a run imported or stored late still belongs to its commit's week.
    """
    when = _run_time() if by_run_time else type_coerce(Run.created_at, UTCDateTime())
    query = _run_info_query().where(
        Run.project_id == _project_id(project), when >= since, when < until
    )
    if (branch := only.get("branch")) is not None:
        query = query.where(Run.branch == branch)
    if (benchmark := only.get("benchmark")) is not None:
        query = query.where(Run.benchmark_id == _benchmark_id(project, benchmark))
    return _run_infos(session, query.order_by(when, Run.created_at, Run.id))


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
    found = _run_infos(session, _run_info_query().where(Run.id == run_id))
    if not found:
        raise NotFoundError(f"no run with id {run_id}")
    return found[0]


def environment_id(session: Session, fingerprint: str) -> int | None:
    """The id of the environment with this fingerprint hash, if any run has used it."""
    query = select(Environment.id).where(Environment.fingerprint == fingerprint)
    found = session.execute(query).scalar()
    return None if found is None else int(found)


#: What each field of RunInfo but its environment is read from, in the field order: a row of
#: :func:`_run_info_query` is then RunInfo's positional arguments as it is.
_RUN_INFO_SOURCES: dict[str, Any] = {
    "project": Project.name,
    "benchmark": Benchmark.name,
    "commit": Commit.sha,
    "commit_time": Commit.committed_at,
}
_RUN_INFO_FIELDS = [f.name for f in fields(RunInfo) if f.name != "environment"]
_ENVIRONMENT_ID = _RUN_INFO_FIELDS.index("environment_id")


def _run_info_query() -> Select[Any]:
    # Columns, not the ORM entity: a week of a team's runs is thousands of rows, and building
    # and registering an ORM object for each cost several times the query (issue 35).
    return (
        select(*(_run_info_column(name) for name in _RUN_INFO_FIELDS))
        .join(Project, Project.id == Run.project_id)
        .join(Benchmark, Benchmark.id == Run.benchmark_id)
        .outerjoin(Commit, Commit.id == Run.commit_id)
    )


def _run_info_column(name: str) -> Any:
    return _RUN_INFO_SOURCES[name] if name in _RUN_INFO_SOURCES else getattr(Run, name)


def _run_infos(session: Session, query: Select[Any]) -> list[RunInfo]:
    """The runs ``query`` (a :func:`_run_info_query`) selects, with their environments' values
    read once per environment: runs share a handful of them, and each row's copy of the same
    JSON decoded again was most of a week's read. Each row is passed to RunInfo as it is: a
    year of a team's runs is 18,000 rows, and a dict of each row's columns cost as much as
    reading them (issue 35)."""
    rows = session.execute(query).all()
    ids = {row[_ENVIRONMENT_ID] for row in rows}
    environments = (
        {
            env_id: _str_dict(values)
            for env_id, values in session.execute(
                select(Environment.id, Environment.values).where(Environment.id.in_(ids))
            )
        }
        if ids
        else {}
    )
    none: dict[str, str] = {}
    # Each run its own copy of its environment's values: callers may change theirs.
    return [
        RunInfo(*row, dict(environments.get(row[_ENVIRONMENT_ID], none)))  # type: ignore[call-arg]
        for row in rows
    ]


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
