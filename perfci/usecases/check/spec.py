"""Which benchmark ``perfci check`` runs, and how: the flags over its config-file table.

:class:`CheckRequest` is what was asked (flags only); :func:`resolve_benchmark` turns it into a
:class:`BenchmarkSpec` (command, repeats, profiler, file globs, format), naming the declared
benchmarks when the choice is ambiguous and refusing unknown keys in a benchmark's table.
"""

from __future__ import annotations

import shlex
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from perfci.core.errors import ConfigError
from perfci.core.settings import BENCHMARK_THRESHOLDS, Settings

__all__ = ["BenchmarkSpec", "CheckRequest", "Runner", "resolve_benchmark"]

#: Runs a benchmark and returns the profile files of each repeat (the CLI adds a progress bar).
Runner = Callable[["BenchmarkSpec", Path], list[list[Path]]]

_SPEC_KEYS = {
    "command",
    "repeats",
    "profiler",
    "globs",
    "glob",
    "format",
    "options",
    *BENCHMARK_THRESHOLDS,
}


@dataclass(frozen=True, slots=True)
class BenchmarkSpec:
    """A benchmark as it will be run: flags over its ``[tool.perfci.benchmarks.NAME]`` table."""

    name: str
    command: list[str]
    repeats: int
    profiler: str
    globs: list[str]
    format: str | None
    #: Variables passed through to the benchmark despite perfci's secret filter.
    pass_env: tuple[str, ...] = ()
    #: The parser's options (``--option KEY=VALUE`` over the table's ``options``).
    options: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class CheckRequest:
    """What ``perfci check`` was asked, flags only (``None`` = not given)."""

    benchmark: str | None = None
    profiles: Sequence[Path] = ()
    command: Sequence[str] = ()
    repeats: int | None = None
    profiler: str | None = None
    globs: Sequence[str] = ()
    format: str | None = None
    options: Mapping[str, str] = field(default_factory=dict)
    baseline_branch: str | None = None
    #: RunContext fields from flags (commit, branch, pr_number, environment ...).
    context: Mapping[str, Any] = field(default_factory=dict)
    #: Same-runner A/B mode (``--ab``): base and PR in alternating pairs, compared paired.
    ab: bool = False


def resolve_benchmark(settings: Settings, request: CheckRequest) -> BenchmarkSpec:
    """The benchmark to check: flags over its declaration in the config file.

    Without ``--benchmark`` the only declared benchmark is used; none or several is an error
    that lists the declared names. A name that is not declared is fine when the command (after
    ``--``) or the profiles come from flags.
    """
    declared = settings.benchmarks
    name = request.benchmark or _only_declared(declared)
    table = declared.get(name, {})
    if not isinstance(table, Mapping):
        raise ConfigError(f"[tool.perfci.benchmarks.{name}] must be a table")
    unknown = set(table) - _SPEC_KEYS
    if unknown:
        raise ConfigError(
            f"[tool.perfci.benchmarks.{name}]: unknown key(s) "
            f"{', '.join(sorted(unknown))}; expected {', '.join(sorted(_SPEC_KEYS))}"
        )
    return BenchmarkSpec(
        name=name,
        command=list(request.command) or _command(name, table.get("command")),
        repeats=_positive(
            request.repeats or table.get("repeats") or settings.repeats, f"repeats of {name!r}"
        ),
        profiler=str(request.profiler or table.get("profiler") or "torch"),
        globs=list(request.globs) or _strings(table.get("globs", table.get("glob")), name),
        format=request.format or table.get("format"),
        pass_env=tuple(settings.pass_env),
        options={**_options(table.get("options"), name), **request.options},
    )


def _options(raw: object, name: str) -> dict[str, str]:
    if raw is None:
        return {}
    if not isinstance(raw, Mapping) or not all(isinstance(k, str) for k in raw):
        raise ConfigError(
            f"[tool.perfci.benchmarks.{name}] options must be a table of parser options, "
            'e.g. options = {better = "higher"}'
        )
    return {str(k): str(v) for k, v in raw.items()}


def _only_declared(declared: Mapping[str, Any]) -> str:
    if len(declared) == 1:
        return next(iter(declared))
    if not declared:
        raise ConfigError(
            "no benchmark given: pass --benchmark NAME, or declare one in "
            "[tool.perfci.benchmarks.NAME] (pyproject.toml) or perfci.toml"
        )
    raise ConfigError(
        f"several benchmarks are declared ({', '.join(sorted(declared))}); "
        "choose one with --benchmark NAME"
    )


def _command(name: str, raw: object) -> list[str]:
    if raw is None:
        return []
    if isinstance(raw, str):
        return shlex.split(raw)
    if isinstance(raw, list) and all(isinstance(part, str) for part in raw):
        return list(raw)
    raise ConfigError(
        f"[tool.perfci.benchmarks.{name}] command must be a string or a list of strings"
    )


def _strings(raw: object, name: str) -> list[str]:
    if raw is None:
        return []
    if isinstance(raw, str):
        return [raw]
    if isinstance(raw, list) and all(isinstance(part, str) for part in raw):
        return list(raw)
    raise ConfigError(
        f"[tool.perfci.benchmarks.{name}] globs must be a string or a list of strings"
    )


def _positive(value: object, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigError(f"{what} must be a positive integer, got {value!r}")
    return value
