"""``/api/v1/projects``: the projects a caller may read, and making one public or private."""

from __future__ import annotations

import dataclasses

from fastapi import APIRouter

from perfci.core.errors import NotFoundError
from perfci.server import auth
from perfci.server.api_params import ERRORS, PREFIX, ProjectName
from perfci.server.deps import SessionDep, TokenDep
from perfci.server.schemas import ProjectPublic, ProjectsPublic, ProjectUpdate
from perfci.usecases.admin import tokens
from perfci.usecases.browse import pages as browse

router = APIRouter(prefix=PREFIX, responses=ERRORS)


@router.get("/projects", response_model=ProjectsPublic, tags=["projects"])
def list_projects(session: SessionDep, token: TokenDep) -> ProjectsPublic:
    """The projects the caller may read: public ones and the token's own."""
    visible = [
        p
        for p in browse.list_projects(session)
        if p.public or (token is not None and token.project == p.name)
    ]
    return ProjectsPublic(projects=[ProjectPublic(**dataclasses.asdict(p)) for p in visible])


@router.patch("/projects/{project:path}", response_model=ProjectPublic, tags=["projects"])
def update_project(
    project: ProjectName, update: ProjectUpdate, session: SessionDep, token: TokenDep
) -> ProjectPublic:
    """Admin: make the project public (readable without a token) or private."""
    auth.require_scope(token, project, "admin")
    tokens.set_project_public(session, project=project, public=update.public)
    # list_projects counts the project's benchmarks and runs (get_project does not).
    found = [p for p in browse.list_projects(session) if p.name == project]
    if not found:
        raise NotFoundError(auth.missing_project(project))
    return ProjectPublic(**dataclasses.asdict(found[0]))
