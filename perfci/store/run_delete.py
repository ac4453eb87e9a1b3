"""Deleting a stored run with everything that hangs off it, and the audit record of it.

Uncommitted: :func:`perfci.usecases.browse.runs.delete_run` makes it one transaction.
"""

from __future__ import annotations

from sqlalchemy import ColumnElement, delete, func, select, true
from sqlalchemy.orm import Session

from perfci.store.partitions import day_number
from perfci.store.samples import delete_run_arrays
from perfci.store.schema import ProfileRow, Run, Sample, SampleSummary
from perfci.store.schema_service import Alert, AuditEvent, Comparison

Dependent = type[Sample | SampleSummary | ProfileRow | Comparison | Alert]

#: What hangs off a run, by the name its count is reported under, deleted in this order. A
#: pruned run's summaries count as its samples (it has one or the other).
DEPENDENTS: tuple[tuple[str, Dependent], ...] = (
    ("samples", Sample),
    ("samples", SampleSummary),
    ("profiles", ProfileRow),
    ("comparisons", Comparison),
    ("alerts", Alert),
)


def delete_run_rows(session: Session, run_id: int) -> dict[str, int]:
    """Delete run ``run_id`` and its dependents; how many of each there were."""
    # The run's row locked first (PostgreSQL): a writer of its arrays holding it
    # (:mod:`perfci.store.arrays_backfill`) finishes before they are deleted below.
    created = session.execute(
        select(Run.created_at).where(Run.id == run_id).with_for_update()
    ).scalar()
    # The run's day names the one partition its samples are in (PostgreSQL prunes the rest).
    day = Sample.run_day == day_number(created) if created is not None else true()
    counts: dict[str, int] = {}
    for name, model in DEPENDENTS:
        where = day if model is Sample else true()
        counts[name] = counts.get(name, 0) + _delete(session, model, run_id, where)
    delete_run_arrays(session, [run_id])  # the samples' values again: not counted twice
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


def _delete(session: Session, model: Dependent, run_id: int, where: ColumnElement[bool]) -> int:
    """Delete ``model``'s rows of the run; returns how many there were."""
    table = model.__table__
    match = (table.c.run_id == run_id) & where
    count = session.execute(select(func.count()).select_from(table).where(match)).scalar_one()
    if count:
        session.execute(delete(table).where(match))  # type: ignore[arg-type]
    return int(count)
