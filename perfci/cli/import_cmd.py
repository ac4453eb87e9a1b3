"""``perfci import-history``: store a github-action-benchmark history as runs of its commits."""

# lazy: the imports inside functions load a command's work only when it runs, so that
# `perfci --help` and the short commands start fast (tests/test_cold_start.py).
from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from perfci.cli import _options as opts

if TYPE_CHECKING:
    from perfci.usecases.history.importing import ImportResult


def import_history_command(
    files: list[Path] = typer.Argument(
        ...,
        help="The history: github-action-benchmark's data.js (gh-pages) or its "
        "external-data-json-path file; or saved runs that name their commit, such as "
        "pytest-benchmark's .benchmarks/ folder (--benchmark-autosave).",
        show_default=False,
    ),
    suite: list[str] = typer.Option(
        [], "--suite", help="Suite to import (repeatable; default: every suite in the file)."
    ),
    benchmark: str | None = typer.Option(
        None, "--benchmark", "-b", help="Store the one suite under this benchmark name."
    ),
    branch: str | None = typer.Option(
        None,
        "--branch",
        help="Branch the history was measured on (default: the baseline branch setting).",
    ),
    format: opts.ProfileFormat = None,
    project: opts.Project = None,
    env: opts.EnvironmentEntries = None,
    database_url: opts.DatabaseUrl = None,
    history: str | None = typer.Option(
        None,
        "--history",
        help="Also push the runs, in one commit, to this history branch of origin "
        "(git:perfci-data), where `perfci check --history` reads them.",
    ),
    as_json: opts.JsonResult = False,
) -> None:
    """Store another tool's benchmark history: each entry a run of its commit (idempotent).

    Every entry is checked before anything is written. Runs are compared only within one
    environment fingerprint, which the history does not record: the imported runs take this
    machine's (plus --env), so run the import on the kind of runner the history came from.
    """
    from rich.progress import BarColumn, Progress, TextColumn

    from perfci.cli._console import err_console
    from perfci.usecases.history.importing import import_history

    with Progress(
        TextColumn("[bold]importing"),
        BarColumn(),
        TextColumn("{task.completed}/{task.total} runs"),
        console=err_console,
        transient=True,
    ) as bar:
        task = bar.add_task("import", total=None)

        def advance(done: int, total: int) -> None:
            bar.update(task, completed=done, total=total)

        result = import_history(
            files,
            suites=suite,
            benchmark=benchmark,
            branch=branch,
            project=project,
            database_url=database_url,
            history=history,
            environment=opts.key_value_pairs(env, option="--env"),
            format=format,
            progress=advance,
        )
    _report(result, as_json=as_json)


def _report(result: ImportResult, *, as_json: bool) -> None:
    from perfci.core.settings import redact_url
    from perfci.report.escape import visible

    where = redact_url(result.where)
    if as_json:
        typer.echo(
            json.dumps(
                {
                    "project": result.project,
                    "branch": result.branch,
                    "database": where,
                    "runs": len(result.runs),
                    "created": result.created,
                    "empty_entries": result.empty,
                    "other_branches": result.other_branches,
                    "benchmarks": result.benchmarks,
                    "history_branch": result.history_branch,
                    "history_pushed": result.history_pushed,
                },
                indent=1,
            )
        )
        return
    for name in result.benchmarks:
        runs = [r for r in result.runs if r.benchmark == name]
        stored = sum(r.created for r in runs)
        commits = len({r.commit for r in runs})
        typer.echo(
            f"{visible(result.project)}/{visible(name)}: {stored} of {len(runs)} runs stored "
            f"({commits} commits of {visible(result.branch)}; "
            f"{len(runs) - stored} already there) in {where}"
        )
    if result.history_branch:
        typer.echo(
            f"history branch {visible(result.history_branch)}: "
            + (
                f"{result.history_pushed} run(s) pushed in one commit"
                if result.history_pushed
                else "every run was there already"
            )
        )
    if result.other_branches:
        named = ", ".join(
            f"{visible(name)}: {count}" for name, count in sorted(result.other_branches.items())
        )
        typer.echo(f"saved runs of other branches left out ({named})")
    if result.empty:
        typer.echo(f"{result.empty} entries without benches left out")
    if not result.runs:
        typer.echo("nothing to import: the history holds no benches")


def register(app: typer.Typer) -> None:
    app.command("import-history")(import_history_command)
