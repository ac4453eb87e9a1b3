"""The smallest change a comparison could have seen: the detectable change of each line.

An *inconclusive* verdict says the run's noise could not settle the practical margin. What it
could settle is said by the minimum detectable effect (e.g. Cohen 1988, *Statistical Power
Analysis for the Behavioral Sciences*, ch. 2; for the one-sample t, the critical value plus
the power quantile, in standard errors): the smallest true change that this run, at its own
noise and at the test level its line gets in the run's multiple testing, would have called
four times in five. The report states it, and what would settle the line (more repeats, or
same-runner A/B).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from scipy import special

from perfci.analysis import stats
from perfci.analysis.engine import CompareOptions
from perfci.analysis.tails import TailModel

__all__ = ["DETECTABLE_POWER", "detectable_changes"]


#: The power at which :func:`detectable_changes` states the smallest change a run could see.
DETECTABLE_POWER = 0.80


def detectable_changes(
    se: np.ndarray,
    dof: np.ndarray,
    tails: Sequence[TailModel | None],
    weights: np.ndarray,
    *,
    has_factor: bool,
    options: CompareOptions,
) -> np.ndarray:
    """Per line, the smallest change (relative, either way) found with 80 % probability.

    A line is called changed when its estimate is beyond the margin and its test passes
    its first Holm step, ``p ≤ alpha · w / Σw`` (the bar for a line that changed alone). So
    the estimate must exceed ``max(margin, c · se)``, ``c`` the critical value at that level
    (made as strict as the baseline's tails demand), and a true change that far plus
    ``z₀.₈ · se`` is found four times in five.
    """
    n = len(se)
    metrics = n - 1 if has_factor else n
    total = float(np.sum(weights[:metrics])) or 1.0
    level = np.clip(options.alpha * weights / total, 1e-300, 1.0)
    if has_factor:
        level[-1] = options.alpha * weights[-1] / n
    # The critical normal score, then as strict as the line's tail model makes it, then on
    # the line's own t scale.
    score = -special.ndtri(level / 2)
    for i, tail in enumerate(tails):
        if tail is not None:
            heavy = tail.scale * float(stats.t_ppf(1 - float(level[i]) / 2, np.asarray(tail.dof)))
            score[i] = max(score[i], heavy)
    t_crit = _t_quantiles(special.ndtr(score), np.maximum(np.asarray(dof, dtype=np.float64), 1e-9))
    margin = math.log1p(options.delta)
    power = stats.norm_ppf(DETECTABLE_POWER)
    with np.errstate(invalid="ignore", over="ignore"):
        return np.asarray(np.expm1(np.maximum(margin, t_crit * se) + power * se), dtype=np.float64)


def _t_quantiles(q: np.ndarray, dof: np.ndarray) -> np.ndarray:
    """:func:`.stats.t_ppf` of each ``q`` at its own ``dof`` (all positive or NaN): the
    element-wise numbers of one call per line, in one call (issue 35)."""
    inside = special.stdtrit(np.where(dof > 0, dof, 1.0), np.clip(q, 0.0, 1.0))
    ends = np.where(q <= 0, -np.inf, np.where(q >= 1, np.inf, inside))
    return np.asarray(np.where(dof > 0, ends, np.nan), dtype=np.float64)
