"""Deleting a stored run with everything that hangs off it, and the audit record of it.

Uncommitted: :func:`perfci.usecases.runs.delete_run` makes it one transaction.
"""

from __future__ import annotations

from sqlalchemy import delete, func, select
from sqlalchemy.orm import Session

from perfci.store.schema import Alert, AuditEvent, Comparison, ProfileRow, Run, Sample

#: What hangs off a run, by the name its count is reported under, deleted in this order.
DEPENDENTS: tuple[tuple[str, type[Sample | ProfileRow | Comparison | Alert]], ...] = (
    ("samples", Sample),
    ("profiles", ProfileRow),
    ("comparisons", Comparison),
    ("alerts", Alert),
)


def delete_run_rows(session: Session, run_id: int) -> dict[str, int]:
    """Delete run ``run_id`` and its dependents; how many of each there were."""
    counts = {name: _delete(session, model, run_id) for name, model in DEPENDENTS}
    session.execute(delete(Run).where(Run.id == run_id))
    return counts


def add_audit_event(
    session: Session,
    *,
    actor: str,
    action: str,
    project: str,
    target: str,
    detail: dict[str, object],
) -> None:
    """Record who did what to which project's object (names cut to the columns' 200)."""
    session.add(
        AuditEvent(
            actor=actor[:200], action=action, project=project[:200], target=target, detail=detail
        )
    )


def _delete(
    session: Session, model: type[Sample | ProfileRow | Comparison | Alert], run_id: int
) -> int:
    """Delete ``model``'s rows of the run; returns how many there were."""
    column = model.__table__.c.run_id
    count = session.execute(select(func.count()).where(column == run_id)).scalar_one()
    if count:
        session.execute(delete(model.__table__).where(column == run_id))  # type: ignore[arg-type]
    return int(count)
