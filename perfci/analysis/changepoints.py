"""Change points in a benchmark's main-branch history: where its level moved, and by how much.

:func:`detect_change_points` takes the values of one series in commit order (e.g. the median step
time of each main-branch run) and returns the points where a new level begins. Pure: numpy/scipy,
no I/O, no randomness (the same input always gives the same answer).

Method (chosen by ``benchmarks/changepoints.py``, explained in ``docs/changepoints.md``):

1. Natural logs of the values when all are positive, so that changes are ratios and the
   multiplicative noise of timings becomes additive and roughly symmetric.
2. The noise scale σ from the median absolute first difference (robust to level shifts and
   outliers), and values clipped to ``±2σ`` around a running median of seven points (which
   keeps steps sharp), so one or two slow runs can neither create nor hide a change; a burst
   shorter than four points mid-series counts as outliers, not as a level.
3. Candidate segmentation: the optimal piecewise-constant fit under a penalty of
   ``penalty · log n`` per change (PELT; Killick, Fearnhead & Eckley 2012) on the cleaned,
   σ-scaled values. It is exact (no masking of short segments, unlike binary segmentation)
   and takes near-linear time.
4. Significance: each candidate is tested by a pooled two-sample t-test of the cleaned values
   of the two segments it separates (variance floored at σ², so two short, quiet segments
   cannot look significant by chance), and the p-value is corrected for having searched the
   split with the tail of the maximum of a standardised Brownian bridge (Siegmund 1986;
   James, James & Siegmund 1987). As in Otava's merge step (Fleming et al. 2023), the weakest
   candidate (largest p-value, else smallest relative change) is removed while it fails
   ``significance`` or ``min_magnitude`` or exceeds ``max_change_points``, and its
   neighbours are re-tested against their new, longer segments.

Levels are medians of the raw values of each segment; ``change = after / before − 1``.

References
----------
- Killick, Fearnhead & Eckley (2012), "Optimal detection of changepoints with a linear
  computational cost", *JASA* 107, 1590–1598, doi:10.1080/01621459.2012.737745.
- Matteson & James (2014), "A nonparametric approach for multiple change point analysis of
  multivariate data", *JASA* 109, 334–345, doi:10.1080/01621459.2013.849605 (e-divisive).
- Daly et al. (2020), "Creating a Virtuous Cycle in Performance Testing at MongoDB", *ICPE '20*,
  doi:10.1145/3358960.3375791.
- Fleming et al. (2023), "Hunter: Using Change Point Detection to Hunt for Performance
  Regressions", *ICPE '23*, doi:10.1145/3578244.3583719 (Apache Otava's split/merge method).
- Siegmund (1986), "Boundary crossing probabilities and statistical applications", *Ann.
  Statist.* 14, 361–404; James, James & Siegmund (1987), "Tests for a change-point",
  *Biometrika* 74, 71–83 (tail of the maximal standardised mean difference).
- Rousseeuw & Croux (1993), *JASA* 88, 1273–1283 (MAD as a robust scale).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray
from scipy import special

from perfci.analysis.stats import MAD_TO_SD, validate_sample

__all__ = ["ChangePoint", "ChangePointOptions", "detect_change_points", "segment_levels"]

FloatArray = NDArray[np.float64]

#: Outliers are clipped at this many σ from the running median.
_CLIP_SIGMAS = 2.0
#: Points in the running median: a level must last ≥ 4 points (half of it plus one) to be
#: kept whole; shorter bursts are treated as outliers (slow runs come in pairs too).
_MEDIAN_WINDOW = 7


@dataclass(frozen=True, slots=True)
class ChangePointOptions:
    """Thresholds of :func:`detect_change_points`.

    Attributes
    ----------
    significance
        Largest two-sided p-value of the t-test between the segments a change point
        separates. 0.001 like Apache Otava's default: a weekly report over hundreds of series
        must not cry wolf.
    min_magnitude
        Smallest relative change (``|after / before − 1|``) worth reporting; 0 keeps every
        significant change.
    min_segment
        Fewest points in a segment; 2 is the least that has a variance. The outlier clipping
        sets the practical limit: a new level is found from 3 runs at the end of the
        history and from 4 in the middle (shorter bursts count as slow runs).
    max_change_points
        Keep at most this many (the most significant); ``None`` for no limit.
    penalty
        Cost of one change in the candidate search, in units of ``log n`` (σ-scaled squared
        error). Larger finds fewer candidates; the t-test decides in the end. 3 gave the best
        synthetic F1 among 1–5 (``docs/changepoints.md``).
    log_values
        Work on natural logs when all values are positive (timings: multiplicative noise).
    """

    significance: float = 0.001
    min_magnitude: float = 0.0
    min_segment: int = 2
    max_change_points: int | None = None
    penalty: float = 3.0
    log_values: bool = True

    def __post_init__(self) -> None:
        if not 0.0 < self.significance < 1.0:
            raise ValueError(f"significance must be in (0, 1), got {self.significance}")
        if self.min_magnitude < 0.0:
            raise ValueError(f"min_magnitude must be ≥ 0, got {self.min_magnitude}")
        if self.min_segment < 2:
            raise ValueError(f"min_segment must be ≥ 2, got {self.min_segment}")
        if self.max_change_points is not None and self.max_change_points < 0:
            raise ValueError(f"max_change_points must be ≥ 0, got {self.max_change_points}")
        if self.penalty <= 0.0:
            raise ValueError(f"penalty must be > 0, got {self.penalty}")


@dataclass(frozen=True, slots=True)
class ChangePoint:
    """One change of level.

    ``index`` is the position of the first value of the new level; ``before`` and ``after``
    are the medians of the segments on either side (up to the neighbouring change points);
    ``change = after / before − 1`` (+0.05: 5 % larger, i.e. slower for times); ``p_value``
    is the two-sided t-test p-value between those segments, corrected for the search over
    split positions (see the module docstring); values below about 1e-300 read as 0.
    """

    index: int
    before: float
    after: float
    change: float
    p_value: float


def detect_change_points(
    values: Sequence[float], *, options: ChangePointOptions | None = None
) -> list[ChangePoint]:
    """Find the points where the level of ``values`` changes.

    Parameters
    ----------
    values
        One series in commit order (oldest first), e.g. ns per step of each main-branch run.
    options
        Thresholds; :class:`ChangePointOptions` defaults when ``None``.

    Returns
    -------
    list[ChangePoint]
        Sorted by index. Empty for fewer than ``2 · min_segment`` values and for constant
        series.

    Raises
    ------
    SampleError
        A value is NaN or infinite (a ``ValueError``; the message names its position).

    Notes
    -----
    Runs in near-linear time (PELT with pruning): 10 000 points take well under a second.
    The module docstring describes the method and its references.
    """
    opts = options or ChangePointOptions()
    raw = _validate(values)
    if len(raw) < 2 * opts.min_segment or raw.min() == raw.max():
        return []
    x = np.log(raw) if opts.log_values and raw.min() > 0 else raw
    sigma = _noise_scale(x)
    clean = _clip_outliers(x, sigma)
    candidates = _pelt(
        clean / sigma, beta=opts.penalty * math.log(len(x)), min_segment=opts.min_segment
    )
    kept = _prune(candidates, clean, raw, sigma, opts)
    return _describe(kept, clean, raw, sigma, opts.min_segment)


def segment_levels(
    values: Sequence[float], change_points: Sequence[ChangePoint | int]
) -> list[float]:
    """The median of each segment between change points, one value per input point.

    Handy for plotting the fitted step function over the series.

    Parameters
    ----------
    values
        The series given to :func:`detect_change_points`.
    change_points
        Its result, or plain indices of the first point of each new segment.
    """
    raw = _validate(values)
    cuts = sorted(cp.index if isinstance(cp, ChangePoint) else int(cp) for cp in change_points)
    bounds = [0, *cuts, len(raw)]
    levels = np.empty_like(raw)
    for start, stop in itertools.pairwise(bounds):
        if stop > start:
            levels[start:stop] = np.median(raw[start:stop])
    return [float(v) for v in levels]


def _validate(values: Sequence[float]) -> FloatArray:
    return validate_sample("values", values, role="change-point series", negative_ok=True)


def _noise_scale(x: FloatArray) -> float:
    """σ of the noise from first differences: a level shift spoils one difference only.

    Falls back to the standard deviation of the differences when over half of them are zero
    (quantised timings), and to a tiny positive value for a noiseless step so that the
    search still runs (then every real step is infinitely significant, as it should be).
    """
    diffs = np.diff(x)
    sigma = MAD_TO_SD * float(np.median(np.abs(diffs - np.median(diffs)))) / math.sqrt(2.0)
    if sigma > 0:
        return sigma
    sigma = float(np.std(diffs)) / math.sqrt(2.0)
    return sigma if sigma > 0 else 1e-12 * max(float(np.abs(x).max()), 1.0)


def _running_median(x: FloatArray, window: int) -> FloatArray:
    """Centred running median, mirrored at the ends (an outlier first point is not repeated)."""
    half = window // 2
    padded = np.pad(x, half, mode="reflect")
    views = np.lib.stride_tricks.sliding_window_view(padded, window)
    return np.asarray(np.median(views, axis=-1), dtype=np.float64)


def _clip_outliers(x: FloatArray, sigma: float) -> FloatArray:
    """Winsorise points beyond ``±2σ`` of the running median (Huber-style, keeps steps).

    2σ rather than 3σ: on the benchmark's flat series with 1 % slow runs, false alarms per
    series fell from 0.013 to 0 and synthetic F1 rose from 0.940 to 0.950. The t-test's
    variance floor (σ) makes up for the narrower spread of clipped segments.
    """
    if len(x) < _MEDIAN_WINDOW:
        return x.copy()
    centre = _running_median(x, _MEDIAN_WINDOW)
    return np.clip(x, centre - _CLIP_SIGMAS * sigma, centre + _CLIP_SIGMAS * sigma)


def _pelt(z: FloatArray, *, beta: float, min_segment: int) -> list[int]:
    """Optimal partition of ``z`` for a piecewise-constant mean (PELT, Killick et al. 2012).

    Minimises the residual sum of squares plus ``beta`` per change. Cost of ``z[s:t]`` is
    ``Σz² − (Σz)² / (t − s)``; the ``Σz²`` part is the same for every partition and dropped.
    Pruning drops a start ``s`` once ``F(s) + C(s, t) > F(t)``, which is exact for this cost.
    Returns the indices where new segments start.

    On a long flat stretch no start is pruned (each stays within ``beta`` of the best), so
    the candidates grow with the stretch: 6,500 at most on a year of 50 runs a day. They are
    kept in preallocated arrays with their ``F(s)`` and ``Σz`` beside them, compacted only
    when some are pruned, so a step costs a few array operations, not gathers and a copy.
    Each step's arithmetic goes into two reused buffers (the same operations in the same
    order as the plain expression, so the same floats) and asks whether anything is to be
    pruned with one maximum before it builds the mask: a fifth less time on a year.
    """
    n = len(z)
    csum = np.concatenate([[0.0], np.cumsum(z)])
    best = np.full(n + 1, np.inf)
    best[0] = -beta
    last = np.zeros(n + 1, dtype=np.int64)
    starts = np.zeros(n + 1, dtype=np.int64)  # the candidates, in the order they came
    start_best = np.zeros(n + 1)  # F(s) of each
    start_sum = np.zeros(n + 1)  # Σz up to each
    start_at = np.zeros(n + 1)  # each as a float, for the segment lengths
    gap_buffer, length_buffer = np.empty(n + 1), np.empty(n + 1)
    start_best[0] = best[0]
    count = 1
    for t in range(min_segment, n + 1):
        # total = F(s) − (Σz of s..t)² / (t − s), for every candidate s
        gap = np.subtract(csum[t], start_sum[:count], out=gap_buffer[:count])
        np.multiply(gap, gap, out=gap)
        np.divide(gap, np.subtract(t, start_at[:count], out=length_buffer[:count]), out=gap)
        total = np.subtract(start_best[:count], gap, out=gap)
        pick = int(total.argmin())
        here = best[t] = total[pick] + beta
        last[t] = starts[pick]
        if np.maximum.reduce(total) > here:  # not .max(): its Python wrapper costs as much
            keep = total <= here
            kept = int(np.count_nonzero(keep))
            for column in (starts, start_best, start_sum, start_at):
                column[:kept] = column[:count][keep]
            count = kept
        # A new start becomes usable once a segment of min_segment fits after it.
        new = t + 1 - min_segment
        if new >= min_segment:
            starts[count], start_best[count] = new, best[new]
            start_sum[count], start_at[count] = csum[new], new
            count += 1
    cuts = []
    t = n
    while t > 0:
        t = int(last[t])
        if t > 0:
            cuts.append(t)
    return sorted(cuts)


def _segment_test(left: FloatArray, right: FloatArray, sigma: float, min_segment: int) -> float:
    """p-value of the largest t over all splits of ``left + right``, at this split's t.

    The split was chosen where the difference looks largest, so the plain t-test p-value is
    too small (about 3 % false alarms on flat 50-point series at 0.001). The pooled t
    (variance floored at the series' noise σ²) is turned into a normal score ``b`` and
    corrected with the tail of the maximum of the standardised Brownian bridge over the
    allowed split fractions [t₀, t₁] (Siegmund 1986; James, James & Siegmund 1987):
    ``P(max |Z| > b) ≈ 2(1 − Φ(b)) + b φ(b) log(t₁(1 − t₀) / (t₀(1 − t₁)))``,
    which is conservative for discrete splits.
    """
    n, m = len(left), len(right)
    total = n + m
    dof = total - 2
    ss = float(((left - left.mean()) ** 2).sum() + ((right - right.mean()) ** 2).sum())
    sd = max(math.sqrt(ss / dof), sigma)
    t = (right.mean() - left.mean()) / (sd * math.sqrt(1.0 / n + 1.0 / m))
    tail = float(special.stdtr(dof, -abs(t)))  # scipy.special: 100× cheaper than stats.t
    if tail == 0.0:  # beyond double precision: no correction can make it insignificant
        return 0.0
    b = -float(special.ndtri(tail))
    lo = min_segment / total
    span = math.log((1.0 - lo) ** 2 / lo**2) if lo < 0.5 else 0.0
    density = math.exp(-0.5 * b * b) / math.sqrt(2.0 * math.pi)
    return float(min(1.0, 2.0 * special.ndtr(-b) + b * density * span))


def _prune(
    cuts: list[int], clean: FloatArray, raw: FloatArray, sigma: float, opts: ChangePointOptions
) -> list[int]:
    """Otava-style merge: drop the weakest change point until all pass, re-testing neighbours."""
    cuts = list(cuts)
    p_values = [_p_value(cuts, i, clean, sigma, opts.min_segment) for i in range(len(cuts))]
    while cuts:
        weakest = int(np.argmax(p_values))
        if p_values[weakest] <= opts.significance:
            magnitudes = [abs(_change(raw, cuts, i)) for i in range(len(cuts))]
            weakest = int(np.argmin(magnitudes))
            too_many = opts.max_change_points is not None and len(cuts) > opts.max_change_points
            if magnitudes[weakest] >= opts.min_magnitude and not too_many:
                break
            if too_many and magnitudes[weakest] >= opts.min_magnitude:
                weakest = int(np.argmax(p_values))
        del cuts[weakest]
        del p_values[weakest]
        for i in (weakest - 1, weakest):
            if 0 <= i < len(cuts):
                p_values[i] = _p_value(cuts, i, clean, sigma, opts.min_segment)
    return cuts


def _bounds(cuts: Sequence[int], i: int, n: int) -> tuple[int, int, int]:
    start = cuts[i - 1] if i > 0 else 0
    stop = cuts[i + 1] if i + 1 < len(cuts) else n
    return start, cuts[i], stop


def _p_value(
    cuts: Sequence[int], i: int, clean: FloatArray, sigma: float, min_segment: int
) -> float:
    start, cut, stop = _bounds(cuts, i, len(clean))
    return _segment_test(clean[start:cut], clean[cut:stop], sigma, min_segment)


def _change(raw: FloatArray, cuts: Sequence[int], i: int) -> float:
    start, cut, stop = _bounds(cuts, i, len(raw))
    before, after = float(np.median(raw[start:cut])), float(np.median(raw[cut:stop]))
    return after / before - 1.0 if before != 0 else math.inf


def _describe(
    cuts: Sequence[int], clean: FloatArray, raw: FloatArray, sigma: float, min_segment: int
) -> list[ChangePoint]:
    found = []
    for i, cut in enumerate(cuts):
        start, _, stop = _bounds(cuts, i, len(raw))
        before, after = float(np.median(raw[start:cut])), float(np.median(raw[cut:stop]))
        found.append(
            ChangePoint(
                index=int(cut),
                before=before,
                after=after,
                change=_change(raw, cuts, i),
                p_value=_p_value(cuts, i, clean, sigma, min_segment),
            )
        )
    return found
