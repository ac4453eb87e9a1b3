"""The pure parts of the answers on pull requests (issue 34): the ``/perfci`` line of a
comment, the event payloads perfci reacts to, the tally behind the measured precision, and
what the comment shows of an acceptance (escaped, replaced in place)."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest

from perfci.core.answers import (
    MAX_REASON_CHARS,
    Acceptance,
    AnswerKind,
    PrVerdict,
    StoredAnswer,
    covers,
    parse_command,
    tally,
)
from perfci.core.compat import UTC
from perfci.integrations.github.events import CommentEvent, comment_event, merged_pull
from perfci.report.answers import ANSWERS_START, acceptance_block, help_reply, with_answers

T0 = datetime(2026, 11, 2, tzinfo=UTC)


@pytest.mark.parametrize(
    ("body", "name", "reason"),
    [
        ("/perfci accept new attention kernel", "accept", "new attention kernel"),
        (
            "Thanks!\n\n   /PERFCI   Accept   we   trade speed\nmore text",
            "accept",
            "we trade speed",
        ),
        ("/perfci false-alarm", "false-alarm", ""),
        ("/perfci false_alarm runner was hot", "false-alarm", "runner was hot"),
        ("/perfci re-run", "rerun", ""),
        ("/perfci help", "help", ""),
    ],
)
def test_a_command_line_is_found_and_read(body: str, name: str, reason: str) -> None:
    command = parse_command(body)
    assert command is not None and command.problem is None
    assert (command.name, command.reason) == (name, reason)


@pytest.mark.parametrize(
    "body", ["LGTM", "> /perfci accept quoted", "see /perfci accept in the docs", "/perfcix"]
)
def test_a_comment_without_a_command_line_is_not_for_perfci(body: str) -> None:
    assert parse_command(body) is None


def test_rerun_options_and_the_problems_of_a_command_written_wrong() -> None:
    rerun = parse_command("/perfci rerun --ab --repeats 12")
    assert rerun is not None and (rerun.ab, rerun.repeats, rerun.problem) == (True, 12, None)
    assert parse_command("/perfci rerun repeats=3") == parse_command("/perfci rerun --repeats 3")
    for body, problem in [
        ("/perfci accept", "needs a reason"),
        ("/perfci rerun --repeats", "needs a number"),
        ("/perfci rerun --repeats 0", "between 1 and 100"),
        ("/perfci rerun --fast", "unknown option"),
        ("/perfci frobnicate now", "unknown command"),
        ("/perfci", "no command given"),
    ]:
        command = parse_command(body)
        assert command is not None and problem in (command.problem or ""), body
    long = parse_command("/perfci accept " + "x" * 2000)
    assert long is not None and len(long.reason) == MAX_REASON_CHARS


def test_help_names_the_commands_and_escapes_what_was_written() -> None:
    command = parse_command("/perfci `@here<b>| and more")
    assert command is not None
    reply = help_reply(command)
    assert "unknown command `` `@here<b>\\| ``." in reply  # a code span: inert
    assert "`/perfci accept <reason>`" in reply and "`/perfci false-alarm" in reply


def _payload(**changes: object) -> dict[str, object]:
    event: dict[str, object] = {
        "action": "created",
        "issue": {"number": 7, "pull_request": {"url": "x"}},
        "comment": {"id": 11, "body": "/perfci rerun", "user": {"login": "al", "type": "User"}},
        "repository": {"full_name": "acme/model"},
    }
    event.update(changes)
    return event


def test_only_new_comments_of_people_on_pull_requests_are_answered() -> None:
    assert comment_event(_payload()) == CommentEvent("acme/model", 7, 11, "al", "/perfci rerun")
    assert "edited" in str(comment_event(_payload(action="edited")))
    assert "issue" in str(comment_event(_payload(issue={"number": 7})))
    bot = {"id": 12, "body": "/perfci rerun", "user": {"login": "perfci[bot]", "type": "Bot"}}
    assert "bot" in str(comment_event(_payload(comment=bot)))
    assert isinstance(comment_event({"pull_request": {}}), str)


def test_a_merge_is_read_from_the_closed_event_only_when_merged() -> None:
    pull = {"number": 7, "merged": True, "merge_commit_sha": "abc123"}
    merged = merged_pull({"action": "closed", "pull_request": pull, "repository": {}})
    assert merged is not None and (merged.pr_number, merged.merge_commit) == (7, "abc123")
    closed = {"action": "closed", "pull_request": {**pull, "merged": False}}
    assert merged_pull(closed) is None
    assert merged_pull({"action": "opened", "pull_request": pull}) is None


def _answer(kind: AnswerKind, pr: int, minutes: int, benchmark: str = "gpt") -> StoredAnswer:
    return StoredAnswer(
        id=minutes,
        benchmark=benchmark,
        pr_number=pr,
        commit=None,
        comparison_id=None,
        kind=kind,
        actor="al",
        reason=None,
        keys=(),
        created_at=T0 + timedelta(minutes=minutes),
    )


def test_the_tally_sorts_each_alert_into_accepted_false_alarm_fixed_or_open() -> None:
    def checks(pr: int, *regressed: bool, benchmark: str = "gpt") -> list[PrVerdict]:
        return [
            PrVerdict(benchmark, pr, flag, T0 + timedelta(minutes=i))
            for i, flag in enumerate(regressed)
        ]

    verdicts = [
        *checks(1, True),  # accepted
        *checks(2, True, True),  # false alarm
        *checks(3, True, False),  # fixed by a later push
        *checks(4, True),  # open
        *checks(5, False, False),  # never an alert
        *checks(6, True),  # accepted, then called a false alarm: the later answer wins
        *checks(1, True, benchmark="bert"),
    ]
    answers = [
        _answer(AnswerKind.ACCEPTED, 1, 5),
        _answer(AnswerKind.FALSE_ALARM, 2, 5),
        _answer(AnswerKind.RERUN, 2, 3),
        _answer(AnswerKind.ACCEPTED, 6, 5),
        _answer(AnswerKind.FALSE_ALARM, 6, 9),
    ]
    bert, gpt = tally(verdicts, answers)
    assert (bert.benchmark, bert.alerts, bert.open, bert.precision) == ("bert", 1, 1, None)
    assert (gpt.alerts, gpt.accepted, gpt.false_alarms, gpt.fixed, gpt.open) == (5, 1, 2, 1, 1)
    assert gpt.reruns == 1
    assert gpt.precision == pytest.approx(2 / 4)


def test_an_acceptance_covers_only_the_lines_it_accepted() -> None:
    accepted = [Acceptance("al", "why", ("step:a", "kernel:b"), "f" * 40, T0)]
    assert covers(accepted, ["step:a"])
    assert not covers(accepted, ["step:a", "kernel:c"])
    assert not covers(accepted, [])  # nothing regressed: nothing to pass by acceptance
    assert not covers([], ["step:a"])


def test_the_acceptance_block_is_escaped_and_replaced_in_place() -> None:
    evil = Acceptance("al", "<img src=x onerror=alert(1)> | **bold** @team", ("k",), None, T0)
    block = acceptance_block([evil])
    assert "<img" not in block and "&lt;img" in block
    assert "\\| \\*\\*bold\\*\\*" in block and "@\u2060team" in block
    body = "<!-- perfci:benchmark=gpt -->\n## perfci: gpt\n"
    once = with_answers(body, block)
    assert once.startswith("<!-- perfci:benchmark=gpt -->\n" + ANSWERS_START)
    twice = with_answers(once, acceptance_block([evil, evil], uncovered=2))
    assert twice.count(ANSWERS_START) == 1 and "2 regressed lines are not part" in twice
    assert with_answers(twice, "") == body
