"""Vectorised two-sample statistics on log values: one row per metric, one column per sample.

Every function takes 2-D float arrays (``k`` metrics × ``n`` samples) so that a whole comparison
is a handful of numpy calls; rows of one call share their sample sizes (the caller groups metrics
by shape). Inputs are natural logs of positive times, so a difference of location is a log ratio.

References
----------
- Student's pooled two-sample t: e.g. Welch (1947), *Biometrika* 34, 28–35, for the unpooled one.
- Hodges & Lehmann (1963), *Ann. Math. Statist.* 34, 598–611 (shift estimate);
  Moses' distribution-free interval (Hollander & Wolfe, *Nonparametric Statistical Methods*, §4.3).
- Mann & Whitney (1947), *Ann. Math. Statist.* 18, 50–60.
- Benjamini & Hochberg (1995), *J. R. Statist. Soc. B* 57, 289–300.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray
from scipy import stats

from perfci.errors import PerfciError

FloatArray = NDArray[np.float64]


class SampleError(PerfciError, ValueError):
    """A sample holds a value that cannot be compared (NaN, infinite or negative time)."""


@dataclass(frozen=True, slots=True)
class ShiftTest:
    """Per-row result of a two-sample location test on logs (candidate − baseline).

    ``estimate`` and the interval are log ratios; ``p_value`` is two-sided; ``sd`` is the
    pooled standard deviation of the logs (≈ the coefficient of variation for small CVs).
    """

    estimate: FloatArray
    ci_low: FloatArray
    ci_high: FloatArray
    p_value: FloatArray
    sd: FloatArray


def validate_sample(key: str, values: Sequence[float], *, role: str) -> FloatArray:
    """The values as a float array, or a :class:`SampleError` naming the metric and value.

    Times must be finite and non-negative; a clear error beats a NaN verdict.
    """
    try:
        array = np.asarray(values, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise SampleError(f"{role} values of {key!r} are not numbers: {exc}") from exc
    if array.ndim != 1:
        raise SampleError(f"{role} values of {key!r} must be a flat list of numbers, "
                          f"got shape {array.shape}")
    bad = ~np.isfinite(array) | (array < 0)
    if bad.any():
        index = int(np.flatnonzero(bad)[0])
        raise SampleError(f"{role} value #{index} of {key!r} is {array[index]!r}: expected a "
                          "finite, non-negative number (a time in ns or a count)")
    return array


def safe_log(values: FloatArray) -> FloatArray:
    """Natural log per row; rows holding zeros are offset by 1 % of their positive median.

    Why: a metric that is 0 ns in some repeat (a memcpy that did not happen) would give −inf.
    The offset keeps such rows comparable at the cost of slightly shrinking their ratio.
    """
    values = np.asarray(values, dtype=np.float64)
    zero_rows = np.asarray((values <= 0).any(axis=-1))
    if not zero_rows.any():
        return np.log(values)
    positive = np.where(values > 0, values, np.nan)
    with warnings.catch_warnings():
        # An all-zero row has no positive median; it gets the 1.0 offset below instead.
        warnings.simplefilter("ignore", RuntimeWarning)
        offset = 0.01 * np.nanmedian(positive, axis=-1, keepdims=True)
    offset = np.where(np.isfinite(offset), offset, 1.0)
    offset = np.where(zero_rows[..., None], offset, 0.0)
    return np.asarray(np.log(values + offset), dtype=np.float64)


def student_t(base: FloatArray, cand: FloatArray, *, confidence: float) -> ShiftTest:
    """Pooled (Student) two-sample t-test per row, with its confidence interval.

    Assumes equal variances in both groups (same machine, same noise), which buys
    ``n + m − 2`` degrees of freedom: with 5 candidate repeats the Welch test keeps only
    ≈ 5 and loses most of its power at the small per-metric α a 500-metric comparison needs
    (see docs/statistics.md). Works for ``m = 1`` as long as ``n ≥ 2``. Zero pooled variance
    gives p = 0 when the means differ and p = 1 when they do not.
    """
    n, m = base.shape[-1], cand.shape[-1]
    diff = cand.mean(axis=-1) - base.mean(axis=-1)
    ss = _sum_squares(base) + _sum_squares(cand)
    dof = n + m - 2
    sd = np.sqrt(ss / dof) if dof > 0 else np.full_like(diff, np.nan)
    se = sd * math.sqrt(1.0 / n + 1.0 / m)
    return _t_result(diff, se, np.full_like(diff, float(dof)), sd, confidence)


def guarded_t(base: FloatArray, cand: FloatArray, *, confidence: float,
              guard: float = 0.01) -> ShiftTest:
    """Pooled t-test whose p-value must be confirmed by a Mann–Whitney U test.

    The estimate and interval are Student's. The p-value is Student's where the two-sided
    Mann–Whitney p-value is at most ``guard``, else the larger of the two. Since the result
    is never smaller than Student's p, the test keeps Student's level under normal noise
    while a single slow candidate repeat (which drags the mean, not the ranks) no longer
    produces an alarm. Under a real shift both tests agree and the power stays Student's.
    The rank test's smallest p-value with ``n``, ``m`` values is ``2 / C(n+m, m)``; when that
    exceeds ``guard`` (few values), the guard becomes that minimum, i.e. the rank test must
    see every candidate value beyond every baseline value.
    """
    n, m = base.shape[-1], cand.shape[-1]
    guard = max(guard, 2.0 / math.comb(n + m, m) * (1 + 1e-9))
    result = student_t(base, cand, confidence=confidence)
    rank_p = _mann_whitney_p(base.reshape(-1, n), cand.reshape(-1, m)).reshape(
        result.p_value.shape)
    p = np.where(rank_p <= guard, result.p_value, np.maximum(result.p_value, rank_p))
    return ShiftTest(result.estimate, result.ci_low, result.ci_high, p, result.sd)


def welch_t(base: FloatArray, cand: FloatArray, *, confidence: float) -> ShiftTest:
    """Welch's unequal-variance t-test per row (Welch–Satterthwaite degrees of freedom).

    Needs at least two values in each group; rows with fewer get NaN.
    """
    n, m = base.shape[-1], cand.shape[-1]
    diff = cand.mean(axis=-1) - base.mean(axis=-1)
    with np.errstate(all="ignore"):
        vb = _sum_squares(base) / (n - 1) / n if n > 1 else np.full_like(diff, np.nan)
        vc = _sum_squares(cand) / (m - 1) / m if m > 1 else np.full_like(diff, np.nan)
        se = np.sqrt(vb + vc)
        dof = (vb + vc) ** 2 / (vb**2 / max(n - 1, 1) + vc**2 / max(m - 1, 1))
        sd = np.sqrt((_sum_squares(base) + _sum_squares(cand)) / max(n + m - 2, 1))
    dof = np.where(np.isfinite(dof), dof, float(n + m - 2))
    return _t_result(diff, se, dof, sd, confidence)


def mann_whitney(base: FloatArray, cand: FloatArray, *, confidence: float) -> ShiftTest:
    """Mann–Whitney U (two-sided) with the Hodges–Lehmann shift and Moses' interval.

    Exact p-values (scipy's, which handle ties) while the smaller group has at most 20 values,
    else the tie-corrected normal approximation. The interval takes order statistics of the
    ``n·m`` pairwise differences at the normal-approximation critical value of U, so it is
    approximate for tiny samples.
    """
    n, m = base.shape[-1], cand.shape[-1]
    pairs = np.sort((cand[:, :, None] - base[:, None, :]).reshape(len(base), n * m), axis=-1)
    estimate = np.median(pairs, axis=-1)
    z = stats.norm.ppf(0.5 + confidence / 2)
    k = math.floor(n * m / 2 - z * math.sqrt(n * m * (n + m + 1) / 12))
    k = min(max(k, 0), n * m - 1)
    p_value = _mann_whitney_p(base, cand)
    sd = np.sqrt((_sum_squares(base) + _sum_squares(cand)) / max(n + m - 2, 1))
    return ShiftTest(estimate, pairs[:, k], pairs[:, n * m - 1 - k], p_value, sd)


def benjamini_hochberg(p_values: FloatArray) -> FloatArray:
    """Benjamini–Hochberg adjusted p-values (q-values) along the last axis; NaN stays NaN.

    Rows are independent families (the benchmark passes many comparisons at once). The
    adjustment is ``min_{j ≥ i} p_(j) · N / j`` capped at 1, as in
    ``scipy.stats.false_discovery_control``, with ``N`` the count of non-NaN p-values.
    """
    p = np.atleast_2d(np.asarray(p_values, dtype=np.float64))
    valid = np.isfinite(p)
    count = valid.sum(axis=-1, keepdims=True)
    order = np.argsort(np.where(valid, p, np.inf), axis=-1)
    ranked = np.take_along_axis(p, order, axis=-1)
    ranks = np.arange(1, p.shape[-1] + 1)
    with np.errstate(all="ignore"):
        scaled = ranked * count / ranks
    scaled = np.where(np.isfinite(scaled), scaled, np.inf)
    adjusted = np.minimum.accumulate(scaled[..., ::-1], axis=-1)[..., ::-1]
    adjusted = np.minimum(adjusted, 1.0)
    q = np.empty_like(p)
    np.put_along_axis(q, order, adjusted, axis=-1)
    q = np.where(valid, q, np.nan)
    return q.reshape(np.shape(p_values)) if np.ndim(p_values) == 1 else q


def _sum_squares(values: FloatArray) -> FloatArray:
    centred = values - values.mean(axis=-1, keepdims=True)
    return np.asarray((centred**2).sum(axis=-1), dtype=np.float64)


def _t_result(diff: FloatArray, se: FloatArray, dof: FloatArray, sd: FloatArray,
              confidence: float) -> ShiftTest:
    """p-value and interval from a t statistic; zero standard errors are decided exactly."""
    with np.errstate(all="ignore"):
        t = diff / se
        p = 2.0 * stats.t.sf(np.abs(t), dof)
        half = stats.t.ppf(0.5 + confidence / 2, dof) * se
    zero_se = se == 0
    p = np.where(zero_se, np.where(diff == 0, 1.0, 0.0), p)
    half = np.where(zero_se, 0.0, half)
    return ShiftTest(diff, diff - half, diff + half, p, sd)


def _mann_whitney_p(base: FloatArray, cand: FloatArray) -> FloatArray:
    """Two-sided MW p-values: exact (scipy handles ties) for small groups, else asymptotic.

    Rows whose values are all equal get p = 1 (no evidence either way).
    """
    both = np.concatenate([base, cand], axis=-1)
    constant = both.min(axis=-1) == both.max(axis=-1)
    p = np.ones(len(base))
    method = "exact" if min(base.shape[-1], cand.shape[-1]) <= 20 else "asymptotic"
    rows = ~constant
    if rows.any():
        p[rows] = stats.mannwhitneyu(cand[rows], base[rows], axis=-1, method=method).pvalue
    return p
