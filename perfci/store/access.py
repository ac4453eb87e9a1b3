"""Who may read a project: the one query the service's access checks need."""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.orm import Session

from perfci.store.schema import Project


def project_is_public(session: Session, project: str) -> bool:
    """Whether ``project`` exists and is readable without a token."""
    found = session.execute(select(Project.public).where(Project.name == project)).scalar()
    return bool(found)
