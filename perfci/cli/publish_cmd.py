"""``perfci publish``: post a saved report's comment and status (the fork-safe workflow_run job)."""

# lazy: the imports inside functions load a command's work only when it runs, so that
# `perfci --help` and the short commands start fast (tests/test_cold_start.py).
from __future__ import annotations

from pathlib import Path

import typer

from perfci.cli import _console


def publish_command(
    report: Path = typer.Argument(..., help="The JSON report of `perfci check --json-out`."),
    markdown: Path | None = typer.Option(
        None, "--markdown", help="The comment (default: REPORT with .md)."
    ),
    repo: str | None = typer.Option(
        None, "--repo", help="OWNER/NAME (default: $GITHUB_REPOSITORY)."
    ),
    commit: str | None = typer.Option(
        None, "--commit", help="The workflow run's head SHA; the report must match."
    ),
) -> None:
    """Post the PR comment and commit status of a report made by an untrusted pull_request run.

    The report is data, never code: its PR number and commit are validated, and with --commit
    a report for another commit is refused.
    """
    # Here, not at the top: requests, jinja2 and pydantic are not needed to build the CLI.
    from perfci.core.settings import get_settings
    from perfci.usecases.check.publish import publish_artifact

    outcome = publish_artifact(
        report, settings=get_settings(), markdown=markdown, repository=repo, commit=commit
    )
    for warning in outcome.warnings:
        _console.err_console.print(f"warning: {warning}", markup=False)
    if outcome.skipped_reason:
        _console.err_console.print(f"nothing posted: {outcome.skipped_reason}", markup=False)
    if outcome.comment_url:
        _console.console.print(outcome.comment_url, markup=False)


def register(app: typer.Typer) -> None:
    app.command("publish")(publish_command)
