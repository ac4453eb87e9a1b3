"""A benchmark command run N times under a profiler, each repeat a fresh process.

``perfci run`` and ``perfci check`` show progress as repeats finish; they hand a callback
and get back the files each repeat wrote.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

from perfci.integrations.runner import RepeatResult, run_benchmark

__all__ = ["RepeatResult", "run_benchmark_repeats"]


def run_benchmark_repeats(
    command: list[str],
    *,
    benchmark: str,
    repeats: int,
    profiler: str,
    work_dir: Path,
    globs: list[str] | None = None,
    pass_env: Sequence[str] | None = None,
    on_repeat: Callable[[int, RepeatResult], None] | None = None,
) -> list[list[Path]]:
    """Run ``command`` ``repeats`` times in ``work_dir``; the profile files of each repeat.

    Raises
    ------
    BenchmarkFailed
        When a repeat exits non-zero (its exit code becomes the CLI's).
    """
    result = run_benchmark(
        command,
        benchmark=benchmark,
        repeats=repeats,
        work_dir=work_dir,
        profiler=profiler,
        globs=globs,
        on_repeat=on_repeat,
        pass_env=pass_env,
    )
    return result.files_per_repeat
