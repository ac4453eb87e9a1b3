"""``perfci formats``: list the input formats perfci reads."""

from __future__ import annotations

import typer


def formats_command() -> None:
    """List the profile formats perfci can read (detection order)."""
    from rich.table import Table

    from perfci.cli._console import console
    from perfci.formats.registry import formats

    table = Table("format", "description", box=None, pad_edge=False)
    for spec in formats().values():
        table.add_row(spec.name, spec.description)
    console.print(table)


def register(app: typer.Typer) -> None:
    app.command("formats")(formats_command)
