"""Options several commands share: run context, profile format, database URL, KEY=VALUE pairs.

One definition each, so that `perfci ingest` and `perfci check` can never describe the same
flag differently.
"""

from __future__ import annotations

from typing import Annotated

import typer

Project = Annotated[str | None, typer.Option("--project", help="Project (default: repository).")]
Commit = Annotated[str | None, typer.Option(
    "--commit", help="Commit SHA (default: detected from CI or git).")]
Branch = Annotated[str | None, typer.Option("--branch", help="Branch (default: detected).")]
BaseBranch = Annotated[str | None, typer.Option("--base-branch", help="PR base branch.")]
PullRequest = Annotated[int | None, typer.Option("--pr", help="Pull request number.")]
CiRunId = Annotated[str | None, typer.Option("--ci-run-id", help="CI run id.")]
CiRunAttempt = Annotated[int | None, typer.Option("--ci-run-attempt", help="CI run attempt.")]
ProfileFormat = Annotated[str | None, typer.Option(
    "--format", "-f", help="Format name (see `perfci formats`); detected from content when "
                           "omitted.")]
EnvironmentEntries = Annotated[list[str] | None, typer.Option(
    "--env", help="Environment fingerprint entry KEY=VALUE (repeatable).")]
DatabaseUrl = Annotated[str | None, typer.Option(
    "--database-url", help="Database URL (default: settings, else the embedded SQLite store "
                           ".perfci/perfci.db).")]


def key_value_pairs(values: list[str] | None, *, option: str) -> dict[str, str]:
    """``["gpu=H100", "note=x"]`` as a dict; a usage error (exit 2) naming ``option`` else."""
    pairs = {}
    for item in values or ():
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise typer.BadParameter(f"expected KEY=VALUE, got {item!r}", param_hint=option)
        pairs[key.strip()] = value.strip()
    return pairs
