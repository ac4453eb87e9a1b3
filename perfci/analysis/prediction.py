"""How far a new run lies from the baseline runs: prediction intervals, run factor, repeats.

Per metric, the baseline runs' values ``y₁ … y_K`` (logs, one per run) and the candidate run's
``y_c``. Under "nothing changed", ``y_c`` is one more draw of the run-level distribution, so

    (y_c − ȳ) / (s · √(1 + 1/K))  ~  t(K − 1)

— the t prediction interval for a new observation (e.g. Hahn & Meeker 1991, *Statistical
Intervals*, §4.6). ``s²`` already holds the within-run part for the baseline's repeat count
``r``; when the candidate has ``m`` repeats, the within-run term is corrected by
``σ_w² (c(m)/m − c(r)/r)``, where ``c(n)`` is the variance of a median of ``n`` normal values
relative to a mean's. ``s²`` is moderated across metrics (:mod:`.moderation`).

Two bases. *Plain*: the values as measured. *Beyond the run factor*: each baseline run's
factor (the median over metrics of how far the run lies from each metric's centre) is taken
out of its values, and so is the candidate's. The candidate's factor is estimated from its
metrics with the baseline's run-to-run spread of factors as a prior and a contaminated-normal
likelihood (a metric moved by the code is an outlier to the factor, not evidence for it). So a
change that moves half the kernels does not drag the factor along (the other half and the
prior hold it; and when noise makes the moved half the larger cluster, the mode at the
baseline's usual factor still wins while a quarter of the metrics sit there), while a shift
of everything — a faster or slower machine — is absorbed by it.

References: Hahn & Meeker (1991), *Statistical Intervals*, Wiley; Huber (1964), "Robust
estimation of a location parameter", *Ann. Math. Statist.* 35:73 (contaminated normal);
Dempster, Laird & Rubin (1977), *JRSS-B* 39:1 (the EM iteration for the factor).
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from perfci.analysis.moderation import squeeze_variances
from perfci.analysis.stats import norm_ppf

FloatArray = NDArray[np.float64]

#: Fewest metrics for estimating a run factor: a median of a few values is noisy itself and one
#: real change could move it.
MIN_METRICS_FOR_FACTOR = 20
#: The most candidate repeats ever suggested; beyond, more repeats will not settle it.
MAX_REPEATS = 200
#: Share of metrics the factor's likelihood allows to have moved for other reasons.
_CONTAMINATION = 0.5
#: Log-scale range of a moved metric under the contamination (uniform over ±log 3).
_MOVED_DENSITY = 1.0 / (2.0 * math.log(3.0))
#: Share of the metrics that, sitting where the baseline's usual factors put them, makes the
#: factor stay there: a machine-wide shift leaves fewer than this behind.
MIN_SUPPORT_AT_USUAL = 0.25
#: Floor of the prior's spread (log scale): factors are never known better than 0.1 %.
_MIN_FACTOR_SD = 1e-3


@dataclass(frozen=True, slots=True)
class Basis:
    """Per-metric estimate of ``log(candidate / baseline)``: value, standard error, dof."""

    estimate: FloatArray
    se: FloatArray
    dof: FloatArray
    centre: FloatArray  # the baseline's mean log value
    var_run: FloatArray  # moderated run-level variance (the repeats_needed plan uses it)


@dataclass(frozen=True, slots=True)
class RunFactor:
    """The candidate's machine-wide factor against the baseline runs' factors (logs)."""

    candidate: float
    candidate_se: float
    baseline_mean: float
    baseline_sd: float
    runs: int


def median_variance_factor(n: FloatArray) -> FloatArray:
    """``c(n)``: Var(run value of n normal repeats) / (σ²/n) for :func:`.runs.summarise`.

    Mean for n ≤ 2, median for 3–4, the mean without the extremes from 5 on (values from a
    simulation of 4·10⁵ runs each; the trimmed mean's factor tends to 1).
    """
    n = np.asarray(n, dtype=np.float64)
    exact = {3: 1.352, 4: 1.193, 5: 1.131, 6: 1.108, 7: 1.080, 8: 1.067, 9: 1.058, 10: 1.051}
    out = np.where(n <= 2, 1.0, 1.0 + 0.5 / np.maximum(n, 1))
    for size, value in exact.items():
        out = np.where(n == size, value, out)
    return out


def prediction(
    base: FloatArray,
    cand: FloatArray,
    within_var: FloatArray,
    base_repeats: FloatArray,
    cand_repeats: FloatArray,
    *,
    moderate: bool,
    own: NDArray[np.bool_] | None = None,
) -> Basis:
    """The t prediction estimate of each row's candidate against its baseline runs (logs).

    ``base`` is metrics × runs (NaN where absent); rows need at least two runs. ``own``
    marks rows that take no part in the moderation's prior and keep their own variance when
    it lies far below it (:func:`.moderation.squeeze_variances`, ``apart``): a step is the
    sum of hundreds of parts and far quieter than any of them, so shrunk towards their
    variance its interval would be several times too wide.
    """
    runs = np.sum(np.isfinite(base), axis=1).astype(np.float64)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        centre = np.nanmean(base, axis=1)
        s2 = np.nanvar(base, axis=1, ddof=1)
        r = np.nanmedian(np.where(base_repeats > 0, base_repeats, np.nan), axis=1)
    dof = np.maximum(runs - 1, 0)
    if moderate:
        s2, dof = squeeze_variances(s2, dof, apart=own)
    r = np.where(np.isfinite(r), r, cand_repeats)
    m = np.maximum(cand_repeats, 1)
    within_now = within_var * median_variance_factor(m) / m
    within_then = within_var * median_variance_factor(r) / np.maximum(r, 1)
    with np.errstate(divide="ignore", invalid="ignore"):
        var = s2 * (1 + 1 / runs) + within_now - within_then
        floor = s2 / runs + within_now
    se = np.sqrt(np.maximum(var, floor))
    return Basis(estimate=cand - centre, se=se, dof=dof, centre=centre, var_run=s2)


def estimate_run_factor(
    deviation: FloatArray, noise_sd: FloatArray, factors: FloatArray
) -> RunFactor | None:
    """The candidate's factor from its metrics' deviations, anchored by the baseline runs'.

    ``deviation[i]`` is how far metric ``i`` of the candidate lies from its baseline centre
    beyond the baseline's own factors (log); ``noise_sd[i]`` its noise when nothing but the
    factor moved. The prior is a normal fitted to the baseline runs' ``factors``
    (:func:`factor_with_prior`).
    """
    if len(factors) < 3:
        return None
    prior_mean = float(np.mean(factors))
    prior_sd = max(float(np.std(factors, ddof=1)), _MIN_FACTOR_SD)
    found = factor_with_prior(deviation, noise_sd, prior_mean, prior_sd)
    if found is None:
        return None
    value, se, _support = found
    return RunFactor(
        candidate=value,
        candidate_se=se,
        baseline_mean=prior_mean,
        baseline_sd=prior_sd,
        runs=len(factors),
    )


def factor_with_prior(
    deviation: FloatArray, noise_sd: FloatArray, prior_mean: float, prior_sd: float
) -> tuple[float, float, float] | None:
    """The machine-wide factor shared by the metrics' deviations, its standard error, and the
    share of the metrics that move with it (their mean posterior weight as inliers).

    Maximises the posterior of a contaminated-normal likelihood under a normal prior
    ``N(prior_mean, prior_sd²)`` (the usual factor): a grid search for the mode, then EM, and
    the mode at the usual factor kept while :data:`MIN_SUPPORT_AT_USUAL` of the metrics sit
    there. ``None`` with fewer than :data:`MIN_METRICS_FOR_FACTOR` usable metrics.
    """
    ok = np.isfinite(deviation) & np.isfinite(noise_sd) & (noise_sd > 0)
    if ok.sum() < MIN_METRICS_FOR_FACTOR:
        return None
    d, s = deviation[ok], noise_sd[ok]
    prior_sd = max(prior_sd, _MIN_FACTOR_SD)
    grid = np.unique(np.concatenate([np.quantile(d, np.linspace(0, 1, 201)), [prior_mean]]))
    best = grid[int(np.argmax(_log_posterior(grid, d, s, prior_mean, prior_sd)))]
    value = _em(float(best), d, s, prior_mean, prior_sd)
    # A machine-wide shift moves every time metric. When the best mode lies away from the
    # usual factor while a good part of the metrics still sit where it puts them, the others
    # moved for the code's own reasons: half the kernels +10 % is a change, not a machine
    # 10 % slower, even when noise makes that half the larger cluster.
    usual = _em(prior_mean, d, s, prior_mean, prior_sd)
    if (
        abs(usual - value) > 1e-6
        and float(np.mean(_inlier_weights(usual, d, s))) >= MIN_SUPPORT_AT_USUAL
    ):
        value = usual
    weights = _inlier_weights(value, d, s)
    precision = float(np.sum(weights / s**2)) + 1 / prior_sd**2
    return value, 1 / math.sqrt(precision), float(np.mean(weights))


def _em(start: float, d: FloatArray, s: FloatArray, prior_mean: float, prior_sd: float) -> float:
    """The posterior mode reached from ``start`` by EM (the mode of that basin)."""
    value = start
    for _ in range(50):
        weights = _inlier_weights(value, d, s)
        precision = float(np.sum(weights / s**2)) + 1 / prior_sd**2
        updated = (float(np.sum(weights * d / s**2)) + prior_mean / prior_sd**2) / precision
        if abs(updated - value) < 1e-9:
            return updated
        value = updated
    return value


def _normal_part(f: FloatArray, d: FloatArray, s: FloatArray) -> FloatArray:
    z = (d[None, :] - f[:, None]) / s[None, :]
    return (1 - _CONTAMINATION) * np.exp(-0.5 * z**2) / (s[None, :] * math.sqrt(2 * math.pi))


def _log_posterior(
    grid: FloatArray, d: FloatArray, s: FloatArray, prior_mean: float, prior_sd: float
) -> FloatArray:
    likelihood = np.log(_normal_part(grid, d, s) + _CONTAMINATION * _MOVED_DENSITY).sum(axis=1)
    return np.asarray(likelihood - 0.5 * ((grid - prior_mean) / prior_sd) ** 2, dtype=np.float64)


def _inlier_weights(value: float, d: FloatArray, s: FloatArray) -> FloatArray:
    """Posterior probability that each metric moved with the factor only (the E step)."""
    normal = _normal_part(np.array([value]), d, s)[0]
    return np.asarray(normal / (normal + _CONTAMINATION * _MOVED_DENSITY), dtype=np.float64)


def repeats_needed(
    estimate: FloatArray,
    var_run: FloatArray,
    within_var: FloatArray,
    base_repeats: FloatArray,
    runs: FloatArray,
    *,
    delta: float,
    confidence: float,
) -> list[int | None]:
    """Candidate repeats that would make each interval narrow enough to settle its verdict.

    The target half-width is the distance from the estimate to the margin ``log(1 + δ)``, at
    least half the margin. More repeats shrink only the within-run part; ``None`` where the
    run-to-run part alone is already wider (more baseline runs, or ``--ab``, are needed) or
    more than :data:`MAX_REPEATS` would be.
    """
    margin = math.log1p(delta)
    width = np.maximum(np.abs(np.abs(estimate) - margin), margin / 2)
    z = norm_ppf(0.5 + confidence / 2)
    c = 1.13
    with np.errstate(divide="ignore", invalid="ignore"):
        room = (width / z) ** 2 - var_run * (1 + 1 / runs) + within_var * c / base_repeats
        needed = np.ceil(within_var * c / room)
    out: list[int | None] = []
    for value, space in zip(needed.tolist(), room.tolist(), strict=True):
        if (
            not math.isfinite(space)
            or space <= 0
            or not math.isfinite(value)
            or value > MAX_REPEATS
        ):
            out.append(None)
        else:
            out.append(max(int(value), 1))
    return out
