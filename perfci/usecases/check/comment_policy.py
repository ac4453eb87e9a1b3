"""When a check is worth a pull-request comment (``--comment-on``), and who is mentioned on a
regression (``--cc``): the policy the GitHub Action used to decide in its shell steps."""

from __future__ import annotations

import re
from collections.abc import Iterable
from enum import Enum

from perfci.core.model import Verdict

__all__ = ["CommentOn", "cc_line", "cc_mentions", "worth_a_comment"]


class CommentOn(str, Enum):
    """Which verdicts get a comment and a commit status; the job summary always has the report."""

    ALWAYS = "always"
    CHANGE = "change"  # a regression or an improvement
    REGRESSION = "regression"


_WORTH: dict[CommentOn, frozenset[Verdict]] = {
    CommentOn.ALWAYS: frozenset(Verdict),
    CommentOn.CHANGE: frozenset({Verdict.REGRESSION, Verdict.IMPROVEMENT}),
    CommentOn.REGRESSION: frozenset({Verdict.REGRESSION}),
}

#: ``@user`` or ``@org/team``, as GitHub spells them; anything else could be Markdown or a URL.
_MENTION = re.compile(r"^@[A-Za-z0-9][A-Za-z0-9-]*(/[A-Za-z0-9][A-Za-z0-9_.-]*)?$")


def worth_a_comment(verdict: Verdict, comment_on: CommentOn) -> bool:
    """Whether a run of ``verdict`` gets a comment (and status) under ``comment_on``."""
    return verdict in _WORTH[comment_on]


def cc_mentions(entries: Iterable[str]) -> tuple[list[str], list[str]]:
    """The valid mentions among ``entries`` (each may hold several, space separated), and a
    warning for each one left out."""
    mentions: list[str] = []
    warnings: list[str] = []
    for word in (w for entry in entries for w in entry.split()):
        if _MENTION.match(word):
            mentions.append(word)
        else:
            warnings.append(f"cc: {word!r} is not a @user or @org/team mention; left out")
    return mentions, warnings


def cc_line(mentions: list[str]) -> str:
    """The line appended to a regression's comment (empty without mentions)."""
    return f"\ncc {' '.join(mentions)}\n" if mentions else ""
