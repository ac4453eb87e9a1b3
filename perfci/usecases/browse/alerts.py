"""Change-point alerts: a step-time level change on a branch, recorded once, then triaged.

An alert is identified by (series, environment, branch, first run of the new level). The weekly
report records the change points of its period here every time it runs, so recording is an
upsert: an alert is never created twice, and its triage (``acknowledged``, ``dismissed``, with a
note) is never overwritten by a later report. A change point that a longer history places one run
earlier or later is the same change: the caller passes the neighbouring runs, and an alert on any
of them is updated instead of creating a second one.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal, cast

from sqlalchemy import Table, select
from sqlalchemy.exc import DBAPIError
from sqlalchemy.orm import Session

from perfci.core.errors import ConfigError, NotFoundError, StorageError
from perfci.core.model import SeriesKey
from perfci.core.weekly import AlertInfo
from perfci.store import _bulk
from perfci.store.db import error_reason
from perfci.store.schema import Alert, Benchmark, Project, Series, series_key_hash, utcnow

__all__ = ["STATUSES", "AlertInfo", "NewAlert", "list_alerts", "record_alerts", "set_alert_status"]

STATUSES = ("open", "acknowledged", "dismissed")
Status = Literal["open", "acknowledged", "dismissed"]
_UNIQUE = ["series_id", "environment_id", "branch", "run_id"]


@dataclass(frozen=True, slots=True)
class NewAlert:
    """A detected change point, as :func:`record_alerts` takes it."""

    benchmark: str
    series: SeriesKey
    environment_id: int
    branch: str
    run_id: int
    commit: str | None
    previous_commit: str | None
    before: float
    after: float
    change: float
    p_value: float
    nearby_run_ids: tuple[int, ...] = ()


def record_alerts(session: Session, *, project: str, alerts: Sequence[NewAlert]) -> list[AlertInfo]:
    """Store ``alerts`` (one transaction, committed) and return them in the same order.

    An alert already stored for the same series, environment and branch at the same run or at
    one of ``nearby_run_ids`` keeps its id, status and note; its numbers are refreshed.
    """
    try:
        ids = [_upsert(session, project, alert) for alert in alerts]
        session.commit()
    except DBAPIError as exc:
        session.rollback()
        raise StorageError(f"could not record alerts of {project!r}: {error_reason(exc)}") from exc
    except BaseException:
        session.rollback()
        raise
    found = {a.id: a for a in _query(session, Alert.id.in_(ids))}
    return [found[i] for i in ids]


def list_alerts(
    session: Session, *, project: str, status: str | None = None, benchmark: str | None = None
) -> list[AlertInfo]:
    """The project's alerts, newest first; only those with ``status`` when given."""
    conditions = [Project.name == project]
    if status is not None:
        conditions.append(Alert.status == _check_status(status))
    if benchmark is not None:
        conditions.append(Benchmark.name == benchmark)
    return _query(session, *conditions)


def get_alert(session: Session, alert_id: int) -> AlertInfo:
    """Alert ``alert_id``; ``NotFoundError`` when there is no such alert."""
    found = _query(session, Alert.id == alert_id)
    if not found:
        raise NotFoundError(f"no alert with id {alert_id}; `perfci alerts list` shows them")
    return found[0]


def set_alert_status(
    session: Session, alert_id: int, status: str, note: str | None = None
) -> AlertInfo:
    """Acknowledge, dismiss or re-open alert ``alert_id`` (committed); ``note`` replaces the old
    one when given. ``NotFoundError`` when there is no such alert."""
    status = _check_status(status)
    alert = session.get(Alert, alert_id)
    if alert is None:
        raise NotFoundError(f"no alert with id {alert_id}; `perfci alerts list` shows them")
    alert.status = status
    if note is not None:
        alert.note = note
    alert.updated_at = utcnow()
    session.commit()
    return _query(session, Alert.id == alert_id)[0]


def _check_status(status: str) -> str:
    if status not in STATUSES:
        raise ConfigError(f"alert status must be one of {', '.join(STATUSES)}; got {status!r}")
    return status


def _upsert(session: Session, project: str, alert: NewAlert) -> int:
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
        status=alert.status,
        note=alert.note,
        created_at=alert.created_at,
        updated_at=alert.updated_at,
    )
