"""Change-point detection on main-branch histories: known answers, null series, edge cases."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest
from conftest import shared_path

from perfci.analysis.changepoints import (
    ChangePoint,
    ChangePointOptions,
    detect_change_points,
    segment_levels,
)
from perfci.analysis.stats import SampleError

MONGODB = ("changepoint-data", "mongodb_spa_testdata")


def _steps(levels: list[tuple[int, float]], *, cv: float, seed: int) -> np.ndarray:
    """Piecewise-constant series (length, level) with lognormal noise of the given CV."""
    rng = np.random.default_rng(seed)
    base = np.concatenate([np.full(n, level) for n, level in levels])
    return base * np.exp(rng.normal(0.0, cv, len(base)))


@pytest.mark.parametrize("seed", range(5))
def test_finds_known_steps_with_their_levels(seed: int) -> None:
    values = _steps([(60, 100.0), (50, 108.0), (70, 95.0)], cv=0.02, seed=seed)
    found = detect_change_points(values)
    assert [cp.index for cp in found] == pytest.approx([60, 110], abs=2)
    first, second = found
    assert first.before == pytest.approx(100.0, rel=0.01)
    assert first.after == pytest.approx(108.0, rel=0.01)
    assert first.change == pytest.approx(0.08, abs=0.01)
    assert second.change == pytest.approx(95.0 / 108.0 - 1.0, abs=0.01)
    assert all(cp.p_value < 1e-3 for cp in found)


def test_change_is_after_over_before_minus_one() -> None:
    found = detect_change_points(_steps([(40, 200.0), (40, 150.0)], cv=0.01, seed=3))
    (cp,) = found
    assert cp.change == pytest.approx(cp.after / cp.before - 1.0)
    assert cp.change == pytest.approx(-0.25, abs=0.01)


@pytest.mark.parametrize("last_runs", [3, 5])
def test_short_last_segment_is_found(last_runs: int) -> None:
    # A regression in the last few runs is what a weekly report most needs to show.
    values = _steps([(50, 100.0), (last_runs, 120.0)], cv=0.01, seed=7)
    assert [cp.index for cp in detect_change_points(values)] == [50]


@pytest.mark.parametrize("seed", range(10))
@pytest.mark.parametrize("n", [30, 200, 1000])
def test_flat_noisy_series_has_no_change_point(seed: int, n: int) -> None:
    values = _steps([(n, 1e6)], cv=0.02, seed=seed)
    assert detect_change_points(values) == []


def test_isolated_slow_runs_are_not_change_points() -> None:
    values = _steps([(150, 100.0)], cv=0.01, seed=11)
    values[[20, 21, 80, 149]] *= 1.6  # slow runs, one pair, one at the very end
    assert detect_change_points(values) == []


def test_same_input_same_output() -> None:
    values = _steps([(80, 10.0), (80, 10.5), (80, 9.0)], cv=0.03, seed=2).tolist()
    assert detect_change_points(values) == detect_change_points(list(values))


def test_options_filter_and_limit() -> None:
    values = _steps([(60, 100.0), (60, 103.0), (60, 130.0)], cv=0.005, seed=4)
    assert [cp.index for cp in detect_change_points(values)] == pytest.approx([60, 120], abs=2)
    big_only = detect_change_points(values, options=ChangePointOptions(min_magnitude=0.1))
    assert [cp.index for cp in big_only] == pytest.approx([120], abs=2)
    assert big_only[0].before == pytest.approx(101.5, rel=0.02)  # the merged segment
    strongest = detect_change_points(values, options=ChangePointOptions(max_change_points=1))
    assert [cp.index for cp in strongest] == pytest.approx([120], abs=2)
    assert detect_change_points(values, options=ChangePointOptions(max_change_points=0)) == []


@pytest.mark.parametrize("values", [[], [1.0], [5.0, 5.0, 5.0], [3.0] * 1000, [1.0, 2.0, 3.0]])
def test_too_short_or_constant_series_have_none(values: list[float]) -> None:
    assert detect_change_points(values) == []


def test_noiseless_step_is_found() -> None:
    (cp,) = detect_change_points([10.0] * 20 + [12.0] * 20)
    assert (cp.index, cp.before, cp.after) == (20, 10.0, 12.0)
    assert cp.change == pytest.approx(0.2)


def test_non_positive_values_use_the_raw_scale() -> None:
    values = np.r_[np.zeros(40), np.ones(40) * 3.0] + np.random.default_rng(0).normal(0, 0.2, 80)
    assert [cp.index for cp in detect_change_points(values)] == pytest.approx([40], abs=1)


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -float("inf")])
def test_non_finite_values_are_a_clear_error(bad: float) -> None:
    values = [1.0, 2.0, bad, 1.5]
    with pytest.raises(SampleError, match="value #2"):
        detect_change_points(values)
    with pytest.raises(ValueError):
        detect_change_points(values)


def test_nested_input_is_a_clear_error() -> None:
    with pytest.raises(SampleError, match="flat list"):
        detect_change_points([[1.0, 2.0], [3.0, 4.0]])  # type: ignore[list-item]


@pytest.mark.parametrize(
    "field, value",
    [
        ("significance", 0.0),
        ("significance", 1.0),
        ("min_magnitude", -0.1),
        ("min_segment", 1),
        ("max_change_points", -1),
        ("penalty", 0.0),
    ],
)
def test_invalid_options_are_rejected(field: str, value: float) -> None:
    with pytest.raises(ValueError, match=field):
        dataclasses.replace(ChangePointOptions(), **{field: value})


def test_ten_thousand_points_find_both_changes() -> None:
    # How long this takes is benchmarks/changepoints.py's to measure, not a test's (issue 16).
    values = _steps([(4000, 1.0), (3000, 1.03), (3000, 0.97)], cv=0.02, seed=5)
    found = detect_change_points(values)
    assert [cp.index for cp in found] == pytest.approx([4000, 7000], abs=5)


def test_segment_levels_follow_the_change_points() -> None:
    values = [1.0, 1.2, 0.8, 5.0, 5.2, 4.8]
    assert segment_levels(values, [3]) == [1.0] * 3 + [5.0] * 3
    found = [ChangePoint(index=3, before=1.0, after=5.0, change=4.0, p_value=0.0)]
    assert segment_levels(values, found) == segment_levels(values, [3])
    assert segment_levels(values, []) == [float(np.median(values))] * 6


def test_agrees_with_mongodb_e_divisive_on_robust_series() -> None:
    """MongoDB's E-Divisive q-hat curve peaks at its first split (114/115) and locally at 25."""
    folder = shared_path(*MONGODB)
    values = json.loads((folder / "robust_series.json").read_text())
    q_hat = np.asarray(json.loads((folder / "expected_result_robust_series.json").read_text()))
    indices = [cp.index for cp in detect_change_points(values)]
    strongest = min(detect_change_points(values), key=lambda cp: cp.p_value).index
    assert abs(strongest - int(np.argmax(q_hat))) <= 2
    local_peak = int(np.argmax(q_hat[:60]))
    assert any(abs(i - local_peak) <= 2 for i in indices)


def test_mongodb_series_without_regression_stays_quiet() -> None:
    """real_series.json is a flat series with one outlier (used by MongoDB's GESD tests)."""
    values = json.loads((shared_path(*MONGODB) / "real_series.json").read_text())
    assert detect_change_points(values) == []


def _pelt_reference(z: np.ndarray, *, beta: float, min_segment: int) -> list[int]:
    """PELT as perfci had it until stop 45: the candidates gathered from ``best`` each step."""
    n = len(z)
    csum = np.concatenate([[0.0], np.cumsum(z)])
    best = np.full(n + 1, np.inf)
    best[0] = -beta
    last = np.zeros(n + 1, dtype=np.int64)
    starts = np.array([0], dtype=np.int64)
    for t in range(min_segment, n + 1):
        total = best[starts] - (csum[t] - csum[starts]) ** 2 / (t - starts)
        pick = int(np.argmin(total))
        best[t] = total[pick] + beta
        last[t] = starts[pick]
        starts = starts[total <= best[t]]
        if t + 1 - min_segment >= min_segment:
            starts = np.concatenate((starts, (t + 1 - min_segment,)))
    cuts, t = [], n
    while t > 0:
        t = int(last[t])
        if t > 0:
            cuts.append(t)
    return sorted(cuts)


@pytest.mark.parametrize("seed", range(12))
def test_the_candidate_search_keeps_the_partition_of_the_plain_pelt(seed: int) -> None:
    """The search keeps its candidates in preallocated arrays (issue 35: 6,500 of them on a
    year at 50 runs a day); the partition must be the one the plain PELT finds, flat
    stretches, steps, outliers, ties of equal values and every minimum segment alike."""
    from perfci.analysis.changepoints import _pelt

    rng = np.random.default_rng(seed)
    n = int(rng.choice([2, 3, 7, 60, 400, 2500]))
    levels = np.repeat(rng.normal(0, 3, 6), -(-n // 6))[:n] if seed % 3 else np.zeros(n)
    z = levels + rng.standard_t(3, n)
    if seed % 4 == 0:
        z = np.round(z)  # equal values: ties between candidates
    for min_segment in (2, 3, 5):
        for beta in (0.5, 3 * np.log(max(n, 2)), 40.0):
            want = _pelt_reference(z, beta=beta, min_segment=min_segment)
            assert _pelt(z, beta=beta, min_segment=min_segment) == want
