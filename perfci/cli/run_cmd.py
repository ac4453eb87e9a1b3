"""``perfci run``: run a benchmark N times under a profiler and collect its profiles."""

# lazy: the imports inside functions load a command's work only when it runs, so that
# `perfci --help` and the short commands start fast (tests/test_cold_start.py).
from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from perfci.cli import _console

if TYPE_CHECKING:
    from perfci.usecases.check.benchmark import RepeatResult


@contextmanager
def repeat_progress(benchmark: str, repeats: int) -> Iterator[Callable[[int, RepeatResult], None]]:
    """A progress bar on stderr while the benchmark runs; yields what each finished repeat calls
    (the ``on_repeat`` of :func:`~perfci.usecases.check.benchmark.run_benchmark_repeats`)."""
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    with Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        TextColumn("{task.completed}/{task.total}"),
        TimeElapsedColumn(),
        console=_console.err_console,
        transient=True,
    ) as progress:
        task = progress.add_task(f"{benchmark}: running", total=repeats)

        def advance(index: int, repeat: RepeatResult) -> None:
            progress.advance(task)
            _console.err_console.print(
                f"  repeat {index + 1}/{repeats}: {repeat.seconds:.1f} s, "
                f"{len(repeat.files)} file(s)"
            )

        yield advance


def default_work_dir(benchmark: str) -> Path:
    from perfci.core.settings_sources import find_project_root

    return find_project_root() / ".perfci" / "runs" / benchmark


def run_command(
    command: list[str] = typer.Argument(..., help="The benchmark command, after `--`."),
    benchmark: str = typer.Option(..., "--benchmark", "-b", help="Benchmark name."),
    repeats: int = typer.Option(3, "--repeats", "-n", min=1, help="Fresh processes to run."),
    profiler: str = typer.Option("torch", "--profiler", help="torch | nsys | none."),
    glob: list[str] = typer.Option([], "--glob", help="Profile file pattern(s) to collect."),
    work_dir: Path | None = typer.Option(
        None, "--work-dir", help="Where repeats write (default .perfci/runs/NAME)."
    ),
) -> None:
    """Run a benchmark command N times, each a fresh process, and list the profiles it wrote.

    The command gets PERFCI_OUTPUT_DIR and PERFCI_REPEAT. Nothing is stored: use
    `perfci ingest` on the files, or `perfci check` for the whole loop.
    """
    from perfci.usecases.check.benchmark import run_benchmark_repeats

    with repeat_progress(benchmark, repeats) as advance:
        files = run_benchmark_repeats(
            command,
            benchmark=benchmark,
            repeats=repeats,
            profiler=profiler,
            work_dir=work_dir or default_work_dir(benchmark),
            globs=glob or None,
            on_repeat=advance,
        )
    for index, repeat_files in enumerate(files):
        for path in repeat_files:
            typer.echo(f"{index}\t{path}")


def register(app: typer.Typer) -> None:
    app.command("run", context_settings={"allow_interspersed_args": False})(run_command)
