"""Variances moderated across metrics: limma's empirical Bayes, for short baselines.

A baseline of five runs gives each metric a variance with four degrees of freedom, and a
t interval with four degrees of freedom is very wide at the small per-metric levels a
comparison of hundreds of metrics needs. Metrics of one benchmark have related noise, so
each metric's variance is shrunk towards a common prior fitted to all of them, and gains
the prior's degrees of freedom. Metrics whose variances truly differ keep more of their own
(the fitted prior degrees of freedom are small then). The moderated t statistic follows a t
distribution with ``d0 + d`` degrees of freedom under the null hypothesis.

Reference
---------
Smyth, G. K. (2004). "Linear models and empirical Bayes methods for assessing differential
expression in microarray experiments." *Statistical Applications in Genetics and Molecular
Biology* 3(1), Article 3 (doi:10.2202/1544-6115.1027), section 6: the prior is fitted by
moments of ``log s²`` (limma's ``fitFDist``), with ``trigammaInverse`` by Newton's method.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
from numpy.typing import NDArray
from scipy import special

FloatArray = NDArray[np.float64]

#: Fewer usable variances than this give no prior: a two-moment fit on a handful of metrics
#: would be noise itself.
MIN_METRICS = 5
#: Prior degrees of freedom stand for "the variances are all alike"; a finite cap keeps
#: the arithmetic finite (t with 10⁶ degrees of freedom is the normal distribution).
MAX_PRIOR_DOF = 1e6
#: A variance this far above the prior (upper tail of ``F(d, d0)``) is a metric unlike the
#: others — two modes (an autotuner's choice), a jumpy wait — and keeps its own.
HYPERVARIABLE_LEVEL = 0.001


def squeeze_variances(
    s2: FloatArray, dof: FloatArray, *, apart: NDArray[np.bool_] | None = None
) -> tuple[FloatArray, FloatArray]:
    """Posterior variances and their degrees of freedom (limma's ``squeezeVar``).

    Parameters
    ----------
    s2
        Sample variances, one per metric (any scale; here of log values).
    dof
        Their degrees of freedom (one per metric, or a scalar). Rows with ``dof <= 0`` or a
        non-finite variance are passed through unchanged and take no part in the fit.

    Returns
    -------
    (s2_post, dof_post)
        ``(d0·s0² + d·s²) / (d0 + d)`` and ``d0 + d``. Without enough usable variances
        (:data:`MIN_METRICS`), the inputs unchanged. A metric whose variance lies beyond the
        prior's upper :data:`HYPERVARIABLE_LEVEL` point (``s²/s0² ~ F(d, d0)``) keeps its
        own variance and degrees of freedom: shrunk towards the others, a kernel that is
        8 % slower in one run of six would read as changed whenever this run is one of them.
        (A simplified form of limma's robust hyperparameter estimation: Phipson et al. 2016.)
    apart
        Rows that take no part in fitting the prior (a step: the sum of the others, not one
        more of them). They are moderated towards it unless their variance lies beyond its
        *lower* :data:`HYPERVARIABLE_LEVEL` point too: a step of hundreds of kernels is far
        quieter than any of them, and thirty runs show it; four runs cannot, and then the
        others' variance is the better guess.
    """
    s2 = np.asarray(s2, dtype=np.float64)
    dof = np.broadcast_to(np.asarray(dof, dtype=np.float64), s2.shape).copy()
    usable = np.isfinite(s2) & (s2 > 0) & (dof > 0)
    if apart is not None:
        usable &= ~apart
    if usable.sum() < MIN_METRICS:
        return s2.copy(), dof
    d0, s0 = fit_prior(s2[usable], dof[usable])
    moderated = np.isfinite(s2) & (dof > 0)
    if d0 < MAX_PRIOR_DOF:
        limit = by_value(lambda d: special.fdtri(d, d0, 1.0 - HYPERVARIABLE_LEVEL), dof)
        low = by_value(lambda d: special.fdtri(d, d0, HYPERVARIABLE_LEVEL), dof)
    else:  # F(d, ∞) is χ²(d)/d
        limit = by_value(lambda d: special.chdtri(d, HYPERVARIABLE_LEVEL), dof)
        limit = limit / np.maximum(dof, 1e-9)
        low = by_value(lambda d: special.chdtri(d, 1.0 - HYPERVARIABLE_LEVEL), dof)
        low = low / np.maximum(dof, 1e-9)
    with np.errstate(invalid="ignore"):
        moderated &= ~(s2 > s0 * limit)
        if apart is not None:
            moderated &= ~(apart & (s2 < s0 * low))
    post = s2.copy()
    post_dof = dof.copy()
    post[moderated] = (d0 * s0 + dof[moderated] * s2[moderated]) / (d0 + dof[moderated])
    post_dof[moderated] = d0 + dof[moderated]
    return post, post_dof


def by_value(function: Callable[[FloatArray], FloatArray], x: FloatArray) -> FloatArray:
    """``function(x)`` for an element-wise ``function``, computed once per distinct value.

    The degrees of freedom of 10,000 metrics take a handful of values (issue 35: special
    functions were a large share of a comparison); the results are the same numbers.
    """
    x = np.asarray(x, dtype=np.float64)
    if x.size < 64:
        return np.asarray(function(x), dtype=np.float64)
    first = x.flat[0]
    if (x == first).all():  # one value (a baseline whose metrics all have every run): no sort
        return np.full(x.shape, np.asarray(function(x.reshape(-1)[:1]), dtype=np.float64)[0])
    values, inverse = np.unique(x, return_inverse=True)
    return np.asarray(function(values), dtype=np.float64)[inverse.reshape(-1)].reshape(x.shape)


def fit_prior(s2: FloatArray, dof: FloatArray) -> tuple[float, float]:
    """The scaled inverse-χ² prior ``(d0, s0²)`` of positive variances, by moments of logs.

    ``log s²`` has mean ``log σ² + ψ(d/2) − log(d/2)`` and variance ``ψ'(d/2)`` per metric;
    the excess variance over the sampling part is ``ψ'(d0/2)``, solved for ``d0``. No
    excess (variances no more spread than sampling alone explains) gives ``d0`` at its cap.
    """
    half = dof / 2.0
    e = np.log(s2) - by_value(special.digamma, half) + np.log(half)
    e_mean = float(e.mean())
    n = len(e)
    trigamma = by_value(_trigamma, half)
    excess = float(((e - e_mean) ** 2).sum() / (n - 1) - trigamma.mean())
    if excess <= 0:
        return MAX_PRIOR_DOF, float(np.exp(e_mean))
    d0 = min(2.0 * trigamma_inverse(excess), MAX_PRIOR_DOF)
    s0 = float(np.exp(e_mean + special.digamma(d0 / 2.0) - np.log(d0 / 2.0)))
    return d0, s0


def trigamma_inverse(y: float) -> float:
    """``x`` with ``ψ'(x) = y``: Newton's method on ``1/ψ'`` as in limma (Smyth 2004, §6)."""
    if y > 1e7:
        return 1.0 / math.sqrt(y)
    if y < 1e-6:
        return 1.0 / y
    x = 0.5 + 1.0 / y
    for _ in range(50):
        tri = float(_trigamma(x))
        step = tri * (1.0 - tri / y) / float(_tetragamma(x))
        x += step
        if -step / x < 1e-8:
            break
    return x


# ψ'(x) = ζ(2, x) and ψ''(x) = −2 ζ(3, x): the very numbers of ``special.polygamma`` (which
# computes ``(−1)ⁿ⁺¹ n! ζ(n + 1, x)``, the factor exact), without its Python wrapper and its
# needless digamma, which cost six times the function on a scalar (issue 35).
def _trigamma(x: FloatArray | float) -> FloatArray:
    return np.asarray(special.zeta(2.0, x), dtype=np.float64)


def _tetragamma(x: FloatArray | float) -> FloatArray:
    return np.asarray(-2.0 * special.zeta(3.0, x), dtype=np.float64)
