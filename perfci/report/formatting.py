"""Formatting shared by the renderers: verdict words, percentages, durations, ordering.

Every renderer (Markdown, terminal, HTML) says the same thing in the same words; only the
markup differs.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from perfci.analysis.steps import primary_step as step_rule
from perfci.core.model import Better, MetricComparison, MetricKind, RunComparison, Verdict
from perfci.core.units import format_ns, format_value

NO_VALUE = "—"
#: A change of ×10,000 or more is printed in scientific notation, not a hundred digits.
_HUGE = 1e4


@dataclass(frozen=True, slots=True)
class Label:
    emoji: str
    words: str

    def __str__(self) -> str:
        return f"{self.emoji} {self.words}"


#: The run's verdict as a headline.
HEADLINES: dict[Verdict, Label] = {
    Verdict.REGRESSION: Label("❌", "Regression"),
    Verdict.UNCHANGED: Label("✅", "No regression"),
    Verdict.IMPROVEMENT: Label("🟢", "Improvement"),
    Verdict.INCONCLUSIVE: Label("⚠️", "Inconclusive"),
    Verdict.NO_BASELINE: Label("ℹ️", "No baseline yet"),
    Verdict.NEW: Label("🆕", "New benchmark"),
    Verdict.MISSING: Label("➖", "Missing"),
}

#: One metric's verdict, in a table cell.
LABELS: dict[Verdict, Label] = {
    Verdict.REGRESSION: Label("❌", "regression"),
    Verdict.IMPROVEMENT: Label("🟢", "improvement"),
    Verdict.UNCHANGED: Label("✅", "unchanged"),
    Verdict.INCONCLUSIVE: Label("⚠️", "inconclusive"),
    Verdict.NEW: Label("🆕", "new"),
    Verdict.MISSING: Label("➖", "missing"),
    Verdict.NO_BASELINE: Label("ℹ️", "no baseline"),
}

#: Order of the full table: what needs attention first, so truncation drops the quiet lines.
SEVERITY = (
    Verdict.REGRESSION,
    Verdict.IMPROVEMENT,
    Verdict.INCONCLUSIVE,
    Verdict.NEW,
    Verdict.MISSING,
    Verdict.NO_BASELINE,
    Verdict.UNCHANGED,
)


def pct(value: float | None, *, signed: bool = True) -> str:
    """``0.0525`` as ``+5.2 %``; ``—`` for no value; ``+∞ %`` and ``+3.1e+12 %`` for the
    bounds of an interval a wild baseline leaves all but open."""
    if value is None:
        return NO_VALUE
    if not math.isfinite(value):
        return NO_VALUE if math.isnan(value) else ("-∞ %" if value < 0 else "+∞ %")
    if abs(value) >= _HUGE:
        return f"{value * 100:+.1e} %" if signed else f"{value * 100:.1e} %"
    rounded = round(value * 100, 1)
    if rounded == 0:
        return "0.0 %"  # not "-0.0 %"
    return f"{rounded:+.1f} %" if signed else f"{rounded:.1f} %"


def share(value: float | None) -> str:
    """A share of step time or of its change: ``62 %``; one decimal below 10 %."""
    if value is None:
        return NO_VALUE
    percent = value * 100
    return f"{percent:.1f} %" if abs(percent) < 10 else f"{percent:.0f} %"


def interval(low: float | None, high: float | None) -> str:
    if low is None or high is None:
        return NO_VALUE
    return f"{pct(low)} … {pct(high)}"


def qvalue(value: float | None) -> str:
    if value is None:
        return NO_VALUE
    return "< 0.001" if value < 0.001 else f"{value:.3f}"


def duration(ns: float | None) -> str:
    return NO_VALUE if ns is None else format_ns(ns)


def delta(ns: float | None) -> str:
    """A signed duration: ``+4.10 ms``."""
    if ns is None:
        return NO_VALUE
    return f"+{format_ns(ns)}" if ns > 0 else format_ns(ns)


def measured(metric: MetricComparison, number: float | None) -> str:
    """One of ``metric``'s values (baseline, this run) in its unit; a duration for the run
    factor's line, which has no series."""
    if number is None:
        return NO_VALUE
    series = metric.series
    return format_ns(number) if series is None else format_value(number, series.unit)


def direction(metric: MetricComparison) -> str:
    """``higher is better`` for the metrics that are read that way; ``""`` for the rest."""
    series = metric.series
    return "higher is better" if series is not None and series.better is Better.HIGHER else ""


def headline_change(metric: MetricComparison) -> str:
    """The change said with what moved: ``−7.2 % throughput``, ``+12.0 % peak memory``."""
    return f"{pct(metric.change)} {name_of(metric)}"


def headline_measures(result: RunComparison) -> list[MetricComparison]:
    """The headline values that are not times (throughput, memory, accuracy), worst first."""
    rows = [
        m
        for m in result.metrics
        if m.series is not None
        and not m.series.is_time
        and m.series.kind in (MetricKind.MEASURE, MetricKind.BENCH)
    ]
    return by_severity(rows)


def short_sha(sha: str | None) -> str:
    return sha[:7] if sha else NO_VALUE


def name_of(metric: MetricComparison) -> str:
    """What a reader calls the metric: section, scope and name, without the kind prefix; a
    renamed kernel's line says which name it replaces."""
    name = metric.series.display_name if metric.series else metric.key
    return f"{name} (replaces {metric.replaces})" if metric.replaces else name


@dataclass(frozen=True, slots=True)
class Replacement:
    """A renamed kernel's line in words: ``old`` replaced by ``new`` (same family, rule)."""

    old: str
    new: str
    rule: str
    change: str
    metric: MetricComparison


def replacements(metrics: Iterable[MetricComparison]) -> list[Replacement]:
    """The lines that pair a renamed kernel, largest per-step change first.

    Every renderer says ``X replaced by Y (same family, rule: R): +12 %``; only the markup
    of the names differs.
    """
    rows = [m for m in metrics if m.replaces and m.series is not None]
    rows.sort(key=lambda m: (-abs(delta_ns(m)), m.key))
    return [
        Replacement(
            old=m.replaces or "",
            new=m.series.name if m.series else m.key,
            rule=m.family_rule or "",
            change=pct(m.change),
            metric=m,
        )
        for m in rows
    ]


def kind_of(metric: MetricComparison) -> str:
    return metric.series.kind.value if metric.series else metric.key.split(":", 1)[0]


def delta_ns(metric: MetricComparison) -> float:
    """Per-step time change, absent sides counting as 0 (a new kernel adds all its time);
    0 for a metric that is not a time (its change is not comparable with times)."""
    if metric.series is not None and not metric.series.is_time:
        return 0.0
    return (metric.candidate_median or 0.0) - (metric.baseline_median or 0.0)


def primary_step(result: RunComparison) -> MetricComparison | None:
    """The step line the run was judged on: the one the comparison names (``primary_step``);
    for a comparison stored before it named one, the same rule (:mod:`perfci.analysis.steps`)."""
    steps = result.steps
    chosen = result.primary_step or next(
        (
            k.key
            for k in [
                step_rule(
                    (m.series, m.baseline_median, m.n_baseline)
                    for m in steps
                    if m.series is not None
                )
            ]
            if k is not None
        ),
        None,
    )
    found = next((m for m in steps if m.key == chosen), None)
    return found or (steps[0] if steps else None)


def by_impact(metrics: Iterable[MetricComparison], verdict: Verdict) -> list[MetricComparison]:
    """Metrics with ``verdict``: gated first, the host's times on a GPU run last (their
    changes are waits moved about), then the largest per-step time change."""
    every = list(metrics)
    host = host_side(every)
    chosen = [m for m in every if m.verdict is verdict]
    return sorted(chosen, key=lambda m: (not m.gated, host(m), -abs(delta_ns(m)), m.key))


def by_severity(metrics: Iterable[MetricComparison]) -> list[MetricComparison]:
    every = list(metrics)
    host = host_side(every)
    rank = {verdict: i for i, verdict in enumerate(SEVERITY)}
    return sorted(
        every, key=lambda m: (rank[m.verdict], not m.gated, host(m), -abs(delta_ns(m)), m.key)
    )


#: The full tables lead with what was decided: regressions, improvements and the gated lines
#: found unchanged; then the gated lines still open, the new and missing ones, and the ungated
#: unchanged. The ungated inconclusive lines (often most of a run: a few µs each) are folded
#: apart (:func:`folded`): they cannot fail the check and settled nothing.
_DECIDED_RANK = {
    Verdict.REGRESSION: 0,
    Verdict.IMPROVEMENT: 1,
    Verdict.UNCHANGED: 2,  # gated; ungated: 7
    Verdict.INCONCLUSIVE: 3,  # gated; ungated: folded
    Verdict.NEW: 4,
    Verdict.MISSING: 5,
    Verdict.NO_BASELINE: 6,
}


def folded(metric: MetricComparison) -> bool:
    """Whether ``metric`` goes under the one folded summary line: inconclusive and ungated."""
    return metric.verdict is Verdict.INCONCLUSIVE and not metric.gated


def decided_first(
    metrics: Iterable[MetricComparison],
) -> tuple[list[MetricComparison], list[MetricComparison]]:
    """``(shown, folded)``: the lines of the full table in the order of ``_DECIDED_RANK``
    (gated first within a verdict, the host's times on a GPU run last, then the largest
    per-step change), and the ungated inconclusive lines, largest change first."""
    every = list(metrics)
    host = host_side(every)

    def rank(m: MetricComparison) -> int:
        if m.verdict is Verdict.UNCHANGED and not m.gated:
            return 7
        return _DECIDED_RANK[m.verdict]

    def order(m: MetricComparison) -> tuple[int, bool, bool, float, str]:
        return (rank(m), not m.gated, host(m), -abs(delta_ns(m)), m.key)

    shown = sorted((m for m in every if not folded(m)), key=order)
    return shown, sorted((m for m in every if folded(m)), key=order)


def folded_summary(count: int) -> str:
    """The one line the ungated inconclusive lines are folded under."""
    if count == 1:
        return (
            "1 inconclusive line that does not gate: reported only (it cannot fail the "
            "check), too small or too noisy at this run to settle"
        )
    return (
        f"{count} inconclusive lines that do not gate: reported only (they cannot fail the "
        "check), too small or too noisy at this run to settle"
    )


def shown_summary(shown: int, folded: int) -> str:
    """The summary line of the full table, beside the folded lines'."""
    if not folded:
        return f"All {shown} metrics, decided first"
    apart = (
        "the ungated inconclusive one is"
        if folded == 1
        else f"the {folded} ungated inconclusive ones are"
    )
    return f"{shown} metrics, decided first ({apart} folded below)"


def unchanged_gated(result: RunComparison) -> list[MetricComparison]:
    """The gated lines found unchanged, the steps left out (their own table shows them),
    largest share of the step first."""
    rows = [
        m
        for m in result.metrics
        if m.verdict is Verdict.UNCHANGED
        and m.gated
        and (m.series is None or m.series.kind is not MetricKind.STEP)
    ]
    return sorted(rows, key=lambda m: (-(m.share_of_step or 0.0), m.key))


def host_side_keys(metrics: Iterable[MetricComparison]) -> frozenset[str]:
    """Keys of the host thread's times on a GPU run (:func:`perfci.analysis.gating.host_timing`)."""
    every = list(metrics)
    host = host_side(every)
    return frozenset(m.key for m in every if host(m))


def host_side(metrics: list[MetricComparison]) -> Callable[[MetricComparison], bool]:
    """Whether a line of ``metrics`` is the host thread's times on a GPU run."""
    # lazy: gating loads numpy and scipy, which the commands that only list (alerts) never need
    from perfci.analysis.gating import gpu_run, host_timing

    on_gpu = gpu_run(m.series for m in metrics if m.series is not None)
    return lambda m: m.series is not None and host_timing(m.series, on_gpu)


def counts(metrics: Iterable[MetricComparison]) -> dict[Verdict, int]:
    """Metrics per verdict, what was decided first, verdicts with none left out."""
    found = Counter(m.verdict for m in metrics)
    return {verdict: found[verdict] for verdict in _DECIDED_RANK if found[verdict]}


def explains_change(result: RunComparison) -> bool:
    """Whether the step-time change is worth explaining: attributing noise misleads."""
    step = primary_step(result)
    return (
        bool(result.contributions)
        and step is not None
        and step.verdict in {Verdict.REGRESSION, Verdict.IMPROVEMENT, Verdict.INCONCLUSIVE}
    )
