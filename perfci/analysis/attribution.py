"""Attribution: which kernels, memory operations, collectives and ranges explain a step-time change.

Each metric's per-step delta (candidate median − baseline median, ns per step) is divided by the
step-time delta, giving the share of the change it explains (negative when it moved the other
way; above 1 when others compensated).

Nesting decides what may be added up. GPU kernels, memory operations and collectives are the
*primary* decomposition: they are the leaves of GPU time and do not contain each other, so their
shares add up to the part of the change the GPU work explains (overlap between streams can push
the sum above 1). Ranges contain kernels, framework operators launch them, and API/OS calls are
CPU time that often *waits* for them; these are *nested* contributions, listed after the primary
ones and never summed with them.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from perfci.core.model import Contribution, MetricComparison, MetricKind, SeriesKey

PRIMARY_KINDS = frozenset({MetricKind.KERNEL, MetricKind.MEMORY, MetricKind.COMM})
NESTED_KINDS = frozenset(
    {MetricKind.RANGE, MetricKind.OP, MetricKind.LAYER, MetricKind.API, MetricKind.OS}
)


@dataclass(frozen=True, slots=True)
class MetricDelta:
    """One metric's per-step medians; ``None`` means absent (a new or removed kernel)."""

    series: SeriesKey
    baseline_ns: float | None
    candidate_ns: float | None

    @property
    def delta_ns(self) -> float:
        """Candidate − baseline per step, counting an absent side as 0 ns."""
        return (self.candidate_ns or 0.0) - (self.baseline_ns or 0.0)


@dataclass(frozen=True, slots=True)
class Attribution:
    """The decomposition of one step-time change.

    ``explained`` is the sum of the primary shares (kernels + memory + collectives).
    """

    step: SeriesKey
    step_delta_ns: float
    primary: list[Contribution]
    nested: list[Contribution]
    explained: float

    @property
    def contributions(self) -> list[Contribution]:
        """Primary contributions first, then nested ones: the order a report lists them in."""
        return [*self.primary, *self.nested]


def attribute(
    step: MetricDelta, metrics: Iterable[MetricDelta], *, top: int = 10
) -> Attribution | None:
    """Decompose ``step``'s change into the per-step deltas of ``metrics``.

    Parameters
    ----------
    step
        The step metric whose change is explained (the primary step of the run).
    metrics
        Per-step medians of the other metrics of the same section; step metrics are ignored.
    top
        How many contributors of each group (primary, nested) to keep, largest |delta| first.

    Returns
    -------
    Attribution or None
        ``None`` when the step time did not change at all (a share of zero is undefined).
    """
    step_delta = step.delta_ns
    if step_delta == 0:
        return None
    primary, nested = _split(metrics)
    primary_all = _contributions(primary, step_delta)
    explained = sum(c.share for c in primary_all)
    return Attribution(
        step=step.series,
        step_delta_ns=step_delta,
        primary=primary_all[:top],
        nested=_contributions(nested, step_delta)[:top],
        explained=explained,
    )


def _split(metrics: Iterable[MetricDelta]) -> tuple[list[MetricDelta], list[MetricDelta]]:
    primary, nested = [], []
    for metric in metrics:
        if metric.series.kind in PRIMARY_KINDS:
            primary.append(metric)
        elif metric.series.kind in NESTED_KINDS:
            nested.append(metric)
    return primary, nested


def _contributions(metrics: list[MetricDelta], step_delta: float) -> list[Contribution]:
    """Contributions sorted by |delta| (largest first; ties by key for stable output)."""
    moved = [m for m in metrics if m.delta_ns != 0]
    moved.sort(key=lambda m: (-abs(m.delta_ns), m.series.key))
    return [
        Contribution(
            key=m.series.key, delta_ns=m.delta_ns, share=m.delta_ns / step_delta, series=m.series
        )
        for m in moved
    ]


def attribute_step(
    metrics: Sequence[MetricComparison], step: MetricComparison, *, top: int
) -> Attribution | None:
    """Attribute the primary step's change to the metrics of its own section.

    Deltas are taken on the printed values (this run − baseline, ns per step), so the table
    adds up to the step's printed change.
    """
    assert step.series is not None
    section = step.series.section
    others = [
        MetricDelta(m.series, m.baseline_median, m.candidate_median)
        for m in metrics
        if m.series is not None
        and m.series.section == section
        and m.series.kind is not MetricKind.STEP
        and m.series.is_time  # a step's time is explained by times, never by bytes or rates
    ]
    target = MetricDelta(step.series, step.baseline_median, step.candidate_median)
    if target.candidate_ns is None or target.baseline_ns is None:
        return None
    return attribute(target, others, top=top)


def explained_note(found: Attribution) -> str:
    if found.primary:
        return (
            f"Kernels, memory operations and collectives explain {found.explained:.0%} of "
            "the step-time change; ranges, operators and API calls overlap them and are "
            "listed after them."
        )
    # CPU-only profiles (and tables without device time) have no leaf-level GPU work.
    return (
        "These profiles have no GPU kernels, memory operations or collectives: the ranges "
        "and operators listed overlap one another (a range contains its operators), so "
        "their shares do not add up."
    )
