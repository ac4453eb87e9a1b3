"""``perfci report``: build a branch's weekly report from the store, and post it to a GitHub
issue or a Slack channel.

Rendering the files is the command's (through :mod:`perfci.report`); reaching the store,
GitHub and Slack is done here.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

from perfci.core.settings import get_settings

if TYPE_CHECKING:
    from perfci.core.weekly import WeeklyReport


@dataclass(frozen=True, slots=True)
class PostedIssue:
    """The weekly issue posted: its number, its URL and whether it was new."""

    number: int
    url: str
    created: bool


def build_report(
    database_url: str | None,
    project: str | None,
    *,
    since: datetime,
    until: datetime,
    branch: str,
    benchmarks: Sequence[str] | None,
    history_weeks: int,
) -> WeeklyReport:
    """The weekly report of ``project`` (default: settings, else the repository) on
    ``branch`` for ``[since, until)``."""
    from perfci.store.db import open_store
    from perfci.usecases.stores import project_or_default
    from perfci.usecases.weekly.report import build_weekly_report

    settings = get_settings({"database_url": database_url, "project": project})
    name = project_or_default(settings.project)
    store = open_store(settings)
    try:
        with store.sessions() as session:
            return build_weekly_report(
                session,
                project=name,
                since=since,
                until=until,
                branch=branch,
                benchmarks=list(benchmarks or []) or None,
                history_weeks=history_weeks,
            )
    finally:
        store.close()


def post_issue(
    report: WeeklyReport,
    repo: str,
    labels: list[str],
    *,
    database_url: str | None = None,
    project: str | None = None,
) -> PostedIssue:
    """Create, or update in place, the weekly issue of ``report`` in ``repo``."""
    from perfci.integrations.github.client import GitHubClient
    from perfci.report.weekly_markdown import issue_title, render_markdown, weekly_marker

    settings = get_settings({"database_url": database_url, "project": project})
    with GitHubClient.from_settings(settings) as client:
        issue = client.create_or_update_issue(
            repo,
            issue_title(report.project, report.week),
            render_markdown(report, repo=repo),
            labels,
            weekly_marker(report.project, report.week),
        )
    return PostedIssue(number=issue.number, url=issue.url, created=issue.created)


def post_to_slack(report: WeeklyReport, webhook: str) -> None:
    """Post the report's Slack summary to the incoming ``webhook``."""
    from perfci.integrations.slack import post_slack
    from perfci.report.weekly_markdown import render_slack

    post_slack(webhook, render_slack(report))
