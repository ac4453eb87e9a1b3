"""``perfci ingest``: store profile files as one run of a benchmark."""

# lazy: the imports inside functions load a command's work only when it runs, so that
# `perfci --help` and the short commands start fast (tests/test_cold_start.py).
from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from perfci.cli import _options as opts

if TYPE_CHECKING:  # the parsers and the store load when the command runs (CLI cold start)
    from perfci.usecases.submit.ingest import IngestResult


@opts.with_run_context
def ingest_command(
    files: list[Path] = typer.Argument(
        ..., help="Profile files of the run, or folders of them.", show_default=False
    ),
    benchmark: str = typer.Option(..., "--benchmark", "-b", help="Benchmark name."),
    repeat: int | None = typer.Option(
        None,
        "--repeat",
        "--repeats",
        min=1,
        help="The files hold N repeats, in N equal consecutive "
        "groups (default: one repeat per file).",
    ),
    format: opts.ProfileFormat = None,
    option: opts.ParserOptions = None,
    project: opts.Project = None,
    context: opts.RunContextFlags = opts.RUN_CONTEXT,
    database_url: opts.DatabaseUrl = None,
    as_json: opts.JsonResult = False,
) -> None:
    """Parse profile files and store them as one run (idempotent: re-ingesting is a no-op)."""
    from perfci.cli._console import err_console
    from perfci.usecases.submit.files import store_profiles
    from perfci.usecases.submit.repeats import parse_repeats

    run_context = context.fields()
    # Parse everything first: a bad file stops here, before the store is even opened.
    skipped: list[Path] = []
    repeats = parse_repeats(
        files,
        format=format,
        repeat=repeat,
        skipped=skipped,
        options=opts.key_value_pairs(option, option="--option"),
    )
    opts.warn_skipped(skipped)
    for profile in (p for group in repeats for p in group):
        for warning in profile.warnings:
            err_console.print(f"warning: {profile.source}: {warning}")

    def warn(message: str) -> None:
        err_console.print(message, markup=False, soft_wrap=True)

    stored = store_profiles(
        repeats,
        benchmark=benchmark,
        database_url=database_url,
        project=project,
        warn=warn,
        context=run_context,
    )
    _report(
        stored.result,
        project=stored.project,
        benchmark=benchmark,
        url=stored.where,
        as_json=as_json,
    )


def _report(result: IngestResult, *, project: str, benchmark: str, url: str, as_json: bool) -> None:
    from perfci.core.settings import redact_url

    if as_json:
        typer.echo(
            json.dumps(
                {
                    "run_id": result.run_id,
                    "created": result.created,
                    "project": project,
                    "benchmark": benchmark,
                    "series": result.series,
                    "samples": result.samples,
                    "database": redact_url(url),
                },
                indent=1,
            )
        )
        return
    if result.created:
        typer.echo(
            f"stored run {result.run_id} of {project}/{benchmark}: "
            f"{result.series} series, {result.samples} samples "
            f"in {redact_url(url)}"
        )
    else:
        typer.echo(
            f"run {result.run_id} of {project}/{benchmark} was already stored "
            f"(same commit and CI run, or the same data); nothing written"
        )


def register(app: typer.Typer) -> None:
    app.command("ingest")(ingest_command)
