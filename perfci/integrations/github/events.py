"""The GitHub event payloads an answer workflow reacts to (issue 34).

``issue_comment`` (a new comment on a pull request: maybe a ``/perfci`` command) and a pull
request's ``closed`` event (merged: where the accepted change landed). Everything here is read
from the payload GitHub wrote; nothing in it is code, and the comment's body is only parsed.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["CommentEvent", "MergedPull", "comment_event", "merged_pull"]


@dataclass(frozen=True, slots=True)
class CommentEvent:
    """A new comment on a pull request."""

    repository: str
    pr_number: int
    comment_id: int
    user: str
    body: str


@dataclass(frozen=True, slots=True)
class MergedPull:
    """A merged pull request and the commit its changes landed as on the base branch."""

    repository: str
    pr_number: int
    merge_commit: str


def comment_event(event: Mapping[str, Any]) -> CommentEvent | str:
    """The comment of an ``issue_comment`` payload, or why it is none of perfci's business:
    an edit or deletion, a comment on a plain issue, or one by a bot (perfci's own replies
    included, which would otherwise answer themselves)."""
    comment, issue = event.get("comment"), event.get("issue")
    if not isinstance(comment, Mapping) or not isinstance(issue, Mapping):
        return "not an issue_comment event"
    if event.get("action", "created") != "created":
        return f"the comment was {event.get('action')}, not created"
    if not issue.get("pull_request"):
        return "a comment on an issue, not on a pull request"
    user = comment.get("user") or {}
    login = str(user.get("login") or "")
    if user.get("type") == "Bot" or login.endswith("[bot]") or not login:
        return "a comment by a bot"
    repository = str((event.get("repository") or {}).get("full_name") or "")
    return CommentEvent(
        repository=repository,
        pr_number=int(issue["number"]),
        comment_id=int(comment["id"]),
        user=login,
        body=str(comment.get("body") or ""),
    )


def merged_pull(event: Mapping[str, Any]) -> MergedPull | None:
    """The merged pull request of a ``pull_request``/``pull_request_target`` ``closed``
    payload; ``None`` for any other (a pull request closed without merging)."""
    pull = event.get("pull_request")
    if event.get("action") != "closed" or not isinstance(pull, Mapping):
        return None
    sha = pull.get("merge_commit_sha")
    if not pull.get("merged") or not sha:
        return None
    repository = str((event.get("repository") or {}).get("full_name") or "")
    return MergedPull(repository=repository, pr_number=int(pull["number"]), merge_commit=str(sha))
