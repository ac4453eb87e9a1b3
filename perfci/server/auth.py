"""Who may do what: uploads need an ``upload`` token of the project, reads a ``read`` token
unless the project is public.

What a caller may not see answers exactly like what does not exist, so that ids and names
cannot be probed: without a token, 401 whether the project or id exists or not; with another
project's token, 404 with the same message a missing id or name gets. 403 is kept for a token
of the project itself that lacks the scope (it tells its holder nothing new).
"""

from __future__ import annotations

from collections.abc import Callable

from sqlalchemy.orm import Session

from perfci.core.errors import AuthError, NotFoundError
from perfci.usecases.admin.tokens import TokenInfo, is_project_public


def is_public(session: Session, project: str) -> bool:
    """Whether ``project`` exists and is readable without a token."""
    return is_project_public(session, project)


def missing_project(project: str) -> str:
    """The 404 message of a project that does not exist (or that the caller may not see)."""
    return f"no project named {project!r}"


def _no_token(scope: str) -> AuthError:
    return AuthError(
        f"this needs an API token with the {scope!r} scope (Authorization: Bearer <token>)",
        status=401,
    )


def require_scope(
    token: TokenInfo | None, project: str, scope: str, *, missing: str | None = None
) -> TokenInfo:
    """``token`` when it grants ``scope`` on ``project``.

    Raises
    ------
    AuthError
        401 without a token; 403 for a token of ``project`` lacking ``scope``.
    NotFoundError
        For a token of another project, with ``missing`` (default: the missing-project
        message) as the message, as if ``project`` or the resource did not exist.
    """
    if token is None:
        raise _no_token(scope)
    if token.project != project:
        raise NotFoundError(missing or missing_project(project))
    if not token.allows(scope):
        raise AuthError(
            f"this token lacks the {scope!r} scope (it has: {', '.join(token.scopes)})", status=403
        )
    return token


def require_read(
    session: Session, token: TokenInfo | None, project: str, *, missing: str | None = None
) -> None:
    """Reads of a public project are open; of a private one need a ``read`` token."""
    if can_read(session, token, project):
        return
    require_scope(token, project, "read", missing=missing)


def can_read(session: Session, token: TokenInfo | None, project: str) -> bool:
    if token is not None and token.project == project and token.allows("read"):
        return True
    return is_public(session, project)


def owner_of(lookup: Callable[[], str], token: TokenInfo | None, scope: str) -> str:
    """The project owning an id-addressed resource, as ``lookup()`` finds it.

    A missing resource is a 401 without a token (as an existing private one would be), and a
    404 with one; the caller then checks access with :func:`require_read` or
    :func:`require_scope`, passing the same ``missing`` message.
    """
    try:
        return lookup()
    except NotFoundError:
        if token is None:
            raise _no_token(scope) from None
        raise
