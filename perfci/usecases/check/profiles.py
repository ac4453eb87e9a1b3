"""The profiles of each repeat of a check: parsed from given files, or by running the benchmark.

Everything is parsed before any store is opened, so a failing benchmark or a bad file writes
nothing.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from perfci.core.errors import ConfigError
from perfci.core.model import Profile
from perfci.core.settings_sources import find_project_root
from perfci.integrations.machine import gpu_state
from perfci.integrations.runner import run_benchmark
from perfci.usecases.check.spec import BenchmarkSpec, Runner
from perfci.usecases.submit.repeats import parse_repeats

__all__ = ["collect_repeats", "run_repeats", "work_dir"]


def collect_repeats(
    spec: BenchmarkSpec, profiles: Sequence[Path], *, runner: Runner, cwd: Path | None = None
) -> list[list[Profile]]:
    """The parsed profiles of each repeat: one repeat per given file, else by running ``spec``.

    Everything is parsed here, before any store is opened, so bad input writes nothing.
    """
    if profiles:
        return parse_repeats(list(profiles), format=spec.format, options=spec.options)
    if not spec.command:
        raise ConfigError(
            f"benchmark {spec.name!r} has no command: give one after `--`, "
            f"declare `command` in [tool.perfci.benchmarks.{spec.name}], or "
            "pass --profile FILE"
        )

    files = runner(spec, work_dir(spec.name, cwd))
    repeats = [
        parse_repeats(group, format=spec.format, repeat=1, options=spec.options, found=True)[0]
        for group in files
    ]
    gpu_state.attach(repeats, files)  # each repeat's GPU clocks and throttling, if sampled
    return repeats


def work_dir(benchmark: str, cwd: Path | None = None) -> Path:
    """Where the repeats of ``benchmark`` write: ``.perfci/runs/NAME`` in the project root."""
    return find_project_root(cwd) / ".perfci" / "runs" / benchmark


def run_repeats(spec: BenchmarkSpec, directory: Path) -> list[list[Path]]:
    """The plain runner: each repeat a fresh process, no progress display."""
    return run_benchmark(
        spec.command,
        benchmark=spec.name,
        repeats=spec.repeats,
        work_dir=directory,
        profiler=spec.profiler,
        globs=spec.globs or None,
        pass_env=spec.pass_env,
    ).files_per_repeat
