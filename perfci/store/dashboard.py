"""The dashboard's and the read API's queries: projects, benchmarks, their step series, runs.

Rows come back as plain tuples and values; :mod:`perfci.usecases.browse.pages` makes them
the dataclasses the server's schemas and templates use.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from datetime import datetime

from sqlalchemy import func, select, type_coerce
from sqlalchemy.orm import Session

from perfci.core.model import Device, MetricKind, SeriesKey
from perfci.store.schema import Benchmark, Project, Run, Series, UTCDateTime
from perfci.store.schema_service import Comparison

__all__ = [
    "benchmark_id",
    "benchmark_run_counts",
    "latest_verdicts",
    "newest_run_ids",
    "project",
    "project_of_run",
    "projects",
    "run_created_at",
    "runs_created_at",
    "step_series",
]

#: ``IN`` lists are cut to this many ids (SQLite's and drivers' parameter limits).
_CHUNK = 1000


def _chunks(ids: Sequence[int]) -> Iterator[list[int]]:
    for start in range(0, len(ids), _CHUNK):
        yield list(ids[start : start + _CHUNK])


def projects(session: Session) -> list[tuple[str, bool, int, int, datetime | None]]:
    """Every project by name: (name, public, benchmarks, runs, time of its last run)."""
    runs = (
        select(
            Run.project_id, func.count(Run.id).label("runs"), func.max(Run.created_at).label("last")
        )
        .group_by(Run.project_id)
        .subquery()
    )
    benchmarks = (
        select(Benchmark.project_id, func.count(Benchmark.id).label("n"))
        .group_by(Benchmark.project_id)
        .subquery()
    )
    query = (
        select(
            Project.name,
            Project.public,
            benchmarks.c.n,
            runs.c.runs,
            type_coerce(runs.c.last, UTCDateTime()),
        )
        .outerjoin(runs, runs.c.project_id == Project.id)
        .outerjoin(benchmarks, benchmarks.c.project_id == Project.id)
        .order_by(Project.name)
    )
    return [
        (name, bool(public), int(n or 0), int(count or 0), last)
        for name, public, n, count, last in session.execute(query)
    ]


def project(session: Session, name: str) -> tuple[str, bool] | None:
    """(name, public) of project ``name``, if there is one."""
    found = session.execute(
        select(Project.name, Project.public).where(Project.name == name)
    ).first()
    return None if found is None else (str(found[0]), bool(found[1]))


def project_of_run(session: Session, run_id: int) -> str | None:
    """The name of the project run ``run_id`` belongs to, if there is such a run."""
    found = session.execute(
        select(Project.name).join(Run, Run.project_id == Project.id).where(Run.id == run_id)
    ).scalar()
    return None if found is None else str(found)


def benchmark_run_counts(session: Session, project: str) -> list[tuple[int, str, int, int | None]]:
    """The benchmarks of ``project`` by name: (id, name, runs, newest run id)."""
    query = (
        select(Benchmark.id, Benchmark.name, func.count(Run.id), func.max(Run.id))
        .join(Project, Project.id == Benchmark.project_id)
        .outerjoin(Run, Run.benchmark_id == Benchmark.id)
        .where(Project.name == project)
        .group_by(Benchmark.id, Benchmark.name)
        .order_by(Benchmark.name)
    )
    return [
        (int(bid), str(name), int(runs), None if latest is None else int(latest))
        for bid, name, runs, latest in session.execute(query).all()
    ]


def benchmark_id(session: Session, project: str, benchmark: str) -> int | None:
    """The id of ``benchmark`` in ``project``, if there is one."""
    found = session.execute(
        select(Benchmark.id)
        .join(Project, Project.id == Benchmark.project_id)
        .where(Project.name == project, Benchmark.name == benchmark)
    ).scalar()
    return None if found is None else int(found)


def run_created_at(session: Session, run_id: int) -> datetime | None:
    """When run ``run_id`` was stored, if there is such a run."""
    row = session.get(Run, run_id)
    return None if row is None else row.created_at


def runs_created_at(session: Session, run_ids: Sequence[int]) -> dict[int, datetime]:
    """Run id → when it was stored, for those of ``run_ids`` that exist."""
    found: dict[int, datetime] = {}
    for chunk in _chunks(run_ids):
        query = select(Run.id, Run.created_at).where(Run.id.in_(chunk))
        found.update({int(run_id): stored for run_id, stored in session.execute(query)})
    return found


def newest_run_ids(session: Session, benchmark_id: int, limit: int) -> list[int]:
    """The ids of the newest ``limit`` runs of benchmark ``benchmark_id``, newest first."""
    query = (
        select(Run.id).where(Run.benchmark_id == benchmark_id).order_by(Run.id.desc()).limit(limit)
    )
    return [int(run_id) for run_id in session.execute(query).scalars()]


def latest_verdicts(session: Session, run_ids: Sequence[int]) -> dict[int, str]:
    """The verdict of each run's latest comparison (runs never compared are left out)."""
    found: dict[int, str] = {}
    for chunk in _chunks(run_ids):
        query = (
            select(Comparison.run_id, Comparison.verdict)
            .where(Comparison.run_id.in_(chunk))
            .order_by(Comparison.id)
        )
        found.update({int(r): v for r, v in session.execute(query)})
    return found


def step_series(session: Session, benchmark_id: int) -> list[tuple[int, SeriesKey]]:
    """The ``step`` series of benchmark ``benchmark_id``: top level first, then by age."""
    query = (
        select(Series.id, Series.name, Series.device, Series.scope, Series.section)
        .where(Series.benchmark_id == benchmark_id, Series.kind == MetricKind.STEP.value)
        .order_by(Series.scope != "", Series.section != "", Series.id)
    )
    return [
        (
            int(series_id),
            SeriesKey(
                kind=MetricKind.STEP,
                name=name,
                device=Device(device),
                scope=scope,
                section=section,
            ),
        )
        for series_id, name, device, scope, section in session.execute(query)
    ]
