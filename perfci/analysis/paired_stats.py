"""The paired statistics of same-runner A/B: each metric's pairs, each process's speed.

:func:`paired_stats` reduces one metric's alternating pairs to the mean and variance of its
log differences; :func:`process_factors` estimates how fast each process of the runner ran
(within its own side, where the code is the same in every process) and the machine-wide
factor between the two sides. :mod:`.paired` turns both into estimates and judges them.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from perfci.analysis import stats
from perfci.analysis.engine import CompareOptions
from perfci.analysis.factor import MIN_METRICS_FOR_FACTOR, MachineFactor, factor_with_prior
from perfci.analysis.gating import gpu_run, host_timing
from perfci.analysis.stats import FloatArray
from perfci.core.model import SeriesKey

__all__ = [
    "MIN_MOVING_TOGETHER",
    "PairedStats",
    "ProcessFactors",
    "paired_stats",
    "process_factors",
]

#: Share of the time metrics that must move with the factor between the sides for it to be
#: taken out: with fewer, the metrics do not move together (half of them changed, say) and
#: which cluster is "the machine" cannot be told from one comparison.
MIN_MOVING_TOGETHER = 0.75


@dataclass(frozen=True, slots=True)
class PairedStats:
    """The paired statistics of one metric, before moderation and judging.

    ``log_base`` is the mean log of the base side over the kept pairs; ``mean`` and ``var``
    are the mean and sample variance of the log differences (``var`` is NaN with one pair).
    """

    n: int
    log_base: float
    mean: float
    var: float


def paired_stats(
    base: Sequence[float | None], pr: Sequence[float | None], *, key: str = "metric"
) -> PairedStats | None:
    """Mean and variance of ``log(pr_k) − log(base_k)`` over the complete pairs.

    Parameters
    ----------
    base, pr
        Values per pair (index ``k`` is pair ``k``); ``None`` or NaN marks a missing value.
        Lists of unequal length are compared over the shorter one.
    key
        The metric's name, for error messages.

    Returns
    -------
    PairedStats | None
        ``None`` when no pair is complete.

    Raises
    ------
    SampleError
        A present value is infinite or negative.
    """
    b = _present(base, key, role="base")
    p = _present(pr, key, role="pull-request")
    n = min(len(b), len(p))
    keep = ~np.isnan(b[:n]) & ~np.isnan(p[:n])
    count = int(keep.sum())
    if count == 0:
        return None
    # One row for both sides, so that a zero on either side gets the same offset on both.
    logs = stats.safe_log(np.concatenate([b[:n][keep], p[:n][keep]])[None, :])[0]
    log_b, log_p = logs[:count], logs[count:]
    diff = log_p - log_b
    var = float(np.var(diff, ddof=1)) if count > 1 else math.nan
    return PairedStats(n=count, log_base=float(log_b.mean()), mean=float(diff.mean()), var=var)


def _present(values: Sequence[float | None], key: str, *, role: str) -> FloatArray:
    array = np.array([math.nan if v is None else float(v) for v in values], dtype=np.float64)
    present = array[~np.isnan(array)]
    stats.validate_sample(key, present.tolist(), role=role)
    return array


@dataclass(frozen=True, slots=True)
class ProcessFactors:
    """What the runner's per-process speed leaves of each metric's noise, and the factor.

    ``residual_var[key]`` is the variance over pairs of a metric's log difference once each
    process's own factor is taken out, for every time metric complete in all pairs;
    ``common_var`` the variance over pairs of the two processes' factor difference (what every
    metric's difference shares); ``factor`` the machine-wide factor between the two sides, or
    ``None`` when the metrics do not move together (:mod:`.factor` says why this is not one
    type with it: the residual noise is needed without a factor too).
    """

    residual_var: dict[SeriesKey, float]
    common_var: float
    pairs: int
    factor: MachineFactor | None


def process_factors(
    found: Mapping[SeriesKey, PairedStats],
    base: Mapping[SeriesKey, Sequence[float | None]],
    pr: Mapping[SeriesKey, Sequence[float | None]],
    options: CompareOptions,
) -> ProcessFactors | None:
    """The runner's per-process speed, estimated within each side, and the factor between them.

    On a shared runner one process runs a few percent faster or slower than the next in every
    metric at once (another job on the host, the clock, the memory it got), so a pair's two
    processes differ by that much even where the code did not change. Within one side the code
    is the same in every process, so a process's factor (the median over time metrics of how
    far it lies from its side's mean) is the machine alone, whatever the code change does to
    the other side. Taking each process's factor out (centred, so each side's mean and each
    metric's printed change stay as they are) leaves a metric's own noise. What stays common
    to all metrics is the difference of the two sides' mean factors: it is estimated like
    history mode's run factor (:func:`.factor.factor_with_prior`: the mode most metrics
    share, under a prior at no shift with the spread the processes' factors imply) and judged
    as its own line; ``factor`` is ``None`` when fewer than :data:`MIN_MOVING_TOGETHER` of the
    metrics move with it.

    ``None`` with fewer than 3 pairs or 20 time metrics complete in all of them, or with
    ``remove_shared_factor=False``.
    """
    if options.remove_shared_factor is False:
        return None
    pairs = max((row.n for row in found.values()), default=0)
    # On a GPU run the host's times move with where the CPU waits, not with the machine's
    # speed (gating.HOST_TIMING_KINDS): the GPU's own times carry the factor. On an H200 with
    # every CPU busy, the host's lines moved apart and vetoed a factor the kernels shared,
    # and every kernel's interval took the processes' whole spread (±12 %).
    on_gpu = gpu_run(found)
    keys = [
        k for k, row in found.items() if k.is_time and row.n == pairs and not host_timing(k, on_gpu)
    ]
    if pairs < 3 or len(keys) < MIN_METRICS_FOR_FACTOR:
        return None
    a = np.array([base[k][:pairs] for k in keys], dtype=np.float64)  # None reads as NaN
    b = np.array([pr[k][:pairs] for k in keys], dtype=np.float64)
    logs = stats.safe_log(np.concatenate([a, b], axis=1))
    log_a, log_b = logs[:, :pairs], logs[:, pairs:]
    side_a = _process_factors(log_a)
    side_b = _process_factors(log_b)
    residual = (log_b - side_b[None, :]) - (log_a - side_a[None, :])
    var = np.var(residual, axis=1, ddof=1)
    change = residual.mean(axis=1)  # equals each metric's paired mean: the factors are centred
    spread = float(np.var(side_a, ddof=1) + np.var(side_b, ddof=1))  # two processes' worth
    common = math.sqrt(spread / pairs)
    found_factor = factor_with_prior(change, np.sqrt(var / pairs), 0.0, common)
    factor = None
    if found_factor is not None and found_factor[2] >= MIN_MOVING_TOGETHER:
        value, se, _support = found_factor
        factor = MachineFactor(
            candidate=value,
            se=se,
            usual=0.0,
            usual_var=common**2,
            spread=math.sqrt(spread / 2),
            runs=pairs,
            candidate_runs=pairs,
            series=keys[0],
            paired=True,
        )
    return ProcessFactors(
        residual_var=dict(zip(keys, var.tolist(), strict=True)),
        common_var=float(np.var(side_b - side_a, ddof=1)),
        pairs=pairs,
        factor=factor,
    )


def _process_factors(logs: FloatArray) -> FloatArray:
    """Each process's factor on one side: median over metrics of its distance from their mean,
    centred so that the factors of the side average zero."""
    factors = np.median(logs - logs.mean(axis=1, keepdims=True), axis=0)
    return np.asarray(factors - factors.mean(), dtype=np.float64)
