"""The weekly report's part of the answers given on pull requests (issue 34).

- The tally: per benchmark, how many pull-request alerts were accepted, rejected as false
  alarms, fixed, or are still open (:func:`perfci.core.answers.tally`): perfci's own measured
  precision, over the history the report searches.
- Accepted changes on the base branch: a change point whose new level starts at the commit an
  accepted pull request was merged as (``perfci answer`` notes it when the pull request is
  merged) is the accepted change landing, not a new regression. Its alert is acknowledged with
  who accepted it and why, so it is not raised again; a dismissed or acknowledged alert is left
  as it is.
"""

from __future__ import annotations

from datetime import datetime

from perfci.core.answers import AnswerKind, BenchmarkAnswers, StoredAnswer, tally
from perfci.core.weekly import AlertInfo, WeeklyReport
from perfci.store.answers import answers_of, pr_verdicts
from perfci.store.work import Session, reading
from perfci.usecases.browse.alerts import set_alert_status

__all__ = ["accepted_note", "acknowledge_accepted", "tally_answers"]


def tally_answers(
    session: Session, *, project: str, since: datetime, until: datetime
) -> list[BenchmarkAnswers]:
    """Per benchmark, the fate of the pull-request alerts checked in ``[since, until)``."""
    with reading(session):
        verdicts = pr_verdicts(session, project, since, until)
        if not verdicts:
            return []
        given = answers_of(session, project, since=since)
    return tally(verdicts, given)


def accepted_note(answer: StoredAnswer) -> str:
    """The note an acknowledged alert gets: who accepted the change, where, and why."""
    return f"accepted in PR #{answer.pr_number} by @{answer.actor}: {answer.reason or ''}".strip()


def acknowledge_accepted(session: Session, report: WeeklyReport) -> None:
    """Acknowledge the report's open alerts at the merge commit of an accepted change, and
    show the new status on the report's change points and alerts."""
    commits = {a.commit for a in report.alerts if a.status == "open" and a.commit}
    if not commits:
        return
    with reading(session):
        merged = answers_of(
            session, report.project, kind=AnswerKind.ACCEPTED, merge_commits=commits
        )
    by_commit = {(a.benchmark, a.merge_commit): a for a in merged}
    updated: dict[int, AlertInfo] = {}
    for alert in report.alerts:
        answer = by_commit.get((alert.benchmark, alert.commit))
        if alert.status == "open" and answer is not None:
            updated[alert.id] = set_alert_status(
                session, alert.id, "acknowledged", accepted_note(answer)
            )
    if not updated:
        return
    report.alerts = [updated.get(a.id, a) for a in report.alerts]
    for trend in report.benchmarks:
        for cp in trend.change_points:
            if cp.alert_id in updated:
                cp.alert_status = updated[cp.alert_id].status
