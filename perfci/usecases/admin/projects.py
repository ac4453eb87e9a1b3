"""Projects: create one, and say whether its runs and dashboard are public.

A project is made implicitly by its first run or token, private; these are the explicit ways,
for ``perfci project`` (and anything else that manages projects by name).
"""

from __future__ import annotations

from perfci.core.errors import ConfigError, NotFoundError
from perfci.store import access
from perfci.store.work import Session, unit_of_work
from perfci.usecases.browse.pages import ProjectSummary

__all__ = ["create_project", "update_project"]

#: The longest project name the store holds (``project.name`` is a VARCHAR(200)).
MAX_NAME = 200


def create_project(session: Session, *, name: str, public: bool = False) -> ProjectSummary:
    """Create project ``name``; ``ConfigError`` when it exists or the name is unusable."""
    name = _checked(name)
    with unit_of_work(session):
        if not access.add_project(session, name, public=public):
            raise ConfigError(
                f"project {name!r} already exists: change it with "
                f"`perfci project update {name} --public` (or --private)"
            )
    return ProjectSummary(name=name, public=public)


def update_project(session: Session, *, name: str, public: bool) -> ProjectSummary:
    """Make project ``name`` public or private; ``NotFoundError`` when there is none."""
    name = _checked(name)
    with unit_of_work(session):
        try:
            project_id = access.project_id(session, name, create=False)
        except NotFoundError:
            raise NotFoundError(
                f"no project named {name!r}: create it with `perfci project create {name}`"
            ) from None
        access.set_project_public(session, project_id, public)
    return ProjectSummary(name=name, public=public)


def _checked(name: str) -> str:
    stripped = name.strip()
    if not stripped or len(stripped) > MAX_NAME:
        raise ConfigError(f"a project name has 1 to {MAX_NAME} characters, got {len(stripped)}")
    return stripped
