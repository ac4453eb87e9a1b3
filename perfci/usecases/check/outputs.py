"""What a CI job reads from a check: the comment and JSON files, step outputs, publishing.

Files are written where asked (``--markdown``, ``--json``); ``$GITHUB_OUTPUT`` gets the verdict;
:func:`publish_outcome` posts the comment, status and job summary
(:mod:`perfci.usecases.check.publish`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from perfci.core import private_env
from perfci.core.errors import ConfigError
from perfci.core.model import RunComparison
from perfci.core.repro import Repro
from perfci.report.formatting import primary_step
from perfci.report.json_report import comparison_to_dict
from perfci.usecases.check.comment_policy import CommentOn
from perfci.usecases.check.repro import repro_of

if TYPE_CHECKING:
    from perfci.usecases.check.outcome import CheckOutcome
    from perfci.usecases.check.publish import PublishOutcome

__all__ = [
    "append_github_output",
    "github_output_path",
    "github_outputs",
    "publish_outcome",
    "report_files",
    "run_url",
    "should_publish",
    "step_time_change",
    "write_json",
    "write_markdown",
]


def write_markdown(
    result: RunComparison,
    path: Path,
    *,
    benchmark: str,
    run_url: str | None = None,
    repro: Repro | None = None,
) -> Path:
    """The pull-request comment (with its hidden marker and repro bundle) as a file."""
    # lazy: jinja2 only for the Markdown comment (HEAVY_FOR_CHECK in tests/test_cold_start.py)
    from perfci.report.markdown import comment_marker, render_comment

    text = render_comment(result, marker=comment_marker(benchmark), run_url=run_url, repro=repro)
    _write(path, text)
    return path


def write_json(result: RunComparison, path: Path) -> Path:
    """The comparison as JSON (``perfci compare --json``'s document)."""
    _write(path, json.dumps(comparison_to_dict(result), indent=1) + "\n")
    return path


def _write(path: Path, text: str) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"cannot write {path}: {exc.strerror}") from None


_SLUG = re.compile(r"[^A-Za-z0-9._-]")


def report_files(report_dir: Path, benchmark: str) -> tuple[Path, Path]:
    """``--report-dir``'s files: ``<report_dir>/<benchmark>/report.md`` and ``report.json``,
    one folder per benchmark (the artifact the GitHub Action's workflows upload)."""
    folder = report_dir / _SLUG.sub("_", benchmark)
    return folder / "report.md", folder / "report.json"


def github_output_path(env: Mapping[str, str] | None = None) -> Path:
    """``$GITHUB_OUTPUT``; checked before the run so a misconfigured job stores nothing."""
    value = (private_env.environ() if env is None else env).get("GITHUB_OUTPUT")
    if not value:
        raise ConfigError("--github-output needs $GITHUB_OUTPUT (set by GitHub Actions)")
    return Path(value)


def github_outputs(
    result: RunComparison,
    *,
    report: Path | None,
    json_report: Path | None = None,
    comment_url: str | None = None,
    server_url: str | None = None,
) -> dict[str, str]:
    """The step outputs of a check, as the GitHub Action names them:

    ``verdict``; ``regressions`` (regressed metrics); ``report`` (the Markdown report, else the
    JSON one); ``json-report``; ``step-time-change`` (the primary step's change in percent,
    signed, empty without a baseline); ``comment-url`` (empty when none was posted);
    ``run-url`` (the run's page on the perfci server, remote mode only).
    """
    return {
        "verdict": result.verdict.value,
        "regressions": str(len(result.regressions)),
        "report": str(report) if report else "",
        "json-report": str(json_report) if json_report else "",
        "step-time-change": step_time_change(result),
        "comment-url": comment_url or "",
        "run-url": run_url(result, server_url),
    }


def step_time_change(result: RunComparison) -> str:
    """The primary step's change in percent, signed (``+35.31``), or ``""`` without one."""
    step = primary_step(result)
    if step is None or step.change is None:
        return ""
    return f"{step.change * 100:+.2f}"


def run_url(result: RunComparison, server_url: str | None) -> str:
    """The stored run's page on the perfci server (remote mode only), else ``""``."""
    if not server_url or result.run_id is None:
        return ""
    return f"{server_url.rstrip('/')}/runs/{result.run_id}"


def append_github_output(path: Path, values: Mapping[str, str]) -> None:
    """Append ``key=value`` lines; a value with a newline uses the heredoc form GitHub reads."""
    lines = []
    for key, value in values.items():
        if "\n" in value:
            lines.append(f"{key}<<PERFCI_EOF\n{value}\nPERFCI_EOF\n")
        else:
            lines.append(f"{key}={value}\n")
    try:
        with path.open("a", encoding="utf-8") as handle:
            handle.write("".join(lines))
    except OSError as exc:
        raise ConfigError(f"cannot append to $GITHUB_OUTPUT {path}: {exc.strerror}") from None


def should_publish(
    outcome: CheckOutcome, *, comment: bool | None, env: Mapping[str, str] | None = None
) -> bool:
    """Publish inside GitHub Actions, on ``--comment``, or when a token, repository and PR are
    all known (a developer checking a PR locally with ``GITHUB_TOKEN`` set)."""
    env = private_env.environ() if env is None else env
    if env.get("GITHUB_ACTIONS") == "true" or comment is True:
        return True
    if comment is False:
        return False
    token = outcome.settings.github_token
    return bool(
        token
        and token.get_secret_value()
        and outcome.context.repository
        and outcome.context.pr_number is not None
    )


def publish_outcome(
    outcome: CheckOutcome,
    *,
    comment: bool | None,
    comment_on: CommentOn = CommentOn.ALWAYS,
    cc: Sequence[str] = (),
    env: Mapping[str, str] | None = None,
    out_dir: Path | None = None,
) -> PublishOutcome:
    """Publish the check's comparison (comment, status, job summary, annotations, files);
    ``comment_on`` and ``cc`` are :func:`perfci.usecases.check.publish.publish`'s."""
    # lazy: posting loads requests and jinja2; a check that does not publish stays without them
    from perfci.usecases.check.publish import publish

    return publish(
        outcome.comparison,
        context=outcome.context,
        settings=outcome.settings,
        benchmark=outcome.spec.name,
        comment=comment is not False,
        comment_on=comment_on,
        cc=cc,
        env=env,
        out_dir=out_dir,
        repro=repro_of(outcome, env),
        acceptances=outcome.acceptances,
    )
