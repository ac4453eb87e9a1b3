"""``perfci ingest``: store profile files as one run of a benchmark."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from perfci.cli import _options as opts

if TYPE_CHECKING:  # the parsers and the store load when the command runs (CLI cold start)
    from perfci.model import RunContext
    from perfci.usecases.ingest import IngestResult


def ingest_command(
    files: list[Path] = typer.Argument(..., help="Profile files of the run.",
                                       show_default=False),
    benchmark: str = typer.Option(..., "--benchmark", "-b", help="Benchmark name."),
    repeat: int | None = typer.Option(None, "--repeat", "--repeats", min=1,
                                      help="The files hold N repeats, in N equal consecutive "
                                           "groups (default: one repeat per file)."),
    format: opts.ProfileFormat = None,
    project: opts.Project = None,
    commit: opts.Commit = None,
    branch: opts.Branch = None,
    base_branch: opts.BaseBranch = None,
    pr: opts.PullRequest = None,
    ci_run_id: opts.CiRunId = None,
    ci_run_attempt: opts.CiRunAttempt = None,
    env: opts.EnvironmentEntries = None,
    database_url: opts.DatabaseUrl = None,
    as_json: bool = typer.Option(False, "--json", help="Print the result as JSON."),
) -> None:
    """Parse profile files and store them as one run (idempotent: re-ingesting is a no-op)."""
    from perfci.cli._console import err_console
    from perfci.context import detect_run_context
    from perfci.settings import get_settings
    from perfci.store.db import open_store
    from perfci.usecases.ingest import ingest_run, parse_repeats

    environment = opts.key_value_pairs(env, option="--env")
    # Parse everything first: a bad file stops here, before the store is even opened.
    repeats = parse_repeats(files, format=format, repeat=repeat)
    for profile in (p for group in repeats for p in group):
        for warning in profile.warnings:
            err_console.print(f"warning: {profile.source}: {warning}")
    settings = get_settings({"database_url": database_url, "project": project})
    context = detect_run_context(settings.project, {
        "commit": commit, "branch": branch, "base_branch": base_branch, "pr_number": pr,
        "ci_run_id": ci_run_id, "ci_run_attempt": ci_run_attempt,
        "environment": environment})
    _check_provenance(context, baseline_branch=settings.baseline_branch)
    if settings.server_url:
        from perfci.usecases.submit import submit_remote

        remote = submit_remote(settings, context=context, benchmark=benchmark, repeats=repeats)
        _report(remote.ingest, project=context.project, benchmark=benchmark,
                url=settings.server_url, as_json=as_json)
        return
    store = open_store(settings)
    try:
        with store.sessions() as session:
            result = ingest_run(session, context=context, benchmark=benchmark, repeats=repeats)
    finally:
        store.close()
    _report(result, project=context.project, benchmark=benchmark, url=store.url,
            as_json=as_json)


def _check_provenance(context: RunContext, *, baseline_branch: str) -> None:
    """Warn about a run without branch or commit; refuse one of the baseline branch without
    its commit.

    Outside a git checkout (and CI) nothing says where a run comes from (issue 16). Without a
    branch it is stored but can never join a baseline, which a warning says. A run of the
    baseline branch without a commit would become baseline history nobody can place on the
    branch (the comment's "commits a..b", change points, bisecting), so it is refused.

    Raises
    ------
    ConfigError
        When ``context.branch`` is ``baseline_branch`` and no commit is known.
    """
    from perfci.cli._console import err_console
    from perfci.errors import ConfigError

    if context.commit is None and context.branch == baseline_branch:
        raise ConfigError(
            f"refusing to store a run of the baseline branch {baseline_branch!r} without its "
            f"commit (not in a git checkout?): pass --commit SHA, or ingest from the checkout")
    if context.branch is None:
        err_console.print(
            "warning: no git checkout or CI variables here: the run is stored without "
            f"{'a branch or commit' if context.commit is None else 'a branch'}, so it will "
            f"never be part of a baseline; pass --branch and --commit to store a run of "
            f"{baseline_branch!r}", markup=False, soft_wrap=True)


def _report(result: IngestResult, *, project: str, benchmark: str, url: str,
            as_json: bool) -> None:
    from perfci.settings import redact_url

    if as_json:
        typer.echo(json.dumps({"run_id": result.run_id, "created": result.created,
                               "project": project, "benchmark": benchmark,
                               "series": result.series, "samples": result.samples,
                               "database": redact_url(url)}, indent=1))
        return
    if result.created:
        typer.echo(f"stored run {result.run_id} of {project}/{benchmark}: "
                      f"{result.series} series, {result.samples} samples "
                      f"in {redact_url(url)}")
    else:
        typer.echo(f"run {result.run_id} of {project}/{benchmark} was already stored "
                      f"(same commit and CI run, or the same data); nothing written")


def register(app: typer.Typer) -> None:
    app.command("ingest")(ingest_command)
