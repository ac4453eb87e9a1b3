"""Stored change-point alerts: upsert one, query them, set their triage status.

The SQL behind :mod:`perfci.usecases.browse.alerts` (which says what an alert is and when it
is one and the same).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, cast

from sqlalchemy import Table, select
from sqlalchemy.orm import Session

from perfci.core.errors import NotFoundError
from perfci.core.weekly import AlertInfo, AlertStatus, NewAlert
from perfci.store import _bulk
from perfci.store.schema import Benchmark, Project, Series, series_key_hash, utcnow
from perfci.store.schema_service import Alert

__all__ = ["query_alerts", "set_status", "upsert_alert"]

_UNIQUE = ["series_id", "environment_id", "branch", "run_id"]


def upsert_alert(session: Session, project: str, alert: NewAlert) -> int:
    """Add ``alert`` (or refresh the numbers of the same one already stored, at its run or
    a nearby one, keeping its status and note); returns its id."""
    project_id, benchmark_id, series_id = _ids(session, project, alert)
    existing = _existing(session, series_id, alert)
    numbers = {
        "before": alert.before,
        "after": alert.after,
        "change": alert.change,
        "p_value": alert.p_value,
    }
    if existing is not None:
        if any(getattr(existing, k) != v for k, v in numbers.items()):
            for name, value in numbers.items():
                setattr(existing, name, value)
            existing.updated_at = utcnow()
        return int(existing.id)
    now = utcnow()
    row = {
        "project_id": project_id,
        "benchmark_id": benchmark_id,
        "series_id": series_id,
        "environment_id": alert.environment_id,
        "branch": alert.branch,
        "run_id": alert.run_id,
        "commit_sha": alert.commit,
        "previous_commit_sha": alert.previous_commit,
        **numbers,
        "status": "open",
        "note": None,
        "created_at": now,
        "updated_at": now,
    }
    # ON CONFLICT DO NOTHING: a concurrent report that recorded it first wins, no error.
    _bulk.insert_rows_ignore(session, cast(Table, Alert.__table__), [row], _UNIQUE)
    found = _existing(session, series_id, alert)
    assert found is not None  # inserted by us or by the concurrent writer
    return int(found.id)


def _existing(session: Session, series_id: int, alert: NewAlert) -> Alert | None:
    runs = {alert.run_id, *alert.nearby_run_ids}
    query = (
        select(Alert)
        .where(
            Alert.series_id == series_id,
            Alert.environment_id == alert.environment_id,
            Alert.branch == alert.branch,
            Alert.run_id.in_(runs),
        )
        .order_by((Alert.run_id == alert.run_id).desc(), Alert.id)
    )
    return session.execute(query).scalars().first()


def _ids(session: Session, project: str, alert: NewAlert) -> tuple[int, int, int]:
    query = (
        select(Project.id, Benchmark.id, Series.id)
        .join(Benchmark, Benchmark.project_id == Project.id)
        .join(Series, Series.benchmark_id == Benchmark.id)
        .where(
            Project.name == project,
            Benchmark.name == alert.benchmark,
            Series.key_hash == series_key_hash(alert.series),
        )
    )
    found = session.execute(query).first()
    if found is None:
        raise NotFoundError(
            f"no series {alert.series.key!r} of benchmark {alert.benchmark!r} "
            f"in project {project!r}"
        )
    return int(found[0]), int(found[1]), int(found[2])


def query_alerts(
    session: Session,
    *,
    ids: Sequence[int] | None = None,
    project: str | None = None,
    status: str | None = None,
    benchmark: str | None = None,
) -> list[AlertInfo]:
    """The alerts matching every filter given, newest first."""
    conditions: list[Any] = []
    if ids is not None:
        conditions.append(Alert.id.in_(list(ids)))
    if project is not None:
        conditions.append(Project.name == project)
    if status is not None:
        conditions.append(Alert.status == status)
    if benchmark is not None:
        conditions.append(Benchmark.name == benchmark)
    return _query(session, *conditions)


def set_status(session: Session, alert_id: int, status: str, note: str | None) -> bool:
    """Set alert ``alert_id``'s status (and note when given); False when there is none."""
    alert = session.get(Alert, alert_id)
    if alert is None:
        return False
    alert.status = status
    if note is not None:
        alert.note = note
    alert.updated_at = utcnow()
    return True


def _query(session: Session, *conditions: object) -> list[AlertInfo]:
    query = (
        select(Alert, Project.name, Benchmark.name, Series)
        .join(Project, Project.id == Alert.project_id)
        .join(Benchmark, Benchmark.id == Alert.benchmark_id)
        .join(Series, Series.id == Alert.series_id)
        .where(*conditions)  # type: ignore[arg-type]
        .order_by(Alert.created_at.desc(), Alert.id.desc())
    )
    return [
        _info(alert, project, benchmark, series)
        for alert, project, benchmark, series in session.execute(query)
    ]


def _info(alert: Alert, project: str, benchmark: str, series: Series) -> AlertInfo:
    section = f"[{series.section}] " if series.section else ""
    scope = f"{series.scope} ▸ " if series.scope else ""
    return AlertInfo(
        id=alert.id,
        project=project,
        benchmark=benchmark,
        series=f"{section}{scope}{series.name}",
        environment_id=alert.environment_id,
        branch=alert.branch,
        run_id=alert.run_id,
        commit=alert.commit_sha,
        previous_commit=alert.previous_commit_sha,
        before=alert.before,
        after=alert.after,
        change=alert.change,
        p_value=alert.p_value,
        status=cast(AlertStatus, alert.status),  # written only from STATUSES
        note=alert.note,
        created_at=alert.created_at,
        updated_at=alert.updated_at,
    )
