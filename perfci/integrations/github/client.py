"""GitHub REST client for what perfci writes: the pull-request comment, commit statuses, issues.

The comment and the weekly issue carry a hidden marker, by which they are found again and edited in
place: never a second one. A POST that may have reached GitHub (a 5xx, a lost connection) is retried
only after looking for what it would have created; a commit status is safe to post twice (the latest
one per context wins), so it is simply retried. The transport under this (token, retries, rate
limits, pagination, errors that name the missing permission) is
:class:`perfci.integrations.github.api.GitHubApi`; the helpers for a GitHub Actions job (job
summary, annotations, fork detection) live in :mod:`perfci.integrations.github.actions`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from perfci.core.errors import GitHubError
from perfci.integrations.github.api import DEFAULT_API_URL, GitHubApi, checked_repo

if TYPE_CHECKING:
    from perfci.core.settings import Settings

__all__ = ["DEFAULT_API_URL", "Comment", "GitHubClient", "Issue"]

MAX_BODY_CHARS = 65_536
MAX_STATUS_DESCRIPTION = 140
STATUS_STATES = frozenset({"error", "failure", "pending", "success"})
_COMMENT_PERMISSION = "pull-requests: write` (or `issues: write` for issues"


@dataclass(frozen=True, slots=True)
class Comment:
    """An issue or pull-request comment. ``created`` says whether this call created it."""

    id: int
    url: str
    created: bool = False
    body: str = ""


@dataclass(frozen=True, slots=True)
class Issue:
    """An issue. ``created`` says whether this call created it."""

    number: int
    url: str
    created: bool = False


class GitHubClient(GitHubApi):
    """A small GitHub REST client for what perfci writes: the PR comment, statuses, issues.

    The parameters are :class:`~perfci.integrations.github.api.GitHubApi`'s.
    """

    @classmethod
    def from_settings(cls, settings: Settings, **kwargs: Any) -> GitHubClient:
        """A client from :class:`perfci.core.settings.Settings`: its GitHub token and API URL."""
        secret = settings.github_token
        token = secret.get_secret_value() if secret is not None else None
        return cls(token, api_url=settings.github_api_url, **kwargs)

    # --- pull-request comments ---------------------------------------------------------------

    def find_comment(self, repo: str, issue_number: int, marker: str) -> Comment | None:
        """The first comment on issue/PR ``issue_number`` whose body contains ``marker``.

        Reads every page of comments (100 a page, following ``Link: rel="next"``).
        """
        found = self._find_comment_data(repo, issue_number, marker)
        return _comment(found, created=False) if found else None

    def upsert_comment(self, repo: str, issue_number: int, body: str, marker: str) -> Comment:
        """Create the comment carrying ``marker``, or edit it in place: never a second one.

        ``marker`` is put on the first line of ``body`` when the body does not contain it.
        An unchanged body is not sent again.
        """
        body = _with_marker(body, marker)
        if len(body) > MAX_BODY_CHARS:
            raise GitHubError(
                f"the comment is {len(body):,} characters; GitHub accepts at most "
                f"{MAX_BODY_CHARS:,}"
            )
        existing = self._find_comment_data(repo, issue_number, marker)
        if existing is not None:
            if existing.get("body") == body:
                return _comment(existing, created=False)
            comment_id = int(existing["id"])
            url = self._url(f"/repos/{checked_repo(repo)}/issues/comments/{comment_id}")
            data = self._request(
                "PATCH", url, json={"body": body}, permission=_COMMENT_PERMISSION
            ).json()
            return _comment(data, created=False)
        url = self._url(f"/repos/{checked_repo(repo)}/issues/{int(issue_number)}/comments")
        data = self._post(
            url,
            {"body": body},
            permission=_COMMENT_PERMISSION,
            recover=lambda: self._find_comment_data(repo, issue_number, marker),
        )
        return _comment(data, created=True)

    def _find_comment_data(
        self, repo: str, issue_number: int, marker: str
    ) -> dict[str, Any] | None:
        url = self._url(f"/repos/{checked_repo(repo)}/issues/{int(issue_number)}/comments")
        for item in self._paginate(url, {}, permission="pull-requests: read"):
            if marker in (item.get("body") or ""):
                return item
        return None

    # --- commit statuses ---------------------------------------------------------------------

    def set_status(
        self,
        repo: str,
        sha: str,
        *,
        state: str,
        context: str,
        description: str,
        target_url: str | None = None,
    ) -> dict[str, Any]:
        """Set commit status ``context`` on ``sha``; ``description`` is cut to 140 characters."""
        if state not in STATUS_STATES:
            raise ValueError(f"status state must be one of {sorted(STATUS_STATES)}, got {state!r}")
        if len(description) > MAX_STATUS_DESCRIPTION:
            description = description[: MAX_STATUS_DESCRIPTION - 1] + "…"
        payload = {"state": state, "context": context, "description": description}
        if target_url:
            payload["target_url"] = target_url
        url = self._url(f"/repos/{checked_repo(repo)}/statuses/{quote(sha, safe='')}")
        # Posting the same status twice is harmless (the latest per context wins): plain retry.
        return self._post(url, payload, permission="statuses: write", recover=None)

    # --- answers on pull requests (issue 34) -------------------------------------------------

    def permission_of(self, repo: str, user: str) -> str:
        """``user``'s role on ``repo``: ``admin``, ``maintain``, ``write``, ``triage``, ``read``
        or ``none`` (a login GitHub does not know is ``none``).

        Reads ``role_name`` (which tells ``maintain`` and ``triage`` apart), else the coarser
        ``permission``. The token needs read access to the repository's collaborators, which
        a workflow's ``GITHUB_TOKEN`` has.
        """
        url = self._url(
            f"/repos/{checked_repo(repo)}/collaborators/{quote(user, safe='')}/permission"
        )
        try:
            data = self._request("GET", url).json()
        except GitHubError as exc:
            if exc.status == 404:
                return "none"
            raise
        role = data.get("role_name") or data.get("permission") or "none"
        return str(role).lower()

    def pull_request(self, repo: str, number: int) -> dict[str, Any]:
        """Pull request ``number`` as GitHub gives it (head and base, merge state)."""
        url = self._url(f"/repos/{checked_repo(repo)}/pulls/{int(number)}")
        data: dict[str, Any] = self._request("GET", url, permission="pull-requests: read").json()
        return data

    def add_reaction(self, repo: str, comment_id: int, content: str) -> None:
        """React to an issue or pull-request comment (``+1``, ``eyes``, ``confused`` ...).

        GitHub answers an existing reaction with 200, so a repeat is harmless.
        """
        url = self._url(f"/repos/{checked_repo(repo)}/issues/comments/{int(comment_id)}/reactions")
        self._post(url, {"content": content}, permission=_COMMENT_PERMISSION, recover=None)

    def rerun_workflow_run(self, repo: str, run_id: int) -> None:
        """Re-run workflow run ``run_id`` as it ran: same event, same commit, same secrets
        (none, for a fork's ``pull_request`` run)."""
        url = self._url(f"/repos/{checked_repo(repo)}/actions/runs/{int(run_id)}/rerun")
        # GitHub answers 201 with an empty body; a second rerun of a running one is a 403.
        self._request("POST", url, permission="actions: write")

    # --- issues (weekly reports) -------------------------------------------------------------

    def create_or_update_issue(
        self,
        repo: str,
        title: str,
        body: str,
        labels: Sequence[str],
        marker: str,
        *,
        state: str = "all",
    ) -> Issue:
        """Update the issue whose body carries ``marker``, or create it with ``labels``.

        Looks through every page of the repository's issues with those labels (``state`` "all"
        by default, so a closed report is updated rather than duplicated).
        """
        body = _with_marker(body, marker)
        existing = self._find_issue_data(repo, labels, marker, state)
        if existing is not None:
            url = self._url(f"/repos/{checked_repo(repo)}/issues/{int(existing['number'])}")
            data = self._request(
                "PATCH", url, json={"title": title, "body": body}, permission="issues: write"
            ).json()
            return _issue(data, created=False)
        url = self._url(f"/repos/{checked_repo(repo)}/issues")
        data = self._post(
            url,
            {"title": title, "body": body, "labels": list(labels)},
            permission="issues: write",
            recover=lambda: self._find_issue_data(repo, labels, marker, state),
        )
        return _issue(data, created=True)

    def _find_issue_data(
        self, repo: str, labels: Sequence[str], marker: str, state: str
    ) -> dict[str, Any] | None:
        params: dict[str, Any] = {"state": state}
        if labels:
            params["labels"] = ",".join(labels)
        url = self._url(f"/repos/{checked_repo(repo)}/issues")
        for item in self._paginate(url, params, permission="issues: read"):
            # The issues endpoint lists pull requests too.
            if "pull_request" not in item and marker in (item.get("body") or ""):
                return item
        return None


# --- helpers --------------------------------------------------------------------------------


def _with_marker(body: str, marker: str) -> str:
    return body if marker in body else f"{marker}\n{body}"


def _comment(data: Mapping[str, Any], *, created: bool) -> Comment:
    return Comment(
        id=int(data["id"]),
        url=str(data.get("html_url") or data.get("url") or ""),
        created=created,
        body=str(data.get("body") or ""),
    )


def _issue(data: Mapping[str, Any], *, created: bool) -> Issue:
    return Issue(
        number=int(data["number"]),
        url=str(data.get("html_url") or data.get("url") or ""),
        created=created,
    )
