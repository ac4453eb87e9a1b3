"""Posting to a pull request: one comment (found by its hidden marker and edited in place),
then the ``perfci/<benchmark>`` commit status. Each refusal is a warning, never an error: the
verdict, not GitHub's mood, decides the job's exit code."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from perfci.core.errors import GitHubError
from perfci.core.model import Verdict
from perfci.core.settings import Settings
from perfci.integrations.github.actions import annotation
from perfci.integrations.github.client import GitHubClient
from perfci.report.markdown import comment_marker
from perfci.usecases.check.verdict_lines import status_context

__all__ = ["PublishOutcome", "Target", "has_token", "post_comment_and_status", "warn"]


@dataclass(slots=True)
class PublishOutcome:
    """What publishing did. ``skipped_reason`` says why no API call was made, if none was;
    ``warnings`` are failures that did not stop it (a refused comment, a missing commit)."""

    markdown: str
    comment_url: str | None = None
    status_set: bool = False
    summary_written: bool = False
    annotations: list[str] = field(default_factory=list)
    skipped_reason: str | None = None
    report_paths: list[Path] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class Target:
    """Where on GitHub the comment and status go."""

    repository: str
    pr_number: int
    commit: str | None


def has_token(settings: Settings) -> bool:
    return settings.github_token is not None and bool(settings.github_token.get_secret_value())


def post_comment_and_status(
    markdown: str,
    outcome: PublishOutcome,
    *,
    target: Target,
    benchmark: str,
    verdict: Verdict,
    description: str,
    settings: Settings,
    run_url: str | None,
    client: GitHubClient | None,
) -> None:
    """Comment, then status; each failure is a warning and the other is still tried."""
    github = client or GitHubClient.from_settings(settings)
    try:
        try:
            posted = github.upsert_comment(
                target.repository, target.pr_number, markdown, comment_marker(benchmark)
            )
            outcome.comment_url = posted.url
        except GitHubError as exc:
            warn(outcome, f"could not post the pull-request comment: {exc}")
        if not target.commit:
            warn(outcome, "no commit SHA is known: the commit status was not set")
            return
        # Only a final state is ever sent: a `pending` left behind by a crash would block merges.
        state = "failure" if verdict is Verdict.REGRESSION else "success"
        try:
            github.set_status(
                target.repository,
                target.commit,
                state=state,
                context=status_context(benchmark),
                description=description,
                target_url=outcome.comment_url or run_url,
            )
            outcome.status_set = True
        except GitHubError as exc:
            warn(outcome, f"could not set the commit status {status_context(benchmark)}: {exc}")
    finally:
        if client is None:
            github.close()


def warn(outcome: PublishOutcome, message: str) -> None:
    """A failure that did not stop publishing: kept, and annotated in the workflow."""
    outcome.warnings.append(message)
    outcome.annotations.append(annotation("warning", message, title="perfci: GitHub"))
