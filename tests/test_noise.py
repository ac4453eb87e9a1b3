"""The shared run factor and the repeats-needed estimate."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats as sst

from perfci.analysis import noise
from perfci.analysis.compare import CompareOptions
from perfci.analysis.engine import compare_core
from perfci.analysis.factor import MIN_METRICS_FOR_FACTOR, SHARED_FACTOR_KEY
from perfci.core.model import Verdict


def _aligned(
    rng: np.random.Generator, metrics: int, base_factor: np.ndarray, cand_factor: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    levels = np.log(rng.uniform(1e3, 1e6, (metrics, 1)))
    base = levels + base_factor + rng.normal(0, 0.005, (metrics, len(base_factor)))
    cand = levels + cand_factor + rng.normal(0, 0.005, (metrics, len(cand_factor)))
    return base, cand


def test_factor_is_recovered_by_medians_over_metrics() -> None:
    rng = np.random.default_rng(2)
    true_b, true_c = rng.normal(0, 0.03, 30), rng.normal(0.05, 0.03, 5)
    base, cand = _aligned(rng, 400, true_b, true_c)
    factor = noise.estimate_shared_factor(base, cand)
    assert factor is not None and factor.metrics == 400
    # Factors are relative to each metric's baseline median, so compare after centring.
    centre = np.median(true_b)
    assert factor.baseline == pytest.approx(true_b - centre, abs=0.002)
    assert factor.candidate == pytest.approx(true_c - centre, abs=0.002)


def test_too_few_metrics_give_no_factor() -> None:
    rng = np.random.default_rng(2)
    base, cand = _aligned(rng, MIN_METRICS_FOR_FACTOR - 1, np.zeros(10), np.zeros(3))
    assert noise.estimate_shared_factor(base, cand) is None


def test_removal_leaves_metric_specific_noise_only() -> None:
    rng = np.random.default_rng(4)
    base, cand = _aligned(rng, 200, rng.normal(0, 0.05, 30), rng.normal(0, 0.05, 5))
    factor = noise.estimate_shared_factor(base, cand)
    assert factor is not None
    clean_b, _ = noise.remove_shared_factor(base, cand, factor)
    assert np.std(base, axis=1, ddof=1).mean() > 0.04
    assert np.std(clean_b, axis=1, ddof=1).mean() == pytest.approx(0.005, rel=0.15)


def test_shared_factor_line_reports_a_common_slowdown() -> None:
    rng = np.random.default_rng(8)
    base, cand = _aligned(rng, 100, rng.normal(0, 0.01, 30), rng.normal(0.06, 0.01, 5))
    keys = [f"kernel:gpu:k{i}" for i in range(100)]
    core = compare_core(
        dict(zip(keys, np.exp(base).tolist(), strict=True)),
        dict(zip(keys, np.exp(cand).tolist(), strict=True)),
        options=CompareOptions(remove_shared_factor=True),
    )
    shared = core.shared_factor
    assert shared is not None and shared.key == SHARED_FACTOR_KEY
    assert shared.verdict is Verdict.REGRESSION
    assert shared.change == pytest.approx(math.expm1(0.06), abs=0.015)
    # Metrics are judged beyond the common shift: none of them moved on its own.
    assert not [m for m in core.metrics if m.verdict is Verdict.REGRESSION]


def test_repeats_needed_solves_the_interval_width() -> None:
    sd, n, delta = np.array([0.02]), 30, 0.02
    estimate = np.array([0.0])
    needed = int(noise.repeats_needed(sd, n, estimate, delta=delta, confidence=0.95)[0])
    z = sst.norm.ppf(0.975)
    half = lambda m: z * 0.02 * math.sqrt(1 / n + 1 / m)  # noqa: E731
    assert half(needed) <= math.log1p(delta) < half(needed - 1)


def test_repeats_needed_says_when_more_repeats_cannot_help() -> None:
    # Baseline noise alone (z·sd/√n) already exceeds the margin: -1.
    needed = noise.repeats_needed(np.array([0.2]), 5, np.array([0.0]), delta=0.02, confidence=0.95)
    assert needed.tolist() == [-1]
    assert noise.repeats_needed(
        np.array([0.0]), 5, np.array([0.0]), delta=0.02, confidence=0.95
    ).tolist() == [1]
