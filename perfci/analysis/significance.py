"""The tests of one run's lines: p-values, q-values, intervals and verdicts.

:func:`judge_lines` is the statistical core of :func:`.judge.judge_estimates`: every
:class:`.estimate.MetricEstimate` (and the machine-wide factor's, last) gets its two-sided t
p-value, made no smaller than the baseline's tails demand (:mod:`.tails`); q-values by
directional weighted Holm/BH over the metrics (:mod:`.gating`), the factor on its own budget;
an interval on the plain basis (what a reader checks) and one on the tested basis (beyond
the factor); and a verdict with the practical margin (:func:`.engine.decide_on`). Gating,
shares, the run's verdict and the attribution stay in :mod:`.judge`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from perfci.analysis import stats
from perfci.analysis.detectable import detectable_changes
from perfci.analysis.engine import CompareOptions, decide_on
from perfci.analysis.estimate import MetricEstimate
from perfci.analysis.factor import SHARED_FACTOR_KEY
from perfci.analysis.gating import FACTOR, GATED_CLASSES, bh_weights, directional_holm
from perfci.analysis.tails import TailModel
from perfci.core.model import Better, MetricComparison, Verdict

__all__ = ["judge_lines", "two_sided_p"]

_VERDICTS = {verdict.value: verdict for verdict in Verdict}  # Verdict(value) is a slow call


def judge_lines(
    estimates: Sequence[MetricEstimate],
    classes: list[str],
    factor: MetricEstimate | None,
    options: CompareOptions,
    *,
    shares: Sequence[float | None] = (),
    gate_on_regression: Sequence[bool] = (),
) -> list[MetricComparison]:
    """One line per estimate (then the factor's), tested and decided together.

    ``shares``: each estimate's share of the step (``share_of_step``); ``gate_on_regression``:
    the estimates gated when found to regress, whatever their class. Both per estimate, or
    empty for none.
    """
    rows = [*estimates, factor] if factor is not None else list(estimates)
    classes = [*classes, FACTOR] if factor is not None else classes
    if not rows:
        return []
    test_log = np.array(
        [e.log_change if e.adjusted_log_change is None else e.adjusted_log_change for e in rows]
    )
    test_se = np.array([e.se if e.adjusted_se is None else e.adjusted_se for e in rows])
    test_dof = np.array([e.dof if e.adjusted_dof is None else e.adjusted_dof for e in rows])
    tails = [e.tails for e in rows]
    p = _with_tails(two_sided_p(test_log, test_se, test_dof), tails)
    weights = bh_weights(classes, options)
    q = _adjust(p, test_log, weights, has_factor=factor is not None)
    plain = np.array([e.log_change for e in rows])
    low, high = _interval(
        plain,
        np.array([e.se for e in rows]),
        np.array([e.dof for e in rows]),
        _confidences(options.confidence, tails),
    )
    adj_low, adj_high = _interval(
        test_log, test_se, test_dof, _confidences(options.confidence, tails)
    )
    higher = np.array(
        [e.series.better is Better.HIGHER or options.is_higher_better(e.series.key) for e in rows],
        dtype=bool,
    )
    verdicts = decide_on(
        np.expm1(plain),
        np.expm1(test_log),
        np.expm1(adj_low),
        np.expm1(adj_high),
        q,
        higher,
        options,
    )
    if factor is not None:
        plain_se = np.array([e.se for e in rows])
        plain_p = _with_tails(two_sided_p(plain, plain_se, np.array([e.dof for e in rows])), tails)
        plain_q = _adjust(plain_p, plain, weights, has_factor=True)
        own = decide_on(
            np.expm1(plain),
            np.expm1(plain),
            np.expm1(low),
            np.expm1(high),
            plain_q,
            higher,
            options,
        )
        _own_numbers_when_machine_moved(verdicts, own)
    detectable = detectable_changes(
        test_se, test_dof, tails, weights, has_factor=factor is not None, options=options
    )
    # Whole arrays to Python floats at once (10,000 lines: no numpy call per line and field).
    change, ci_low, ci_high = (np.expm1(a).tolist() for a in (plain, low, high))
    adj_change, adj_low_l, adj_high_l = (
        np.expm1(a).tolist() for a in (test_log, adj_low, adj_high)
    )
    p_list, q_list, found = p.tolist(), q.tolist(), detectable.tolist()
    last = len(rows) - 1
    shares = list(shares) or [None] * len(estimates)
    grows = list(gate_on_regression) or [False] * len(estimates)
    if factor is not None:
        shares.append(None)
        grows.append(False)
    lines = []
    for i, e in enumerate(rows):
        adjusted = e.adjusted_log_change is not None
        verdict = _VERDICTS[verdicts[i]]
        lines.append(
            MetricComparison(
                key=SHARED_FACTOR_KEY if factor is not None and i == last else e.series.key,
                verdict=verdict,
                baseline_median=e.baseline,
                candidate_median=e.candidate,
                change=change[i],
                ci_low=ci_low[i],
                ci_high=ci_high[i],
                p_value=p_list[i],
                q_value=None if math.isnan(q_list[i]) else q_list[i],
                n_baseline=e.n_baseline,
                n_candidate=e.n_candidate,
                gated=classes[i] in GATED_CLASSES or (verdict is Verdict.REGRESSION and grows[i]),
                repeats_needed=e.repeats_needed if verdict is Verdict.INCONCLUSIVE else None,
                series=None if classes[i] == FACTOR else e.series,
                adjusted_change=adj_change[i] if adjusted else None,
                adjusted_ci_low=adj_low_l[i] if adjusted else None,
                adjusted_ci_high=adj_high_l[i] if adjusted else None,
                detectable_change=found[i]
                if verdict is Verdict.INCONCLUSIVE and math.isfinite(found[i])
                else None,
                share_of_step=shares[i],
            )
        )
    return lines


def _adjust(
    p: np.ndarray, estimate: np.ndarray, weights: np.ndarray, *, has_factor: bool
) -> np.ndarray:
    """q-values: directional weighted BH over the metrics; the factor line on its own budget.

    The factor (last, when present) asks another question (is this machine unusual?) than
    the metrics (did the code move this?). Inside BH, a broad real change's many discoveries
    would loosen its threshold until an ordinary machine 2 % slower read as "moved beyond its
    usual spread"; so it is tested at its own share of ``alpha`` (Bonferroni), and BH runs
    over the rest with the rest of the budget.
    """
    if not has_factor:
        return directional_holm(p, estimate, weights)
    share = weights[-1] / len(weights)
    factor_q = np.minimum(p[-1:] / share, 1.0) if share > 0 else np.ones(1)
    return np.concatenate([directional_holm(p[:-1], estimate[:-1], weights[:-1]), factor_q])


def _own_numbers_when_machine_moved(verdicts: np.ndarray, own: np.ndarray) -> None:
    """When the run factor itself moved beyond its usual spread, verdicts need own numbers.

    Then nobody can tell a machine that moved from a code change that moved most metrics
    (the factor line says so). A metric keeps a regression or an improvement only if its own
    numbers (``own``: the verdicts on the plain change, tested and BH-adjusted alike) say the
    same; judged beyond an uncertain factor alone, an untouched kernel would read as an
    improvement because the rest got slower. The factor line (last) keeps its verdict.
    Edits ``verdicts`` in place.
    """
    if verdicts[-1] not in (Verdict.REGRESSION.value, Verdict.IMPROVEMENT.value):
        return
    decided = np.isin(verdicts[:-1], [Verdict.REGRESSION.value, Verdict.IMPROVEMENT.value])
    differs = decided & (verdicts[:-1] != own[:-1])
    verdicts[:-1][differs] = Verdict.INCONCLUSIVE.value


def two_sided_p(estimate: np.ndarray, se: np.ndarray, dof: np.ndarray) -> np.ndarray:
    """Two-sided t p-values; a zero standard error is decided exactly (0 if moved, else 1)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        t = np.abs(estimate) / se
    p = 2.0 * stats.t_sf(t, np.maximum(dof, 1e-9))
    zero = se == 0
    return np.where(zero, np.where(estimate == 0, 1.0, 0.0), p)


def _with_tails(p: np.ndarray, tails: Sequence[TailModel | None]) -> np.ndarray:
    """``p`` with each row's tail model applied (rows without one unchanged)."""
    out = p.copy()
    for model in {t for t in tails if t is not None}:
        rows = np.array([t is not None and t == model for t in tails])
        out[rows] = model.p_values(p[rows])
    return out


def _confidences(confidence: float, tails: Sequence[TailModel | None]) -> np.ndarray:
    """Per row, the normal-model confidence that covers ``confidence`` under its tails."""
    levels = {t: t.confidence(confidence) for t in tails if t is not None}
    return np.array([confidence if t is None else levels[t] for t in tails])


def _interval(
    estimate: np.ndarray, se: np.ndarray, dof: np.ndarray, confidence: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Two-sided t intervals, each row at its own confidence level."""
    quantile = np.empty(np.shape(estimate))
    for level in np.unique(confidence):
        rows = confidence == level
        quantile[rows] = stats.t_ppf(0.5 + float(level) / 2, np.maximum(dof[rows], 1e-9))
    half = quantile * se
    half = np.where(se == 0, 0.0, half)
    return estimate - half, estimate + half
