"""``perfci compare``: show how a stored run compares with its baseline.

The comparison stored when the run was checked is shown as it was reported; ``--fresh`` (or a
run that was never compared, or another ``--baseline-branch``) compares it against the history
as it is now and stores that too. Exit 0: no gated regression; 1: gated regression (when
``fail_on_regression``); 2: usage or input error, such as an unknown run id.
"""

# lazy: the imports inside functions load a command's work only when it runs, so that
# `perfci --help` and the short commands start fast (tests/test_cold_start.py).
from __future__ import annotations

from typing import TYPE_CHECKING

import typer

from perfci.cli import _options as opts
from perfci.cli._options import output_formats
from perfci.core.errors import ConfigError

if TYPE_CHECKING:
    from perfci.core.model import RunComparison


def compare_command(
    run: int = typer.Option(..., "--run", "-r", help="Id of the stored run.", show_default=False),
    baseline_branch: str | None = typer.Option(
        None,
        "--baseline-branch",
        help="Baseline branch (default: the run's base, else "
        "settings). Another branch than stored compares anew.",
    ),
    as_json: bool = typer.Option(False, "--json", help="Print the comparison as JSON."),
    as_markdown: bool = typer.Option(
        False, "--markdown", "--md", help="Print the pull-request comment (Markdown)."
    ),
    output: str | None = typer.Option(
        None,
        "--format",
        "-f",
        help="text, json or md (or markdown): the same as --json / --markdown.",
        show_default=False,
    ),
    database_url: opts.DatabaseUrl = None,
    fresh: bool = typer.Option(
        False, "--fresh", help="Compare against the history as it is now (and store it)."
    ),
) -> int:
    """Print the comparison of a stored run with its baseline (terminal, --json or --markdown)."""
    if output is not None:
        (chosen,) = output_formats([output], allowed=("text", "json", "md"), option="--format")
        if (as_json and chosen != "json") or (as_markdown and chosen != "md"):
            raise ConfigError(f"--format {output} contradicts --json/--markdown: give one")
        as_json, as_markdown = chosen == "json", chosen == "md"
    if as_json and as_markdown:
        raise ConfigError("choose one of --json and --markdown")
    from perfci.usecases.browse.stored import run_comparison

    answer = run_comparison(database_url, run, baseline_branch=baseline_branch, fresh=fresh)
    _show(answer.comparison, as_json=as_json, as_markdown=as_markdown)
    return answer.exit_code


def _show(result: RunComparison, *, as_json: bool, as_markdown: bool) -> None:
    if as_json:
        import json

        from perfci.report.json_report import comparison_to_dict

        typer.echo(json.dumps(comparison_to_dict(result), indent=1))
    elif as_markdown:
        from perfci.report.markdown import comment_marker, render_comment

        typer.echo(render_comment(result, marker=comment_marker(result.benchmark)))
    else:
        from perfci.cli._console import console
        from perfci.report.console import print_comparison

        print_comparison(result, console)


def register(app: typer.Typer) -> None:
    app.command("compare")(compare_command)
