"""Operator actions on stored runs: remove one (a bad upload, a run of the wrong machine).

A deletion is one transaction: the run's samples, profiles, comparisons and alerts go with it,
and an :class:`~perfci.store.schema_service.AuditEvent` row records who removed what, so a baseline
that changed under a team can be explained afterwards. ``perfci runs delete`` and the
admin-scoped API call both come here.
"""

from __future__ import annotations

from dataclasses import dataclass

from perfci.core.errors import DatabaseFailure, NotFoundError, StorageError
from perfci.store.queries import get_run
from perfci.store.run_delete import add_audit_event, delete_run_rows
from perfci.store.work import Session, unit_of_work

__all__ = ["DELETE_ACTION", "DeletedRun", "delete_run"]

#: ``audit_event.action`` of a run deletion.
DELETE_ACTION = "run.delete"


@dataclass(frozen=True, slots=True)
class DeletedRun:
    """What :func:`delete_run` removed."""

    run_id: int
    project: str
    benchmark: str
    commit: str | None
    branch: str | None
    samples: int
    profiles: int
    comparisons: int
    alerts: int


def delete_run(
    session: Session, *, run_id: int, actor: str, project: str | None = None
) -> DeletedRun:
    """Delete run ``run_id`` with everything stored for it, audited, in one transaction.

    Parameters
    ----------
    session
        The store's session; the deletion is one unit of work, rolled back on any error.
    run_id
        The run to delete.
    actor
        Who deletes it, for the audit record (a token's name, ``cli:USER``).
    project
        When given, the run must belong to this project (an API token's); a run of another
        project is "not found" exactly like a missing id, so ids reveal nothing.

    Raises
    ------
    NotFoundError
        No such run (in ``project``).
    StorageError
        The database failed; nothing was deleted.
    """
    try:
        with unit_of_work(session):
            run = get_run(session, run_id)
            if project is not None and run.project != project:
                raise NotFoundError(f"no run with id {run_id}")
            counts = delete_run_rows(session, run_id)
            deleted = DeletedRun(
                run_id=run_id,
                project=run.project,
                benchmark=run.benchmark,
                commit=run.commit,
                branch=run.branch,
                **counts,
            )
            add_audit_event(
                session,
                actor=actor,
                action=DELETE_ACTION,
                project=run.project,
                target=f"run {run_id}",
                detail=_detail(deleted),
            )
    except DatabaseFailure as exc:
        raise StorageError(f"could not delete run {run_id}: {exc.reason}") from exc
    return deleted


def _detail(deleted: DeletedRun) -> dict[str, object]:
    return {
        "benchmark": deleted.benchmark,
        "commit": deleted.commit,
        "branch": deleted.branch,
        "samples": deleted.samples,
        "profiles": deleted.profiles,
        "comparisons": deleted.comparisons,
        "alerts": deleted.alerts,
    }
