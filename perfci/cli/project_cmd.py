"""``perfci project``: create a project, and make its runs and dashboard public or private.

Projects are private by default: their runs and dashboard pages need a read token. A public
project is readable by anyone who can reach the server (uploads still need a token).
"""

# lazy: the imports inside functions load a command's work only when it runs, so that
# `perfci --help` and the short commands start fast (tests/test_cold_start.py).
from __future__ import annotations

import typer

from perfci.cli import _options as opts

project_app = typer.Typer(
    help="Create projects; make their dashboards public or private.", no_args_is_help=True
)

_PUBLIC_HELP = (
    "Public: runs and dashboard readable without a token. Private (the default "
    "for new projects): a read token is needed."
)


@project_app.command("create")
def create_command(
    name: str = typer.Argument(..., help="Project name, e.g. OWNER/REPO.", show_default=False),
    public: bool = typer.Option(False, "--public/--private", help=_PUBLIC_HELP),
    database_url: opts.DatabaseUrl = None,
) -> None:
    """Create a project (private unless --public)."""
    from perfci.usecases.admin.projects import create_project
    from perfci.usecases.stores import session_for

    with session_for(database_url) as session:
        project = create_project(session, name=name, public=public)
    typer.echo(_said(project.name, project.public, "created"))


@project_app.command("update")
def update_command(
    name: str = typer.Argument(..., help="Project name.", show_default=False),
    public: bool = typer.Option(..., "--public/--private", help=_PUBLIC_HELP, show_default=False),
    database_url: opts.DatabaseUrl = None,
) -> None:
    """Make an existing project public or private."""
    from perfci.usecases.admin.projects import update_project
    from perfci.usecases.stores import session_for

    with session_for(database_url) as session:
        project = update_project(session, name=name, public=public)
    typer.echo(_said(project.name, project.public, "updated"))


def _said(name: str, public: bool, verb: str) -> str:
    from perfci.report.escape import visible

    access = (
        "public: its runs and dashboard are readable without a token"
        if public
        else "private: reading its runs and dashboard needs a read token"
    )
    return f"project {visible(name)} {verb}, {access}"


def register(app: typer.Typer) -> None:
    app.add_typer(project_app, name="project")
