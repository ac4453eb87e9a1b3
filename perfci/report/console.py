"""A comparison in the terminal (Rich): the verdict first, then what moved and why.

Every name from the run goes through :func:`rich.markup.escape` or is placed in a
:class:`~rich.text.Text`, so a kernel called ``[bold red]x`` prints as itself, and through
:func:`~perfci.report.escape.visible`, so one holding U+202E cannot read reversed.
"""

from __future__ import annotations

from rich import box
from rich.console import Console, JustifyMethod
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from perfci.core.model import MetricComparison, RunComparison, Verdict
from perfci.report import formatting as fmt
from perfci.report import sentences
from perfci.report.escape import shorten, visible

__all__ = ["print_comparison"]

NAME_LEN = 80
_STYLES = {
    Verdict.REGRESSION: "bold red",
    Verdict.IMPROVEMENT: "bold green",
    Verdict.UNCHANGED: "green",
    Verdict.INCONCLUSIVE: "yellow",
    Verdict.NO_BASELINE: "cyan",
    Verdict.NEW: "cyan",
    Verdict.MISSING: "magenta",
}
_COLUMNS: tuple[tuple[str, JustifyMethod], ...] = (
    ("Metric", "left"),
    ("Kind", "left"),
    ("Baseline", "right"),
    ("This run", "right"),
    ("Change", "right"),
    ("95 % interval", "left"),
    ("q", "right"),
    ("Verdict", "left"),
)


def print_comparison(result: RunComparison, console: Console, *, max_rows: int = 10) -> None:
    """Print ``result`` to ``console``: headline, steps, top contributors, regressions,
    improvements, counts per verdict, baseline and notes."""
    console.print(_headline(result))
    step = fmt.primary_step(result)
    if step is not None and step.change is not None:
        beyond = (
            ""
            if step.adjusted_change is None
            else f"; {fmt.pct(step.adjusted_change)} beyond the run factor, interval "
            f"{fmt.interval(step.adjusted_ci_low, step.adjusted_ci_high)}"
        )
        console.print(
            f"Step time {fmt.pct(step.change)} "
            f"(95 % interval {fmt.interval(step.ci_low, step.ci_high)}{beyond}): "
            f"{fmt.duration(step.baseline_median)} → "
            f"{fmt.duration(step.candidate_median)} per step "
            f"({escape(_shown(fmt.name_of(step)))})"
        )
        if (answer := sentences.step_answer(result)) is not None:
            console.print(escape(answer))
    if (unsettled := sentences.unsettled_sentence(result)) is not None:
        console.print(escape(unsettled))
    for m in fmt.headline_measures(result)[:max_rows]:
        if m.change is None:
            continue
        better = f", {fmt.direction(m)}" if fmt.direction(m) else ""
        console.print(
            Text.assemble(
                (fmt.LABELS[m.verdict].words, _STYLES[m.verdict]),
                f": {_shown(fmt.headline_change(m))} "
                f"({visible(fmt.measured(m, m.baseline_median))} → "
                f"{visible(fmt.measured(m, m.candidate_median))}{better}; "
                f"95 % interval {fmt.interval(m.ci_low, m.ci_high)})",
            )
        )
    factor = result.shared_factor is not None
    if result.steps:
        console.print(_metric_table("Steps", result.steps[:max_rows], factor=factor))
    if result.shared_factor is not None:
        shared = result.shared_factor
        console.print(
            f"Machine-wide factor of this run: {fmt.pct(shared.change)} "
            f"(95 % interval {fmt.interval(shared.ci_low, shared.ci_high)}), "
            f"{fmt.LABELS[shared.verdict].words}; metrics with a value beyond it are judged on that"
        )
    if fmt.explains_change(result):
        console.print(_contributions_table(result, max_rows))
    for r in fmt.replacements(result.metrics)[:max_rows]:
        console.print(
            Text.assemble(
                f"{shorten(visible(r.old), 300)} replaced by {shorten(visible(r.new), 300)} "
                f"(same family, rule: {visible(r.rule)}): {r.change}, ",
                (fmt.LABELS[r.metric.verdict].words, _STYLES[r.metric.verdict]),
            )
        )
    for title, verdict in (
        ("Regressions", Verdict.REGRESSION),
        ("Improvements", Verdict.IMPROVEMENT),
    ):
        rows = fmt.by_impact(result.metrics, verdict)
        if rows:
            console.print(
                _metric_table(
                    f"{title} ({len(rows)})",
                    rows[:max_rows],
                    factor=factor,
                    host=fmt.host_side_keys(result.metrics),
                )
            )
    console.print(f"{len(result.metrics)} metrics: {sentences.counts_sentence(result.metrics)}")
    if (rerun := sentences.rerun_sentence(result)) is not None:
        console.print(rerun)
    _print_context(result, console)


def _headline(result: RunComparison) -> Text:
    label = fmt.HEADLINES[result.verdict]
    text = Text(f"{label.emoji} {label.words}", style=_STYLES[result.verdict])
    text.append(f": {visible(result.benchmark)}", style="bold")
    return text


def _shown(name: str) -> str:
    """A name from the run as printed: invisible characters shown, then shortened."""
    return shorten(visible(name), NAME_LEN)


def _metric_table(
    title: str, rows: list[MetricComparison], *, factor: bool, host: frozenset[str] = frozenset()
) -> Table:
    """Metrics on the measured basis; with a run factor, the change beyond it in its own
    column (the basis the verdict was decided on). Lines in ``host`` (the CPU's times on a
    GPU run) say that they do not gate."""
    table = Table(title=title, title_justify="left", box=box.SIMPLE_HEAD)
    for header, justify in _COLUMNS:
        if header == "q" and factor:
            table.add_column("Beyond factor", justify="right")
        table.add_column(header, justify=justify)
    for m in rows:
        cells: list[str | Text] = [
            Text(_shown(fmt.name_of(m))),
            escape(visible(fmt.kind_of(m))),
            escape(visible(fmt.measured(m, m.baseline_median))),
            escape(visible(fmt.measured(m, m.candidate_median))),
            fmt.pct(m.change),
            fmt.interval(m.ci_low, m.ci_high),
        ]
        if factor:
            cells.append(fmt.pct(m.adjusted_change))
        cells += [
            fmt.qvalue(m.q_value),
            Text(
                fmt.LABELS[m.verdict].words + (" (CPU side, not gating)" if m.key in host else ""),
                style=_STYLES[m.verdict],
            ),
        ]
        table.add_row(*cells)
    return table


def _contributions_table(result: RunComparison, max_rows: int) -> Table:
    table = Table(
        title="What explains the step-time change", title_justify="left", box=box.SIMPLE_HEAD
    )
    table.add_column("Metric")
    table.add_column("Kind")
    table.add_column("Δ per step", justify="right")
    table.add_column("Share", justify="right")
    by_key = {m.key: m for m in result.metrics}
    for c in result.contributions[:max_rows]:
        line = by_key.get(c.key)
        name = fmt.name_of(line) if line else c.series.display_name if c.series else c.key
        kind = c.series.kind.value if c.series else c.key.split(":", 1)[0]
        table.add_row(
            Text(_shown(name)), escape(visible(kind)), fmt.delta(c.delta_ns), fmt.share(c.share)
        )
    return table


def _print_context(result: RunComparison, console: Console) -> None:
    if result.baseline is not None:
        base = result.baseline
        commits = ""
        if base.first_commit or base.last_commit:
            commits = (
                f", commits {fmt.short_sha(base.first_commit)}..{fmt.short_sha(base.last_commit)}"
            )
        console.print(
            f"Baseline: {escape(visible(sentences.baseline_words(result) or ''))}"
            f"{escape(visible(commits))}"
        )
    for note in result.notes:
        console.print(Text(f"• {visible(note)}", style="dim"))
    if result.ci_url:
        console.print(f"CI run: {escape(visible(result.ci_url))}")
