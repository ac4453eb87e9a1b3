"""The one number per metric and repeat that comparisons use.

Times are compared per step, so that a profile of 3 steps and one of 5 compare fairly; a
value in another unit (tokens/s, bytes, %) is compared as the source gives it.

Per step means the mean over the profiled steps (:attr:`PerStep.MEAN`), what the store keeps
and history mode compares. Same-runner A/B compares the host-side work of each operator and
range on its fastest step (:attr:`PerStep.FASTEST`): a busy neighbour only ever adds time, to
some steps more than others, and the step it left alone is the work itself (the minimum as
the estimator of a benchmark's cost under additive noise: Chen & Revels 2016, "Robust
benchmarking in noisy environments", arXiv:1608.04295). The step itself stays a mean, so a
change that slows one step in four still shows.
"""

from __future__ import annotations

from enum import StrEnum

from perfci.model import Metric, MetricKind


class PerStep(StrEnum):
    """How a time becomes one number per repeat."""

    MEAN = "mean"  # the total over the profiled steps, divided by their number
    FASTEST = "fastest"  # the smallest per-step total, where the source gives them


#: Kinds whose time is one instance's own (an iteration, one benchmark case, a time-to-train),
#: not a total over the profile to be divided by its steps.
_PER_INSTANCE = frozenset({MetricKind.STEP, MetricKind.BENCH, MetricKind.MEASURE})


def compared_value(
    metric: Metric, steps: int | None, per_step: PerStep = PerStep.MEAN
) -> float | None:
    """The value of ``metric`` that comparisons use, in its unit; ``None`` when it has none.

    - a value in another unit than ns: the mean of its non-warm-up samples, else its value;
    - with :attr:`PerStep.FASTEST`, a time with per-step totals (not a step, benchmark case
      or headline time): the smallest of them;
    - a time: :func:`per_step_ns`.
    """
    if not metric.is_time:
        steady = metric.steady_samples()
        if steady:
            return sum(steady) / len(steady)
        return metric.value
    if (
        per_step is PerStep.FASTEST
        and metric.step_totals_ns
        and metric.kind not in _PER_INSTANCE  # a step stays a mean: a slow step in four shows
    ):
        return min(metric.step_totals_ns)
    return per_step_ns(metric, steps)


def per_step_ns(metric: Metric, steps: int | None) -> float | None:
    """Per-step time of ``metric`` in ns, or ``None`` when the source gives no time.

    - steps, benchmark cases and headline times: the mean of the non-warm-up samples (the
      instance's own time), else the source's average, else the total per call;
    - everything else: the total time divided by the number of profiled steps when known,
      else the total time (one profile = one unit of work).
    """
    if metric.kind in _PER_INSTANCE:
        steady = metric.steady_samples()
        if steady:
            return sum(steady) / len(steady)
        if metric.avg_ns is not None:
            return metric.avg_ns
        if metric.total_ns is not None:
            return metric.total_ns / metric.calls if metric.calls else metric.total_ns
        return None
    total = metric.total_ns
    if total is None and metric.avg_ns is not None and metric.calls is not None:
        total = metric.avg_ns * metric.calls
    if total is None:
        return None
    return total / steps if steps else total
