"""Which lines may fail the check, and how the false-discovery budget is spread over them.

A metric gates when it is a headline value (the step, a benchmark case, a throughput) or a
kernel, copy, collective, range, operator or layer holding at least ``gate_share`` of its
section's step time; without a step, the summed GPU work (or the longest CPU range) stands in
(:func:`work_levels`). On a run with GPU work, the host thread's own times never gate
(:data:`HOST_TIMING_KINDS`). Each class of line (the step, the run factor, gated leaves,
gated views, the rest) gets a fixed share of the Benjamini–Hochberg budget
(:func:`bh_weights`), spent through weighted BH (:func:`weighted_bh`;
:mod:`perfci.analysis.judge` applies it).

Reference: Genovese, Roeder & Wasserman (2006), "False discovery control with p-value
weighting", *Biometrika* 93:509–524.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

import numpy as np

from perfci.analysis import stats
from perfci.analysis.engine import CompareOptions
from perfci.core.model import Device, MetricKind, SeriesKey

__all__ = [
    "FACTOR",
    "GATED",
    "GATED_CLASSES",
    "GATE_KINDS",
    "HEADLINE_KINDS",
    "HOST_TIMING_KINDS",
    "OTHER",
    "STEP",
    "VIEW",
    "VIEW_KINDS",
    "VIEW_SHARE",
    "bh_weights",
    "directional_bh",
    "directional_holm",
    "gpu_run",
    "host_timing",
    "is_gated",
    "share_of_step",
    "weighted_bh",
    "weighted_holm",
    "work_levels",
]

#: Kinds that may fail the check when their share of step time reaches ``gate_share``.
#: API and OS calls are left out: their time is mostly the CPU *waiting* for GPU work, an
#: effect of a kernel slowdown rather than a cause, and they are noisy.
GATE_KINDS = frozenset(
    {
        MetricKind.KERNEL,
        MetricKind.MEMORY,
        MetricKind.COMM,
        MetricKind.RANGE,
        MetricKind.OP,
        MetricKind.LAYER,
    }
)
#: Kinds that always may fail the check: a benchmark case, or a headline value of the whole
#: profile (throughput, peak memory, accuracy, time-to-train) is what a team gates on.
HEADLINE_KINDS = frozenset({MetricKind.STEP, MetricKind.BENCH, MetricKind.MEASURE})
#: On a run with GPU work, these kinds' CPU-side times are the host thread's, its waits for
#: the GPU included. When any kernel changes, the thread blocks somewhere else, and the wait
#: moves between operators, ranges and API calls: on an H200, a GELU kernel 8 % slower (the
#: step unchanged) moved 59 of their CPU times by −92 … +1,884 % (``benchmarks/cuda_ab.py``).
#: They are tested and listed after the GPU's own times, never gating; the step, the kernels
#: and the device-side ranges judge the run.
HOST_TIMING_KINDS = frozenset(
    {MetricKind.RANGE, MetricKind.OP, MetricKind.LAYER, MetricKind.API, MetricKind.OS}
)

STEP, FACTOR, GATED, VIEW, OTHER = "step", "factor", "gated", "view", "other"
#: Kinds that overlap the leaf-level work (an operator holds its kernels, a range its
#: operators): a kernel's change shows in them again, so they add little that the leaves do
#: not already test and get the smaller part of the gated budget when leaves are present.
VIEW_KINDS = frozenset({MetricKind.RANGE, MetricKind.OP, MetricKind.LAYER})
#: The views' part of ``gated_budget`` when the run also has gated leaves or headline values.
VIEW_SHARE = 1 / 3
GATED_CLASSES = frozenset({STEP, FACTOR, GATED, VIEW})


#: Parts of one unit of work that run one after another: without a step, their sum stands in.
SUMMED_KINDS = frozenset({MetricKind.KERNEL, MetricKind.MEMORY, MetricKind.COMM, MetricKind.LAYER})
#: Nested parts (an operator holds the operators it calls): the longest stands in.
NESTED_KINDS = frozenset({MetricKind.RANGE, MetricKind.OP})


def work_levels(rows: Iterable[tuple[SeriesKey, float | None]]) -> dict[str, float]:
    """Each section's stand-in for a step time when the profiles hold none.

    Many profiles have no iteration in them (``nsys stats`` without NVTX steps, nvprof, Nsight
    Compute, DeepSpeed's comm log, a workload table): with no level, no kernel would ever reach
    the gate share, and a kernel 35 % slower holding half the GPU time would pass the check.
    The level is the section's summed kernel, copy, collective and layer time (one stream's
    work, one layer after another), else, in a CPU profile, its longest range or operator (the
    top-level call holds the rest). Shares are then shares of that work.
    """
    summed: dict[str, float] = {}
    longest: dict[str, float] = {}
    for key, value in rows:
        if not value or not key.is_time:
            continue
        if key.kind in SUMMED_KINDS:
            summed[key.section] = summed.get(key.section, 0.0) + value
        elif key.kind in NESTED_KINDS:
            longest[key.section] = max(longest.get(key.section, 0.0), value)
    return {section: summed.get(section) or longest[section] for section in {*summed, *longest}}


def share_of_step(
    series: SeriesKey, value: float | None, levels: Mapping[str, float]
) -> float | None:
    """The metric's time as a share of its section's step time (times only)."""
    if not series.is_time:
        return None
    step = levels.get(series.section) or (max(levels.values()) if levels else None)
    return None if value is None or not step else value / step


def gpu_run(series: Iterable[SeriesKey]) -> bool:
    """Whether the profiles hold GPU work (kernels or collectives timed on the device)."""
    return any(
        s.device is Device.GPU and s.kind in (MetricKind.KERNEL, MetricKind.COMM) for s in series
    )


def host_timing(series: SeriesKey, on_gpu: bool) -> bool:
    """A CPU-side time (operator, range, layer, API or OS call) of a GPU run: waits included."""
    return on_gpu and series.device is Device.CPU and series.kind in HOST_TIMING_KINDS


def is_gated(series: SeriesKey, share: float | None, options: CompareOptions, on_gpu: bool) -> bool:
    return series.kind in HEADLINE_KINDS or (
        series.kind in GATE_KINDS
        and not host_timing(series, on_gpu)
        and share is not None
        and share >= options.gate_share
    )


def bh_weights(classes: Sequence[str], options: CompareOptions) -> np.ndarray:
    """p-value weights averaging one: each class's budget share spread evenly inside it.

    ``gated_budget`` is split between gated leaves and headline values and the overlapping
    views (:data:`VIEW_SHARE`); when one of the two is absent, the other has all of it.
    Budgets of other classes with no member go to the rest in proportion, so a run with no
    step line (or no factor) spends its whole budget on what it has.
    """
    counts = {name: sum(1 for c in classes if c == name) for name in (*GATED_CLASSES, OTHER)}
    views = options.gated_budget * (VIEW_SHARE if counts[GATED] else 1.0)
    budget = {
        STEP: options.step_budget,
        FACTOR: options.factor_budget,
        GATED: options.gated_budget - (views if counts[VIEW] else 0.0),
        VIEW: views,
        OTHER: max(0.0, 1.0 - options.step_budget - options.factor_budget - options.gated_budget),
    }
    total = sum(share for name, share in budget.items() if counts[name])
    n = len(classes)
    if not n or total <= 0:
        return np.ones(n)
    return np.array([budget[c] / total * n / counts[c] for c in classes], dtype=np.float64)


def weighted_bh(p_values: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """Weighted Benjamini–Hochberg q-values: BH on ``p / w`` (Genovese et al. 2006), ≤ 1."""
    with np.errstate(divide="ignore", invalid="ignore"):
        scaled = np.where(weights > 0, p_values / weights, np.inf)
    scaled = np.where(np.isnan(p_values), np.nan, np.minimum(scaled, 1.0))
    return np.asarray(stats.benjamini_hochberg(scaled), dtype=np.float64)


def weighted_holm(p_values: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """Weighted Holm adjusted p-values (Holm 1979, with weights), ≤ 1; NaN stays NaN.

    The step-down form of the weighted Bonferroni test: the line with the smallest ``p / w``
    is tested at ``alpha · w / Σw``, and each next one at its weight over the weight still
    untested. With weights averaging one, the first threshold is ``alpha · w / m``: a run with
    one real change decides it as weighted BH does, but a hundred real changes do not loosen
    the bar for the untouched lines beside them.
    """
    p = np.asarray(p_values, dtype=np.float64)
    valid = np.isfinite(p) & (weights > 0)
    out = np.full(p.shape, np.nan)
    out[np.isfinite(p) & ~valid] = 1.0
    if not valid.any():
        return out
    scaled = p[valid] / weights[valid]
    order = np.argsort(scaled, kind="stable")
    w = weights[valid][order]
    remaining = np.cumsum(w[::-1])[::-1]
    adjusted = np.minimum(np.maximum.accumulate(scaled[order] * remaining), 1.0)
    found = np.empty_like(adjusted)
    found[order] = adjusted
    out[valid] = found
    return out


def directional_holm(p: np.ndarray, estimate: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """Weighted Holm run once per direction of change, each at half the level.

    As :func:`directional_bh`, with the family-wise error rate held instead of the false
    discovery rate: under a broad real change, BH's hundred discoveries let untouched lines
    beside them be called changed (about 2 in 500 with half the kernels 10 % slower), where
    each line's own evidence should decide it.
    """
    half = p / 2
    up = estimate > 0
    q_up = weighted_holm(np.where(up, half, 1 - half), weights)
    q_down = weighted_holm(np.where(up, 1 - half, half), weights)
    return np.asarray(np.minimum(2 * np.where(up, q_up, q_down), 1.0), dtype=np.float64)


def directional_bh(p: np.ndarray, estimate: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """Weighted BH run once per direction of change, each at half the level.

    Each direction is a family of one-sided tests of every metric (half the two-sided p on
    the side the estimate lies, ``1 − p/2`` on the other); a metric's q is its own side's,
    doubled, so ``q ≤ alpha`` keeps each family's false-discovery rate at ``alpha/2``
    (Benjamini & Yekutieli 2005 on directional errors). Under no change at all it rejects as
    often as two-sided BH, but a broad real regression's hundred discoveries no longer
    loosen the threshold for calling untouched metrics *improvements* (nor a broad
    improvement's for calling them *regressions*, which would fail the run).
    """
    half = p / 2
    up = estimate > 0
    q_up = weighted_bh(np.where(up, half, 1 - half), weights)
    q_down = weighted_bh(np.where(up, 1 - half, half), weights)
    return np.asarray(np.minimum(2 * np.where(up, q_up, q_down), 1.0), dtype=np.float64)
