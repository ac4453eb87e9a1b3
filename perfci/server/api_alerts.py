"""``/api/v1/projects/{project}/alerts`` and ``/api/v1/alerts/{alert_id}``: change-point alerts."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query

from perfci.server import auth
from perfci.server.api_params import ERRORS, NO_NUL, PREFIX, ProjectName, RunId
from perfci.server.deps import SessionDep, TokenDep
from perfci.server.schemas import AlertPublic, AlertsPublic, AlertUpdate
from perfci.usecases.browse import alerts

router = APIRouter(prefix=PREFIX, responses=ERRORS)


@router.get("/projects/{project:path}/alerts", response_model=AlertsPublic, tags=["alerts"])
def list_alerts(
    project: ProjectName,
    session: SessionDep,
    token: TokenDep,
    status: Annotated[alerts.Status | None, Query()] = None,
    benchmark: Annotated[str | None, Query(max_length=200, pattern=NO_NUL)] = None,
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


def _alert_public(alert: alerts.AlertInfo) -> AlertPublic:
    found: AlertPublic = AlertPublic.of(alert)
    return found
