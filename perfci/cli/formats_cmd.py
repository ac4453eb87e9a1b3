"""``perfci formats``: list the input formats perfci reads."""

from __future__ import annotations

import typer


def formats_command() -> None:
    """List the profile formats perfci can read (detection order)."""
    from rich.table import Table

    from perfci.cli._console import console
    from perfci.usecases.submit.formats import list_formats

    table = Table("format", "description", box=None, pad_edge=False)
    for name, description in list_formats():
        table.add_row(name, description)
    console.print(table)


def register(app: typer.Typer) -> None:
    app.command("formats")(formats_command)
