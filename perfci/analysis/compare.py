"""Compare a pull request's repeats with the base branch's history: the public entry points.

:func:`compare` works on plain ``{key: values}`` mappings; :func:`compare_run` takes one run's
series (baseline runs × repeats, candidate repeats) and adds gating, the run verdict, the shared
run factor and the attribution of the step-time change. Both are pure: numpy/scipy, no I/O.

Method (chosen by ``benchmarks/detection.py``, explained in ``docs/statistics.md``):

1. Natural logs of the values, so changes are ratios and noise is multiplicative.
2. Optionally remove the run factor shared by all metrics of one repeat (:mod:`.noise`).
3. Per metric, a pooled two-sample t-test on the logs (``method="student"``, default; or
   ``"welch"``, or ``"mannwhitney"``: exact Mann–Whitney U with the Hodges–Lehmann shift) gives
   a two-sided p-value and a confidence interval of the log ratio; ``change = exp(estimate) − 1``
   is the ratio of geometric means minus one (+0.05 = 5 % larger value, i.e. slower for times).
4. Benjamini–Hochberg q-values across all tested metrics of the comparison (FDR ``alpha``).
5. Verdict with a practical margin δ: *regression* = q ≤ alpha and the change is worse than δ;
   *improvement* likewise in the better direction; *unchanged* = the interval lies inside ±δ;
   anything else is *inconclusive*, with the candidate repeats that would settle it.

Small samples: fewer than ``min_baseline`` baseline values give ``no-baseline``; fewer than
``min_candidate`` candidate values give ``inconclusive``; constant samples are decided exactly
(zero variance: p = 0 if the values differ, 1 if not). NaN, infinite or negative values raise
:class:`SampleError` (a :class:`~perfci.errors.PerfciError` and a ``ValueError``) naming the
metric and the value.

References: Student (1908), Biometrika 6:1; Benjamini & Hochberg (1995), JRSS-B 57:289;
Hodges & Lehmann (1963), Ann. Math. Statist. 34:598; Lakens (2017), "Equivalence tests",
Soc. Psychol. Personal. Sci. 8:355 (the interval-inside-margin rule).
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Mapping, Sequence

import numpy as np

from perfci.analysis import attribution, stats
from perfci.analysis.engine import CompareOptions, compare_core
from perfci.analysis.stats import SampleError
from perfci.model import MetricComparison, MetricKind, RunComparison, SeriesKey, Verdict

__all__ = ["CompareOptions", "SampleError", "compare", "compare_run"]

#: Kinds that may fail the check when their share of step time reaches ``gate_share``.
#: API and OS calls are left out: their time is mostly the CPU *waiting* for GPU work, an
#: effect of a kernel slowdown rather than a cause, and they are noisy.
GATE_KINDS = frozenset({MetricKind.KERNEL, MetricKind.MEMORY, MetricKind.COMM, MetricKind.RANGE,
                        MetricKind.OP, MetricKind.LAYER})
_UNTESTED = frozenset({Verdict.NEW, Verdict.MISSING, Verdict.NO_BASELINE})


def compare(baseline: Mapping[str, Sequence[float]], candidate: Mapping[str, Sequence[float]],
            *, options: CompareOptions | None = None) -> list[MetricComparison]:
    """Compare candidate values with baseline values, one :class:`MetricComparison` per key.

    Parameters
    ----------
    baseline, candidate
        Values per metric key (e.g. ns per step). With ``remove_shared_factor``, values at the
        same index are taken to come from the same baseline run / candidate repeat.
    options
        Thresholds and method; :class:`CompareOptions` defaults when ``None``.

    Returns
    -------
    list[MetricComparison]
        Sorted by key. Keys only in the candidate are ``new``, only in the baseline
        ``missing``; the module docstring defines the other verdicts.

    Raises
    ------
    SampleError
        A value is NaN, infinite or negative.
    """
    return compare_core(baseline, candidate, options=options or CompareOptions()).metrics


def compare_run(baseline: Mapping[SeriesKey, Sequence[Sequence[float]]],
                candidate: Mapping[SeriesKey, Sequence[float]], *, benchmark: str,
                options: CompareOptions | None = None) -> RunComparison:
    """Compare one candidate run of ``benchmark`` with its baseline runs.

    Parameters
    ----------
    baseline
        Per series, one list of repeat values per baseline run, most recent run last. Each run
        is summarised by the median of its repeats (robust to one bad repeat; the run-to-run
        spread then carries the run-level noise the candidate is also subject to).
    candidate
        Per series, the candidate's repeat values; index ``i`` is repeat ``i`` in every series,
        which is what lets the shared per-repeat factor be estimated.
    benchmark
        Name copied into the result.
    options
        Thresholds and method; :class:`CompareOptions` defaults when ``None``.

    Returns
    -------
    RunComparison
        Metrics with ``series``, ``gated`` and ``share_of_step`` filled; the run verdict;
        contributions to the primary step's change (see :mod:`.attribution`); the shared
        factor line (gated) when ``options.remove_shared_factor`` is on (the default here;
        it needs at least 20 metrics of equal run counts), in which case every
        metric's change is what it did beyond that common shift; notes that say which step was
        primary.
    """
    options = options or CompareOptions()
    if options.remove_shared_factor is None:
        # Repeats are aligned across series here, so the benchmark-backed default applies.
        options = dataclasses.replace(options, remove_shared_factor=True)
    series = {key.key: key for key in (*baseline.keys(), *candidate.keys())}
    base = {key.key: _summarise_runs(key.key, runs) for key, runs in baseline.items()}
    cand = {key.key: list(values) for key, values in candidate.items()}
    core = compare_core(base, cand, options=options)
    primary = _primary_step(core.metrics, series)
    metrics = _with_gating(core.metrics, series, primary, options)
    step = next((m for m in metrics if primary and m.key == primary.key), None)
    # The common shift is removed from every metric, so it must be able to fail the run itself.
    shared = dataclasses.replace(core.shared_factor, gated=True) if core.shared_factor else None
    verdict = run_verdict([*metrics, shared] if shared else metrics)
    result = RunComparison(benchmark=benchmark, verdict=verdict, metrics=metrics,
                           shared_factor=shared, notes=_notes(step, shared))
    found = _attribution(metrics, step, options) if step else None
    if found is not None:
        result.contributions = found.contributions
        result.notes.append(_attribution_note(found))
    return result


def run_verdict(metrics: Sequence[MetricComparison]) -> Verdict:
    """The run's verdict from its gated metrics.

    Regression if any gated metric regressed, else improvement if any improved, else unchanged
    when every tested gated metric is unchanged, inconclusive when some are not, and
    no-baseline when no gated metric could be tested.
    """
    gated = [m for m in metrics if m.gated]
    verdicts = {m.verdict for m in gated}
    if Verdict.REGRESSION in verdicts:
        return Verdict.REGRESSION
    if Verdict.IMPROVEMENT in verdicts:
        return Verdict.IMPROVEMENT
    tested = [m for m in gated if m.verdict not in _UNTESTED]
    if not tested:
        return Verdict.NO_BASELINE
    if all(m.verdict is Verdict.UNCHANGED for m in tested):
        return Verdict.UNCHANGED
    return Verdict.INCONCLUSIVE


def _summarise_runs(key: str, runs: Sequence[Sequence[float]]) -> list[float]:
    """One value per baseline run: the median of its repeats; empty runs are skipped.

    Runs almost always have the same number of repeats, so the medians are taken in one
    vectorised call (30 runs × 1,000 series: one call per series, not 30,000).
    """
    lengths = [len(run) for run in runs if len(run)]
    flat = stats.validate_sample(key, [value for run in runs for value in run],
                                 role="baseline")
    if not lengths:
        return []
    if min(lengths) == max(lengths):
        return [float(m) for m in np.median(flat.reshape(len(lengths), lengths[0]), axis=1)]
    bounds = np.cumsum([0, *lengths])
    return [float(np.median(flat[a:b])) for a, b in itertools.pairwise(bounds)]


def _primary_step(metrics: Sequence[MetricComparison],
                  series: Mapping[str, SeriesKey]) -> MetricComparison | None:
    """The step metric to gate shares and attribution on.

    The one with the largest baseline median (an iteration contains any sub-steps such as a
    forward step), ties broken by more baseline values, then by key for determinism.
    """
    steps = [m for m in metrics if series[m.key].kind is MetricKind.STEP
             and m.baseline_median is not None]
    if not steps:
        return None
    return max(steps, key=lambda m: (m.baseline_median or 0.0, m.n_baseline, m.key))


def _with_gating(metrics: Sequence[MetricComparison], series: Mapping[str, SeriesKey],
                 step: MetricComparison | None,
                 options: CompareOptions) -> list[MetricComparison]:
    """Fill ``series``, ``share_of_step`` and ``gated`` on every line."""
    step_by_section = _step_medians(metrics, series)
    fallback = step.baseline_median if step else None
    out = []
    for metric in metrics:
        key = series[metric.key]
        reference = step_by_section.get(key.section, fallback)
        share = _share(metric.baseline_median, reference)
        gated = key.kind is MetricKind.STEP or (
            key.kind in GATE_KINDS and share is not None and share >= options.gate_share)
        out.append(dataclasses.replace(metric, series=key, share_of_step=share, gated=gated))
    return out


def _step_medians(metrics: Sequence[MetricComparison],
                  series: Mapping[str, SeriesKey]) -> dict[str, float]:
    """The largest baseline step median of each section (its iteration time)."""
    found: dict[str, float] = {}
    for metric in metrics:
        key = series[metric.key]
        if key.kind is MetricKind.STEP and metric.baseline_median:
            found[key.section] = max(found.get(key.section, 0.0), metric.baseline_median)
    return found


def _share(value: float | None, step: float | None) -> float | None:
    return None if value is None or not step else value / step


def _attribution(metrics: Sequence[MetricComparison], step: MetricComparison,
                 options: CompareOptions) -> attribution.Attribution | None:
    """Attribute the primary step's change to the metrics of its own section."""
    assert step.series is not None  # _with_gating filled it
    section = step.series.section
    others = [attribution.MetricDelta(m.series, m.baseline_median, m.candidate_median)
              for m in metrics if m.series is not None and m.series.section == section
              and m.series.kind is not MetricKind.STEP]
    target = attribution.MetricDelta(step.series, step.baseline_median, step.candidate_median)
    if target.candidate_ns is None:
        return None
    return attribution.attribute(target, others, top=options.top_contributors)


def _attribution_note(found: attribution.Attribution) -> str:
    if found.primary:
        return (f"Kernels, memory operations and collectives explain {found.explained:.0%} of "
                "the step-time change; ranges, operators and API calls overlap them and are "
                "listed after them.")
    # CPU-only profiles (and tables without device time) have no leaf-level GPU work.
    return ("These profiles have no GPU kernels, memory operations or collectives: the ranges "
            "and operators listed overlap one another (a range contains its operators), so "
            "their shares do not add up.")


def _notes(step: MetricComparison | None, shared: MetricComparison | None) -> list[str]:
    notes = []
    if step is not None and step.series is not None:
        notes.append(f"Primary step: {step.series.display_name} (the longest step series).")
    else:
        notes.append("No step metric with a baseline: only per-metric gates apply.")
    if shared is not None and shared.change is not None:
        notes.append("Per-metric changes are relative to the run factor shared by all metrics; "
                     f"that common shift ({shared.change:+.1%}) is its own gated line.")
    return notes
