"""Projects and their API tokens: the queries of access control (who may read, upload, admin).

Rows in, rows out; the use cases (:mod:`perfci.usecases.admin.tokens`) decide and commit.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import ColumnElement, select, update
from sqlalchemy.orm import Session

from perfci.core.compat import UTC
from perfci.core.errors import NotFoundError
from perfci.store.schema import Project
from perfci.store.schema_service import ApiToken


def project_is_public(session: Session, project: str) -> bool:
    """Whether ``project`` exists and is readable without a token."""
    found = session.execute(select(Project.public).where(Project.name == project)).scalar()
    return bool(found)


def project_id(session: Session, project: str, *, create: bool) -> int:
    """The id of ``project``; a new (flushed, uncommitted) project when ``create``.

    Raises
    ------
    NotFoundError
        For an unknown project when not ``create``.
    """
    found = session.execute(select(Project.id).where(Project.name == project)).scalar()
    if found is not None:
        return int(found)
    if not create:
        raise NotFoundError(f"no project named {project!r}")
    row = Project(name=project, created_at=datetime.now(UTC))
    session.add(row)
    session.flush()
    return row.id


def add_project(session: Session, name: str, *, public: bool) -> bool:
    """Add project ``name`` (uncommitted); False when one of that name exists."""
    if session.execute(select(Project.id).where(Project.name == name)).scalar() is not None:
        return False
    session.add(Project(name=name, public=public, created_at=datetime.now(UTC)))
    session.flush()
    return True


def add_token(session: Session, row: ApiToken) -> ApiToken:
    """Add token ``row`` (uncommitted; its id assigned)."""
    session.add(row)
    session.flush()
    return row


def set_project_public(session: Session, project_id: int, public: bool) -> None:
    """Mark project ``project_id`` public or private (uncommitted)."""
    session.execute(update(Project).where(Project.id == project_id).values(public=public))


def project_tokens(session: Session, project_id: int) -> list[ApiToken]:
    """The tokens of project ``project_id``, oldest first, revoked ones included."""
    return list(
        session.execute(
            select(ApiToken).where(ApiToken.project_id == project_id).order_by(ApiToken.id)
        ).scalars()
    )


def token_by_id(session: Session, token_id: int) -> tuple[ApiToken, str] | None:
    """Token ``token_id`` with its project's name, or ``None``."""
    return _token_where(session, ApiToken.id == token_id)


def token_by_hash(session: Session, token_hash: str) -> tuple[ApiToken, str] | None:
    """The token whose hash is ``token_hash`` (an index lookup) with its project's name."""
    return _token_where(session, ApiToken.token_hash == token_hash)


def _token_where(session: Session, condition: ColumnElement[bool]) -> tuple[ApiToken, str] | None:
    found = session.execute(
        select(ApiToken, Project.name)
        .join(Project, Project.id == ApiToken.project_id)
        .where(condition)
    ).first()
    return None if found is None else (found[0], found[1])


def mark_token_used(session: Session, token_id: int, when: datetime) -> None:
    """Record that token ``token_id`` was used at ``when`` (uncommitted)."""
    session.execute(update(ApiToken).where(ApiToken.id == token_id).values(last_used_at=when))
