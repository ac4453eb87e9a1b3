"""What perfci says back to an answer on a pull request (issue 34). (The answers' tally in the
weekly report is rendered by its templates, ``weekly.md.j2`` and ``weekly.html.j2``.)

Every reason and login comes from a person's comment, so each goes through
:func:`perfci.report.escape.md_escape` (no tag, table cell, link or mention can be made of
it). The acceptance sits in the perfci comment between
two hidden markers, so that a later edit replaces it instead of stacking another.
"""

from __future__ import annotations

from collections.abc import Sequence

from perfci.core.answers import COMMANDS, Acceptance, Command
from perfci.report.escape import md_code, md_escape, visible

__all__ = [
    "ANSWERS_END",
    "ANSWERS_START",
    "acceptance_block",
    "help_reply",
    "reply_marker",
    "status_text",
    "with_answers",
]

ANSWERS_START = "<!-- perfci:answers -->"
ANSWERS_END = "<!-- /perfci:answers -->"
_REASON_LEN = 300


def reply_marker(comment_id: int | str) -> str:
    """The hidden line of perfci's reply to comment ``comment_id`` (a number, or a key made of
    hex digits for a command given on the command line): a job that runs twice edits its
    reply instead of posting a second one."""
    key = str(comment_id)
    if not key.replace("local-", "", 1).isalnum():
        raise ValueError(f"not a comment id: {comment_id!r}")
    return f"<!-- perfci:reply={key} -->"


def acceptance_block(acceptances: Sequence[Acceptance], *, uncovered: int = 0) -> str:
    """The lines shown at the top of the perfci comment once a regression was accepted.

    ``uncovered`` counts the regressed lines of the shown check that no acceptance holds:
    the check fails on them, and the block says so.
    """
    lines = [ANSWERS_START]
    for accepted in acceptances:
        count = len(accepted.keys)
        lines.append(
            f"> ✅ **Accepted** by {md_escape('@' + accepted.actor, max_len=60, mid_line=True)}"
            f" ({count} regressed line{'' if count == 1 else 's'}"
            f"{_at(accepted.commit)}): {md_escape(accepted.reason, max_len=_REASON_LEN)}"
        )
    if uncovered:
        lines.append(
            f"> ⚠️ {uncovered} regressed line{' is' if uncovered == 1 else 's are'} not part "
            "of what was accepted: the check fails on "
            f"{'it' if uncovered == 1 else 'them'}."
        )
    else:
        lines.append(
            "> The check passes while the regressed lines are the accepted ones; the "
            "accepted level becomes the base branch's after the merge."
        )
    lines.append(ANSWERS_END)
    return "\n".join(lines)


def _at(commit: str | None) -> str:
    return f" at {md_escape(commit[:12], mid_line=True)}" if commit else ""


def with_answers(body: str, block: str) -> str:
    """``body`` (a perfci comment) with ``block`` at its top, after the hidden marker line,
    replacing a block already there; an empty ``block`` only removes the old one."""
    start, end = body.find(ANSWERS_START), body.find(ANSWERS_END)
    if start != -1 and end > start:
        body = body[:start] + body[end + len(ANSWERS_END) :].lstrip("\n")
    if not block:
        return body
    first, newline, rest = body.partition("\n")
    if first.startswith("<!-- perfci:"):
        return f"{first}\n{block}\n\n{rest}" if newline else f"{first}\n{block}\n"
    return f"{block}\n\n{body}"


def status_text(actor: str, reason: str) -> str:
    """The commit status of an accepted check (plain text; GitHub cuts it at 140)."""
    return f"accepted by @{visible(actor)}: {visible(reason)}"


def help_reply(command: Command) -> str:
    """The reply to a command perfci does not know, or cannot carry out as written."""
    what = command.problem or "the commands are"
    if command.detail:
        what += f" {md_code(command.detail, max_len=40)}"
    lines = [f"perfci: {what}. The commands are:" if command.problem else "perfci commands:", ""]
    lines += [f"- {line}" for line in COMMANDS.values()]
    lines += ["", "Only people with write access to the repository can give them."]
    return "\n".join(lines)
