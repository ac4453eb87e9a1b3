"""``perfci report``: the weekly trend report of a branch, written to files and optionally posted.

Progress goes to stderr; the paths of the files written go to stdout, one per line.
"""

# lazy: the imports inside functions load a command's work only when it runs, so that
# `perfci --help` and the short commands start fast (tests/test_cold_start.py).
from __future__ import annotations

import json
import os
import re
from datetime import datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from perfci.cli import _console
from perfci.cli import _options as opts
from perfci.cli._options import output_formats
from perfci.core.compat import UTC
from perfci.core.errors import ConfigError

if TYPE_CHECKING:  # the report stack (scipy, matplotlib, jinja2, the store) loads when run
    from perfci.core.weekly import WeeklyReport

FORMATS = ("html", "md", "json")
TARGETS = ("github-issue", "slack")
DEFAULT_OUT = Path(".perfci") / "reports"
DEFAULT_LABELS = "perfci,performance"
_DURATION = re.compile(r"^(\d+)\s*([hdw])$")
_UNITS = {"h": "hours", "d": "days", "w": "weeks"}


def period(
    since: str | None, week: str | None, *, now: datetime | None = None
) -> tuple[datetime, datetime]:
    """``[since, until)`` from ``--since 7d`` (up to now) or ``--week YYYY-Www``; default 7d."""
    if since and week:
        raise ConfigError("give --since or --week, not both")
    if week:
        from perfci.usecases.weekly.weeks import week_bounds

        return week_bounds(week)
    match = _DURATION.match((since or "7d").strip().lower())
    if not match:
        raise ConfigError(f"--since {since!r} is not a duration such as 7d, 36h or 2w")
    until = now or datetime.now(UTC)
    try:
        return until - timedelta(**{_UNITS[match[2]]: int(match[1])}), until
    except OverflowError:  # --since 99999999w: before year 1
        raise ConfigError(
            f"--since {since!r} reaches back before the calendar's start: give a shorter period"
        ) from None


def report_command(
    since: str | None = typer.Option(
        None, "--since", help="Period up to now: 7d, 36h, 2w (default 7d)."
    ),
    week: str | None = typer.Option(
        None, "--week", help="ISO week YYYY-Www (Monday–Sunday, UTC) instead of --since."
    ),
    branch: str = typer.Option("main", "--branch", help="Branch whose history is reported."),
    benchmark: list[str] = typer.Option(
        [], "--benchmark", "-b", help="Only this benchmark (repeatable)."
    ),
    project: opts.StoredProject = None,
    formats: list[str] = typer.Option(
        list(FORMATS),
        "--format",
        "-f",
        help="html, md (or markdown) or json (repeatable; default all).",
    ),
    out: Path = typer.Option(DEFAULT_OUT, "--out", help="Folder the files are written to."),
    post: list[str] = typer.Option([], "--post", help="github-issue or slack (repeatable)."),
    repo: str | None = typer.Option(
        None, "--repo", help="OWNER/NAME for --post github-issue (default: GITHUB_REPOSITORY)."
    ),
    labels: str = typer.Option(
        DEFAULT_LABELS, "--labels", help="Comma-separated labels of the weekly issue."
    ),
    slack_webhook: str | None = typer.Option(
        None,
        "--slack-webhook",
        help="Slack incoming webhook URL (default: "
        "PERFCI_SLACK_WEBHOOK). A secret: prefer "
        "the variable.",
    ),
    history: str | None = typer.Option(
        None,
        "--history",
        help="Read the runs from this history branch of origin first (git:perfci-data, as "
        "`perfci check --history` writes it) into the embedded store, and report from there.",
    ),
    history_weeks: int = typer.Option(
        8, "--history-weeks", min=1, help="Weeks of history searched for change points."
    ),
    database_url: opts.DatabaseUrl = None,
) -> None:
    """Write the weekly trend report: change points, the kernels behind them, noise, coverage."""
    from perfci.usecases.stores import project_or_default
    from perfci.usecases.weekly.outputs import build_report, post_issue, post_to_slack

    formats = output_formats(formats, allowed=FORMATS, option="--format")
    _check_choices(post, TARGETS, "--post")
    start, until = period(since, week)
    name = project_or_default(project)
    repository = repo or os.environ.get("GITHUB_REPOSITORY")
    webhook = slack_webhook or os.environ.get("PERFCI_SLACK_WEBHOOK")
    _check_targets(post, repository, webhook)
    with _console.err_console.status(f"Building the report of {name} on {branch}…"):
        report = build_report(
            database_url,
            name,
            since=start,
            until=until,
            branch=branch,
            benchmarks=benchmark or None,
            history_weeks=history_weeks,
            history=history,
        )
    _console.err_console.print(
        f"{len(report.change_points())} change points in "
        f"{len(report.benchmarks)} benchmark trends, week {report.week}"
    )
    for path in write_report(report, out, formats, repo=repository):
        typer.echo(str(path))
    if "github-issue" in post:
        issue = post_issue(
            report,
            repository or "",
            [x.strip() for x in labels.split(",") if x.strip()],
            database_url=database_url,
            project=project,
        )
        verb = "created" if issue.created else "updated"
        _console.err_console.print(f"{verb} issue #{issue.number}: {issue.url}")
    if "slack" in post:
        post_to_slack(report, webhook or "")
        _console.err_console.print("posted to Slack")


def write_report(
    report: WeeklyReport, out: Path, formats: list[str], *, repo: str | None = None
) -> list[Path]:
    """Write the report in each format to ``out``; returns the paths written."""
    out.mkdir(parents=True, exist_ok=True)
    stem = f"weekly-{_slug(report.project)}-{report.week}"
    paths = []
    for kind in dict.fromkeys(formats):
        path = out / f"{stem}.{kind}"
        with _console.err_console.status(f"Rendering {kind}…"):
            path.write_text(_render(report, kind, repo), encoding="utf-8")
        paths.append(path)
    return paths


def _render(report: WeeklyReport, kind: str, repo: str | None) -> str:
    if kind == "html":
        from perfci.report.weekly_html import render_html

        return render_html(report)
    if kind == "md":
        from perfci.report.weekly_markdown import render_markdown

        return render_markdown(report, repo=repo)
    from perfci.usecases.weekly.report_json import report_to_dict

    return json.dumps(report_to_dict(report), indent=1, ensure_ascii=False) + "\n"


def _check_choices(values: list[str], allowed: tuple[str, ...], flag: str) -> None:
    for value in values:
        if value not in allowed:
            raise ConfigError(f"{flag} {value!r}: expected one of {', '.join(allowed)}")


def _check_targets(post: list[str], repo: str | None, webhook: str | None) -> None:
    """Fail before the report is built, not after, when a target is not configured."""
    if "github-issue" in post and not repo:
        raise ConfigError("--post github-issue needs --repo OWNER/NAME (or GITHUB_REPOSITORY)")
    if "slack" in post and not webhook:
        raise ConfigError("--post slack needs PERFCI_SLACK_WEBHOOK (or --slack-webhook)")


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text).strip("_") or "project"


def register(app: typer.Typer) -> None:
    app.command("report")(report_command)
