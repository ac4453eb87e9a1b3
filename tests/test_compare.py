"""The comparator's statistics against scipy.stats as the oracle, and its edge cases."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats as sst

from perfci.analysis import stats
from perfci.analysis.compare import CompareOptions, SampleError, compare
from perfci.core.errors import ConfigError, PerfciError
from perfci.core.model import Verdict

RNG = np.random.default_rng(7)
BASE = np.exp(RNG.normal(0, 0.02, (6, 30))) * 1e6
CAND = np.exp(RNG.normal(0.01, 0.02, (6, 5))) * 1e6


def test_student_t_matches_scipy_pooled_ttest() -> None:
    result = stats.student_t(np.log(BASE), np.log(CAND), confidence=0.95)
    for i in range(len(BASE)):
        oracle = sst.ttest_ind(np.log(CAND[i]), np.log(BASE[i]), equal_var=True)
        assert result.p_value[i] == pytest.approx(oracle.pvalue, rel=1e-9)
        ci = oracle.confidence_interval(0.95)
        assert (result.ci_low[i], result.ci_high[i]) == pytest.approx((ci.low, ci.high), rel=1e-9)


def test_welch_matches_scipy_welch() -> None:
    result = stats.welch_t(np.log(BASE), np.log(CAND), confidence=0.9)
    for i in range(len(BASE)):
        oracle = sst.ttest_ind(np.log(CAND[i]), np.log(BASE[i]), equal_var=False)
        assert result.p_value[i] == pytest.approx(oracle.pvalue, rel=1e-9)
        ci = oracle.confidence_interval(0.9)
        assert result.ci_low[i] == pytest.approx(ci.low, rel=1e-9)


def test_mann_whitney_p_and_hodges_lehmann_match_scipy_with_ties() -> None:
    base = np.array([[10.0, 11, 11, 12, 13, 13, 14, 15]])
    cand = np.array([[13.0, 14, 16, 16, 17]])
    result = stats.mann_whitney(base, cand, confidence=0.95)
    oracle = sst.mannwhitneyu(cand[0], base[0], method="exact")
    assert result.p_value[0] == pytest.approx(oracle.pvalue)
    assert result.estimate[0] == np.median(np.subtract.outer(cand[0], base[0]))


def test_benjamini_hochberg_matches_scipy_and_keeps_nan() -> None:
    p = np.array([0.01, 0.04, 0.03, 0.2, 0.001, 0.5, 0.04])
    assert stats.benjamini_hochberg(p) == pytest.approx(sst.false_discovery_control(p))
    with_nan = stats.benjamini_hochberg(np.array([0.01, np.nan, 0.02]))
    assert math.isnan(with_nan[1])
    assert with_nan[[0, 2]] == pytest.approx(sst.false_discovery_control([0.01, 0.02]))


def test_compare_reports_scipy_p_value_and_geometric_mean_ratio() -> None:
    base = {"kernel": BASE[0].tolist()}
    cand = {"kernel": (CAND[0] * 1.10).tolist()}
    [line] = compare(base, cand, options=CompareOptions(method="student"))
    oracle = sst.ttest_ind(np.log(cand["kernel"]), np.log(base["kernel"]))
    ratio = math.exp(np.log(cand["kernel"]).mean() - np.log(base["kernel"]).mean())
    assert line.p_value == pytest.approx(oracle.pvalue, rel=1e-9)
    assert line.change == pytest.approx(ratio - 1, rel=1e-12)
    assert line.verdict is Verdict.REGRESSION
    assert line.baseline_median == pytest.approx(float(np.median(BASE[0])))
    assert (line.n_baseline, line.n_candidate) == (30, 5)


def test_default_verdicts_regression_improvement_unchanged_inconclusive() -> None:
    rng = np.random.default_rng(3)
    base = {k: (1000 * np.exp(rng.normal(0, 0.01, 30))).tolist() for k in "abcd"}
    cand = {
        "a": (1100 * np.exp(rng.normal(0, 0.01, 10))).tolist(),  # +10 %: regression
        "b": (900 * np.exp(rng.normal(0, 0.01, 10))).tolist(),  # −10 %: improvement
        "c": (1000 * np.exp(rng.normal(0, 0.001, 10))).tolist(),  # tight, ±0: unchanged
        "d": [1000.0, 1060.0],  # two noisy repeats: cannot tell
    }
    verdicts = {m.key: m.verdict for m in compare(base, cand)}
    assert verdicts == {
        "a": Verdict.REGRESSION,
        "b": Verdict.IMPROVEMENT,
        "c": Verdict.UNCHANGED,
        "d": Verdict.INCONCLUSIVE,
    }


def test_higher_is_better_flips_the_direction() -> None:
    base = {"tok/s": [100.0, 101, 99, 100, 100.5, 99.5] * 5}
    cand = {"tok/s": [90.0, 91, 89, 90, 90.5]}
    [line] = compare(base, cand, options=CompareOptions(higher_is_better=frozenset({"tok/s"})))
    assert line.change is not None and line.change < -0.05
    assert line.verdict is Verdict.REGRESSION
    [line] = compare(base, cand, options=CompareOptions(higher_is_better=lambda k: False))
    assert line.verdict is Verdict.IMPROVEMENT


def test_new_missing_and_no_baseline() -> None:
    lines = {
        m.key: m
        for m in compare(
            {"old": [1.0, 2, 3], "short": [5.0, 5]}, {"fresh": [4.0, 4], "short": [5.0, 6]}
        )
    }
    assert lines["fresh"].verdict is Verdict.NEW and lines["fresh"].candidate_median == 4.0
    assert lines["old"].verdict is Verdict.MISSING and lines["old"].baseline_median == 2.0
    assert lines["short"].verdict is Verdict.NO_BASELINE and lines["short"].n_baseline == 2


def test_one_candidate_value_is_inconclusive_with_repeats_hint() -> None:
    [line] = compare({"k": [10.0, 11, 12, 10]}, {"k": [30.0]})
    assert line.verdict is Verdict.INCONCLUSIVE
    assert line.repeats_needed == CompareOptions().min_candidate


def test_zero_variance_is_decided_exactly() -> None:
    same = compare({"k": [100.0] * 10}, {"k": [100.0] * 5})[0]
    assert (same.verdict, same.change, same.p_value) == (Verdict.UNCHANGED, 0.0, 1.0)
    moved = compare({"k": [100.0] * 10}, {"k": [110.0] * 5})[0]
    assert moved.verdict is Verdict.REGRESSION
    assert moved.change == pytest.approx(0.10) and moved.ci_low == pytest.approx(0.10)


def test_zeros_do_not_produce_infinities() -> None:
    [line] = compare({"memcpy": [0.0, 10.0, 10.0, 11.0]}, {"memcpy": [10.0, 0.0, 10.0]})
    assert line.change is not None and math.isfinite(line.change)
    assert line.verdict is Verdict.INCONCLUSIVE


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf, -1.0])
def test_nan_inf_and_negative_values_raise_a_clear_error(bad: float) -> None:
    with pytest.raises(SampleError, match=r"candidate value #1 of 'kernel:gpu:gemm'") as info:
        compare({"kernel:gpu:gemm": [1.0, 2.0, 3.0]}, {"kernel:gpu:gemm": [1.0, bad]})
    assert isinstance(info.value, PerfciError) and isinstance(info.value, ValueError)


def test_non_numeric_values_raise_sample_error() -> None:
    with pytest.raises(SampleError, match="baseline values of 'k' are not numbers"):
        compare({"k": ["fast", "slow", "slow"]}, {"k": [1.0, 2.0]})  # type: ignore[list-item]


def test_bad_options_raise_config_error() -> None:
    with pytest.raises(ConfigError, match="delta"):
        CompareOptions(delta=0.0)
    with pytest.raises(ConfigError, match="unknown compare method 'bayes'"):
        CompareOptions(method="bayes")  # type: ignore[arg-type]


def test_rank_guard_vetoes_a_single_outlier_repeat() -> None:
    rng = np.random.default_rng(11)
    base = {"k": (1000 * np.exp(rng.normal(0, 0.01, 30))).tolist()}
    cand = {"k": [1000.0, 1001.0, 999.0, 1000.5, 1600.0]}  # one repeat hit a hiccup
    student = compare(base, cand, options=CompareOptions(method="student"))[0]
    guarded = compare(base, cand)[0]
    assert student.verdict is Verdict.REGRESSION
    assert guarded.verdict is not Verdict.REGRESSION
    assert guarded.p_value is not None and student.p_value is not None
    assert guarded.p_value > student.p_value


def test_bh_is_applied_across_the_metrics_of_one_comparison() -> None:
    rng = np.random.default_rng(5)
    base = {f"k{i}": (100 * np.exp(rng.normal(0, 0.02, 30))).tolist() for i in range(50)}
    cand = {f"k{i}": (100 * np.exp(rng.normal(0, 0.02, 5))).tolist() for i in range(50)}
    lines = compare(base, cand)
    p = np.array([m.p_value for m in lines])
    q = np.array([m.q_value for m in lines])
    assert q == pytest.approx(sst.false_discovery_control(p))


def test_output_is_deterministic_and_sorted() -> None:
    base = {"b": BASE[1].tolist(), "a": BASE[0].tolist()}
    cand = {"b": CAND[1].tolist(), "a": CAND[0].tolist()}
    first, second = compare(base, cand), compare(base, cand)
    assert first == second
    assert [m.key for m in first] == ["a", "b"]
