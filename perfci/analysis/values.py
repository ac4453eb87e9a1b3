"""The one number per metric and repeat that comparisons use: time per profiled step.

Comparisons are made per step so that a profile of 3 steps and one of 5 compare fairly.
"""

from __future__ import annotations

from perfci.model import Metric, MetricKind


def per_step_ns(metric: Metric, steps: int | None) -> float | None:
    """Per-step time of ``metric`` in ns, or ``None`` when the source gives no time.

    - step metrics: the mean of the non-warm-up samples (the iteration time itself);
    - everything else: the total time divided by the number of profiled steps when known,
      else the total time (one profile = one unit of work).
    """
    if metric.kind is MetricKind.STEP:
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
