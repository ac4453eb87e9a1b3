"""From per-metric estimates to a run's verdict: tests, weighted BH, margin, gating, attribution.

Both ways of comparing a run end here: history mode (:func:`perfci.analysis.compare.compare_run`,
a candidate run against the base branch's recent runs) and same-runner A/B mode
(:func:`perfci.analysis.paired.compare_paired`). Each hands over one :class:`MetricEstimate`
per metric: a log change, its standard error and degrees of freedom, and the two values a
reader sees. This module turns them into p-values, adjusts them across the run, decides each
metric with the practical margin, and derives the run's verdict and the attribution.

Multiple testing: Benjamini–Hochberg with p-value weights (Genovese, Roeder & Wasserman 2006).
The metrics of a run are not equally important: the primary step is the question a pull
request asks, the run factor is one line, and gated metrics (kernels and ranges holding at
least ``gate_share`` of the step) can fail the check, while the long tail of tiny kernels
and API calls is reported only. A tail metric found to regress into ``gate_share`` of the
step (a kernel ten times slower) fails the check too; its test stays that of its class.
On a run with GPU work, operators' and ranges' CPU-side times never gate
(:data:`HOST_TIMING_KINDS`: they hold the host thread's waits for the GPU).
Each class gets a fixed share of the false-discovery budget (``CompareOptions.step_budget``
…), spread evenly inside it; the weights average one over all tested lines, which is what
keeps the false-discovery rate at ``alpha``.

Verdicts are decided on the basis the estimate names (``adjusted_*`` when the run factor was
taken out, else the plain change) and must agree in sign with the plain change a reader can
check from the two printed values: a metric whose own numbers went up is never called an
improvement.

References: Genovese, Roeder & Wasserman (2006), "False discovery control with p-value
weighting", *Biometrika* 93:509–524; Benjamini & Hochberg (1995), *JRSS-B* 57:289–300;
Lakens (2017), "Equivalence tests", *Soc. Psychol. Personal. Sci.* 8:355 (interval inside
the margin = unchanged).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence

from perfci.analysis import attribution
from perfci.analysis.engine import CompareOptions
from perfci.analysis.estimate import MetricEstimate
from perfci.analysis.gating import (
    GATE_KINDS,
    GATED,
    OTHER,
    STEP,
    VIEW,
    VIEW_KINDS,
    gpu_run,
    host_timing,
    is_gated,
    share_of_step,
    work_levels,
)
from perfci.analysis.significance import judge_lines
from perfci.analysis.steps import primary_step
from perfci.analysis.work import WORK_NAME
from perfci.core.model import (
    MetricComparison,
    MetricKind,
    RunComparison,
    SeriesKey,
    Verdict,
)

__all__ = ["judge_estimates", "run_verdict"]

_UNTESTED = frozenset({Verdict.NEW, Verdict.MISSING, Verdict.NO_BASELINE})


def judge_estimates(
    estimates: Sequence[MetricEstimate],
    *,
    benchmark: str,
    options: CompareOptions | None = None,
    notes: Sequence[str] = (),
    untested: Sequence[MetricComparison] = (),
    factor: MetricEstimate | None = None,
) -> RunComparison:
    """Test, adjust, decide and gate every estimate; the run's verdict and attribution.

    Parameters
    ----------
    estimates
        One per testable metric (both sides present, enough data).
    benchmark
        Name copied into the result.
    options
        Thresholds; :class:`CompareOptions` defaults when ``None``.
    notes
        Lines for the report, kept first (what was left out of the baseline, and why).
    untested
        Lines already decided without a test (``new``, ``missing``, ``no-baseline``, too
        few candidate values); they are gated and listed like the others.
    factor
        The run's machine-wide factor as its own line (``series`` is ignored), or ``None``.

    Returns
    -------
    RunComparison
        Metrics sorted by key with verdicts, q-values, shares and gating; the run verdict;
        the shared-factor line; contributions to the primary step's change.
    """
    options = options or CompareOptions()
    series = {e.series.key: e.series for e in estimates}
    series.update({m.series.key: m.series for m in untested if m.series is not None})
    primary = _primary_step(estimates, untested)
    step_levels = _step_levels(estimates, untested)
    on_gpu = gpu_run(series.values())
    shares = [share_of_step(e.series, e.baseline, step_levels) for e in estimates]
    classes = [
        _budget_class(e, share, primary, options, on_gpu)
        for e, share in zip(estimates, shares, strict=True)
    ]
    # Each line is built once with its share and gating (10,000 lines: a second dataclass per
    # line was a twentieth of a comparison).
    lines = judge_lines(
        estimates,
        classes,
        factor,
        options,
        shares=shares,
        gate_on_regression=[
            _gates_when_regressed(e, step_levels, options, on_gpu) for e in estimates
        ],
    )
    tested = lines[: len(estimates)]
    shared = lines[len(estimates)] if factor is not None else None
    metrics = sorted(
        [*tested, *(_gate_untested(m, step_levels, options, on_gpu) for m in untested)],
        key=lambda m: m.key,
    )
    verdict = run_verdict(
        [*metrics, shared] if shared else metrics,
        primary=primary.key if primary is not None else None,
    )
    result = RunComparison(
        benchmark=benchmark,
        verdict=verdict,
        metrics=metrics,
        shared_factor=shared,
        notes=[*notes, *_step_note(primary, series.values()), *_host_note(metrics, on_gpu)],
        primary_step=primary.key if primary is not None else None,
        margin=options.delta,
    )
    step = next((m for m in metrics if primary is not None and m.key == primary.key), None)
    found = (
        attribution.attribute_step(metrics, step, top=options.top_contributors) if step else None
    )
    if found is not None:
        result.contributions = found.contributions
        result.notes.append(attribution.explained_note(found))
    return result


def run_verdict(metrics: Sequence[MetricComparison], *, primary: str | None = None) -> Verdict:
    """The run's verdict from its gated metrics.

    Regression if any gated metric regressed, else improvement if any improved. Otherwise the
    primary step's own verdict when it was tested (it is what a pull request asks about; a
    small kernel's wide interval does not make the whole run doubtful), else unchanged when
    every tested gated metric is unchanged, inconclusive when some are not, and no-baseline
    when no gated metric could be tested.
    """
    gated = [m for m in metrics if m.gated]
    verdicts = {m.verdict for m in gated}
    if Verdict.REGRESSION in verdicts:
        return Verdict.REGRESSION
    if Verdict.IMPROVEMENT in verdicts:
        return Verdict.IMPROVEMENT
    step = next((m for m in gated if m.key == primary), None) if primary else None
    if step is not None and step.verdict in (Verdict.UNCHANGED, Verdict.INCONCLUSIVE):
        return step.verdict
    tested = [m for m in gated if m.verdict not in _UNTESTED]
    if not tested:
        return Verdict.NO_BASELINE
    if all(m.verdict is Verdict.UNCHANGED for m in tested):
        return Verdict.UNCHANGED
    return Verdict.INCONCLUSIVE


# --- classes and weights ----------------------------------------------------------------------


def _primary_step(
    estimates: Sequence[MetricEstimate], untested: Sequence[MetricComparison]
) -> SeriesKey | None:
    """The step series to gate shares and attribution on (:func:`.steps.primary_step`)."""
    rows: list[tuple[SeriesKey, float | None, int]] = [
        (e.series, e.baseline, e.n_baseline) for e in estimates
    ]
    rows += [(m.series, m.baseline_median, m.n_baseline) for m in untested if m.series is not None]
    chosen = primary_step(rows)
    if chosen is None:
        # A first run (every line "no baseline") has step series all the same: by this run's
        # values (issue 36: "No step time in these profiles" beside a step row).
        chosen = primary_step(
            [(m.series, m.candidate_median, m.n_candidate) for m in untested if m.series]
        )
    return chosen


def _step_levels(
    estimates: Sequence[MetricEstimate], untested: Sequence[MetricComparison]
) -> dict[str, float]:
    """The longest step's baseline value of each section ("" included): its iteration time.

    Without any step series, :func:`work_levels` stands in for it.
    """
    found: dict[str, float] = {}
    rows: list[tuple[SeriesKey, float | None]] = [(e.series, e.baseline) for e in estimates]
    rows += [(m.series, m.baseline_median) for m in untested if m.series is not None]
    for key, value in rows:
        if key.kind is MetricKind.STEP and key.is_time and value:
            found[key.section] = max(found.get(key.section, 0.0), value)
    return found or work_levels(rows)


def _budget_class(
    estimate: MetricEstimate,
    share: float | None,
    primary: SeriesKey | None,
    options: CompareOptions,
    on_gpu: bool,
) -> str:
    """The estimate's budget class; ``share``: its baseline's share of the step."""
    if primary is not None and estimate.series == primary:
        return STEP
    if not is_gated(estimate.series, share, options, on_gpu):
        return OTHER
    return VIEW if estimate.series.kind in VIEW_KINDS else GATED


# --- shares, gating, attribution --------------------------------------------------------------


def _gates_when_regressed(
    estimate: MetricEstimate, levels: Mapping[str, float], options: CompareOptions, on_gpu: bool
) -> bool:
    """Whether a regression of this metric gates it, whatever its class: it grew into a gated
    share of the step.

    A kernel that was 1.5 % of the step and now takes 13 % of it (ten times slower) is what a
    pull request must not pass, even when the step's own interval is too wide to say so. Its
    test and its BH weight stay those of its class (set before testing, from the baseline's
    share alone); only the consequence of a regression already found changes.
    """
    grown = share_of_step(estimate.series, estimate.candidate, levels)
    return (
        estimate.series.kind in GATE_KINDS
        and not host_timing(estimate.series, on_gpu)
        and grown is not None
        and grown >= options.gate_share
    )


def _gate_untested(
    metric: MetricComparison, levels: Mapping[str, float], options: CompareOptions, on_gpu: bool
) -> MetricComparison:
    if metric.series is None:
        return metric
    share = share_of_step(metric.series, metric.baseline_median, levels)
    return dataclasses.replace(
        metric, share_of_step=share, gated=is_gated(metric.series, share, options, on_gpu)
    )


def _host_note(metrics: Sequence[MetricComparison], on_gpu: bool) -> list[str]:
    moved = [
        m
        for m in metrics
        if m.series is not None
        and host_timing(m.series, on_gpu)
        and m.verdict in (Verdict.REGRESSION, Verdict.IMPROVEMENT)
    ]
    if not moved:
        return []
    return [
        f"{len(moved)} operator, range and API-call times changed. On a GPU run they are the "
        "CPU thread's times, waits for the GPU included, and a kernel's change moves those "
        "waits from one operator to another: they are listed after the GPU's own times, and "
        "the step and the GPU's own times decide the check."
    ]


def _step_note(primary: SeriesKey | None, series: Iterable[SeriesKey]) -> list[str]:
    if primary is None:
        if any(s.kind in (MetricKind.BENCH, MetricKind.MEASURE) for s in series):
            return [
                "No step time in these profiles: each benchmark case and headline value "
                "gates on its own."
            ]
        return [
            "No step time in these profiles: a kernel, copy, collective or layer gates at the "
            "gate share of their summed time (a range or operator: of the longest one), and "
            "each benchmark case and headline value on its own."
        ]
    if primary.name == WORK_NAME:
        return []  # the note of analysis.work says what this step is
    return [f"Primary step: {primary.display_name} (the longest step series)."]
