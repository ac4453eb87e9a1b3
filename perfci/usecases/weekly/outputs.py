"""``perfci report``: build a branch's weekly report from the store, and post it to a GitHub
issue or a Slack channel.

Rendering the files is the command's (through :mod:`perfci.report`); reaching the store,
GitHub and Slack is done here.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

from perfci.core.errors import ConfigError
from perfci.core.settings import Settings, get_settings
from perfci.core.settings_sources import find_project_root
from perfci.store.db import open_store
from perfci.usecases.stores import project_or_default
from perfci.usecases.weekly.report import build_weekly_report

if TYPE_CHECKING:
    from perfci.core.weekly import WeeklyReport

#: The history branch's progress and skipped files: the CLI shows this logger's lines.
logger = logging.getLogger("perfci.history")


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
    history: str | None = None,
    cwd: Path | None = None,
) -> WeeklyReport:
    """The weekly report of ``project`` (default: settings, else the repository) on
    ``branch`` for ``[since, until)``.

    With a history branch (``history = "git:perfci-data"``, from the flag, the settings or a
    ``git:`` database URL), its runs are read into the embedded store first, as a check does
    (:func:`perfci.usecases.history.branch.sync_branch`): the weekly job of the Action's
    default mode has no other store. A report cannot be made without them, so a branch that
    cannot be read is an error here, not a warning.

    Raises
    ------
    ConfigError
        The history branch is not ``git:NAME``, names a branch of the code, or holds no runs.
    StorageError
        git could not fetch the branch.
    """
    overrides = {"database_url": database_url, "project": project, "history": history}
    settings = get_settings(overrides, start=cwd)
    name = project_or_default(settings.project)
    if settings.history and not settings.server_url:
        _read_history(settings, settings.history, cwd)
    store = open_store(settings, root=find_project_root(cwd))
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


def _read_history(settings: Settings, history: str, cwd: Path | None) -> None:
    # lazy: the history branch and the ingest it needs load only with `history = "git:…"`
    from perfci.history import parse_history
    from perfci.usecases.history.branch import sync_branch

    branch = parse_history(history)  # ConfigError when it is not git:BRANCH
    if branch is None:  # history = "none"
        return
    synced = sync_branch(settings, branch, cwd=cwd)
    if synced.commit is None:
        raise ConfigError(
            f"the history branch git:{branch} does not exist on origin yet: a push to the base "
            "branch with `perfci check --history` creates it"
        )
    for warning in synced.warnings:
        logger.warning("%s", warning)


def post_issue(
    report: WeeklyReport,
    repo: str,
    labels: list[str],
    *,
    database_url: str | None = None,
    project: str | None = None,
) -> PostedIssue:
    """Create, or update in place, the weekly issue of ``report`` in ``repo``."""
    # lazy: requests and jinja2 only when the report is posted as an issue
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
    # lazy: requests and jinja2 only when the report is posted to Slack
    from perfci.integrations.slack import post_slack
    from perfci.report.weekly_markdown import render_slack

    post_slack(webhook, render_slack(report))
