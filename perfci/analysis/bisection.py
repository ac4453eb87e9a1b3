"""The decisions of a bisection: which side of the change a probe lies on, which commit to
probe next, and whether a range holds more than one change.

A probe compares a commit with the range's good end. Its commit lies on the *bad* side when the
A/B verdict says the metric changed, in the direction of the whole range's change, by at least
half of it (on the log scale, where changes along a range add up). With one change, every
changed probe carries all of it and every other none, so the half-way rule is the plain
changed/unchanged rule. With two (+10 % at one commit, +25 % at a later one), the commits
between them changed by +10 %, under half of the +37.5 % total: the search walks on to the
larger change, the one that matters most, and the smaller one is the evidence that the range
holds more than one (the rule of rustc-perf's and Pinpoint's "largest step" follow-up, made
explicit). Inconclusive and unbuildable commits are on neither side: the search skips them,
probing the nearest neighbour inside the range still open (``git bisect skip``'s rule).
"""

from __future__ import annotations

import math
from collections.abc import Collection

from perfci.core.bisection import Probe, ProbeStatus, log_change
from perfci.core.compat import StrEnum

__all__ = ["Side", "more_than_one", "next_index", "side_of"]


class Side(StrEnum):
    GOOD = "good"
    BAD = "bad"
    #: Good, but changed by part of the range's change: another change lies before it.
    PARTLY = "partly"
    SKIP = "skip"


def side_of(probe: Probe, total: Probe) -> Side:
    """Which side of the change ``probe`` (against the good end) lies on; ``total`` is the bad
    end against the good end, a changed probe."""
    if probe.status is ProbeStatus.UNCHANGED:
        return Side.GOOD
    if probe.status is not ProbeStatus.CHANGED:
        return Side.SKIP
    moved, whole = log_change(probe.change), log_change(total.change)
    if moved is None or whole is None or whole == 0:
        return Side.SKIP
    return Side.BAD if moved / whole >= 0.5 else Side.PARTLY


def next_index(low: int, high: int, skipped: Collection[int]) -> int | None:
    """The commit to probe strictly between ``low`` (good) and ``high`` (bad): the middle, or
    its nearest neighbour not in ``skipped`` (after, then before, widening); ``None`` when
    none is left."""
    if high - low < 2:
        return None
    middle = (low + high) // 2
    for distance in range(high - low):
        for index in (middle + distance, middle - distance):
            if low < index < high and index not in skipped:
                return index
    return None


def more_than_one(total: Probe, found: Probe, *, margin: float, partly: bool) -> bool:
    """Whether the range's change is more than the found commit's.

    ``partly``: a probe between the ends moved by part of the change (:attr:`Side.PARTLY`).
    Otherwise the two changes are compared on the log scale: the range holds more when they
    differ by more than the practical ``margin`` and by more than their intervals allow (the
    half-widths added in quadrature, a rough but conservative bound for two independent
    intervals).
    """
    if partly:
        return True
    whole, step = log_change(total.change), log_change(found.change)
    if whole is None or step is None:
        return False
    spread = math.hypot(_half_width(total), _half_width(found))
    return abs(whole - step) > max(math.log1p(margin), spread)


def _half_width(probe: Probe) -> float:
    low, high = log_change(probe.ci_low), log_change(probe.ci_high)
    if low is None or high is None:
        return 0.0
    return (high - low) / 2
