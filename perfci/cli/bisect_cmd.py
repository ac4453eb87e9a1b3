"""``perfci bisect GOOD BAD -b BENCH``: find the commit that moved a benchmark's metric.

Each probe is a same-runner A/B (``perfci check --ab``'s pairs and looks) of a commit against
GOOD, in temporary worktrees removed on every way out. One progress line per probe goes to
stderr, the answer to stdout (``--markdown-out`` writes it as Markdown for an issue). Exit 0
when a culprit is named and its rerun confirms it, 1 when the search ends without one
(nothing changed, budget spent, not confirmed), 2 on a usage error.
"""

# lazy: the imports inside functions load a command's work only when it runs, so that
# `perfci --help` and the short commands start fast (tests/test_cold_start.py).
from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import typer

from perfci.cli import _options as opts

if TYPE_CHECKING:  # the type only: `perfci --help` does not import the bisection model
    from perfci.core.bisection import Probe


def bisect_command(
    good: str = typer.Argument(..., help="A commit where the metric has its old level."),
    bad: str = typer.Argument(
        ..., help="A later commit (on GOOD's first-parent line) where it moved."
    ),
    benchmark: opts.DeclaredBenchmark = None,
    metric: str | None = typer.Option(
        None,
        "--metric",
        help="Series key or name to follow, e.g. a kernel (default: the step).",
    ),
    budget: int | None = typer.Option(
        None, "--budget", min=1, help="Most probes (A/B comparisons) this invocation runs."
    ),
    resume: bool = typer.Option(
        False, "--resume", help="Go on from the saved state (.perfci/bisect-<id>.json)."
    ),
    ab_pairs: int | None = typer.Option(
        None, "--ab-pairs", min=2, help="Pairs per probe (default: settings, 5)."
    ),
    max_repeats: int | None = typer.Option(
        None,
        "--max-repeats",
        min=1,
        help="Most pairs a probe's adaptive looks may run (default: 3x --ab-pairs).",
    ),
    delta: opts.Delta = None,
    alpha: opts.Alpha = None,
    markdown_out: Path | None = typer.Option(
        None, "--markdown-out", help="Write the answer as Markdown here (for an issue)."
    ),
    pass_env: opts.PassEnv = None,
) -> int:
    """Binary search on GOOD..BAD for the first commit where the metric moved."""
    from perfci.cli._console import console, err_console
    from perfci.report.bisect import answer_lines, answer_markdown, probe_line
    from perfci.usecases.bisect import BisectRequest, run_bisect

    request = BisectRequest(
        good=good, bad=bad, benchmark=benchmark, metric=metric, budget=budget, resume=resume
    )
    overrides = {
        "ab_pairs": ab_pairs,
        "max_repeats": max_repeats,
        "delta": delta,
        "alpha": alpha,
        "pass_env": pass_env or None,
    }

    def progress(probe: Probe, place: int | None, commits: int) -> None:
        err_console.print(probe_line(probe, place, commits), markup=False, highlight=False)

    answer = run_bisect(request, overrides=overrides, progress=progress)
    for line in answer_lines(answer):
        console.print(line, markup=False, highlight=False, soft_wrap=True)
    if markdown_out is not None:
        markdown_out.write_text(answer_markdown(answer), encoding="utf-8")
        err_console.print(f"wrote {markdown_out}", markup=False)
    return 0 if answer.culprit is not None and answer.confirmed else 1


def register(app: typer.Typer) -> None:
    app.command("bisect")(bisect_command)
