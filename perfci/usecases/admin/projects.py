"""Projects: create one, and say whether its runs and dashboard are public.

A project is made implicitly by its first run or token, private; these are the explicit ways,
for ``perfci project`` (and anything else that manages projects by name).
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import select, update
from sqlalchemy.orm import Session

from perfci.core.compat import UTC
from perfci.core.errors import ConfigError, NotFoundError
from perfci.store.schema import Project
from perfci.usecases.browse.pages import ProjectSummary

__all__ = ["create_project", "update_project"]

#: The longest project name the store holds (``project.name`` is a VARCHAR(200)).
MAX_NAME = 200


def create_project(session: Session, *, name: str, public: bool = False) -> ProjectSummary:
    """Create project ``name``; ``ConfigError`` when it exists or the name is unusable."""
    name = _checked(name)
    if session.execute(select(Project.id).where(Project.name == name)).scalar() is not None:
        raise ConfigError(
            f"project {name!r} already exists: change it with "
            f"`perfci project update {name} --public` (or --private)"
        )
    session.add(Project(name=name, public=public, created_at=datetime.now(UTC)))
    session.commit()
    return ProjectSummary(name=name, public=public)


def update_project(session: Session, *, name: str, public: bool) -> ProjectSummary:
    """Make project ``name`` public or private; ``NotFoundError`` when there is none."""
    name = _checked(name)
    done = session.execute(update(Project).where(Project.name == name).values(public=public))
    if not done.rowcount:  # type: ignore[attr-defined]  # a CursorResult for an UPDATE
        session.rollback()
        raise NotFoundError(
            f"no project named {name!r}: create it with `perfci project create {name}`"
        )
    session.commit()
    return ProjectSummary(name=name, public=public)


def _checked(name: str) -> str:
    stripped = name.strip()
    if not stripped or len(stripped) > MAX_NAME:
        raise ConfigError(f"a project name has 1 to {MAX_NAME} characters, got {len(stripped)}")
    return stripped
