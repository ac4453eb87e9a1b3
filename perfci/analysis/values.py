"""The one number per metric and repeat that comparisons use.

Times are compared per step, so that a profile of 3 steps and one of 5 compare fairly; a
value in another unit (tokens/s, bytes, %) is compared as the source gives it.

Per step means the mean over the profiled steps (:attr:`PerStep.MEAN`). The host-side work of
each operator and range is compared on its fastest step (:attr:`PerStep.FASTEST`), by
same-runner A/B and by history mode alike (the store keeps both values, issue 30): a busy
neighbour only ever adds time, to some steps more than others, and the step it left alone is
the work itself (the minimum as the estimator of a benchmark's cost under additive noise:
Chen & Revels 2016, "Robust benchmarking in noisy environments", arXiv:1608.04295). The step
itself stays a mean, so a change that slows one step in four still shows.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from perfci.core.compat import StrEnum
from perfci.core.model import TIME_UNIT, Metric, MetricKind, SeriesKey


class PerStep(StrEnum):
    """How a time becomes one number per repeat."""

    MEAN = "mean"  # the total over the profiled steps, divided by their number
    FASTEST = "fastest"  # the smallest per-step total, where the source gives them


# An enum member read from its class costs more than the rest of the test (once per sample).
_FASTEST = PerStep.FASTEST

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
    if metric.unit != TIME_UNIT:  # not is_time, without the property's call
        steady = metric.steady_samples()
        if steady:
            return sum(steady) / len(steady)
        return metric.value
    if per_step is _FASTEST and (fastest := fastest_value(metric)) is not None:
        return fastest  # a step stays a mean: a slow step in four shows
    return per_step_ns(metric, steps)


def fastest_value(metric: Metric) -> float | None:
    """The time of ``metric`` on its fastest profiled step, where the source gave per-step
    totals (not for a step, benchmark case or headline time); else ``None``. What the store
    keeps beside the mean so that history mode compares such series as A/B does."""
    # Most metrics have no per-step totals: asked first, it answers them without the rest.
    if not metric.step_totals_ns or not metric.is_time or metric.kind in _PER_INSTANCE:
        return None
    return min(metric.step_totals_ns)


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


def on_fastest_step(
    samples: Mapping[SeriesKey, Mapping[int, Sequence[float]]],
    fastest: Mapping[SeriesKey, Mapping[int, Sequence[float | None]]],
    run_ids: Sequence[int],
) -> tuple[dict[SeriesKey, Mapping[int, Sequence[float]]], int, int]:
    """``samples`` with each series that has a fastest-step value in every repeat of every
    run of ``run_ids`` (that holds the series) compared on it; how many series were, and how
    many fell back to their mean because some run in the window lacks it (stored before the
    store kept it, or pruned). A series is compared on one basis in every run, never mixed."""
    out: dict[SeriesKey, Mapping[int, Sequence[float]]] = dict(samples)
    used = fallback = 0
    for key, per_run in fastest.items():
        means = samples.get(key)
        if means is None:
            continue
        window = [r for r in run_ids if r in means]
        chosen: dict[int, Sequence[float]] = {}
        for run_id in window:
            values = per_run.get(run_id)
            if values is None or len(values) != len(means[run_id]) or None in values:
                break
            chosen[run_id] = [float(v) for v in values if v is not None]
        else:
            out[key] = {**means, **chosen}
            used += 1
            continue
        fallback += 1
    return out, used, fallback
