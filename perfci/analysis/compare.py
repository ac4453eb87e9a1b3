"""Compare a pull request's run with the base branch's history: the public entry points.

:func:`compare_run` compares one candidate run with the base branch's recent runs, the run
being the unit of noise; :func:`compare` is the plain two-sample comparison of ``{key:
values}`` mappings; :func:`judge_estimates` turns per-metric estimates (from either, or from
the same-runner A/B mode in :mod:`.paired`) into verdicts. All are pure: numpy/scipy, no I/O.

``compare_run``, step by step (``docs/statistics.md`` explains each choice):

1. Every run becomes one value per metric: the median of its repeats' logs, after leaving out
   repeats that are off in every metric (:mod:`.runs`).
2. The baseline starts at the base branch's last change of level (an accepted change), and
   baseline runs off in every metric (a loaded runner, a throttled GPU) are left out
   (:mod:`.baseline_runs`).
3. Per metric, a t prediction interval for a new run from the baseline runs' spread, with
   variances moderated across metrics (:mod:`.prediction`, :mod:`.moderation`), and no
   narrower than the baseline's own tails demand when they are heavier than normal
   (:mod:`.tails`).
4. With 20 or more metrics, the run's machine-wide factor is estimated (anchored by the
   baseline's run-to-run spread of factors, robust to a change that moves many metrics; on
   a GPU run from the GPU's own time lines) and each metric it covers is also judged beyond
   it; the factor is its own gated line (:mod:`.factor`).
5. Weighted Benjamini–Hochberg across the run's metrics, the practical margin, gating,
   the run verdict and the attribution of the step's change (:mod:`.judge`).

Before step 1, a kernel missing from this run is paired with the one new kernel of its
family, when there is exactly one (:mod:`.renames`): the pair is one metric from then on.

The values printed for a metric (baseline: the geometric mean of the baseline runs; this
run: its median repeat) and its change are on one basis: ``change = this / baseline − 1``.

References: Student (1908), Biometrika 6:1; Hahn & Meeker (1991), *Statistical Intervals*;
Smyth (2004), SAGMB 3(1):3; Efron (2004), JASA 99:96; Genovese, Roeder & Wasserman (2006),
Biometrika 93:509; Benjamini & Hochberg (1995), JRSS-B 57:289; Lakens (2017), Soc. Psychol.
Personal. Sci. 8:355.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence

import numpy as np

from perfci.analysis import prediction
from perfci.analysis.baseline_runs import drop_wrecked_runs, run_factors, start_at_last_level
from perfci.analysis.engine import CompareOptions, compare_core
from perfci.analysis.estimate import MetricEstimate
from perfci.analysis.factor import (
    MIN_METRICS_FOR_FACTOR,
    SHARED_FACTOR_KEY,
    MachineFactor,
    estimate_run_factor,
    factor_notes,
)
from perfci.analysis.gating import GATE_KINDS, gpu_run, host_timing
from perfci.analysis.judge import judge_estimates, run_verdict
from perfci.analysis.pooling import (
    StepParts,
    pool_primary_step,
    split_parts,
    with_step_parts,
)
from perfci.analysis.renames import any_repeat, any_run, mark_renames, pair_renamed
from perfci.analysis.runs import RunTable, build_run_table
from perfci.analysis.tails import TailModel, fit_tails
from perfci.analysis.work import with_work_step
from perfci.core.errors import SampleError
from perfci.core.model import MetricComparison, MetricKind, RunComparison, SeriesKey, Verdict

__all__ = [
    "GATE_KINDS",
    "SHARED_FACTOR_KEY",
    "CompareOptions",
    "MetricEstimate",
    "SampleError",
    "compare",
    "compare_run",
    "judge_estimates",
    "run_verdict",
]


def compare(
    baseline: Mapping[str, Sequence[float]],
    candidate: Mapping[str, Sequence[float]],
    *,
    options: CompareOptions | None = None,
) -> list[MetricComparison]:
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


def compare_run(
    baseline: Mapping[SeriesKey, Sequence[Sequence[float]]],
    candidate: Mapping[SeriesKey, Sequence[float]],
    *,
    benchmark: str,
    options: CompareOptions | None = None,
) -> RunComparison:
    """Compare one candidate run of ``benchmark`` with its baseline runs.

    Parameters
    ----------
    baseline
        Per series, one list of repeat values per baseline run, oldest run first. Series
        with fewer runs than others are aligned on the newest run; an empty list stands for a
        run that lacks the series. Index ``i`` of every list of one run is repeat ``i``.
    candidate
        Per series, the candidate run's repeat values (index ``i`` = repeat ``i``).
    benchmark
        Name copied into the result.
    options
        Thresholds and method; :class:`CompareOptions` defaults when ``None``.

    Returns
    -------
    RunComparison
        Metrics with verdicts, intervals, q-values, ``gated`` and ``share_of_step``; the run
        verdict; the machine-wide factor line (with 20 or more metrics); contributions to
        the primary step's change; notes on what was left out of the baseline and why.
        ``baseline_runs_used`` indexes the given baseline runs (oldest first) that formed it.

    Raises
    ------
    SampleError
        A value is NaN, infinite or negative.
    """
    options = options or CompareOptions()
    baseline, renamed, rename_notes = pair_renamed(baseline, candidate, any_run, any_repeat)
    baseline, candidate, work_notes = with_work_step(baseline, candidate)
    if not work_notes:
        baseline, candidate = with_step_parts(baseline, candidate)
    table = build_run_table(baseline, candidate)
    table.notes.extend(work_notes)
    if options.trim_change_points:
        table = start_at_last_level(table, delta=options.delta)
    if options.robust_baseline:
        table = drop_wrecked_runs(table)
    table, parts = split_parts(table)
    untested, rows = _untested_lines(table, options)
    estimates, factor = _estimates(table, rows, options, parts)
    result = judge_estimates(
        estimates,
        benchmark=benchmark,
        options=options,
        notes=table.notes,
        untested=untested,
        factor=factor.to_estimate() if factor is not None else None,
    )
    result.notes.extend(factor_notes(result.shared_factor, factor))
    mark_renames(result, renamed, rename_notes)
    result.baseline_runs_used = list(table.used)
    result.baseline_level_start = table.level_start
    return result


def _untested_lines(
    table: RunTable, options: CompareOptions
) -> tuple[list[MetricComparison], list[int]]:
    """Lines decided without a test, and the rows left to test."""
    runs = np.sum(np.isfinite(table.base), axis=1)
    has_cand = np.isfinite(table.cand)
    testable = (
        (runs > 0)
        & has_cand
        & (runs >= options.min_baseline)
        & (table.cand_repeats >= options.min_candidate_repeats)
    )
    lines: list[MetricComparison] = []
    for i in np.flatnonzero(~testable).tolist():  # a line object only where it is decided
        key = table.keys[i]
        line = MetricComparison(
            key=key.key,
            verdict=Verdict.INCONCLUSIVE,
            series=key,
            baseline_median=_centre(table.base[i]),
            candidate_median=float(np.exp(table.cand[i])) if has_cand[i] else None,
            n_baseline=int(runs[i]),
            n_candidate=int(table.cand_repeats[i]),
        )
        if runs[i] == 0:
            lines.append(dataclasses.replace(line, verdict=Verdict.NEW))
        elif not has_cand[i]:
            lines.append(dataclasses.replace(line, verdict=Verdict.MISSING))
        elif runs[i] < options.min_baseline:
            lines.append(dataclasses.replace(line, verdict=Verdict.NO_BASELINE))
        else:
            lines.append(dataclasses.replace(line, repeats_needed=options.min_candidate_repeats))
    return lines, np.flatnonzero(testable).tolist()


def _centre(row: np.ndarray) -> float | None:
    values = row[np.isfinite(row)]
    return float(np.exp(values.mean())) if values.size else None


def _estimates(
    table: RunTable, rows: list[int], options: CompareOptions, parts: StepParts | None = None
) -> tuple[list[MetricEstimate], MachineFactor | None]:
    """Per-metric estimates on the plain basis, and beyond the run factor when it is known."""
    if not rows:
        return [], None
    base, cand = table.base[rows], table.cand[rows]
    within, base_rep, cand_rep = (
        table.within_var[rows],
        table.base_repeats[rows],
        table.cand_repeats[rows],
    )
    steps = np.array([table.keys[i].kind is MetricKind.STEP for i in rows], dtype=bool)
    plain = prediction.prediction(
        base, cand, within, base_rep, cand_rep, moderate=options.moderate, own=steps
    )
    # The machine-wide factor is a factor on times: a slower runner lowers a throughput and
    # leaves a peak memory or an accuracy alone, so only time metrics estimate it or are
    # judged beyond it; the others are judged on their own numbers. On a GPU run the
    # operators', ranges' and API calls' CPU-side times hold the host thread's waits for the
    # GPU, which move with the host's load and with where the thread blocks, not with the
    # GPU's speed: the factor is the GPU's lines' alone, as in the A/B mode.
    on_gpu = gpu_run(table.keys)
    host = np.array([host_timing(table.keys[i], on_gpu) for i in rows], dtype=bool)
    time = np.array([table.keys[i].is_time for i in rows], dtype=bool) & ~host
    factors = run_factors(base[time]) if time.any() else None
    tails: list[TailModel | None] = [None] * len(rows)
    if options.calibrate_tails:
        # A candidate of one or two repeats is judged against runs of its own size.
        like_cand, like_factors = base, factors
        if table.base_few is not None:
            like_cand = table.base_few[rows]
            like_factors = run_factors(like_cand[time]) if time.any() else None
        tails = _tails_by_family(
            like_cand, host, time, like_factors, options.moderate, table.notes, table.few_repeats
        )
    relative, found = plain, None
    if factors is not None and options.remove_shared_factor is not False:
        relative = prediction.prediction(
            base - factors[None, :],
            cand,
            within,
            base_rep,
            cand_rep,
            moderate=options.moderate,
            own=steps,
        )
        first_time = table.keys[rows[int(np.argmax(time))]]
        found = estimate_run_factor(relative.estimate[time], relative.se[time], factors, first_time)
    beyond = time if found is not None else np.zeros_like(time)
    adjusted = relative.estimate - found.candidate if found is not None else None
    adjusted_se = np.sqrt(relative.se**2 + found.se**2) if found is not None else None
    pooled = pool_primary_step(
        table, rows, parts, relative if found is not None else plain, found, factors
    )
    runs = np.sum(np.isfinite(base), axis=1).astype(np.float64)
    needed = prediction.repeats_needed(
        np.where(beyond, adjusted, plain.estimate) if adjusted is not None else plain.estimate,
        np.where(beyond, relative.var_run, plain.var_run),
        within,
        np.nanmedian(np.where(base_rep > 0, base_rep, np.nan), axis=1),
        runs,
        delta=options.delta,
        confidence=options.confidence,
    )
    # Whole arrays to Python numbers at once: no numpy call per line and field.
    centres, cands = np.exp(plain.centre).tolist(), np.exp(cand).tolist()
    changes, ses, dofs = plain.estimate.tolist(), plain.se.tolist(), plain.dof.tolist()
    counts, cand_counts = runs.astype(np.int64).tolist(), cand_rep.astype(np.int64).tolist()
    beyond_l = beyond.tolist()
    moved = adjusted.tolist() if adjusted is not None else None
    moved_se = adjusted_se.tolist() if adjusted_se is not None else None
    moved_dof = relative.dof.tolist()
    estimates = []
    for n, i in enumerate(rows):
        estimates.append(
            MetricEstimate(
                series=table.keys[i],
                baseline=centres[n],
                candidate=cands[n],
                log_change=changes[n],
                se=ses[n],
                dof=dofs[n],
                n_baseline=counts[n],
                n_candidate=cand_counts[n],
                repeats_needed=needed[n],
                adjusted_log_change=moved[n] if moved is not None and beyond_l[n] else None,
                adjusted_se=moved_se[n] if moved_se is not None and beyond_l[n] else None,
                adjusted_dof=moved_dof[n] if beyond_l[n] else None,
                tails=tails[n],
            )
        )
    if pooled is not None:
        at, step = pooled
        estimates[at] = dataclasses.replace(
            estimates[at],
            adjusted_log_change=step.estimate,
            adjusted_se=step.se,
            adjusted_dof=step.dof,
        )
    return estimates, found


def _tails_by_family(
    base: np.ndarray,
    host: np.ndarray,
    time: np.ndarray,
    factors: np.ndarray | None,
    moderate: bool,
    notes: list[str],
    few: int | None = None,
) -> list[TailModel | None]:
    """Each row's tail model (:mod:`.tails`), fitted within its family and for both bases;
    a line in ``notes`` for each family whose tails made its tests stricter. ``few``: the
    baseline's runs were taken from that many repeats each, as the candidate's
    (:func:`.runs.few_repeat_values`).

    The tails are fitted to what each metric does on its own: with enough time metrics,
    each run's factor is taken out of their values first. Left in, a runner 2σ slower puts
    every metric of that run 2σ out at once, and the pooled scores of twenty such clusters
    look heavy-tailed when every metric is normal. On a GPU run the CPU-side times (the host
    thread's waits, which jump between operators) are fitted apart from the GPU's own lines
    and the other metrics, so that their tails do not loosen or tighten the others' tests.
    """
    own = base
    if factors is not None and time.sum() >= MIN_METRICS_FOR_FACTOR:
        own = base - np.where(time[:, None], factors[None, :], 0.0)
    models = {
        flag: fit_tails(own[host == flag], moderate=moderate)
        for flag in (False, True)
        if (host == flag).any()
    }
    size = "" if few is None else f" (each run from {few} repeat{'s' * (few > 1)}, as this run)"
    notes.extend(
        model.note(("CPU-side times" if flag else "metrics") + size)
        for flag, model in models.items()
        if model is not None
    )
    return [models[bool(flag)] for flag in host]
