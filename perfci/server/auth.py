"""Who may do what: uploads need an ``upload`` token of the project, reads a ``read`` token
unless the project is public. 401 means "no valid token", 403 "valid, but not for this"."""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.orm import Session

from perfci.errors import AuthError
from perfci.store.schema import Project
from perfci.usecases.tokens import TokenInfo


def is_public(session: Session, project: str) -> bool:
    """Whether ``project`` exists and is readable without a token."""
    found = session.execute(select(Project.public).where(Project.name == project)).scalar()
    return bool(found)


def require_scope(token: TokenInfo | None, project: str, scope: str) -> TokenInfo:
    """``token`` when it grants ``scope`` on ``project``; else AuthError (401 or 403)."""
    if token is None:
        raise AuthError(f"this needs an API token with the {scope!r} scope "
                        "(Authorization: Bearer <token>)", status=401)
    if token.project != project:
        raise AuthError(f"this token belongs to another project, not {project!r}", status=403)
    if not token.allows(scope):
        raise AuthError(f"this token lacks the {scope!r} scope (it has: "
                        f"{', '.join(token.scopes)})", status=403)
    return token


def require_read(session: Session, token: TokenInfo | None, project: str) -> None:
    """Reads of a public project are open; of a private one need a ``read`` token."""
    if can_read(session, token, project):
        return
    require_scope(token, project, "read")


def can_read(session: Session, token: TokenInfo | None, project: str) -> bool:
    if token is not None and token.project == project and token.allows("read"):
        return True
    return is_public(session, project)
