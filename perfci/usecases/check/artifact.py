"""The report artifact: the comment and the JSON report written for the workflow to upload, and
posted later by a trusted ``workflow_run`` job (the fork-safe pattern: a fork's pull request
gets a read-only token, so its own job cannot post)."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from perfci.core import private_env
from perfci.core.errors import ConfigError
from perfci.core.model import RunComparison, RunContext, Verdict
from perfci.core.settings import Settings
from perfci.integrations.github.client import GitHubClient
from perfci.report.json_report import comparison_to_dict
from perfci.usecases.check.posting import (
    PublishOutcome,
    Target,
    has_token,
    post_comment_and_status,
)
from perfci.usecases.check.verdict_lines import status_description, status_verdict

__all__ = ["artifact_paths", "publish_artifact", "write_artifact"]

_SLUG = re.compile(r"[^A-Za-z0-9._-]+")
_SHA = re.compile(r"^[0-9a-fA-F]{7,64}$")


def artifact_paths(out_dir: Path, benchmark: str) -> tuple[Path, Path]:
    """The Markdown and JSON report files of ``benchmark`` inside ``out_dir``."""
    stem = f"perfci-{_SLUG.sub('_', benchmark).strip('_') or 'benchmark'}"
    return out_dir / f"{stem}.md", out_dir / f"{stem}.json"


def write_artifact(
    result: RunComparison, markdown: str, *, context: RunContext, benchmark: str, out_dir: Path
) -> list[Path]:
    """Write the comment and the JSON report (with what posting it later needs) to ``out_dir``."""
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
        "verdict": status_verdict(result).value,
        "description": status_description(result),
    }
    json_path.write_text(json.dumps(document, indent=1) + "\n", encoding="utf-8")
    return [md_path, json_path]


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
    if not repository or not has_token(settings):
        outcome.skipped_reason = "no GitHub token or repository: nothing posted"
        return outcome
    post_comment_and_status(
        body,
        outcome,
        target=Target(repository, saved["pr_number"], commit or saved.get("commit")),
        benchmark=saved["benchmark"],
        verdict=Verdict(saved["verdict"]),
        description=saved["description"],
        settings=settings,
        run_url=saved.get("ci_url"),
        client=client,
    )
    return outcome


def _read_artifact(path: Path) -> dict[str, Any]:
    """What posting needs from a saved report, checked: it comes from an untrusted run.

    The ``publish`` block (written by :func:`write_artifact`) wins over the report's top-level
    keys (``perfci check --json-out``), which carry the stored run's PR number and commit.
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
