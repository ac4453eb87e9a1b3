"""``perfci answer``: carry out a ``/perfci`` command commented on a pull request (issue 34)."""

# lazy: the imports inside functions load a command's work only when it runs, so that
# `perfci --help` and the short commands start fast (tests/test_cold_start.py).
from __future__ import annotations

from pathlib import Path

import typer

from perfci.cli import _console
from perfci.cli import _options as opts
from perfci.core.errors import ConfigError


def answer_command(
    event: Path | None = typer.Option(
        None,
        "--event",
        help="The GitHub event payload (default: $GITHUB_EVENT_PATH): issue_comment, or a "
        "pull request's closed event.",
    ),
    pr: int | None = typer.Option(
        None, "--pr", min=1, help="Instead of an event: the pull request commented on."
    ),
    user: str | None = typer.Option(None, "--user", help="With --pr: who commented."),
    body: str | None = typer.Option(
        None, "--body", help="With --pr: the comment, e.g. '/perfci accept new kernel'."
    ),
    repo: str | None = typer.Option(
        None, "--repo", help="OWNER/NAME (default: the event's, else $GITHUB_REPOSITORY)."
    ),
    project: opts.StoredProject = None,
    database_url: opts.DatabaseUrl = None,
) -> None:
    """Answer a pull request's check: /perfci accept <reason>, false-alarm, rerun.

    Only people with write access to the repository (checked with GitHub) are obeyed; others
    get a reply and nothing is recorded. See docs/answers.md for the workflow.
    """
    import os

    from perfci.core.settings import get_settings
    from perfci.usecases.answers.run import answer_event, local_comment, read_answer_event
    from perfci.usecases.stores import project_or_default

    repository = repo or os.environ.get("GITHUB_REPOSITORY")
    if pr is not None:
        if not user or body is None:
            raise ConfigError("--pr needs --user and --body")
        given = local_comment(repository, pr, user, body)
    else:
        path = str(event) if event else os.environ.get("GITHUB_EVENT_PATH")
        if not path:
            raise ConfigError("give --event PATH (or $GITHUB_EVENT_PATH), or --pr/--user/--body")
        given = read_answer_event(path)
    outcome = answer_event(
        given,
        settings=get_settings({"database_url": database_url, "project": project}),
        project=project_or_default(project),
        repository=repository,
    )
    for warning in outcome.warnings:
        _console.err_console.print(f"warning: {warning}", markup=False)
    _console.console.print(f"{outcome.action}: {outcome.message}", markup=False)
    if outcome.reply_url:
        _console.console.print(outcome.reply_url, markup=False)


def register(app: typer.Typer) -> None:
    app.command("answer")(answer_command)
