"""The baseline's own tails: heavy-tailed run levels must not turn into false verdicts.

Seeded draws (deterministic outcomes). A metric's level in one run is now and then far off
in real CI (an autotuner's other choice, a memory layout); the normal prediction interval is
far too thin at the per-metric levels a 300-metric comparison decides at.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from perfci.analysis import tails
from perfci.analysis.compare import CompareOptions, compare_run
from perfci.analysis.runs import summarise
from perfci.core.model import MetricKind, SeriesKey, Verdict
from perfci.report.markdown import render_comment

STEP = SeriesKey(MetricKind.STEP, "train_step")
KERNELS = [SeriesKey(MetricKind.KERNEL, f"kernel_{i}") for i in range(300)]
KEYS = [STEP, *KERNELS]


def _runs(rng: np.random.Generator, *, runs: int, heavy: bool, repeats: int = 5) -> np.ndarray:
    """metrics × runs × repeats of log values: 1 % run level (t3 or normal), 2 % repeats."""
    n = len(KEYS)
    if heavy:
        level = rng.standard_t(3, (n, runs, 1)) * 0.01 / math.sqrt(3.0)
    else:
        level = rng.normal(0, 0.01, (n, runs, 1))
    base = np.log(np.linspace(1e5, 1e7, n))[:, None, None]
    return base + level + rng.normal(0, 0.02, (n, runs, repeats))


def _as_inputs(
    logs: np.ndarray, candidate: np.ndarray
) -> tuple[dict[SeriesKey, list[list[float]]], dict[SeriesKey, list[float]]]:
    baseline = {k: np.exp(logs[i]).tolist() for i, k in enumerate(KEYS)}
    return baseline, {k: np.exp(candidate[i]).tolist() for i, k in enumerate(KEYS)}


def test_leave_one_out_scores_are_each_runs_prediction_t_as_a_normal_score() -> None:
    rng = np.random.default_rng(3)
    base = rng.normal(0, 1, (4, 7))
    base[3, 5:] = np.nan  # a metric absent from two runs: five left, still scored
    scores = tails.leave_one_out_scores(base)
    expected = []
    for row in base:
        present = row[np.isfinite(row)]
        k = present.size
        for j in range(k):
            others = np.delete(present, j)
            t = (present[j] - others.mean()) / (others.std(ddof=1) * math.sqrt(1 + 1 / (k - 1)))
            expected.append(stats.norm.ppf(stats.t.cdf(t, k - 2)))
    assert scores.size == 4 * 7 - 2
    np.testing.assert_allclose(np.sort(scores), np.sort(expected), rtol=1e-9, atol=1e-9)


def test_metrics_with_too_few_runs_give_no_scores() -> None:
    base = np.random.default_rng(4).normal(0, 1, (50, tails.MIN_RUNS - 1))
    assert tails.leave_one_out_scores(base).size == 0
    assert tails.fit_tails(base) is None


def test_normal_run_levels_leave_the_normal_model_alone() -> None:
    for seed in range(3):
        logs = _runs(np.random.default_rng(seed), runs=30, heavy=False)
        assert tails.fit_tails(np.median(logs, axis=2)) is None


def test_heavy_run_levels_are_found_and_make_far_scores_count_less() -> None:
    logs = _runs(np.random.default_rng(7), runs=30, heavy=True)
    model = tails.fit_tails(np.median(logs, axis=2))
    assert model is not None
    assert model.dof <= 10
    assert model.scores == len(KEYS) * 30
    normal_p = 2 * stats.norm.sf(np.array([1.0, 5.0]))
    calibrated = model.p_values(normal_p)
    assert calibrated[1] > 100 * normal_p[1]  # a run 5 σ off is far likelier than normal says
    assert calibrated[0] == pytest.approx(normal_p[0])  # the bulk keeps the normal test
    assert model.confidence(0.95) >= 0.95


def test_a_tail_model_never_makes_a_test_less_strict() -> None:
    light = tails.TailModel(dof=math.inf, scale=0.5, likelihood_ratio=20.0, scores=1000)
    p = np.array([1e-12, 1e-4, 0.03, 0.5, 1.0, 0.0])
    assert (light.p_values(p) >= p).all()
    assert light.confidence(0.95) == 0.95


def _heavy_case(seed: int) -> tuple[np.ndarray, np.ndarray, int]:
    """Heavy-tailed baseline; an unchanged candidate with one kernel's run level 9 % off."""
    rng = np.random.default_rng(seed)
    logs = _runs(rng, runs=30, heavy=True)
    candidate = _runs(rng, runs=1, heavy=False)[:, 0, :]
    target = len(KEYS) // 2
    candidate[target] += math.log(1.09)  # what a t3 run level does now and then
    return logs, candidate, target


def test_an_unchanged_kernel_far_off_in_a_heavy_tailed_history_is_not_a_regression() -> None:
    logs, candidate, target = _heavy_case(11)
    baseline, cand = _as_inputs(logs, candidate)
    normal = compare_run(
        baseline, cand, benchmark="b", options=CompareOptions(calibrate_tails=False)
    )
    calibrated = compare_run(baseline, cand, benchmark="b")
    key = KEYS[target].key
    before = next(m for m in normal.metrics if m.key == key)
    after = next(m for m in calibrated.metrics if m.key == key)
    assert before.verdict is Verdict.REGRESSION  # the normal model's false alarm
    assert after.verdict is not Verdict.REGRESSION
    assert after.p_value is not None and before.p_value is not None
    assert after.p_value > before.p_value
    # Intervals widen with the tails too, around the same change.
    assert after.change == pytest.approx(before.change)
    assert after.ci_high - after.ci_low > before.ci_high - before.ci_low
    # The comment says why, once.
    said = [n for n in calibrated.notes if n.startswith("The baseline's metrics lie out")]
    assert len(said) == 1 and "beyond 4 standard deviations" in said[0]
    assert not [n for n in normal.notes if "lie out more often" in n]
    assert "lie out more often than normal noise" in render_comment(calibrated)


def test_a_large_real_change_is_still_found_in_a_heavy_tailed_history() -> None:
    logs, candidate, target = _heavy_case(12)
    candidate[target] += math.log(1.25 / 1.09)  # +25 % in all
    baseline, cand = _as_inputs(logs, candidate)
    result = compare_run(baseline, cand, benchmark="b")
    line = next(m for m in result.metrics if m.key == KEYS[target].key)
    assert line.verdict is Verdict.REGRESSION


def test_a_short_baseline_is_scored_as_the_candidate_is_tested_with_moderated_variances() -> None:
    """Five runs: the leave-one-out t has 3 degrees of freedom, whose own tails hide some of
    the runs' (3 % of the cells 8 % off), while the candidate is tested with a variance
    pooled across the metrics. Scored the same way, the tail comes out heavier."""
    rng = np.random.default_rng(0)
    base = rng.normal(0, 0.01, (300, 5))
    base[rng.random((300, 5)) < 0.03] += 0.08
    own = tails.fit_tails(base, moderate=False)
    pooled = tails.fit_tails(base, moderate=True)
    assert own is not None and pooled is not None
    far = np.array([2 * stats.norm.sf(5.0)])
    assert pooled.p_values(far)[0] > own.p_values(far)[0]
    assert pooled.dof < own.dof


def test_a_runner_pool_s_shared_factor_alone_is_not_a_heavy_tail() -> None:
    """Every metric normal, each run on a runner up to a few percent faster or slower: in
    the plain values every metric of a run lies out together, and twenty such clusters of
    scores look heavy-tailed (the first assertion). The tails are fitted to what each metric
    does beyond its run's factor, so the tests stay the normal model's."""
    rng = np.random.default_rng(2)
    logs = _runs(rng, runs=20, heavy=False) + rng.normal(0, 0.03, (1, 20, 1))
    assert tails.fit_tails(np.median(logs, axis=2)) is not None
    candidate = _runs(rng, runs=1, heavy=False)[:, 0, :]
    baseline, cand = _as_inputs(logs, candidate)
    calibrated = compare_run(baseline, cand, benchmark="b")
    normal = compare_run(
        baseline, cand, benchmark="b", options=CompareOptions(calibrate_tails=False)
    )
    assert [m.p_value for m in calibrated.metrics] == [m.p_value for m in normal.metrics]
    assert [(m.ci_low, m.ci_high) for m in calibrated.metrics] == [
        (m.ci_low, m.ci_high) for m in normal.metrics
    ]


def _wild_repeats(rng: np.random.Generator, runs: int, repeats: int) -> np.ndarray:
    """metrics × runs × repeats of logs: normal 1 % run levels, Student-t (3 dof) repeats at
    2 %: now and then one process is far off, which a run of five trims away."""
    n = len(KEYS)
    base = np.log(np.linspace(1e5, 1e7, n))[:, None, None]
    level = rng.normal(0, 0.01, (n, runs, 1))
    return base + level + rng.standard_t(3, (n, runs, repeats)) * 0.02 / math.sqrt(3.0)


def test_a_one_repeat_candidate_is_judged_against_runs_of_one_repeat() -> None:
    """A candidate of one repeat is one draw of a repeat, with its tail; the baseline's run
    values are trimmed means of five, whose tails are light. Calibrated on them, wild single
    repeats were called regressions (18.5 % of unchanged runs failed in
    ``benchmarks/verdicts.py --candidate-repeats 1``); on the baseline's first repeats, not."""
    rng = np.random.default_rng(33)
    logs = _wild_repeats(rng, runs=30, repeats=5)
    candidate = _wild_repeats(rng, runs=1, repeats=1)[:, 0, :]
    few = tails.fit_tails(logs[:, :, 0])
    assert few is not None and few.dof <= 5  # one repeat a run: the tail shows
    # Runs of five, trimmed as perfci summarises them: far lighter, if heavy at all.
    trimmed = tails.fit_tails(np.stack([summarise(logs[:, j]) for j in range(30)], axis=1))
    assert trimmed is None or (trimmed.dof > few.dof and trimmed.beyond_four < few.beyond_four)
    baseline, cand = _as_inputs(logs, candidate)
    result = compare_run(baseline, cand, benchmark="b")
    assert not [m for m in result.metrics if m.verdict is Verdict.REGRESSION]
    said = [n for n in result.notes if "lie out more often" in n]
    assert len(said) == 1 and "(each run from 1 repeat, as this run)" in said[0]
    # Without the calibration on runs of its size, the same candidate is a false alarm.
    plain = compare_run(
        baseline, cand, benchmark="b", options=CompareOptions(calibrate_tails=False)
    )
    assert [m for m in plain.metrics if m.verdict is Verdict.REGRESSION]
