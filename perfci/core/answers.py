"""Answers people give back on a pull request: ``/perfci accept``, ``false-alarm``, ``rerun``.

Pure: the parser of a comment's body, the records the store keeps, and the tally of what the
answers say about perfci's own alerts (issue 34). The use case is
:mod:`perfci.usecases.answers.answer`; ``docs/answers.md`` is the user's page.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from perfci.core.compat import StrEnum

__all__ = [
    "COMMANDS",
    "MAX_REASON_CHARS",
    "Acceptance",
    "AnswerKind",
    "BenchmarkAnswers",
    "Command",
    "PrVerdict",
    "StoredAnswer",
    "covers",
    "parse_command",
    "tally",
]

#: A reason longer than this is cut: it is shown in a status (140 characters) and a comment.
MAX_REASON_CHARS = 500
_PREFIX = re.compile(r"^/perfci(?:\s+|$)", re.IGNORECASE)
_REPEATS = re.compile(r"^(?:--)?repeats[=:]?(\d*)$", re.IGNORECASE)


class AnswerKind(StrEnum):
    """What an answer said, as stored."""

    ACCEPTED = "accepted"
    FALSE_ALARM = "false-alarm"
    RERUN = "rerun"


#: The commands, with the line of help each gets in a reply.
COMMANDS: dict[str, str] = {
    "accept": "`/perfci accept <reason>`: the regression is intended; the check passes and "
    "the reason is recorded",
    "false-alarm": "`/perfci false-alarm [reason]`: the regression is not real; recorded to "
    "measure perfci's precision",
    "rerun": "`/perfci rerun [--ab] [--repeats N]`: run the check again",
    "help": "`/perfci help`: this list",
}
_ALIASES = {
    "accept": "accept",
    "accepted": "accept",
    "false-alarm": "false-alarm",
    "false_alarm": "false-alarm",
    "falsealarm": "false-alarm",
    "rerun": "rerun",
    "re-run": "rerun",
    "help": "help",
}


@dataclass(frozen=True, slots=True)
class Command:
    """A ``/perfci`` line. ``name`` is a key of :data:`COMMANDS`, or ``"unknown"``; ``word``
    what was written; ``problem`` says why the command cannot be carried out as written (fixed
    text, Markdown) and ``detail`` the piece of the comment it is about (the comment's own
    text: escape it)."""

    name: str
    word: str = ""
    reason: str = ""
    ab: bool = False
    repeats: int | None = None
    problem: str | None = None
    detail: str = ""


def parse_command(body: str) -> Command | None:
    """The first line of ``body`` that starts with ``/perfci`` (any case, leading blanks
    allowed), parsed; ``None`` when there is none (the comment is not for perfci).

    Quoted lines (``> /perfci accept``, a reply quoting a command) do not start with it.
    """
    for line in body.splitlines():
        text = line.strip()
        if _PREFIX.match(text):
            return _parse_line(text[len("/perfci") :].strip())
    return None


def _parse_line(rest: str) -> Command:
    parts = rest.split(None, 1)
    word, tail = (parts[0], parts[1] if len(parts) > 1 else "") if parts else ("", "")
    name = _ALIASES.get(word.lower())
    if name is None:
        problem = "no command given" if not word else "unknown command"
        return Command("unknown", word=word[:40], problem=problem, detail=word[:40])
    reason = " ".join(tail.split())[:MAX_REASON_CHARS]
    if name == "accept" and not reason:
        return Command(name, word, problem="`/perfci accept` needs a reason after it")
    if name == "rerun":
        return _rerun(word, tail.split())
    return Command(name, word, reason=reason)


def _rerun(word: str, tokens: list[str]) -> Command:
    ab, repeats = False, None
    pending = False
    for token in tokens:
        if pending:
            if not token.isdigit():
                return Command(
                    "rerun", word, problem="`--repeats` needs a number, not", detail=token[:40]
                )
            repeats, pending = int(token), False
        elif token.lower() == "--ab":
            ab = True
        elif match := _REPEATS.match(token):
            if match[1]:
                repeats = int(match[1])
            else:
                pending = True
        else:
            return Command("rerun", word, problem="unknown option of rerun", detail=token[:40])
    if pending:
        return Command("rerun", word, problem="`--repeats` needs a number")
    if repeats is not None and not 1 <= repeats <= 100:
        return Command("rerun", word, problem="`--repeats` must be between 1 and 100")
    return Command("rerun", word, ab=ab, repeats=repeats)


@dataclass(frozen=True, slots=True)
class StoredAnswer:
    """One recorded answer, as the store returns it."""

    id: int
    benchmark: str
    pr_number: int
    commit: str | None
    comparison_id: int | None
    kind: AnswerKind
    actor: str
    reason: str | None
    keys: tuple[str, ...]
    created_at: datetime
    merge_commit: str | None = None


@dataclass(frozen=True, slots=True)
class Acceptance:
    """Who accepted which regressed lines of a benchmark on a pull request, and why."""

    actor: str
    reason: str
    keys: tuple[str, ...]
    commit: str | None
    at: datetime


def covers(acceptances: Sequence[Acceptance], regressed: Iterable[str]) -> bool:
    """Whether the accepted lines hold every regressed line (and something was accepted):
    a later check of the pull request passes while what regresses is what was accepted."""
    accepted = {key for a in acceptances for key in a.keys}
    wanted = set(regressed)
    return bool(acceptances) and bool(wanted) and wanted <= accepted


@dataclass(frozen=True, slots=True)
class PrVerdict:
    """One stored comparison of a pull request's run: did it flag a gated regression?"""

    benchmark: str
    pr_number: int
    regression: bool
    at: datetime


@dataclass(slots=True)
class BenchmarkAnswers:
    """What happened to a benchmark's alerts on pull requests (the measured precision).

    An alert is a pull request whose check flagged a regression. It was ``accepted`` (real and
    intended), rejected as a ``false_alarm``, ``fixed`` (a later check of the same pull
    request no longer regressed, and nobody called it a false alarm), or is still ``open``.
    """

    benchmark: str
    alerts: int = 0
    accepted: int = 0
    false_alarms: int = 0
    fixed: int = 0
    open: int = 0
    reruns: int = 0
    accepted_by: list[str] = field(default_factory=list)

    @property
    def precision(self) -> float | None:
        """(accepted + fixed) / (accepted + fixed + false alarms): the share of the judged
        alerts that were real; ``None`` before any was judged."""
        real = self.accepted + self.fixed
        judged = real + self.false_alarms
        return real / judged if judged else None


def tally(verdicts: Iterable[PrVerdict], answers: Iterable[StoredAnswer]) -> list[BenchmarkAnswers]:
    """Per benchmark (by name), the fate of each pull request's alert; see
    :class:`BenchmarkAnswers`. The latest of an accept and a false alarm on one pull request
    wins (someone changed their mind)."""
    by_pr: dict[tuple[str, int], list[PrVerdict]] = {}
    for verdict in sorted(verdicts, key=lambda v: v.at):
        by_pr.setdefault((verdict.benchmark, verdict.pr_number), []).append(verdict)
    said: dict[tuple[str, int], list[StoredAnswer]] = {}
    for answer in sorted(answers, key=lambda a: (a.created_at, a.id)):
        said.setdefault((answer.benchmark, answer.pr_number), []).append(answer)
    out: dict[str, BenchmarkAnswers] = {}
    for (benchmark, pr), found in by_pr.items():
        row = out.setdefault(benchmark, BenchmarkAnswers(benchmark))
        given = said.get((benchmark, pr), [])
        row.reruns += sum(a.kind is AnswerKind.RERUN for a in given)
        first = next((i for i, v in enumerate(found) if v.regression), None)
        if first is None:
            continue
        row.alerts += 1
        judged = [a for a in given if a.kind is not AnswerKind.RERUN]
        if judged and judged[-1].kind is AnswerKind.FALSE_ALARM:
            row.false_alarms += 1
        elif judged:
            row.accepted += 1
            row.accepted_by.append(judged[-1].actor)
        elif not found[-1].regression:
            row.fixed += 1
        else:
            row.open += 1
    return [out[name] for name in sorted(out)]
