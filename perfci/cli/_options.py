"""Options several commands share: benchmark, run context, profile format, database URL, the
test's margin and level, KEY=VALUE pairs.

One definition each, so that `perfci ingest` and `perfci check` can never describe the same
flag differently.
"""

# lazy: the imports inside functions load a command's work only when it runs, so that
# `perfci --help` and the short commands start fast (tests/test_cold_start.py).
from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Annotated, Any, TypeVar

import typer

T = TypeVar("T")

Project = Annotated[str | None, typer.Option("--project", help="Project (default: repository).")]
#: ``--project`` of the commands that read what is stored (the settings name a project).
StoredProject = Annotated[
    str | None,
    typer.Option("--project", help="Project (default: settings, else the repository name)."),
]
#: ``--benchmark`` where the config file declares the benchmarks.
DeclaredBenchmark = Annotated[
    str | None,
    typer.Option(
        "--benchmark",
        "-b",
        help="Benchmark name (default: the only one declared in the config file).",
    ),
]
#: ``--json`` of the commands that store something: what they stored, as JSON.
JsonResult = Annotated[bool, typer.Option("--json", help="Print the result as JSON.")]
#: ``--json`` of the commands that list stored things.
Json = Annotated[bool, typer.Option("--json", help="Print JSON.")]
Delta = Annotated[float | None, typer.Option("--delta", help="Practical margin (relative).")]
Alpha = Annotated[float | None, typer.Option("--alpha", help="False-discovery rate.")]
Commit = Annotated[
    str | None, typer.Option("--commit", help="Commit SHA (default: detected from CI or git).")
]
Branch = Annotated[str | None, typer.Option("--branch", help="Branch (default: detected).")]
BaseBranch = Annotated[str | None, typer.Option("--base-branch", help="PR base branch.")]
PullRequest = Annotated[int | None, typer.Option("--pr", help="Pull request number.")]
CiRunId = Annotated[str | None, typer.Option("--ci-run-id", help="CI run id.")]
CiRunAttempt = Annotated[int | None, typer.Option("--ci-run-attempt", help="CI run attempt.")]
ProfileFormat = Annotated[
    str | None,
    typer.Option(
        "--format",
        "-f",
        help="Format name (see `perfci formats`); detected from content when omitted.",
    ),
]
ParserOptions = Annotated[
    list[str] | None,
    typer.Option(
        "--option",
        "-o",
        help="Parser option KEY=VALUE, repeatable (e.g. time_unit=us, better=higher).",
    ),
]
EnvironmentEntries = Annotated[
    list[str] | None,
    typer.Option("--env", help="Environment fingerprint entry KEY=VALUE (repeatable)."),
]
DatabaseUrl = Annotated[
    str | None,
    typer.Option(
        "--database-url",
        help="Database URL (default: settings, else the embedded SQLite store .perfci/perfci.db).",
    ),
]

PassEnv = Annotated[
    list[str] | None,
    typer.Option(
        "--pass-env",
        metavar="NAME",
        help="Let this environment variable through to the benchmark although perfci withholds it "
        "(PERFCI_* and CI tokens; repeatable; default: the pass_env setting).",
    ),
]


def key_value_pairs(values: list[str] | None, *, option: str) -> dict[str, str]:
    """``["gpu=H100", "note=x"]`` as a dict; a usage error (exit 2) naming ``option`` else."""
    pairs = {}
    for item in values or ():
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise typer.BadParameter(f"expected KEY=VALUE, got {item!r}", param_hint=option)
        pairs[key.strip()] = value.strip()
    return pairs


#: The flags that say where a run was measured, by parameter name, in the order ``--help``
#: lists them: :func:`with_run_context` gives them to a command.
_RUN_CONTEXT: dict[str, Any] = {
    "commit": Commit,
    "branch": Branch,
    "base_branch": BaseBranch,
    "pr": PullRequest,
    "ci_run_id": CiRunId,
    "ci_run_attempt": CiRunAttempt,
    "env": EnvironmentEntries,
}
#: The RunContext field of each of those flags whose name is not the field's.
_FIELD = {"pr": "pr_number", "env": "environment"}

#: A command's parameter with this default stands for the run-context flags
#: (:func:`with_run_context`).
RUN_CONTEXT: Any = object()


class RunContextFlags:
    """The run-context flags as given (``None`` where not), for the command's use case."""

    def __init__(self, given: Mapping[str, Any]) -> None:
        self._given = dict(given)

    def fields(self) -> dict[str, Any]:
        """As :class:`~perfci.core.model.RunContext` fields: a usage error (exit 2) for an
        ``--env`` entry that is not KEY=VALUE."""
        fields = {_FIELD.get(name, name): value for name, value in self._given.items()}
        fields["environment"] = key_value_pairs(self._given["env"], option="--env")
        return fields


def with_run_context(command: Callable[..., T]) -> Callable[..., T]:
    """``command`` taking the run-context flags (``--commit`` … ``--env``) where its parameter
    whose default is :data:`RUN_CONTEXT` stands; that parameter gets them as
    :class:`RunContextFlags`.

    Typer reads a command's options from its signature: the one made here lists the flags in
    the place of that parameter, so that ``--help`` shows them there.
    """
    signature = inspect.signature(command, eval_str=True)
    (slot,) = (p for p in signature.parameters.values() if p.default is RUN_CONTEXT)
    flags = [
        inspect.Parameter(name, slot.kind, default=None, annotation=option)
        for name, option in _RUN_CONTEXT.items()
    ]
    params = list(signature.parameters.values())
    at = params.index(slot)
    params[at : at + 1] = flags

    @functools.wraps(command)
    def given_flags(**given: Any) -> T:
        context = RunContextFlags({name: given.pop(name) for name in _RUN_CONTEXT})
        return command(**given, **{slot.name: context})

    given_flags.__signature__ = signature.replace(parameters=params)  # type: ignore[attr-defined]
    given_flags.__annotations__ = {p.name: p.annotation for p in params}
    given_flags.__annotations__["return"] = signature.return_annotation
    return given_flags


#: Every spelling of an output format a command accepts, to the one name it is written under:
#: ``markdown`` and ``md`` are the same output wherever Markdown is offered (issue 16).
OUTPUT_FORMAT_SPELLINGS = {
    "md": "md",
    "markdown": "md",
    "html": "html",
    "json": "json",
    "text": "text",
    "terminal": "text",
}


def output_formats(values: list[str], *, allowed: tuple[str, ...], option: str) -> list[str]:
    """``values`` in canonical spelling (``markdown`` → ``md``), duplicates dropped, in order.

    Raises
    ------
    ConfigError
        For a value that is not a spelling of one of ``allowed``, listing the spellings accepted.
    """
    from perfci.core.errors import ConfigError

    canonical = []
    for value in values:
        name = OUTPUT_FORMAT_SPELLINGS.get(value.strip().lower())
        if name not in allowed:
            spellings = [s for s, n in OUTPUT_FORMAT_SPELLINGS.items() if n in allowed]
            raise ConfigError(f"{option} {value!r}: expected one of {', '.join(spellings)}")
        canonical.append(name)
    return list(dict.fromkeys(canonical))


def warn_skipped(skipped: list[Path], *, shown: int = 5) -> None:
    """Name the files of given folders that no parser recognised, or that held no measurement
    yet (they were not read), and the links there that were not followed (never opened)."""
    if not skipped:
        return
    from perfci.cli._console import err_console

    names = ", ".join(str(p) for p in skipped[:shown])
    more = f" and {len(skipped) - shown} more" if len(skipped) > shown else ""
    err_console.print(
        f"warning: skipped {len(skipped)} file{'s' if len(skipped) != 1 else ''} that no "
        "parser recognises or that hold no measurement yet (or links not followed: out of "
        f"the folder, dangling, or round in a loop): {names}{more}",
        markup=False,
        soft_wrap=True,
    )
