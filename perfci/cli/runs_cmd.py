"""``perfci runs``: list a benchmark's stored runs, and delete one (audited)."""

from __future__ import annotations

import getpass
import json

import typer

from perfci.cli._console import err_console

runs_app = typer.Typer(help="List stored runs and delete one (a bad upload).",
                       no_args_is_help=True)

_URL_HELP = "Database URL (default: PERFCI_DATABASE_URL, the config file, else SQLite)."


@runs_app.command("list")
def list_command(
    benchmark: str = typer.Option(..., "--benchmark", "-b", help="Benchmark name."),
    project: str | None = typer.Option(None, "--project", help="Project (default: settings, "
                                                               "else the repository name)."),
    limit: int = typer.Option(20, "--limit", min=1, help="Newest runs shown."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
    database_url: str | None = typer.Option(None, "--database-url", help=_URL_HELP),
) -> None:
    """The newest runs of a benchmark: id, time, branch, commit, CI run."""
    from perfci.context import detect_run_context
    from perfci.report.escape import visible
    from perfci.settings import get_settings
    from perfci.store.db import open_store
    from perfci.usecases import browse

    settings = get_settings({"database_url": database_url, "project": project})
    name = settings.project or detect_run_context(None).project
    store = open_store(settings)
    try:
        with store.sessions() as session:
            runs = browse.benchmark_runs(session, name, benchmark, limit=limit)
    finally:
        store.close()
    if as_json:
        typer.echo(json.dumps([{"id": r.id, "created_at": r.created_at.isoformat(),
                                "branch": r.branch, "commit": r.commit,
                                "ci_run_id": r.ci_run_id, "ci_run_attempt": r.ci_run_attempt}
                               for r in runs], indent=1))
        return
    typer.echo(f"{'id':>6}  {'stored':<16}  {'commit':<12}  {'CI run':<16}  branch")
    for r in runs:
        ci = f"{r.ci_run_id}/{r.ci_run_attempt or 0}" if r.ci_run_id else "—"
        typer.echo(f"{r.id:>6}  {r.created_at:%Y-%m-%d %H:%M}  {(r.commit or '—')[:12]:<12}  "
                   f"{visible(ci)[:16]:<16}  {visible(r.branch or '—')}")


@runs_app.command("delete")
def delete_command(
    run_id: int = typer.Argument(..., help="Run id (from `perfci runs list`)."),
    yes: bool = typer.Option(False, "--yes", "-y", help="Do not ask for confirmation."),
    database_url: str | None = typer.Option(None, "--database-url", help=_URL_HELP),
) -> None:
    """Delete a run with its samples, profiles and comparisons; recorded in the audit log."""
    from perfci.errors import ConfigError
    from perfci.report.escape import visible
    from perfci.settings import get_settings
    from perfci.store.db import open_store
    from perfci.store.queries import get_run
    from perfci.usecases.runs import delete_run

    store = open_store(get_settings({"database_url": database_url}))
    try:
        with store.sessions() as session:
            run = get_run(session, run_id)  # NotFoundError before any question
            what = (f"run {run.id} of {visible(run.project)}/{visible(run.benchmark)} "
                    f"(commit {(run.commit or '—')[:12]}, branch {visible(run.branch or '—')})")
            if not yes and not typer.confirm(f"delete {what}?", default=False, err=True):
                raise ConfigError(f"{what} not deleted (pass --yes to skip the question)")
            deleted = delete_run(session, run_id=run_id, actor=f"cli:{_user()}")
    finally:
        store.close()
    err_console.print(f"deleted {what}: {deleted.samples} samples, {deleted.profiles} "
                      f"profiles, {deleted.comparisons} comparisons, {deleted.alerts} alerts",
                      markup=False, highlight=False, soft_wrap=True)


def _user() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):  # no passwd entry (a container's arbitrary uid)
        return "unknown"


def register(app: typer.Typer) -> None:
    app.add_typer(runs_app, name="runs")
