"""The short lines a check leaves on GitHub besides its comment: the commit status's name and
description, and the workflow annotations (``::error`` per gated regression, ``::warning`` per
inconclusive step line) that the runner turns into check annotations."""

from __future__ import annotations

from perfci.core.model import MetricComparison, MetricKind, RunComparison, Verdict
from perfci.integrations.github.actions import annotation

__all__ = [
    "MAX_ERROR_ANNOTATIONS",
    "status_context",
    "status_description",
    "status_verdict",
    "verdict_annotations",
]

#: GitHub shows at most 10 error annotations per step; the last one says how many were left out.
MAX_ERROR_ANNOTATIONS = 10


def status_context(benchmark: str) -> str:
    """The commit-status name of ``benchmark``: ``perfci/<benchmark>``."""
    return f"perfci/{benchmark}"


def status_verdict(result: RunComparison) -> Verdict:
    """The verdict the commit status reports: a gated regression fails it whatever the rest."""
    return Verdict.REGRESSION if result.gated_regressions else result.verdict


def status_description(result: RunComparison) -> str:
    """One short line for the commit status: the verdict and the change that matters most."""
    gated = _by_impact(result.gated_regressions)
    if gated:
        more = f" (+{len(gated) - 1} more)" if len(gated) > 1 else ""
        return f"regression: {_name(gated[0])} {_change(gated[0])}{more}"
    steps = [m for m in result.steps if m.change is not None]
    if steps:
        step = max(steps, key=lambda m: m.baseline_median or 0.0)
        return f"{result.verdict.value}: {_name(step)} {_change(step)}"
    return result.verdict.value


def verdict_annotations(result: RunComparison, *, benchmark: str) -> list[str]:
    """``::error`` lines for gated regressions (step lines first, then by time lost, at most
    :data:`MAX_ERROR_ANNOTATIONS`), ``::warning`` lines for inconclusive step lines."""
    gated = _by_impact(result.gated_regressions)
    shown = gated if len(gated) <= MAX_ERROR_ANNOTATIONS else gated[: MAX_ERROR_ANNOTATIONS - 1]
    title = f"perfci {benchmark}: regression"
    lines = [
        annotation("error", f"{_name(m)} {_change(m)} per step (q={_q(m)})", title=title)
        for m in shown
    ]
    if len(shown) < len(gated):
        lines.append(
            annotation(
                "error",
                f"{len(gated) - len(shown)} more regressions: see the job summary",
                title=title,
            )
        )
    for metric in result.steps:
        if metric.verdict is Verdict.INCONCLUSIVE:
            hint = (
                f"; re-run with about {metric.repeats_needed} repeats"
                if metric.repeats_needed
                else ""
            )
            lines.append(
                annotation(
                    "warning",
                    f"{_name(metric)} {_change(metric)} is not conclusive{hint}",
                    title=f"perfci {benchmark}: inconclusive",
                )
            )
    return lines


def _by_impact(metrics: list[MetricComparison]) -> list[MetricComparison]:
    """Step lines first (what a reviewer judges), then by per-step time lost."""

    def lost(m: MetricComparison) -> float:
        return abs((m.candidate_median or 0.0) - (m.baseline_median or 0.0))

    return sorted(metrics, key=lambda m: (not _is_step(m), -lost(m), m.key))


def _is_step(metric: MetricComparison) -> bool:
    return metric.series is not None and metric.series.kind is MetricKind.STEP


def _name(metric: MetricComparison) -> str:
    return metric.series.display_name if metric.series else metric.key


def _change(metric: MetricComparison) -> str:
    return "(no change measured)" if metric.change is None else f"{metric.change * 100:+.1f} %"


def _q(metric: MetricComparison) -> str:
    q = metric.q_value if metric.q_value is not None else metric.p_value
    if q is None:
        return "n/a"
    return "<0.001" if q < 0.001 else f"{q:.3f}"
