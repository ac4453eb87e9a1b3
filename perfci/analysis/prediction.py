"""How far a new run lies from the baseline runs: prediction intervals and repeats needed.

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
out of its values, and so is the candidate's, estimated by :func:`.factor.estimate_run_factor`.

References: Hahn & Meeker (1991), *Statistical Intervals*, Wiley.
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

#: The most candidate repeats ever suggested; beyond, more repeats will not settle it.
MAX_REPEATS = 200


@dataclass(frozen=True, slots=True)
class Basis:
    """Per-metric estimate of ``log(candidate / baseline)``: value, standard error, dof."""

    estimate: FloatArray
    se: FloatArray
    dof: FloatArray
    centre: FloatArray  # the baseline's mean log value
    var_run: FloatArray  # moderated run-level variance (the repeats_needed plan uses it)


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
