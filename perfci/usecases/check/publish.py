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
  repository and the pull-request number. A fork's pull request gets a read-only token, so no
  API call is even tried. A refusal (say a missing ``permissions:`` entry) becomes a warning:
  the verdict, not GitHub's mood, decides the job's exit code.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from perfci.core import private_env
from perfci.core.answers import Acceptance
from perfci.core.errors import ConfigError, GitHubError
from perfci.core.model import MetricComparison, MetricKind, RunComparison, RunContext, Verdict
from perfci.core.repro import Repro
from perfci.core.settings import Settings
from perfci.integrations.github.actions import annotation, is_fork_pull_request, write_job_summary
from perfci.integrations.github.client import GitHubClient
from perfci.report.answers import with_answers
from perfci.report.json_report import comparison_to_dict
from perfci.report.markdown import comment_marker, render_comment, render_summary
from perfci.usecases.answers.accepted import AcceptedView, accepted_view

__all__ = [
    "MAX_ERROR_ANNOTATIONS",
    "PublishOutcome",
    "artifact_paths",
    "publish",
    "publish_artifact",
    "status_context",
    "status_description",
    "verdict_annotations",
]

#: GitHub shows at most 10 error annotations per step; the last one says how many were left out.
MAX_ERROR_ANNOTATIONS = 10
_SLUG = re.compile(r"[^A-Za-z0-9._-]+")
_SHA = re.compile(r"^[0-9a-fA-F]{7,64}$")


@dataclass(slots=True)
class PublishOutcome:
    """What :func:`publish` did. ``skipped_reason`` says why no API call was made, if none was;
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
class _Target:
    """Where on GitHub the comment and status go."""

    repository: str
    pr_number: int
    commit: str | None


def status_context(benchmark: str) -> str:
    """The commit-status name of ``benchmark``: ``perfci/<benchmark>``."""
    return f"perfci/{benchmark}"


def artifact_paths(out_dir: Path, benchmark: str) -> tuple[Path, Path]:
    """The Markdown and JSON report files of ``benchmark`` inside ``out_dir``."""
    stem = f"perfci-{_SLUG.sub('_', benchmark).strip('_') or 'benchmark'}"
    return out_dir / f"{stem}.md", out_dir / f"{stem}.json"


def publish(
    result: RunComparison,
    *,
    context: RunContext,
    settings: Settings,
    benchmark: str,
    comment: bool = True,
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
    outcome = PublishOutcome(markdown=markdown)
    if out_dir is not None:
        outcome.report_paths = _write_artifact(
            result, markdown, context=context, benchmark=benchmark, out_dir=out_dir
        )
    outcome.annotations = verdict_annotations(result, benchmark=benchmark)
    outcome.skipped_reason = _skip_reason(
        context, settings, comment=comment, event=_event(event, env)
    )
    if outcome.skipped_reason is None:
        target = _Target(str(context.repository), int(context.pr_number or 0), context.commit)
        _post(
            result,
            markdown,
            outcome,
            target=target,
            benchmark=benchmark,
            settings=settings,
            run_url=context.ci_url,
            client=client,
            accepted=accepted,
        )
    outcome.summary_written = _write_summary(
        result, outcome, run_url=context.ci_url, env=env, repro=repro
    )
    if in_actions:
        for line in outcome.annotations:
            print(line, file=sys.stdout, flush=True)
    return outcome


def verdict_annotations(result: RunComparison, *, benchmark: str) -> list[str]:
    """``::error`` lines for gated regressions (step lines first, then by time lost, at most
    :data:`MAX_ERROR_ANNOTATIONS`), ``::warning`` lines for inconclusive step lines."""
    gated = _by_impact(result.gated_regressions)
    shown = gated if len(gated) <= MAX_ERROR_ANNOTATIONS else gated[: MAX_ERROR_ANNOTATIONS - 1]
    title = f"perfci {benchmark}: regression"
    lines = [
        annotation("error", f"{_name(m)} {_change(m)} per step (q={_q(m)})", title=title)
        for m in shown
    ]
    if len(shown) < len(gated):
        lines.append(
            annotation(
                "error",
                f"{len(gated) - len(shown)} more regressions: see the job summary",
                title=title,
            )
        )
    for metric in result.steps:
        if metric.verdict is Verdict.INCONCLUSIVE:
            hint = (
                f"; re-run with about {metric.repeats_needed} repeats"
                if metric.repeats_needed
                else ""
            )
            lines.append(
                annotation(
                    "warning",
                    f"{_name(metric)} {_change(metric)} is not conclusive{hint}",
                    title=f"perfci {benchmark}: inconclusive",
                )
            )
    return lines


def publish_artifact(
    report_json: Path,
    *,
    settings: Settings,
    markdown: Path | None = None,
    repository: str | None = None,
    commit: str | None = None,
    client: GitHubClient | None = None,
    env: Mapping[str, str] | None = None,
) -> PublishOutcome:
    """Post the comment and status of a saved report (the fork-safe ``workflow_run`` pattern).

    Runs in a trusted job that downloaded the artifact of an untrusted ``pull_request`` run:
    the JSON report (``perfci check --json-out``, or the one :func:`publish` writes) and the
    Markdown comment beside it (``markdown``, default: the same name ending in ``.md``). The
    artifact is data, never code: its PR number must be a positive integer and its commit a
    hexadecimal SHA; when ``commit`` (the workflow run's ``head_sha``, which GitHub vouches for)
    is given, the report's commit must equal it, and the status goes on ``commit``.
    """
    env = private_env.environ() if env is None else env
    saved = _read_artifact(report_json)
    repository = repository or env.get("GITHUB_REPOSITORY") or saved.get("repository")
    if commit and saved.get("commit") and str(saved["commit"]).lower() != commit.lower():
        raise ConfigError(
            f"{report_json}: the report is for commit {saved['commit']}, not for "
            f"the workflow run's head {commit}; refusing to post it"
        )
    md_path = markdown or report_json.with_suffix(".md")
    try:
        body = md_path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"cannot read the report's comment {md_path}: {exc.strerror}") from None
    outcome = PublishOutcome(markdown=body, report_paths=[report_json, md_path])
    if not repository or not _has_token(settings):
        outcome.skipped_reason = "no GitHub token or repository: nothing posted"
        return outcome
    target = _Target(repository, saved["pr_number"], commit or saved.get("commit"))
    _post_saved(
        body,
        outcome,
        target=target,
        benchmark=saved["benchmark"],
        verdict=Verdict(saved["verdict"]),
        description=saved["description"],
        settings=settings,
        run_url=saved.get("ci_url"),
        client=client,
    )
    return outcome


# --- the pieces ----------------------------------------------------------------------------


def _event(event: Mapping[str, Any] | None, env: Mapping[str, str]) -> Mapping[str, Any]:
    from perfci.integrations.context import read_event

    return event if event is not None else read_event(env.get("GITHUB_EVENT_PATH"))


def _skip_reason(
    context: RunContext, settings: Settings, *, comment: bool, event: Mapping[str, Any]
) -> str | None:
    """Why no API call should be made, or ``None`` when the comment and status can be posted."""
    if not comment:
        return "commenting is off (--no-comment): no comment and no status posted"
    if is_fork_pull_request(event):
        return (
            "pull request from a fork: its GITHUB_TOKEN is read-only, so no comment and no "
            "status were posted; the job summary and the report artifact carry the report "
            "(see the fork-safe workflow in github_action/README.md)"
        )
    if not _has_token(settings):
        return (
            "no GitHub token (GITHUB_TOKEN or PERFCI_GITHUB_TOKEN): no comment and no status posted"
        )
    if not context.repository:
        return "the repository is unknown (GITHUB_REPOSITORY): no comment and no status posted"
    if context.pr_number is None:
        return "not a pull request: no comment and no status posted"
    return None


def _has_token(settings: Settings) -> bool:
    return settings.github_token is not None and bool(settings.github_token.get_secret_value())


def _post(
    result: RunComparison,
    markdown: str,
    outcome: PublishOutcome,
    *,
    target: _Target,
    benchmark: str,
    settings: Settings,
    run_url: str | None,
    client: GitHubClient | None,
    accepted: AcceptedView | None = None,
) -> None:
    covered = accepted is not None and accepted.covered
    _post_saved(
        markdown,
        outcome,
        target=target,
        benchmark=benchmark,
        # An accepted check passes: its status is a success saying who accepted it and why.
        verdict=Verdict.UNCHANGED if covered else _status_verdict(result),
        description=accepted.description if accepted and covered else status_description(result),
        settings=settings,
        run_url=run_url,
        client=client,
    )


def _post_saved(
    markdown: str,
    outcome: PublishOutcome,
    *,
    target: _Target,
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
            _warn(outcome, f"could not post the pull-request comment: {exc}")
        if not target.commit:
            _warn(outcome, "no commit SHA is known: the commit status was not set")
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
            _warn(outcome, f"could not set the commit status {status_context(benchmark)}: {exc}")
    finally:
        if client is None:
            github.close()


def _warn(outcome: PublishOutcome, message: str) -> None:
    outcome.warnings.append(message)
    outcome.annotations.append(annotation("warning", message, title="perfci: GitHub"))


def _status_verdict(result: RunComparison) -> Verdict:
    return Verdict.REGRESSION if result.gated_regressions else result.verdict


def status_description(result: RunComparison) -> str:
    """One short line for the commit status: the verdict and the change that matters most."""
    gated = _by_impact(result.gated_regressions)
    if gated:
        more = f" (+{len(gated) - 1} more)" if len(gated) > 1 else ""
        return f"regression: {_name(gated[0])} {_change(gated[0])}{more}"
    steps = [m for m in result.steps if m.change is not None]
    if steps:
        step = max(steps, key=lambda m: m.baseline_median or 0.0)
        return f"{result.verdict.value}: {_name(step)} {_change(step)}"
    return result.verdict.value


def _by_impact(metrics: list[MetricComparison]) -> list[MetricComparison]:
    """Step lines first (what a reviewer judges), then by per-step time lost."""

    def lost(m: MetricComparison) -> float:
        return abs((m.candidate_median or 0.0) - (m.baseline_median or 0.0))

    return sorted(metrics, key=lambda m: (not _is_step(m), -lost(m), m.key))


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


def _write_artifact(
    result: RunComparison, markdown: str, *, context: RunContext, benchmark: str, out_dir: Path
) -> list[Path]:
    md_path, json_path = artifact_paths(out_dir, benchmark)
    out_dir.mkdir(parents=True, exist_ok=True)
    md_path.write_text(markdown, encoding="utf-8")
    document = comparison_to_dict(result)
    # What a later workflow_run job needs to post this report for a fork's pull request.
    document["publish"] = {
        "benchmark": benchmark,
        "repository": context.repository,
        "pr_number": context.pr_number,
        "commit": context.commit,
        "ci_url": context.ci_url,
        "verdict": _status_verdict(result).value,
        "description": status_description(result),
    }
    json_path.write_text(json.dumps(document, indent=1) + "\n", encoding="utf-8")
    return [md_path, json_path]


def _read_artifact(path: Path) -> dict[str, Any]:
    """What posting needs from a saved report, checked: it comes from an untrusted run.

    The ``publish`` block (written by :func:`publish`) wins over the report's top-level keys
    (``perfci check --json-out``), which carry the stored run's PR number and commit.
    """
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ConfigError(f"{path}: not a readable JSON report ({exc})") from None
    if not isinstance(document, dict) or "verdict" not in document:
        raise ConfigError(f"{path}: not a perfci JSON report (no `verdict`)")
    block = document.get("publish")
    saved = {**document, **block} if isinstance(block, dict) else dict(document)
    pr = saved.get("pr_number")
    if not isinstance(pr, int) or isinstance(pr, bool) or pr < 1:
        raise ConfigError(f"{path}: `pr_number` must be a positive integer, got {pr!r}")
    if saved.get("commit") is not None and not _SHA.match(str(saved["commit"])):
        raise ConfigError(f"{path}: `commit` is not a hexadecimal SHA")
    if saved.get("verdict") not in {v.value for v in Verdict}:
        raise ConfigError(f"{path}: unknown verdict {saved.get('verdict')!r}")
    if not isinstance(saved.get("benchmark"), str) or not saved["benchmark"]:
        raise ConfigError(f"{path}: `benchmark` is missing")
    description = saved.get("description")
    saved["description"] = (
        description if isinstance(description, str) and description else saved["verdict"]
    )
    return saved


def _is_step(metric: MetricComparison) -> bool:
    return metric.series is not None and metric.series.kind is MetricKind.STEP


def _name(metric: MetricComparison) -> str:
    return metric.series.display_name if metric.series else metric.key


def _change(metric: MetricComparison) -> str:
    return "(no change measured)" if metric.change is None else f"{metric.change * 100:+.1f} %"


def _q(metric: MetricComparison) -> str:
    q = metric.q_value if metric.q_value is not None else metric.p_value
    if q is None:
        return "n/a"
    return "<0.001" if q < 0.001 else f"{q:.3f}"
