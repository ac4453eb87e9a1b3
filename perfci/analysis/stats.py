"""Vectorised two-sample statistics on log values: one row per metric, one column per sample.

Every function takes 2-D float arrays (``k`` metrics × ``n`` samples) so that a whole comparison
is a handful of numpy calls; rows of one call share their sample sizes (the caller groups metrics
by shape). Inputs are natural logs of positive times, so a difference of location is a log ratio.

References
----------
- Student's pooled two-sample t: e.g. Welch (1947), *Biometrika* 34, 28–35, for the unpooled one.
- Hodges & Lehmann (1963), *Ann. Math. Statist.* 34, 598–611 (shift estimate);
  Moses' distribution-free interval (Hollander & Wolfe, *Nonparametric Statistical Methods*, §4.3).
- Mann & Whitney (1947), *Ann. Math. Statist.* 18, 50–60; exact null distribution by
  Löffler (1983), *Metrika* 30, 49–57 ("Über eine Partition der natürlichen Zahlen und ihre
  Anwendung beim U-Test"), in the form of scipy 1.17's ``scipy.stats._mannwhitneyu._MWU``.
- Benjamini & Hochberg (1995), *J. R. Statist. Soc. B* 57, 289–300.
"""

from __future__ import annotations

import functools
import math
import warnings
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

# scipy.special, not scipy.stats: the distributions below are its ufuncs behind scipy.stats'
# wrappers, and importing scipy.stats dominates `perfci check`'s cold start.
from scipy import special

from perfci.core.errors import SampleError

FloatArray = NDArray[np.float64]

#: The MAD times this estimates σ for normal data (1 / Φ⁻¹(3/4)): robust spreads use it.
MAD_TO_SD = 1.4826


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


def validate_sample(
    key: str, values: Sequence[float], *, role: str, negative_ok: bool = False
) -> FloatArray:
    """The values as a float array, or a :class:`SampleError` naming the metric and value.

    Times must be finite and non-negative (``negative_ok``: finite only, for series that are
    not times); a clear error beats a NaN verdict.
    """
    try:
        array = np.asarray(values, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise SampleError(f"{role} values of {key!r} are not numbers: {exc}") from exc
    if array.ndim != 1:
        raise SampleError(
            f"{role} values of {key!r} must be a flat list of numbers, got shape {array.shape}"
        )
    bad = ~np.isfinite(array) if negative_ok else ~np.isfinite(array) | (array < 0)
    if bad.any():
        index = int(np.flatnonzero(bad)[0])
        expected = (
            "finite number"
            if negative_ok
            else "finite, non-negative number (a time in ns or a count)"
        )
        raise SampleError(
            f"{role} value #{index} of {key!r} is {array[index]!r}: expected a {expected}"
        )
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


def guarded_t(
    base: FloatArray, cand: FloatArray, *, confidence: float, guard: float = 0.01
) -> ShiftTest:
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
    rank_p = _mann_whitney_p(base.reshape(-1, n), cand.reshape(-1, m)).reshape(result.p_value.shape)
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

    Exact p-values while the smaller group has at most 20 values (as scipy's
    ``mannwhitneyu(method="exact")``: tied values get midranks and the truncated ``U`` is
    looked up in the no-ties distribution), else the tie-corrected normal approximation. The
    interval takes order statistics of the ``n·m`` pairwise differences at the
    normal-approximation critical value of U, so it is approximate for tiny samples.
    """
    n, m = base.shape[-1], cand.shape[-1]
    pairs = np.sort((cand[:, :, None] - base[:, None, :]).reshape(len(base), n * m), axis=-1)
    estimate = np.median(pairs, axis=-1)
    z = norm_ppf(0.5 + confidence / 2)
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


def _t_result(
    diff: FloatArray, se: FloatArray, dof: FloatArray, sd: FloatArray, confidence: float
) -> ShiftTest:
    """p-value and interval from a t statistic; zero standard errors are decided exactly."""
    with np.errstate(all="ignore"):
        t = diff / se
        p = 2.0 * _t_sf(np.abs(t), dof)
        half = _t_ppf(0.5 + confidence / 2, dof) * se
    zero_se = se == 0
    p = np.where(zero_se, np.where(diff == 0, 1.0, 0.0), p)
    half = np.where(zero_se, 0.0, half)
    return ShiftTest(diff, diff - half, diff + half, p, sd)


def _mann_whitney_p(base: FloatArray, cand: FloatArray) -> FloatArray:
    """Two-sided MW p-values: exact for small groups, else asymptotic (tie-corrected).

    Rows whose values are all equal get p = 1 (no evidence either way).
    """
    both = np.concatenate([base, cand], axis=-1)
    constant = both.min(axis=-1) == both.max(axis=-1)
    p = np.ones(len(base))
    rows = ~constant
    if rows.any():
        p[rows] = mann_whitney_u_p(cand[rows], base[rows])
    return p


def mann_whitney_u_p(x: FloatArray, y: FloatArray) -> FloatArray:
    """Two-sided Mann–Whitney U p-value of each row of ``x`` against the same row of ``y``.

    Equal, bit for bit, to ``scipy.stats.mannwhitneyu(x, y, axis=-1, method=m).pvalue`` with
    ``m = "exact"`` while ``min(n1, n2) <= 20``, else ``"asymptotic"`` (tests hold scipy as
    the oracle). Why not call scipy: importing scipy.stats dominates ``perfci check``'s cold
    start, and this is the only part of it the check path needs.
    """
    x, y = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    if np.isnan(x).any() or np.isnan(y).any():
        raise ValueError("`x` and `y` must not contain NaNs.")
    n1, n2 = x.shape[-1], y.shape[-1]
    ranks, tie_term = _average_ranks(np.concatenate([x, y], axis=-1))
    u1 = ranks[..., :n1].sum(axis=-1) - n1 * (n1 + 1) / 2
    u = np.maximum(u1, n1 * n2 - u1)
    if min(n1, n2) <= 20:
        # scipy truncates a midrank U (ties) to an integer before the lookup; so does this.
        p = _mwu_exact_sf(np.asarray(u, dtype=np.int64), n1, n2)
    else:
        n = n1 + n2
        s = np.sqrt(n1 * n2 / 12 * ((n + 1) - tie_term / (n * (n - 1))))
        with np.errstate(divide="ignore", invalid="ignore"):
            z = (u - n1 * n2 / 2 - 0.5) / s
        p = special.ndtr(-z)
    return np.asarray(np.clip(p * 2, 0.0, 1.0), dtype=np.float64)


def _average_ranks(values: FloatArray) -> tuple[FloatArray, FloatArray]:
    """Midranks (1-based) along the last axis, and ``Σ (t³ − t)`` over each row's tie groups."""
    order = np.argsort(values, axis=-1, kind="stable")
    ordered = np.take_along_axis(values, order, axis=-1)
    size = values.shape[-1]
    starts = np.ones(values.shape, dtype=bool)
    starts[..., 1:] = ordered[..., 1:] != ordered[..., :-1]
    ends = np.ones(values.shape, dtype=bool)
    ends[..., :-1] = starts[..., 1:]
    index = np.arange(size)
    first = np.maximum.accumulate(np.where(starts, index, 0), axis=-1)
    last = np.minimum.accumulate(np.where(ends, index, size - 1)[..., ::-1], axis=-1)[..., ::-1]
    ranks = np.empty(values.shape, dtype=np.float64)
    # Half-integers: exact in floating point, whatever the order of later sums.
    np.put_along_axis(ranks, order, (first + last) / 2 + 1, axis=-1)
    ties = (last - first + 1).astype(np.float64)
    tie_term = np.where(starts, ties**3 - ties, 0.0).sum(axis=-1)
    return ranks, tie_term


def _mwu_exact_sf(k: NDArray[np.int64], n1: int, n2: int) -> FloatArray:
    """``P(U >= k)`` under the null (no ties), as scipy's ``_MWU.sf``: summed from the left."""
    n1, n2 = min(n1, n2), max(n1, n2)
    pmf, cdf = _mwu_null(n1, n2)
    kc = np.asarray(n1 * n2 - k)
    left = k < kc
    kc[left] = k[left]
    sf = np.array(cdf[kc], dtype=np.float64)  # writable, also for a single (0-d) row
    sf[left] = 1.0 - sf[left] + pmf[kc[left]]
    return sf


@functools.lru_cache(maxsize=64)
def _mwu_null(n1: int, n2: int) -> tuple[FloatArray, FloatArray]:
    """pmf and cdf of U for ``u <= n1·n2 / 2`` (``n1 <= n2``), by Löffler's recurrence.

    ``N(u) = (1/u) Σ_{i<u} N(i) σ(u − i)`` with ``σ(a) = Σ_{d | a, d <= n1} d −
    Σ_{d | a, n2 < d <= n1+n2} d``. The arithmetic (uint64 counts, float64 dot products, a
    switch to floats past 2⁶⁴) is scipy's own, so the p-values are bit-identical to it; each
    entry depends only on the ones before it, so computing the whole half at once changes none.
    """
    top = n1 * n2 // 2
    sigma = np.zeros(top + 1, dtype=int)
    for d in range(1, n1 + 1):
        sigma[d::d] += d
    for d in range(n2 + 1, n2 + n1 + 1):
        sigma[d::d] -= d
    sigma = sigma[1:]
    counts = np.zeros(top + 1, dtype=np.uint64)
    counts_are_ints = True
    uint_max = np.iinfo(np.uint64).max
    counts[0] = 1
    for u in range(1, top + 1):
        value = np.dot(counts[:u], sigma[u - 1 :: -1]) / u
        if value > uint_max and counts_are_ints:
            counts = counts.astype(float)
            counts_are_ints = False
        counts[u] = value
    pmf = counts / special.binom(n1 + n2, n1)
    return pmf, np.cumsum(pmf)


def _t_sf(x: FloatArray, dof: FloatArray) -> FloatArray:
    """``scipy.stats.t.sf(x, dof)``: its ufunc, with the wrapper's NaN for ``dof <= 0``."""
    x, dof = np.broadcast_arrays(np.asarray(x, dtype=np.float64), np.asarray(dof, dtype=np.float64))
    inside = (dof > 0) & (x < np.inf)
    values = np.where(dof > 0, np.where(np.isnan(x), np.nan, 0.0), np.nan)
    if inside.any():
        values[inside] = special.stdtr(dof[inside], -x[inside])
    return values


def _t_ppf(q: float, dof: FloatArray) -> FloatArray:
    """``scipy.stats.t.ppf(q, dof)``: its ufunc inside (0, 1), ∓inf at 0 and 1, else NaN."""
    dof = np.asarray(dof, dtype=np.float64)
    if 0 < q < 1:
        inside = special.stdtrit(np.where(dof > 0, dof, 1.0), q)
    else:
        inside = np.full(dof.shape, -np.inf if q == 0 else np.inf if q == 1 else np.nan)
    return np.where(dof > 0, inside, np.nan)


def t_sf(x: FloatArray, dof: FloatArray) -> FloatArray:
    """``scipy.stats.t.sf(x, dof)`` (vectorised; NaN for ``dof <= 0``)."""
    return _t_sf(x, dof)


def t_ppf(q: float, dof: FloatArray) -> FloatArray:
    """``scipy.stats.t.ppf(q, dof)`` (vectorised; NaN for ``dof <= 0``)."""
    return _t_ppf(q, dof)


def norm_cdf(x: float) -> float:
    """``scipy.stats.norm.cdf(x)``, which is ``ndtr``."""
    return float(special.ndtr(x))


def norm_ppf(q: float) -> float:
    """``scipy.stats.norm.ppf(q)``, which is ``ndtri`` for ``0 < q < 1``."""
    return float(special.ndtri(q))
