"""``perfci runs``: list a benchmark's stored runs, and delete one (audited)."""

# lazy: the imports inside functions load a command's work only when it runs, so that
# `perfci --help` and the short commands start fast (tests/test_cold_start.py).
from __future__ import annotations

import getpass
import json
from typing import TYPE_CHECKING

import typer

from perfci.cli import _console
from perfci.cli import _options as opts

if TYPE_CHECKING:
    from perfci.core.model import RunInfo

runs_app = typer.Typer(help="List stored runs and delete one (a bad upload).", no_args_is_help=True)


@runs_app.command("list")
def list_command(
    benchmark: str = typer.Option(..., "--benchmark", "-b", help="Benchmark name."),
    project: opts.StoredProject = None,
    limit: int = typer.Option(20, "--limit", min=1, help="Newest runs shown."),
    as_json: opts.Json = False,
    database_url: opts.DatabaseUrl = None,
) -> None:
    """The newest runs of a benchmark: id, time, branch, commit, CI run."""
    from perfci.report.escape import visible
    from perfci.usecases.browse.stored import newest_runs

    runs = newest_runs(database_url, project, benchmark, limit=limit)
    if as_json:
        typer.echo(
            json.dumps(
                [
                    {
                        "id": r.id,
                        "created_at": r.created_at.isoformat(),
                        "branch": r.branch,
                        "commit": r.commit,
                        "ci_run_id": r.ci_run_id,
                        "ci_run_attempt": r.ci_run_attempt,
                    }
                    for r in runs
                ],
                indent=1,
            )
        )
        return
    typer.echo(f"{'id':>6}  {'stored':<16}  {'commit':<12}  {'CI run':<16}  branch")
    for r in runs:
        ci = f"{r.ci_run_id}/{r.ci_run_attempt or 0}" if r.ci_run_id else "—"
        typer.echo(
            f"{r.id:>6}  {r.created_at:%Y-%m-%d %H:%M}  {(r.commit or '—')[:12]:<12}  "
            f"{visible(ci)[:16]:<16}  {visible(r.branch or '—')}"
        )


@runs_app.command("delete")
def delete_command(
    run_id: int = typer.Argument(..., help="Run id (from `perfci runs list`)."),
    yes: bool = typer.Option(False, "--yes", "-y", help="Do not ask for confirmation."),
    database_url: opts.DatabaseUrl = None,
) -> None:
    """Delete a run with its samples, profiles and comparisons; recorded in the audit log."""
    from perfci.core.errors import ConfigError
    from perfci.report.escape import visible
    from perfci.usecases.browse.stored import delete_stored_run

    def described(run: RunInfo) -> str:
        return (
            f"run {run.id} of {visible(run.project)}/{visible(run.benchmark)} "
            f"(commit {(run.commit or '—')[:12]}, branch {visible(run.branch or '—')})"
        )

    def confirm(run: RunInfo) -> bool:
        # Asked once the run is found (an unknown id fails before any question).
        if not yes and not typer.confirm(f"delete {described(run)}?", default=False, err=True):
            raise ConfigError(f"{described(run)} not deleted (pass --yes to skip the question)")
        return True

    run, deleted = delete_stored_run(database_url, run_id, actor=f"cli:{_user()}", confirm=confirm)
    what = described(run)
    _console.err_console.print(
        f"deleted {what}: {deleted.samples} samples, {deleted.profiles} "
        f"profiles, {deleted.comparisons} comparisons, {deleted.alerts} alerts",
        markup=False,
        highlight=False,
        soft_wrap=True,
    )


def _user() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):  # no passwd entry (a container's arbitrary uid)
        return "unknown"


def register(app: typer.Typer) -> None:
    app.add_typer(runs_app, name="runs")
