"""One metric's change, as every estimator hands it to the judge (:mod:`.judge`).

History mode (:mod:`.compare`), same-runner A/B (:mod:`.paired`) and the machine-wide factor
(:mod:`.factor`) each produce :class:`MetricEstimate` rows; :func:`.judge.judge_estimates`
tests, adjusts and decides them alike. Its own module so that the estimators and the judge
import it without importing each other.
"""

from __future__ import annotations

from dataclasses import dataclass

from perfci.analysis.tails import TailModel
from perfci.core.model import SeriesKey

__all__ = ["MetricEstimate"]


@dataclass(frozen=True, slots=True)
class MetricEstimate:
    """One metric's change, ready to be judged.

    ``baseline`` and ``candidate`` are the values shown (``Baseline``, ``This run``) and
    ``log_change`` must equal ``log(candidate / baseline)`` so that the printed change can be
    checked from them; ``se`` and ``dof`` give its interval. ``adjusted_*`` (optional) is the
    change beyond the run's machine-wide factor; when present, the test uses it. ``tails``
    (optional) are the baseline's heavy tails (:mod:`perfci.analysis.tails`): p-values and
    intervals on either basis are made no narrower than they demand.
    """

    series: SeriesKey
    baseline: float
    candidate: float
    log_change: float
    se: float
    dof: float
    n_baseline: int
    n_candidate: int
    repeats_needed: int | None = None
    adjusted_log_change: float | None = None
    adjusted_se: float | None = None
    adjusted_dof: float | None = None
    tails: TailModel | None = None
