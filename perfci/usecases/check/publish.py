"""Publish a comparison where the CI job's readers are: report files, the job summary, workflow
annotations, and on a pull request one comment (edited in place) and a commit status.

What is written where, and why:

- The Markdown comment and the JSON report always go to ``out_dir``: the workflow uploads that
  folder as an artifact, which is also how a pull request from a fork gets its comment (a
  ``workflow_run`` job with a write token posts it later, see :func:`publish_artifact`).
- The job summary (``$GITHUB_STEP_SUMMARY``) is written whenever it is set: it needs no token,
  so forks and read-only tokens still get the report.
- Annotations (``::error`` per gated regression, ``::warning`` per inconclusive step line) are
  printed only inside GitHub Actions, where the runner turns them into check annotations.
- The comment and the ``perfci/<benchmark>`` status need a token with write access, the
  repository and the pull-request number, and a verdict worth a comment (``comment_on``,
  :mod:`perfci.usecases.check.comment_policy`). A fork's pull request gets a read-only token,
  so no API call is even tried. A refusal (say a missing ``permissions:`` entry) becomes a
  warning: the verdict, not GitHub's mood, decides the job's exit code.

The pieces: :mod:`~perfci.usecases.check.verdict_lines` (status line, annotations),
:mod:`~perfci.usecases.check.posting` (comment and status), :mod:`~perfci.usecases.check.artifact`
(the files, and posting them later); their public names are re-exported here.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from perfci.core import private_env
from perfci.core.answers import Acceptance
from perfci.core.model import RunComparison, RunContext, Verdict
from perfci.core.repro import Repro
from perfci.core.settings import Settings
from perfci.integrations.context import read_event
from perfci.integrations.github.actions import (
    annotation,
    is_fork_pull_request,
    write_job_summary,
)
from perfci.integrations.github.client import GitHubClient
from perfci.report.answers import with_answers
from perfci.report.markdown import comment_marker, render_comment, render_summary
from perfci.usecases.answers.accepted import accepted_view
from perfci.usecases.check.artifact import artifact_paths, publish_artifact, write_artifact
from perfci.usecases.check.comment_policy import CommentOn, cc_line, cc_mentions, worth_a_comment
from perfci.usecases.check.posting import (
    PublishOutcome,
    Target,
    has_token,
    post_comment_and_status,
)
from perfci.usecases.check.verdict_lines import (
    MAX_ERROR_ANNOTATIONS,
    status_context,
    status_description,
    status_verdict,
    verdict_annotations,
)

__all__ = [
    "MAX_ERROR_ANNOTATIONS",
    "CommentOn",
    "PublishOutcome",
    "artifact_paths",
    "publish",
    "publish_artifact",
    "status_context",
    "status_description",
    "verdict_annotations",
]


def publish(
    result: RunComparison,
    *,
    context: RunContext,
    settings: Settings,
    benchmark: str,
    comment: bool = True,
    comment_on: CommentOn = CommentOn.ALWAYS,
    cc: Sequence[str] = (),
    event: Mapping[str, Any] | None = None,
    env: Mapping[str, str] | None = None,
    out_dir: Path | None = None,
    client: GitHubClient | None = None,
    repro: Repro | None = None,
    acceptances: Sequence[Acceptance] = (),
) -> PublishOutcome:
    """Report ``result`` as files, job summary, annotations, PR comment and commit status.

    Parameters
    ----------
    result
        The comparison to publish.
    context
        The run's repository, commit, PR number and CI URL (the comment links to the CI run).
    settings
        The GitHub token and API URL.
    benchmark
        Names the comment's hidden marker and the ``perfci/<benchmark>`` status.
    comment
        ``False`` (``--no-comment``) makes no API call; files and summary are still written.
    comment_on
        Which verdicts get the comment and status (``--comment-on``); a quiet run makes no
        API call, and its job summary says why.
    cc
        ``@user`` / ``@org/team`` mentions (each entry may hold several) added to the comment
        of a regression; an invalid one is left out with a warning.
    event
        The GitHub event payload; read from ``$GITHUB_EVENT_PATH`` when ``None``.
    env
        The process environment (:func:`perfci.core.private_env.environ` when ``None``).
    out_dir
        Folder for the report files (the artifact); none are written when ``None``.
    client
        A GitHub client to use (tests); built from ``settings`` when needed.
    repro
        The repro bundle shown in the comment and the job summary (``None``: none).
    acceptances
        Regressions accepted on the pull request (``/perfci accept``, issue 34): shown at the
        top of the comment; when they hold every gated regression, the status is ``success``.

    Never raises for GitHub's refusals: they come back in ``warnings`` (and as annotations).
    """
    env = private_env.environ() if env is None else env
    in_actions = env.get("GITHUB_ACTIONS") == "true"
    markdown = render_comment(
        result, marker=comment_marker(benchmark), run_url=context.ci_url, repro=repro
    )
    accepted = accepted_view(result, acceptances)
    if accepted is not None:
        markdown = with_answers(markdown, accepted.block)
    mentions, cc_warnings = cc_mentions(cc)
    if result.verdict is Verdict.REGRESSION:
        markdown += cc_line(mentions)
    outcome = PublishOutcome(markdown=markdown, warnings=cc_warnings)
    outcome.annotations = [annotation("warning", w, title="perfci: cc") for w in cc_warnings]
    if out_dir is not None:
        outcome.report_paths = write_artifact(
            result, markdown, context=context, benchmark=benchmark, out_dir=out_dir
        )
    outcome.annotations += verdict_annotations(result, benchmark=benchmark)
    outcome.skipped_reason = _skip_reason(
        result,
        context,
        settings,
        comment=comment,
        comment_on=comment_on,
        event=_event(event, env),
    )
    if outcome.skipped_reason is None:
        covered = accepted is not None and accepted.covered
        post_comment_and_status(
            markdown,
            outcome,
            target=Target(str(context.repository), int(context.pr_number or 0), context.commit),
            benchmark=benchmark,
            # An accepted check passes: its status is a success saying who accepted it and why.
            verdict=Verdict.UNCHANGED if covered else status_verdict(result),
            description=accepted.description
            if accepted and covered
            else status_description(result),
            settings=settings,
            run_url=context.ci_url,
            client=client,
        )
    outcome.summary_written = _write_summary(
        result, outcome, run_url=context.ci_url, env=env, repro=repro
    )
    if in_actions:
        for line in outcome.annotations:
            print(line, file=sys.stdout, flush=True)
    return outcome


def _event(event: Mapping[str, Any] | None, env: Mapping[str, str]) -> Mapping[str, Any]:
    return event if event is not None else read_event(env.get("GITHUB_EVENT_PATH"))


def _skip_reason(
    result: RunComparison,
    context: RunContext,
    settings: Settings,
    *,
    comment: bool,
    comment_on: CommentOn,
    event: Mapping[str, Any],
) -> str | None:
    """Why no API call should be made, or ``None`` when the comment and status can be posted."""
    if not comment:
        return "commenting is off (--no-comment): no comment and no status posted"
    if not worth_a_comment(result.verdict, comment_on):
        return (
            f"the verdict is {result.verdict.value} and comments are for "
            f"--comment-on {comment_on.value}: no comment and no status posted"
        )
    if is_fork_pull_request(event):
        return (
            "pull request from a fork: its GITHUB_TOKEN is read-only, so no comment and no "
            "status were posted; the job summary and the report artifact carry the report "
            "(see the fork-safe workflow in github_action/README.md)"
        )
    if not has_token(settings):
        return (
            "no GitHub token (GITHUB_TOKEN or PERFCI_GITHUB_TOKEN): no comment and no status posted"
        )
    if not context.repository:
        return "the repository is unknown (GITHUB_REPOSITORY): no comment and no status posted"
    if context.pr_number is None:
        return "not a pull request: no comment and no status posted"
    return None


def _write_summary(
    result: RunComparison,
    outcome: PublishOutcome,
    *,
    run_url: str | None,
    env: Mapping[str, str],
    repro: Repro | None,
) -> bool:
    path = env.get("GITHUB_STEP_SUMMARY")
    if not path:
        return False
    summary = render_summary(result, run_url=run_url, repro=repro)
    notes = [outcome.skipped_reason, *outcome.warnings]
    if any(notes):
        summary += "\n" + "".join(f"> perfci: {note}\n" for note in notes if note)
    return write_job_summary(summary, path)
