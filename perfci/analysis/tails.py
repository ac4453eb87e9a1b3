"""The baseline's own tails: how far a new run can lie out when nothing changed.

The prediction interval of :mod:`.prediction` takes run-to-run noise to be normal. A
comparison of hundreds of metrics decides at per-metric levels near 10⁻⁴ (Benjamini–Hochberg
over the run's metrics), where that assumption matters most: when a run's level of a metric
is now and then far off (an autotuner's other choice, a memory layout, a neighbour's job that
touched some metrics and not others), the normal tail is a hundred times too thin there, and
unchanged metrics are called changed.

So the baseline tests itself. Each baseline run in turn is judged as a new run against the
others (leave one out): under the normal model its statistic follows ``t(K − 2)`` exactly,
and its normal score ``Φ⁻¹(F(t))`` is standard normal. The scores of every metric and run,
pooled, are the empirical null (Efron 2004) of what this comparison does with unchanged
code. A scaled Student t, ``σ · t(ν)``, is fitted to them by maximum likelihood; when it
fits them better than the standard normal beyond chance (likelihood ratio above
:data:`MIN_LIKELIHOOD_RATIO`), the tails are heavy and each metric's p-value becomes the
larger of its own and the fitted tail's at its normal score. Its interval is widened to the
fitted tail's quantile in the same way. With normal noise the ratio stays small (under 5 in
simulation) and nothing changes; a test never becomes less strict than the normal one.

References: Efron (2004), "Large-scale simultaneous hypothesis testing: the choice of a null
hypothesis", *JASA* 99:96; Lange, Little & Taylor (1989), "Robust statistical modeling using
the t distribution", *JASA* 84:881 (the EM fit of σ for a given ν).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray
from scipy import special

from perfci.analysis.moderation import squeeze_variances
from perfci.analysis.stats import t_ppf, t_sf

FloatArray = NDArray[np.float64]

#: Fewest baseline runs of a metric for its leave-one-out scores (``t(K − 2)`` needs K ≥ 3;
#: with fewer than five a single run's score says little).
MIN_RUNS = 5
#: Fewest pooled scores for a fit: the tail beyond 3σ holds 0.3 % of a normal sample.
MIN_SCORES = 200
#: Likelihood ratio against the standard normal above which the tails count as heavy: the
#: 0.999 quantile of χ² with 2 degrees of freedom. Scores of one metric share its other
#: runs, so they are not independent, and a strict level keeps noise from triggering it.
MIN_LIKELIHOOD_RATIO = 13.8
#: Thresholds on |normal score| at which the fit must hold at least the observed count, and
#: the fewest scores beyond one for it to count as evidence.
_THRESHOLDS = (3.0, 4.0, 5.0, 6.0, 8.0, 10.0)
MIN_EXCEEDANCES = 5
#: Five scores beyond this are not the normal model's (it expects 0.1 in 15,000).
_FAR = 5.0
#: Degrees of freedom tried for the fitted t (ν); ∞ is the normal with a free scale.
_DOF_GRID = (1.0, 1.5, 2.0, 2.5, 3.0, 4.0, 5.0, 7.0, 10.0, 15.0, 25.0, 50.0, 100.0, math.inf)
#: Normal scores are capped here: a run 40 standard deviations off tells no more than one at 12.
_MAX_SCORE = 12.0


@dataclass(frozen=True, slots=True)
class TailModel:
    """The null distribution of a metric's normal score: ``scale · t(dof)``, fitted."""

    dof: float
    scale: float
    likelihood_ratio: float
    scores: int
    #: Share of the scores beyond 4 (the normal model puts 6.3·10⁻⁵ there).
    beyond_four: float = 0.0

    def p_values(self, p: FloatArray) -> FloatArray:
        """Two-sided p-values made no smaller than this tail gives at their normal scores."""
        p = np.asarray(p, dtype=np.float64)
        with np.errstate(divide="ignore", invalid="ignore"):
            score = -special.ndtri(np.clip(p, 0.0, 1.0) / 2.0)
            tail = 2.0 * t_sf(score / self.scale, np.asarray(self.dof))
        return np.where(np.isfinite(tail), np.maximum(p, tail), p)

    def note(self, what: str) -> str:
        """One line for the report: what the baseline showed and what was done about it."""
        nu = "∞" if self.dof == math.inf else f"{self.dof:g}"
        return (
            f"The baseline's {what} lie out more often than normal noise would: judged one "
            f"run at a time against the others, {self.beyond_four * 100:.2f} % of their values lay "
            "beyond 4 standard deviations, where normal noise puts 0.006 %. Every test and "
            f"interval of them was made that much stricter (a t with {nu} degrees of freedom "
            f"at scale {self.scale:.2f} fits them)."
        )

    def confidence(self, confidence: float) -> float:
        """The normal-model confidence whose interval covers ``confidence`` under this tail."""
        quantile = self.scale * float(t_ppf(0.5 + confidence / 2.0, np.asarray(self.dof)))
        return max(confidence, 1.0 - 2.0 * float(special.ndtr(-quantile)))


def fit_tails(base: FloatArray, *, moderate: bool = True) -> TailModel | None:
    """The fitted tail of ``base`` (metrics × runs, logs, NaN where absent) when it is heavy.

    ``None`` when the normal model holds (the usual case), or when there are too few runs or
    metrics to tell. ``moderate`` as the tests it calibrates (:func:`leave_one_out_scores`).
    """
    scores = leave_one_out_scores(base, moderate=moderate)
    if scores.size < MIN_SCORES:
        return None
    dof, gain, scales = _fit_scaled_t(scores)
    far = _exceedances(scores)
    beyond_normal = any(count >= MIN_EXCEEDANCES for c, count in far if c >= _FAR)
    if gain < MIN_LIKELIHOOD_RATIO and not beyond_normal:
        return None
    dof, scale = _envelope(scores, dof, scales, far)
    if dof == math.inf and scale <= 1.0:
        return None
    return TailModel(
        dof=dof,
        scale=scale,
        likelihood_ratio=gain,
        scores=int(scores.size),
        beyond_four=float(np.mean(np.abs(scores) > 4.0)),
    )


def leave_one_out_scores(base: FloatArray, *, moderate: bool = False) -> FloatArray:
    """Normal scores of every baseline run judged as a new run against the metric's others.

    For run ``j`` of a metric with ``K`` runs, ``t = (y_j − ȳ₋ⱼ) / (s₋ⱼ √(1 + 1/(K−1)))``
    follows ``t(K − 2)`` under the normal model; its normal score is returned, so metrics
    with different run counts pool on one scale. Metrics with fewer than :data:`MIN_RUNS`
    runs, or no spread, give none.

    With ``moderate``, the others' variances of each left-out run are moderated across the
    metrics (:func:`.moderation.squeeze_variances`) and the degrees of freedom are the
    moderated ones, as in the test of the candidate itself. That matters for a short
    baseline: five runs give ``t(3)``, whose own heavy tails hide the runs' heavy tails,
    while the candidate is tested with a variance pooled across metrics and many degrees
    of freedom.
    """
    present = np.isfinite(base)
    runs = present.sum(axis=1)
    rows = runs >= MIN_RUNS
    if not rows.any():
        return np.zeros(0)
    values = np.where(present, base, 0.0)[rows]
    mask = present[rows]
    k = runs[rows][:, None].astype(np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        centre = np.sum(values, axis=1, keepdims=True) / k
        # The others' mean and variance by removing run j from the row's sums (centred
        # first, so that the subtraction loses no precision).
        dev = np.where(mask, values - centre, 0.0)
        ss = np.sum(dev**2, axis=1, keepdims=True)
        others_mean = -dev / (k - 1)
        others_var = (ss - dev**2 - (k - 1) * others_mean**2) / (k - 2)
        dof = np.broadcast_to(k - 2, others_var.shape).copy()
        var = np.where(mask & (others_var > 0), others_var, np.nan)
        if moderate:
            for j in range(var.shape[1]):
                var[:, j], dof[:, j] = squeeze_variances(var[:, j], dof[:, j])
        t = (dev - others_mean) / np.sqrt(var * (1 + 1 / (k - 1)))
        score = -special.ndtri(special.stdtr(dof, -np.abs(t))) * np.sign(t)
    usable = mask & np.isfinite(score)
    return np.asarray(np.clip(score[usable], -_MAX_SCORE, _MAX_SCORE), dtype=np.float64)


def _fit_scaled_t(scores: FloatArray) -> tuple[float, float, dict[float, float]]:
    """Maximum-likelihood ``ν`` of ``σ · t(ν)`` over :data:`_DOF_GRID`, the likelihood ratio
    of that fit against the standard normal, and each ν's maximum-likelihood σ."""
    squares = scores**2
    n = scores.size
    standard = -0.5 * float(squares.sum()) - 0.5 * n * math.log(2 * math.pi)
    scales: dict[float, float] = {}
    best = (-math.inf, math.inf)
    for nu in _DOF_GRID:
        if nu == math.inf:
            var = float(squares.mean())
            loglik = -0.5 * n * (1.0 + math.log(2 * math.pi * var))
            scales[nu] = math.sqrt(var)
        else:
            scales[nu] = _em_scale(squares, nu)
            loglik = float(np.sum(_t_logpdf(scores / scales[nu], nu))) - n * math.log(scales[nu])
        if loglik > best[0]:
            best = (loglik, nu)
    loglik, nu = best
    return nu, 2.0 * (loglik - standard), scales


def _exceedances(scores: FloatArray) -> list[tuple[float, int]]:
    size = np.abs(scores)
    return [(c, int(np.sum(size > c))) for c in _THRESHOLDS]


def _envelope(
    scores: FloatArray, dof: float, scales: dict[float, float], far: list[tuple[float, int]]
) -> tuple[float, float]:
    """The heaviest-needed fit: from the likelihood's ν down, the first whose tail expects at
    least the observed count beyond every threshold with :data:`MIN_EXCEEDANCES` or more.

    The likelihood is ruled by the bulk of the scores; the decisions are made in the far
    tail, where a mixture (most runs normal, a few far off) is heavier than any t that fits
    the bulk. Erring heavy there costs power; erring light calls unchanged metrics changed.
    """
    supported = [(c, count) for c, count in far if count >= MIN_EXCEEDANCES]
    nu = dof
    for nu in sorted((v for v in _DOF_GRID if v <= dof), reverse=True):
        expected = (
            scores.size
            * 2.0
            * t_sf(np.array([c for c, _ in supported]) / scales[nu], np.asarray(nu))
        )
        if all(e >= count for e, (_, count) in zip(expected.tolist(), supported, strict=True)):
            break
    return nu, scales[nu]


def _em_scale(squares: FloatArray, nu: float) -> float:
    """σ of ``σ · t(ν)`` for a fixed ν: the EM iteration of Lange, Little & Taylor (1989)."""
    var = max(float(squares.mean()), 1e-12)
    # weights = (ν + 1) / (ν + s² / var), then their mean times s², each step into one buffer:
    # the same operations in the same order as the plain expression, without four new arrays
    # per step (a few hundred steps per comparison).
    step = np.empty_like(squares)
    top = nu + 1.0
    for _ in range(100):
        np.divide(squares, var, out=step)
        np.add(nu, step, out=step)
        np.divide(top, step, out=step)
        np.multiply(step, squares, out=step)
        updated = max(float(step.mean()), 1e-12)
        if abs(updated - var) <= 1e-6 * var:  # σ to 5·10⁻⁷: far finer than it is known
            break
        var = updated
    return math.sqrt(var)


def _t_logpdf(x: FloatArray, nu: float) -> FloatArray:
    const = special.gammaln((nu + 1) / 2) - special.gammaln(nu / 2) - 0.5 * math.log(nu * math.pi)
    return np.asarray(const - (nu + 1) / 2 * np.log1p(x**2 / nu), dtype=np.float64)
