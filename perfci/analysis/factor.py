"""The machine-wide factor: how much faster or slower everything ran, one number per run.

GPU clocks, thermals, a busy neighbour or another card of the same model move *every* time
metric of a run (or of a process) together. Both ways of comparing a run estimate that shared
factor from the metrics, take it out of each metric's change, and judge it as its own line:

- history mode (:func:`.compare.compare_run`): the candidate run's factor against the factors
  of the baseline runs (:func:`estimate_run_factor`; the prior is their mean and spread);
- same-runner A/B (:func:`.paired.compare_paired`): the pull request's side's factor against
  the base side's, with the prior at no shift and the spread the processes' factors imply.

Both end in one :class:`MachineFactor`, judged as one line (:meth:`MachineFactor.to_estimate`)
and explained by one notes writer (:func:`factor_notes`). Their wording differs where the
meaning does: in history mode a machine that moved and a change that slowed everything look
the same from one run; in A/B mode both sides ran on this runner, alternately, so a factor
that moved is the code's doing.

Two related objects stay elsewhere, because they hold different things:

- :class:`.noise.ColumnFactors` (the plain two-sample :func:`.compare.compare`) holds one
  factor per *column* on both sides, arrays with leading batch axes (the detection benchmark
  estimates thousands of comparisons in one call); it is tested by the two-sample test itself,
  column against column, and has no standard error or prior to carry.
- :class:`.paired_stats.ProcessFactors` holds what the A/B mode learns besides the factor between
  the sides: each metric's noise once every process's own factor is out, which its estimates
  need even when the metrics do not move together (and there is no :class:`MachineFactor`).

The factor's estimate maximises the posterior of a contaminated-normal likelihood (a metric
moved by the code is an outlier to the factor, not evidence for it) under a normal prior (the
usual factor). So a change that moves half the kernels does not drag the factor along (the
other half and the prior hold it; and when noise makes the moved half the larger cluster, the
mode at the baseline's usual factor still wins while a quarter of the metrics sit there),
while a shift of everything — a faster or slower machine — is absorbed by it.

References: Huber (1964), "Robust estimation of a location parameter", *Ann. Math. Statist.*
35:73 (contaminated normal); Dempster, Laird & Rubin (1977), *JRSS-B* 39:1 (the EM iteration).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from perfci.analysis.estimate import MetricEstimate
from perfci.core.model import MetricComparison, SeriesKey, Verdict

__all__ = [
    "MIN_METRICS_FOR_FACTOR",
    "MIN_SUPPORT_AT_USUAL",
    "SHARED_FACTOR_KEY",
    "MachineFactor",
    "estimate_run_factor",
    "factor_notes",
    "factor_with_prior",
]

FloatArray = NDArray[np.float64]

#: The key of the factor's line (:attr:`.RunComparison.shared_factor`), in every mode.
SHARED_FACTOR_KEY = "shared:run-factor"
#: Fewest metrics for estimating a factor: a median of a few values is noisy itself (its error
#: would be added to every metric) and one real change could move it.
MIN_METRICS_FOR_FACTOR = 20
#: Share of metrics the factor's likelihood allows to have moved for other reasons.
_CONTAMINATION = 0.5
#: Log-scale range of a moved metric under the contamination (uniform over ±log 3).
_MOVED_DENSITY = 1.0 / (2.0 * math.log(3.0))
#: Share of the metrics that, sitting where the baseline's usual factors put them, makes the
#: factor stay there: a machine-wide shift leaves fewer than this behind.
MIN_SUPPORT_AT_USUAL = 0.25
#: Floor of the prior's spread (log scale): factors are never known better than 0.1 %.
_MIN_FACTOR_SD = 1e-3
#: The smallest level (history) or spread (A/B) worth a note when the factor did not move.
_NOTED = 0.005


@dataclass(frozen=True, slots=True)
class MachineFactor:
    """The candidate side's machine-wide factor against the baseline side's usual one (logs).

    ``candidate`` is the candidate's factor estimated from its metrics, ``se`` its standard
    error; ``usual`` the baseline's usual factor (the mean of its runs' factors; 0 in A/B
    mode, where each side's processes are centred); ``usual_var`` the variance of
    ``candidate − usual`` when nothing changed (the baseline's run-to-run spread for one new
    run; the processes' spread over the pairs in A/B). ``spread`` is the standard deviation of
    one run's (process's) factor. ``runs`` and ``candidate_runs`` count what each side's factor
    comes from (baseline runs and one run; pairs on both sides). ``series`` stands in for the
    line's series (a time metric of the run: the judge reads only its direction). ``paired``:
    from same-runner A/B pairs, which changes what the factor means (:func:`factor_notes`).
    """

    candidate: float
    se: float
    usual: float
    usual_var: float
    spread: float
    runs: int
    candidate_runs: int
    series: SeriesKey
    paired: bool = False

    @property
    def change(self) -> float:
        """``log`` of how much slower (> 0) the candidate's machine ran than usual."""
        return self.candidate - self.usual

    def to_estimate(self) -> MetricEstimate:
        """The factor as a line for :func:`.judge.judge_estimates` (``factor=``)."""
        change = self.change
        return MetricEstimate(
            series=self.series,
            baseline=1.0,
            candidate=math.exp(change),
            log_change=change,
            se=math.sqrt(self.usual_var + self.se**2),
            dof=float(self.runs - 1),
            n_baseline=self.runs,
            n_candidate=self.candidate_runs,
        )


def factor_notes(line: MetricComparison | None, factor: MachineFactor | None) -> list[str]:
    """What the judged factor ``line`` says, in words a reader can act on.

    When it moved, both modes say so; what it means differs. When it did not, history mode
    notes a level of at least 0.5 % (quoting the line's interval), A/B mode a spread between
    processes of at least 0.5 % (the operators and kernels are judged beyond it).
    """
    if line is None or factor is None or line.change is None:
        return []
    change = line.change
    if factor.paired:
        spread = factor.spread
        moved = (
            "Every metric of the pull request's side moved together: {size:.1%} {way} than "
            "the base side, more than this runner's speed varied between processes "
            "(±{spread:.1%}). Both sides ran here, alternately, so that is the code's doing: "
            "each metric is judged on its own numbers."
        )
        level = (
            "This runner's speed varied by ±{spread:.1%} from one process to the next, in "
            "every metric at once; operators and kernels are judged beyond that "
            '(column "Beyond run factor"), the step on its own numbers.'
        )
        noted = spread
    else:
        spread = (line.ci_high or 0.0) - change
        moved = (
            "Every metric of this run moved together: {size:.1%} {way} than the baseline "
            "runs, beyond their usual spread (±{spread:.1%}). From one run on a shared "
            "runner, a machine-wide shift (load, throttling, another card) and a change that "
            "slows everything look the same: re-run it, or compare on one runner with "
            "`perfci check --ab`. A metric is called changed here only where its own numbers "
            "moved too."
        )
        level = (
            "This run's machine-wide level was {change:+.1%} against the baseline runs "
            "(within their usual ±{spread:.1%}); each metric is judged beyond it "
            '(column "Beyond run factor").'
        )
        noted = abs(change)
    if line.verdict in (Verdict.REGRESSION, Verdict.IMPROVEMENT):
        way = "slower" if change > 0 else "faster"
        return [moved.format(size=abs(change), way=way, spread=spread)]
    if noted >= _NOTED:
        return [level.format(change=change, spread=spread)]
    return []


def estimate_run_factor(
    deviation: FloatArray, noise_sd: FloatArray, factors: FloatArray, series: SeriesKey
) -> MachineFactor | None:
    """The candidate's factor from its metrics' deviations, anchored by the baseline runs'.

    ``deviation[i]`` is how far metric ``i`` of the candidate lies from its baseline centre
    beyond the baseline's own factors (log); ``noise_sd[i]`` its noise when nothing but the
    factor moved. The prior is a normal fitted to the baseline runs' ``factors``
    (:func:`factor_with_prior`). ``series`` stands in for the line's (a time metric).
    """
    if len(factors) < 3:
        return None
    prior_mean = float(np.mean(factors))
    prior_sd = max(float(np.std(factors, ddof=1)), _MIN_FACTOR_SD)
    found = factor_with_prior(deviation, noise_sd, prior_mean, prior_sd)
    if found is None:
        return None
    value, se, _support = found
    runs = len(factors)
    return MachineFactor(
        candidate=value,
        se=se,
        usual=prior_mean,
        usual_var=prior_sd**2 * (1 + 1 / runs),
        spread=prior_sd,
        runs=runs,
        candidate_runs=1,
        series=series,
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
