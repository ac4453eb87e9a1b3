"""A benchmark command run N times under a profiler, each repeat a fresh process.

``perfci run`` and ``perfci check`` show progress as repeats finish; they hand a callback
and get back the files each repeat wrote.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, TypedDict

from perfci.integrations.runner import RepeatResult, run_benchmark

if TYPE_CHECKING:
    from typing_extensions import Unpack  # typing's own from Python 3.11

__all__ = ["RepeatResult", "RepeatsOf", "run_benchmark_repeats"]


class _Repeats(TypedDict):
    benchmark: str
    repeats: int
    profiler: str
    work_dir: Path


class RepeatsOf(_Repeats, total=False):
    """What :func:`run_benchmark_repeats` runs, besides the command: the benchmark's name,
    how many repeats, under which profiler, in which folder, and what it collects and keeps."""

    globs: list[str] | None
    pass_env: Sequence[str] | None
    on_repeat: Callable[[int, RepeatResult], None] | None


def run_benchmark_repeats(command: list[str], **run: Unpack[RepeatsOf]) -> list[list[Path]]:
    """Run ``command`` ``repeats`` times in ``work_dir``; the profile files of each repeat.

    Raises
    ------
    BenchmarkFailed
        When a repeat exits non-zero (its exit code becomes the CLI's).
    """
    return run_benchmark(command, **run).files_per_repeat
