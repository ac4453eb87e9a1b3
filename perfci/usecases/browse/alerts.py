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

from perfci.core.errors import ConfigError, DatabaseFailure, NotFoundError, StorageError
from perfci.core.weekly import AlertInfo, AlertStatus, NewAlert
from perfci.store.alerts import query_alerts, set_status, upsert_alert
from perfci.store.work import Session, reading, unit_of_work

__all__ = ["STATUSES", "AlertInfo", "NewAlert", "list_alerts", "record_alerts", "set_alert_status"]

STATUSES = ("open", "acknowledged", "dismissed")
Status = AlertStatus


def record_alerts(session: Session, *, project: str, alerts: Sequence[NewAlert]) -> list[AlertInfo]:
    """Store ``alerts`` (one unit of work) and return them in the same order.

    An alert already stored for the same series, environment and branch at the same run or at
    one of ``nearby_run_ids`` keeps its id, status and note; its numbers are refreshed.
    """
    try:
        with unit_of_work(session):
            ids = [upsert_alert(session, project, alert) for alert in alerts]
    except DatabaseFailure as exc:
        raise StorageError(f"could not record alerts of {project!r}: {exc.reason}") from exc
    with reading(session):
        found = {a.id: a for a in query_alerts(session, ids=ids)}
    return [found[i] for i in ids]


def list_alerts(
    session: Session, *, project: str, status: str | None = None, benchmark: str | None = None
) -> list[AlertInfo]:
    """The project's alerts, newest first; only those with ``status`` when given."""
    checked = None if status is None else _check_status(status)
    with reading(session):
        return query_alerts(session, project=project, status=checked, benchmark=benchmark)


def get_alert(session: Session, alert_id: int) -> AlertInfo:
    """Alert ``alert_id``; ``NotFoundError`` when there is no such alert."""
    with reading(session):
        found = query_alerts(session, ids=[alert_id])
    if not found:
        raise NotFoundError(f"no alert with id {alert_id}; `perfci alerts list` shows them")
    return found[0]


def set_alert_status(
    session: Session, alert_id: int, status: str, note: str | None = None
) -> AlertInfo:
    """Acknowledge, dismiss or re-open alert ``alert_id`` (committed); ``note`` replaces the old
    one when given. ``NotFoundError`` when there is no such alert."""
    status = _check_status(status)
    with unit_of_work(session):
        if not set_status(session, alert_id, status, note):
            raise NotFoundError(f"no alert with id {alert_id}; `perfci alerts list` shows them")
    return get_alert(session, alert_id)


def _check_status(status: str) -> str:
    if status not in STATUSES:
        raise ConfigError(f"alert status must be one of {', '.join(STATUSES)}; got {status!r}")
    return status
