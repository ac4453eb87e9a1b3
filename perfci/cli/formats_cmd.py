"""``perfci formats``: list the input formats perfci reads."""

# lazy: the imports inside functions load a command's work only when it runs, so that
# `perfci --help` and the short commands start fast (tests/test_cold_start.py).
from __future__ import annotations

import typer


def formats_command() -> None:
    """List the profile formats perfci can read (detection order)."""
    from perfci.usecases.submit.formats import list_formats

    # Two plain columns: no Rich to import for a list (issue 33: a short command starts at once).
    listed = list_formats()
    width = max(len("format"), *(len(name) for name, _ in listed))
    typer.echo(f"{'format':<{width}}  description")
    for name, description in listed:
        typer.echo(f"{name:<{width}}  {description}")


def register(app: typer.Typer) -> None:
    app.command("formats")(formats_command)
