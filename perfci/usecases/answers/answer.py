"""Carry out a ``/perfci`` comment on a pull request (issue 34).

The order matters: a comment that holds no ``/perfci`` line is ignored; an unknown command (or
one written wrong) gets the list of commands, which costs nothing and records nothing; then
the commenter's role on the repository is asked of GitHub (the token the workflow holds, never
what the comment says), and anyone below ``write`` gets a reply saying so and nothing is
recorded. Only then is the answer stored and carried out:

- ``accept <reason>``: one ``accepted`` answer per benchmark whose check of the pull request's
  head regressed, holding the regressed lines; that benchmark's commit status on the head
  turns ``success`` ("accepted by @user: reason") and its comment is edited in place to show
  the acceptance at its top. A later check of the pull request shows it too, and passes while
  what regresses is what was accepted (:mod:`perfci.usecases.answers.accepted`).
- ``false-alarm [reason]``: recorded against the comparisons it answers; the check stays as
  it is (rerun it, or accept it).
- ``rerun``: the pull request's own workflow run that stored the check is re-run through
  ``POST /actions/runs/{id}/rerun``: the same ``pull_request`` event and commit, hence a
  fork's run again gets no secret and a read-only token. Nothing of the pull request runs in
  the answering job itself.

The comment is reacted to (``+1`` when carried out, ``confused`` when not), and any reply is
one comment per command, found again by a hidden marker if the job runs twice.
"""

from __future__ import annotations

import zlib
from collections.abc import Sequence
from contextlib import suppress
from dataclasses import dataclass, field
from typing import Any

from perfci.core.answers import Acceptance, AnswerKind, Command, parse_command
from perfci.core.errors import GitHubError
from perfci.integrations.github.client import GitHubClient
from perfci.integrations.github.events import CommentEvent, MergedPull
from perfci.report.answers import (
    acceptance_block,
    help_reply,
    reply_marker,
    status_text,
    with_answers,
)
from perfci.report.escape import md_escape
from perfci.report.markdown import comment_marker
from perfci.store.answers import PrComparison, add_answer, answers_of, pr_comparisons
from perfci.store.answers import set_merge_commit as store_merge_commit
from perfci.store.work import Session, reading, unit_of_work
from perfci.usecases.check.verdict_lines import status_context

__all__ = ["ALLOWED_ROLES", "AnswerOutcome", "answer_comment", "record_merge"]

#: Roles that may answer: those that can push to the repository.
ALLOWED_ROLES = frozenset({"admin", "maintain", "write"})


@dataclass(slots=True)
class AnswerOutcome:
    """What :func:`answer_comment` did: ``action`` is ``ignored``, ``help``, ``refused``,
    ``nothing`` (no stored check to answer), ``accepted``, ``false-alarm`` or ``rerun``."""

    action: str
    message: str
    recorded: list[int] = field(default_factory=list)
    reply_url: str | None = None
    warnings: list[str] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class _Checked:
    """A benchmark's latest stored check of the pull request's head."""

    found: PrComparison
    regressed: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class _Asked:
    """A command to carry out: where and by whom it was asked, and the head's stored checks."""

    session: Session
    client: GitHubClient
    event: CommentEvent
    command: Command
    project: str
    checked: list[_Checked]

    def record(
        self, checked: list[_Checked], kind: AnswerKind, reason: str | None, *, keys: bool = False
    ) -> list[int]:
        """One answer of ``kind`` per benchmark of ``checked`` (``keys``: its regressed lines)."""
        with unit_of_work(self.session):
            return [_record(self, c, kind, reason, c.regressed if keys else ()) for c in checked]


def answer_comment(
    session: Session, *, event: CommentEvent, project: str, client: GitHubClient
) -> AnswerOutcome:
    """Carry out the ``/perfci`` command of ``event`` (see the module docstring).

    ``session`` is the store of the checks (one unit of work for what is recorded);
    ``client`` holds the workflow's token for ``event.repository``.
    """
    command = parse_command(event.body)
    if command is None:
        return AnswerOutcome("ignored", "the comment holds no /perfci command")
    if command.name in {"unknown", "help"} or command.problem:
        url = _reply(client, event, help_reply(command))
        return AnswerOutcome("help", command.problem or "listed the commands", reply_url=url)
    role = client.permission_of(event.repository, event.user)
    if role not in ALLOWED_ROLES:
        url = _reply(client, event, _refusal(event, role))
        _react(client, event, "-1")
        return AnswerOutcome("refused", f"@{event.user} has {role} access: refused", reply_url=url)
    head = _head_sha(client.pull_request(event.repository, event.pr_number))
    with reading(session):
        checked = _latest(pr_comparisons(session, project, event.pr_number), head)
    if not checked:
        url = _reply(client, event, _no_check(head))
        _react(client, event, "confused")
        return AnswerOutcome("nothing", f"no stored check of head {head[:12]}", reply_url=url)
    carry_out = {"accept": _accept, "false-alarm": _false_alarm}.get(command.name, _rerun)
    return carry_out(_Asked(session, client, event, command, project, checked))


def record_merge(session: Session, *, merged: MergedPull, project: str) -> int:
    """Note the commit a merged pull request landed as on its accepted answers: the weekly
    report then acknowledges the change point there instead of raising it again."""
    with unit_of_work(session):
        return store_merge_commit(session, project, merged.pr_number, merged.merge_commit)


# --- the commands -------------------------------------------------------------------------------


def _accept(asked: _Asked) -> AnswerOutcome:
    regressed = [c for c in asked.checked if c.regressed]
    if not regressed:
        return _nothing(asked, "nothing to accept", "no regression to accept")
    ids = asked.record(regressed, AnswerKind.ACCEPTED, asked.command.reason, keys=True)
    outcome = AnswerOutcome("accepted", f"accepted {len(ids)} benchmark(s)", recorded=ids)
    for c in regressed:
        _show_acceptance(asked, c, outcome)
    _react(asked.client, asked.event, "+1")
    return outcome


def _show_acceptance(asked: _Asked, checked: _Checked, outcome: AnswerOutcome) -> None:
    """The status turns green and the comment shows every acceptance of the benchmark."""
    client, event, reason = asked.client, asked.event, asked.command.reason
    benchmark, commit = checked.found.benchmark, checked.found.commit
    with reading(asked.session):
        accepted = acceptances(asked.session, asked.project, event.pr_number, benchmark)
    try:
        if commit:
            client.set_status(
                event.repository,
                commit,
                state="success",
                context=status_context(benchmark),
                description=status_text(event.user, reason),
            )
        marker = comment_marker(benchmark)
        found = client.find_comment(event.repository, event.pr_number, marker)
        if found is not None:
            body = with_answers(found.body, acceptance_block(accepted))
            client.upsert_comment(event.repository, event.pr_number, body, marker)
    except GitHubError as exc:
        outcome.warnings.append(f"{benchmark}: the acceptance is recorded, but {exc}")


def _false_alarm(asked: _Asked) -> AnswerOutcome:
    regressed = [c for c in asked.checked if c.regressed]
    if not regressed:
        return _nothing(asked, "no false alarm to record", "no regression to call a false alarm")
    ids = asked.record(regressed, AnswerKind.FALSE_ALARM, asked.command.reason or None)
    names = ", ".join(md_escape(c.found.benchmark, max_len=80) for c in regressed)
    url = _reply(
        asked.client,
        asked.event,
        f"perfci: recorded as a false alarm ({names}); it counts in the weekly report's "
        "precision. The check stays as it is: `/perfci rerun` measures again, "
        "`/perfci accept <reason>` lets it pass.",
    )
    _react(asked.client, asked.event, "+1")
    return AnswerOutcome("false-alarm", f"recorded {len(ids)} false alarm(s)", ids, url)


def _rerun(asked: _Asked) -> AnswerOutcome:
    client, event = asked.client, asked.event
    runs = sorted({run for c in asked.checked if (run := c.found.ci_run_id or "").isdigit()})
    if not runs:
        url = _reply(client, event, _NO_RUN)
        return AnswerOutcome("nothing", "no workflow run to re-run", reply_url=url)
    options = _options(asked.command)
    ids = asked.record(asked.checked, AnswerKind.RERUN, options)
    outcome = AnswerOutcome("rerun", f"re-running workflow run(s) {', '.join(runs)}", ids)
    for run_id in runs:
        try:
            client.rerun_workflow_run(event.repository, int(run_id))
        except GitHubError as exc:
            outcome.warnings.append(f"could not re-run workflow run {run_id}: {exc}")
    if outcome.warnings:
        text = "perfci: " + md_escape(outcome.warnings[0], max_len=300)
    else:
        text = f"perfci: re-running workflow run {', '.join(runs)}."
        if options:
            text += (
                f" The options ({md_escape(options)}) are recorded; the re-run itself uses "
                "the workflow's own settings."
            )
    outcome.reply_url = _reply(client, event, text)
    _react(client, event, "confused" if outcome.warnings else "+1")
    return outcome


_NO_RUN = (
    "perfci: the stored check names no GitHub Actions run to re-run; re-run it from the pull "
    "request's Checks tab."
)


def _options(command: Command) -> str | None:
    parts = ["--ab"] if command.ab else []
    if command.repeats:
        parts.append(f"--repeats {command.repeats}")
    return " ".join(parts) or None


# --- pieces ---------------------------------------------------------------------------------------


def acceptances(session: Session, project: str, pr_number: int, benchmark: str) -> list[Acceptance]:
    """The acceptances of ``benchmark`` on pull request ``pr_number``, oldest first."""
    return [
        Acceptance(
            actor=a.actor, reason=a.reason or "", keys=a.keys, commit=a.commit, at=a.created_at
        )
        for a in answers_of(
            session, project, pr_number=pr_number, benchmark=benchmark, kind=AnswerKind.ACCEPTED
        )
    ]


def _nothing(asked: _Asked, said: str, summary: str) -> AnswerOutcome:
    """The head's check found no regression: a reply saying so, and nothing recorded."""
    text = f"perfci: {said}: the check of the head found no regression."
    url = _reply(asked.client, asked.event, text)
    return AnswerOutcome("nothing", summary, reply_url=url)


def _record(
    asked: _Asked, checked: _Checked, kind: AnswerKind, reason: str | None, keys: Sequence[str]
) -> int:
    return add_answer(
        asked.session,
        project=asked.project,
        benchmark=checked.found.benchmark,
        pr_number=asked.event.pr_number,
        commit=checked.found.commit,
        comparison_id=checked.found.comparison_id,
        kind=kind,
        actor=asked.event.user,
        reason=reason,
        keys=keys,
    )


def _latest(found: list[PrComparison], head: str) -> list[_Checked]:
    """Per benchmark, the newest comparison of a run of the head commit (newest first in)."""
    latest: dict[str, _Checked] = {}
    for comparison in found:
        same = (comparison.commit or "").lower() == head.lower()
        if same and comparison.benchmark not in latest:
            latest[comparison.benchmark] = _Checked(comparison, _regressed(comparison.document))
    return [latest[name] for name in sorted(latest)]


def _regressed(document: dict[str, Any]) -> tuple[str, ...]:
    """The keys of the gated regressions of a stored comparison document."""
    return tuple(
        str(m["key"])
        for m in document.get("metrics") or []
        if m.get("verdict") == "regression" and m.get("gated")
    )


def _head_sha(pull: dict[str, Any]) -> str:
    sha = (pull.get("head") or {}).get("sha")
    if not sha:
        raise GitHubError("GitHub gave the pull request without its head commit")
    return str(sha)


def _reply(client: GitHubClient, event: CommentEvent, text: str) -> str | None:
    # A command given on the command line has no comment: its words key the reply.
    words = "\n".join((event.user, event.body)).encode()
    key = event.comment_id or f"local-{zlib.crc32(words):08x}"
    posted = client.upsert_comment(event.repository, event.pr_number, text, reply_marker(key))
    return posted.url


def _react(client: GitHubClient, event: CommentEvent, content: str) -> None:
    if event.comment_id <= 0:  # a command given on the command line: no comment to react to
        return
    # A refused reaction is no failure: the reply or the status already says what happened.
    with suppress(GitHubError):
        client.add_reaction(event.repository, event.comment_id, content)


def _refusal(event: CommentEvent, role: str) -> str:
    return (
        f"perfci: {md_escape('@' + event.user, max_len=60, mid_line=True)} has `{md_escape(role)}` "
        f"access to {md_escape(event.repository)}; only people with write access (write, "
        "maintain or admin) can answer the check. Nothing was recorded."
    )


def _no_check(head: str) -> str:
    return (
        f"perfci: no check of the pull request's head ({md_escape(head[:12], mid_line=True)}) "
        "is stored in this project's store yet; wait for the check to finish, then answer. "
        "Nothing was recorded."
    )
