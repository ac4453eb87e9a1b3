"""The comparison engine behind :mod:`perfci.analysis.compare`: options, tests, BH, verdicts.

See :mod:`perfci.analysis.compare` for the method and its references; this module holds the
vectorised machinery so that :func:`~perfci.analysis.compare.compare` and
:func:`~perfci.analysis.compare.compare_run` share one implementation.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

import numpy as np

from perfci.analysis import noise, stats
from perfci.analysis.factor import SHARED_FACTOR_KEY
from perfci.analysis.stats import FloatArray, ShiftTest
from perfci.core.errors import ConfigError, SampleError
from perfci.core.model import MetricComparison, Verdict

__all__ = [
    "CompareOptions",
    "CoreResult",
    "SampleError",
    "compare_core",
    "decide",
    "decide_on",
    "shift_test",
]

Method = Literal["student-mw", "student", "welch", "mannwhitney"]
_TESTS: dict[str, Callable[..., ShiftTest]] = {
    "student-mw": stats.guarded_t,
    "student": stats.student_t,
    "welch": stats.welch_t,
    "mannwhitney": stats.mann_whitney,
}


@dataclass(frozen=True, slots=True)
class CompareOptions:
    """Thresholds and choices of a comparison; every default is justified in docs/statistics.md.

    ``higher_is_better`` names metric keys (or is a predicate on keys) whose larger values are
    better (throughput); times are lower-is-better. ``remove_shared_factor``: ``None`` (auto)
    means off in :func:`~perfci.analysis.compare.compare`, whose columns need not be aligned,
    and on in :func:`~perfci.analysis.compare.compare_run` and
    :func:`~perfci.analysis.paired.compare_paired` (each process's factor), whose repeats are;
    ``False`` turns it off there too. ``min_candidate`` is the fewest candidate values
    :func:`~perfci.analysis.compare.compare` tests (two samples); ``min_candidate_repeats``
    the fewest repeats of a candidate *run* :func:`~perfci.analysis.compare.compare_run`
    judges: one repeat is one draw of the run-level distribution, which the prediction
    interval is for, and more repeats only sharpen it. ``rank_guard``
    is the Mann–Whitney confirmation level of the default ``student-mw`` method. ``gate_share``
    and ``top_contributors`` are used by :func:`perfci.analysis.compare.compare_run`.

    Run comparisons (``compare_run``, ``compare_paired``) share the false-discovery budget
    ``alpha`` between classes of lines: ``step_budget`` for the primary step, ``factor_budget``
    for the run's machine-wide factor, ``gated_budget`` for the other gated metrics, and the
    rest for ungated ones (weighted Benjamini–Hochberg, :mod:`perfci.analysis.judge`).
    ``moderate`` shrinks per-metric variances towards a common prior
    (:mod:`perfci.analysis.moderation`); ``robust_baseline`` leaves wrecked baseline runs
    and outlier repeats out; ``trim_change_points`` starts the baseline after the base
    branch's last change point; ``calibrate_tails`` makes the tests no less strict than
    the baseline's own tails demand (:mod:`perfci.analysis.tails`).
    """

    delta: float = 0.02
    alpha: float = 0.05
    confidence: float = 0.95
    min_baseline: int = 3
    min_candidate: int = 2
    min_candidate_repeats: int = 1
    higher_is_better: frozenset[str] | Callable[[str], bool] = field(default=frozenset())
    method: Method = "student-mw"
    rank_guard: float = 0.002
    remove_shared_factor: bool | None = None
    gate_share: float = 0.02
    top_contributors: int = 10
    step_budget: float = 0.09
    factor_budget: float = 0.03
    gated_budget: float = 0.28
    moderate: bool = True
    robust_baseline: bool = True
    trim_change_points: bool = True
    calibrate_tails: bool = True

    def __post_init__(self) -> None:
        for name, low, high in (
            ("delta", 0.0, 1.0),
            ("alpha", 0.0, 1.0),
            ("confidence", 0.0, 1.0),
            ("gate_share", -1e-12, 1.0),
            ("rank_guard", 0.0, 1.0 + 1e-12),
            ("step_budget", -1e-12, 1.0 + 1e-12),
            ("factor_budget", -1e-12, 1.0 + 1e-12),
            ("gated_budget", -1e-12, 1.0 + 1e-12),
        ):
            value = getattr(self, name)
            if not low < value < high:
                raise ConfigError(
                    f"compare option {name}={value!r} must lie in ({low:g}, {high:g})"
                )
        if self.min_baseline < 2 or self.min_candidate < 1 or self.min_candidate_repeats < 1:
            raise ConfigError(
                "compare options need min_baseline ≥ 2, min_candidate ≥ 1 and "
                f"min_candidate_repeats ≥ 1, got {self.min_baseline}, {self.min_candidate} "
                f"and {self.min_candidate_repeats}"
            )
        if self.step_budget + self.factor_budget + self.gated_budget > 1.0 + 1e-9:
            raise ConfigError(
                "compare options step_budget + factor_budget + gated_budget must "
                "not exceed 1 (they are shares of alpha)"
            )
        if self.method not in _TESTS:
            raise ConfigError(
                f"unknown compare method {self.method!r}; choose one of {', '.join(sorted(_TESTS))}"
            )

    def is_higher_better(self, key: str) -> bool:
        """Whether larger values of ``key`` are better."""
        if callable(self.higher_is_better):
            return bool(self.higher_is_better(key))
        return key in self.higher_is_better


@dataclass(frozen=True, slots=True)
class CoreResult:
    """What :func:`compare_core` returns: the per-metric lines and the shared-factor line."""

    metrics: list[MetricComparison]
    shared_factor: MetricComparison | None


def compare_core(
    baseline: Mapping[str, Sequence[float]],
    candidate: Mapping[str, Sequence[float]],
    *,
    options: CompareOptions,
) -> CoreResult:
    """Per-metric lines sorted by key, plus the shared run factor line (``None`` if not estimated).

    The engine of :func:`perfci.analysis.compare.compare`; see that function for the contract.
    """
    base = {
        key: stats.validate_sample(key, values, role="baseline") for key, values in baseline.items()
    }
    cand = {
        key: stats.validate_sample(key, values, role="candidate")
        for key, values in candidate.items()
    }
    lines = _untestable_lines(base, cand, options)
    testable = sorted(key for key in base.keys() & cand.keys() if key not in lines)
    tested, shared = _test_keys(testable, base, cand, options)
    lines.update(tested)
    return CoreResult([lines[key] for key in sorted(lines)], shared)


def shift_test(base_log: FloatArray, cand_log: FloatArray, options: CompareOptions) -> ShiftTest:
    """Run the configured two-sample test on log samples (rows = metrics)."""
    if options.method == "student-mw":
        return stats.guarded_t(
            base_log, cand_log, confidence=options.confidence, guard=options.rank_guard
        )
    return _TESTS[options.method](base_log, cand_log, confidence=options.confidence)


def decide(
    change: FloatArray,
    ci_low: FloatArray,
    ci_high: FloatArray,
    q_value: FloatArray,
    higher_is_better: np.ndarray,
    options: CompareOptions,
) -> np.ndarray:
    """Verdict strings from relative changes, their intervals and q-values (vectorised).

    A change must be both significant (q ≤ alpha) and worse than δ to be a regression; an
    interval inside ±δ is unchanged even when significant (a real but negligible change).
    """
    return decide_on(change, change, ci_low, ci_high, q_value, higher_is_better, options)


def decide_on(
    change: FloatArray,
    tested: FloatArray,
    low: FloatArray,
    high: FloatArray,
    q_value: FloatArray,
    higher_is_better: np.ndarray,
    options: CompareOptions,
) -> np.ndarray:
    """:func:`decide` when the verdict is tested on another basis than the printed change.

    *regression*: q ≤ alpha, the ``tested`` change (with its interval ``low``…``high``) is
    worse than δ, and the printed ``change`` points the same way, so a metric whose own
    numbers went up is never an improvement; *improvement* likewise; *unchanged*: the
    interval lies inside ±δ; anything else *inconclusive*.
    """
    sign = np.where(higher_is_better, -1.0, 1.0)
    significant = q_value <= options.alpha
    worse = (sign * tested > options.delta) & (sign * change > 0)
    better = (sign * tested < -options.delta) & (sign * change < 0)
    inside = (low >= -options.delta) & (high <= options.delta)
    verdict = np.full(np.shape(change), Verdict.INCONCLUSIVE.value, dtype=object)
    verdict[inside] = Verdict.UNCHANGED.value
    verdict[significant & better] = Verdict.IMPROVEMENT.value
    verdict[significant & worse] = Verdict.REGRESSION.value
    return verdict


def _untestable_lines(
    base: Mapping[str, FloatArray], cand: Mapping[str, FloatArray], options: CompareOptions
) -> dict[str, MetricComparison]:
    """Lines for keys that get no test: new, missing, too little baseline or candidate data."""
    lines: dict[str, MetricComparison] = {}
    for key in base.keys() | cand.keys():
        b, c = base.get(key), cand.get(key)
        if b is None or len(b) == 0:
            lines[key] = _line(key, Verdict.NEW, None, c)
        elif c is None or len(c) == 0:
            lines[key] = _line(key, Verdict.MISSING, b, None)
        elif len(b) < options.min_baseline:
            lines[key] = _line(key, Verdict.NO_BASELINE, b, c)
        elif len(c) < options.min_candidate:
            lines[key] = _line(
                key, Verdict.INCONCLUSIVE, b, c, repeats_needed=options.min_candidate
            )
    return lines


def _line(
    key: str, verdict: Verdict, base: FloatArray | None, cand: FloatArray | None, **extra: object
) -> MetricComparison:
    return MetricComparison(
        key=key,
        verdict=verdict,
        baseline_median=_median(base),
        candidate_median=_median(cand),
        n_baseline=0 if base is None else len(base),
        n_candidate=0 if cand is None else len(cand),
        **extra,  # type: ignore[arg-type]
    )


def _median(values: FloatArray | None) -> float | None:
    return None if values is None or len(values) == 0 else float(np.median(values))


@dataclass(slots=True)
class _Group:
    """Metrics sharing one (n, m) shape, tested in one vectorised call."""

    keys: list[str]
    base: FloatArray
    cand: FloatArray
    base_log: FloatArray
    cand_log: FloatArray
    result: ShiftTest | None = None


def _test_keys(
    keys: list[str],
    base: Mapping[str, FloatArray],
    cand: Mapping[str, FloatArray],
    options: CompareOptions,
) -> tuple[dict[str, MetricComparison], MetricComparison | None]:
    """Test every key, grouped by sample sizes, then adjust and decide across all of them."""
    groups = _group_by_shape(keys, base, cand)
    shared = _apply_shared_factor(groups, options) if options.remove_shared_factor else None
    for group in groups:
        group.result = shift_test(group.base_log, group.cand_log, options)
    return _decide_groups(groups, options), shared


def _group_by_shape(
    keys: list[str], base: Mapping[str, FloatArray], cand: Mapping[str, FloatArray]
) -> list[_Group]:
    by_shape: dict[tuple[int, int], list[str]] = {}
    for key in keys:
        by_shape.setdefault((len(base[key]), len(cand[key])), []).append(key)
    groups = []
    for members in by_shape.values():
        base_raw = np.stack([base[k] for k in members])
        cand_raw = np.stack([cand[k] for k in members])
        groups.append(
            _Group(members, base_raw, cand_raw, stats.safe_log(base_raw), stats.safe_log(cand_raw))
        )
    return sorted(groups, key=lambda g: -len(g.keys))


def _apply_shared_factor(groups: list[_Group], options: CompareOptions) -> MetricComparison | None:
    """Estimate the shared factor on the largest group (aligned columns) and remove it there.

    Only the largest same-shape group is used: metrics with other run counts cannot be aligned
    column by column. After removal each metric's change is what it did *beyond* the common
    shift; the common shift itself is returned as its own comparison line.
    """
    if not groups:
        return None
    group = groups[0]
    factor = noise.estimate_shared_factor(group.base_log, group.cand_log)
    if factor is None:
        return None
    group.base_log, group.cand_log = noise.remove_shared_factor(
        group.base_log, group.cand_log, factor
    )
    return _shared_factor_line(factor, options)


def _shared_factor_line(factor: noise.ColumnFactors, options: CompareOptions) -> MetricComparison:
    """The shift common to all metrics, tested like a metric: its own p-value, not BH-adjusted."""
    result = shift_test(factor.baseline[None, :], factor.candidate[None, :], options)
    change, low, high = (np.expm1(a) for a in (result.estimate, result.ci_low, result.ci_high))
    verdict = decide(change, low, high, result.p_value, np.array([False]), options)[0]
    return MetricComparison(
        key=SHARED_FACTOR_KEY,
        verdict=Verdict(verdict),
        baseline_median=float(np.exp(np.median(factor.baseline))),
        candidate_median=float(np.exp(np.median(factor.candidate))),
        change=float(change[0]),
        ci_low=float(low[0]),
        ci_high=float(high[0]),
        p_value=float(result.p_value[0]),
        q_value=float(result.p_value[0]),
        n_baseline=len(factor.baseline),
        n_candidate=len(factor.candidate),
    )


def _decide_groups(groups: list[_Group], options: CompareOptions) -> dict[str, MetricComparison]:
    """BH across every tested metric of the comparison, then one verdict per metric."""
    p_all = (
        np.concatenate([g.result.p_value for g in groups if g.result is not None])
        if groups
        else np.array([])
    )
    q_all = stats.benjamini_hochberg(p_all)
    lines: dict[str, MetricComparison] = {}
    start = 0
    for group in groups:
        q = q_all[start : start + len(group.keys)]
        start += len(group.keys)
        lines.update(_group_lines(group, q, options))
    return lines


def _group_lines(
    group: _Group, q: FloatArray, options: CompareOptions
) -> dict[str, MetricComparison]:
    """One line per metric of a group; columns are converted to lists once (10k metrics < 1 s)."""
    result = group.result
    assert result is not None  # set by _test_keys before deciding
    change, low, high = (np.expm1(a) for a in (result.estimate, result.ci_low, result.ci_high))
    higher = np.array([options.is_higher_better(k) for k in group.keys], dtype=bool)
    verdicts = decide(change, low, high, q, higher, options)
    needed = noise.repeats_needed(
        result.sd,
        group.base.shape[1],
        result.estimate,
        delta=options.delta,
        confidence=options.confidence,
    )
    needed = np.where((verdicts == Verdict.INCONCLUSIVE.value) & (needed > 0), needed, 0)
    n, m = group.base.shape[1], group.cand.shape[1]
    columns = zip(
        group.keys,
        verdicts.tolist(),
        np.median(group.base, axis=1).tolist(),
        np.median(group.cand, axis=1).tolist(),
        change.tolist(),
        low.tolist(),
        high.tolist(),
        result.p_value.tolist(),
        q.tolist(),
        needed.tolist(),
        strict=True,
    )
    return {
        key: MetricComparison(
            key=key,
            verdict=Verdict(verdict),
            baseline_median=b_med,
            candidate_median=c_med,
            change=chg,
            ci_low=lo,
            ci_high=hi,
            p_value=p,
            q_value=None if math.isnan(qv) else qv,
            n_baseline=n,
            n_candidate=m,
            repeats_needed=rep or None,
        )
        for key, verdict, b_med, c_med, chg, lo, hi, p, qv, rep in columns
    }
