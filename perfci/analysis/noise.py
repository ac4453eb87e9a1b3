"""Noise of the plain two-sample comparison: its column factors, and the repeats it needs.

GPU clocks, thermals and a busy neighbour slow *every* kernel of one repeat together. Seen per
metric that is noise; seen across hundreds of metrics it is one number per repeat that can be
estimated robustly (a median over metrics) and removed, which shrinks each metric's variance
without moving its level. (The run comparisons estimate their factor otherwise, as a
:class:`.factor.MachineFactor`; :mod:`.factor` says why these are another type.)

References
----------
- The per-repeat factor is the column effect of a two-way (metric × repeat) layout fitted by
  medians: Tukey (1977), *Exploratory Data Analysis*, ch. 11 ("median polish"), one sweep.
- Sample size for a two-sample mean difference: e.g. Chow, Shao & Wang (2008),
  *Sample Size Calculations in Clinical Research*, §3.2.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from perfci.analysis.factor import MIN_METRICS_FOR_FACTOR
from perfci.analysis.stats import norm_ppf

FloatArray = NDArray[np.float64]

#: The most repeats :func:`repeats_needed` will suggest before saying "more runs will not do".
MAX_REPEATS = 200


@dataclass(frozen=True, slots=True)
class ColumnFactors:
    """Per-column log factors shared by all metrics, estimated by medians over metrics.

    ``baseline`` holds one log factor per baseline run, ``candidate`` one per candidate repeat,
    both relative to the baseline medians of each metric (so ``exp(candidate) − 1`` is how much
    slower everything was in that repeat). ``metrics`` counts the metrics used.
    """

    baseline: FloatArray
    candidate: FloatArray
    metrics: int


def estimate_shared_factor(base_log: FloatArray, cand_log: FloatArray) -> ColumnFactors | None:
    """Estimate the shared factor of aligned log samples (rows = metrics, columns = runs/repeats).

    Leading axes are independent comparisons (``(..., metrics, columns)``), so the detection
    benchmark can estimate thousands of comparisons in one call.

    Each metric is centred on its own baseline median; the factor of a column is the median of
    that column over metrics. The median is robust to a minority of metrics that truly changed.
    Returns ``None`` with fewer than :data:`MIN_METRICS_FOR_FACTOR` metrics.
    """
    if base_log.shape[-2] < MIN_METRICS_FOR_FACTOR:
        return None
    centre = np.median(base_log, axis=-1, keepdims=True)
    baseline = np.median(base_log - centre, axis=-2)
    candidate = np.median(cand_log - centre, axis=-2)
    return ColumnFactors(baseline=baseline, candidate=candidate, metrics=base_log.shape[-2])


def remove_shared_factor(
    base_log: FloatArray, cand_log: FloatArray, factor: ColumnFactors
) -> tuple[FloatArray, FloatArray]:
    """Divide every metric by its column's factor (subtract, on logs).

    The whole factor goes, level included: what remains of each metric is what it did beyond
    what every metric did together. Why not keep the level: the candidate's mean factor is a
    single draw shared by all metrics, so leaving it in while removing the spread makes every
    metric's test too confident at once (the benchmark measured 3.4 false alarms per
    500-metric comparison that way). The common shift is tested separately as its own line.
    """
    return base_log - factor.baseline[..., None, :], cand_log - factor.candidate[..., None, :]


def repeats_needed(
    sd: FloatArray, n_baseline: int, estimate: FloatArray, *, delta: float, confidence: float
) -> NDArray[np.int64]:
    """Candidate repeats for a confidence interval narrow enough to settle a verdict.

    The target half-width (log scale) is the distance from the estimate to the margin
    ``log(1 + δ)``, at least half the margin: then the interval lies either inside ±δ
    (unchanged) or beyond it (a change). Solves ``z · sd · √(1/n + 1/m) ≤ w`` for ``m`` with
    the normal quantile, so it is a planning figure, not a guarantee. Returns −1 where more
    candidate repeats cannot reach the target because the baseline's own uncertainty
    (``z · sd / √n``) is already wider: more baseline runs are needed instead.
    """
    margin = math.log1p(delta)
    width = np.maximum(np.abs(np.abs(estimate) - margin), margin / 2)
    z = norm_ppf(0.5 + confidence / 2)
    with np.errstate(all="ignore"):
        inverse_m = (width / (z * sd)) ** 2 - 1.0 / n_baseline
        needed = np.ceil(1.0 / inverse_m)
    needed = np.where(sd == 0, 1, needed)
    unreachable = (inverse_m <= 0) | ~np.isfinite(needed) | (needed > MAX_REPEATS)
    needed = np.where(unreachable & (sd != 0), -1, needed)
    return np.asarray(np.maximum(needed, np.where(needed < 0, -1, 1)), dtype=np.int64)
