"""``perfci answer``'s use case: read the event, open the store and GitHub, answer.

The event is a GitHub payload (``$GITHUB_EVENT_PATH``): an ``issue_comment`` is carried out
by :func:`perfci.usecases.answers.answer.answer_comment`, a merged pull request's ``closed``
event noted by :func:`~perfci.usecases.answers.answer.record_merge`, anything else ignored.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from perfci.core.errors import ConfigError
from perfci.core.settings import Settings
from perfci.integrations.context import read_event
from perfci.integrations.github.client import GitHubClient
from perfci.integrations.github.events import CommentEvent, comment_event, merged_pull
from perfci.store.db import open_store
from perfci.usecases.answers.answer import AnswerOutcome, answer_comment, record_merge

__all__ = ["answer_event", "local_comment", "read_answer_event"]


def read_answer_event(path: str) -> Mapping[str, Any] | CommentEvent:
    """The event payload at ``path``, as :func:`answer_event` takes it; ``ConfigError`` when
    there is none to read."""
    event = read_event(path)
    if not event:
        raise ConfigError(f"{path}: not a readable GitHub event payload")
    return event


def local_comment(
    repository: str | None, pr_number: int, user: str, body: str
) -> Mapping[str, Any] | CommentEvent:
    """A comment given on the command line (no comment id: nothing to react to), as
    :func:`answer_event` takes it."""
    return CommentEvent(repository or "", pr_number, 0, user, body)


def answer_event(
    event: Mapping[str, Any] | CommentEvent,
    *,
    settings: Settings,
    project: str,
    repository: str | None = None,
    client: GitHubClient | None = None,
) -> AnswerOutcome:
    """Answer ``event`` (a payload, or a comment given on the command line).

    ``repository`` (``OWNER/NAME``) stands in for the payload's when it names none.
    """
    if isinstance(event, CommentEvent):
        found: CommentEvent | str = event
    else:
        merged = merged_pull(event)
        if merged is not None:
            store = open_store(settings)
            try:
                with store.sessions() as session:
                    count = record_merge(session, merged=merged, project=project)
            finally:
                store.close()
            return AnswerOutcome(
                "merged",
                f"pull request #{merged.pr_number} merged as {merged.merge_commit[:12]}: "
                f"{count} acceptance(s) noted",
            )
        found = comment_event(event)
    if isinstance(found, str):
        return AnswerOutcome("ignored", found)
    if not found.repository:
        if not repository:
            raise ConfigError("the repository is unknown: give --repo OWNER/NAME")
        found = CommentEvent(repository, found.pr_number, found.comment_id, found.user, found.body)
    github = client or GitHubClient.from_settings(settings)
    store = open_store(settings)
    try:
        with store.sessions() as session:
            return answer_comment(session, event=found, project=project, client=github)
    finally:
        store.close()
        if client is None:
            github.close()
