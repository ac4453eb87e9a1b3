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
explicit). Unbuildable commits are on neither side: the search skips them, probing the nearest
neighbour inside the range still open (``git bisect skip``'s rule).

An *inconclusive* probe still places its commit when its interval lies wholly on one side of
the half-way point. The question a probe answers is not "did this commit change by more than
the 2 % margin?" (which a loaded runner's ±10 % intervals never settle) but "does it sit at the
good level or the bad one?", and for a +30 % range an interval of ±10 % answers that. A probe
whose interval straddles the half-way point is skipped like an unbuildable one. One whose
interval lies short of the half-way point but past the practical margin, in the range's
direction, sits on the good side having moved by part of the change (:attr:`Side.PARTLY`):
the evidence, with its numbers, that the range holds more than one change. A wrong side
costs nothing worse than an unconfirmed answer: the culprit must then show the change against
its parent, twice (:func:`moved`).
"""

from __future__ import annotations

import math
from collections.abc import Collection, Sequence

from perfci.core.bisection import Probe, ProbeStatus, log_change
from perfci.core.compat import StrEnum

__all__ = [
    "SEQUENTIAL_BOUND",
    "Rest",
    "Side",
    "judge_rest",
    "more_than_one",
    "moved",
    "next_index",
    "rest_of_range",
    "side_of",
]


class Side(StrEnum):
    GOOD = "good"
    BAD = "bad"
    #: Good, but changed by part of the range's change: another change lies before it.
    PARTLY = "partly"
    SKIP = "skip"


def side_of(probe: Probe, total: Probe, *, margin: float = 0.02) -> Side:
    """Which side of the change ``probe`` (against the good end) lies on; ``total`` is the bad
    end against the good end, a changed probe; ``margin`` the practical margin (a relative
    change) past which an inconclusive probe short of the half-way point moved by part of it."""
    if probe.status is ProbeStatus.UNCHANGED:
        return Side.GOOD
    whole = log_change(total.change)
    if probe.status is ProbeStatus.UNBUILDABLE or whole is None or whole == 0:
        return Side.SKIP
    if probe.status is ProbeStatus.INCONCLUSIVE:
        return _side_by_interval(probe, whole, math.log1p(margin))
    shift = log_change(probe.change)
    if shift is None:
        return Side.SKIP
    return Side.BAD if shift / whole >= 0.5 else Side.PARTLY


def _side_by_interval(probe: Probe, whole: float, margin: float) -> Side:
    """An inconclusive probe's side: its interval (on the log scale, turned so that the
    range's change is positive) wholly past the half-way point, or wholly short of it; short
    of it and wholly past ``margin`` (log scale), it moved by part of the change."""
    low, high = log_change(probe.ci_low), log_change(probe.ci_high)
    if low is None or high is None:
        return Side.SKIP
    sign = math.copysign(1.0, whole)
    low, high = sorted((low * sign, high * sign))
    half = abs(whole) / 2
    if low >= half:
        return Side.BAD
    if high >= half:
        return Side.SKIP
    return Side.PARTLY if low > margin else Side.GOOD


def moved(probe: Probe, direction: float | None = None) -> bool:
    """Whether a probe shows a change (in ``direction``'s sign when given): its verdict says
    changed, or, inconclusive, its interval leaves out zero.

    The second case is a bisection's one metric, chosen beforehand: the verdict's correction
    for the comparison's many lines (:mod:`perfci.analysis.judge`) does not apply to it, its
    own interval does.
    """
    if probe.status is ProbeStatus.CHANGED:
        shift = log_change(probe.change)
    elif probe.status is ProbeStatus.INCONCLUSIVE:
        low, high = log_change(probe.ci_low), log_change(probe.ci_high)
        if low is None or high is None or low * high <= 0:
            return False
        shift = low
    else:
        return False
    if shift is None or shift == 0:
        return False
    return direction is None or shift * direction > 0


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


class Rest(StrEnum):
    """What the readings say of the range's change beyond the culprit's."""

    #: More than one change: the rest differs from zero past the margin and its own bound.
    MORE = "more"
    #: One change, as far as the readings tell.
    ONE = "one"
    #: Suggestive (the rest is more than one standard error from zero) but not settled: the
    #: culprit's parent measured against GOOD again, with more pairs, would settle it.
    OPEN = "open"


def rest_of_range(
    total: Probe,
    found: Probe,
    *,
    rerun: Probe | None = None,
    before: Sequence[Probe] = (),
) -> tuple[float, float] | None:
    """The range's change beyond the culprit's, on the log scale, with its standard error.

    Changes along a range add up on the log scale, so the rest is read in two ways: the
    range's change less the culprit's (``found`` against its parent, pooled with its
    ``rerun``), and each A/B of the culprit's parent against the good end (``before``), which
    carries every earlier change. They are pooled by inverse variance, each standard error read
    from its 95 % interval. ``None`` without the readings to say.
    """
    culprit = _pooled([_estimate(p) for p in (found, rerun) if p is not None])
    whole = _estimate(total)
    if culprit is None or whole is None:
        return None
    rests = [(whole[0] - culprit[0], math.hypot(whole[1], culprit[1]))]
    rests += [e for e in map(_estimate, before) if e is not None]
    return _pooled(rests)


def judge_rest(
    rest: tuple[float, float] | None,
    *,
    margin: float,
    bound: float | None = None,
    direction: float | None = None,
) -> Rest:
    """More than one change when the rest differs from zero by more than the practical
    ``margin`` and by more than ``bound`` standard errors (default: a 95 % bound); open when it
    is at least one standard error from zero; else one.

    With ``direction`` (the sign of the range's change), a rest pointing the other way is one
    change: the culprit then carries more than the whole range, which says nothing of a second
    change like it. It is either an earlier change the other way or a steady difference between
    two checkouts of the same code (where code and environment land in memory moves a tight
    loop's time by a few percent: Mytkowicz et al. 2009, "Producing wrong data without doing
    anything obviously wrong!", ASPLOS). Seen on the loaded VM (stop 43): a one-change range
    whose culprit's parent read −4.3 % and −3.4 % against GOOD, twice, with the same code.
    """
    if rest is None:
        return Rest.ONE
    estimate, error = rest
    if direction is not None and estimate * direction <= 0:
        return Rest.ONE
    if abs(estimate) > max(math.log1p(margin), (bound or _Z95) * error):
        return Rest.MORE
    return Rest.OPEN if abs(estimate) > error else Rest.ONE


#: The bound of a rest judged at every look of a probe that adds pairs until it is settled:
#: Pocock's constant for five looks at a two-sided 5 %, so that looking again and again does not
#: turn noise into a second change more often than one look at 95 % would.
SEQUENTIAL_BOUND = 2.413


def more_than_one(
    total: Probe,
    found: Probe,
    *,
    margin: float,
    partly: bool,
    rerun: Probe | None = None,
    parent: Probe | None = None,
) -> bool:
    """Whether the range's change is more than the found commit's.

    ``partly``: a probe between the ends moved by part of the change (:attr:`Side.PARTLY`).
    Otherwise :func:`rest_of_range` of the readings given, judged at a 95 % bound in the
    range's direction (:func:`judge_rest`). Without a rerun or a parent this is the plain
    comparison of the two changes; each added reading narrows the bound (under load a +6 %
    first change beside a +30 % one needs them).
    """
    if partly:
        return True
    before = [parent] if parent is not None else []
    rest = rest_of_range(total, found, rerun=rerun, before=before)
    return judge_rest(rest, margin=margin, direction=log_change(total.change)) is Rest.MORE


#: The normal quantile of a two-sided 95 % interval.
_Z95 = 1.959963984540054


def _estimate(probe: Probe) -> tuple[float, float] | None:
    """A probe's change and standard error on the log scale; ``None`` without an interval."""
    change = log_change(probe.change)
    low, high = log_change(probe.ci_low), log_change(probe.ci_high)
    if change is None or low is None or high is None or high <= low:
        return None
    return change, (high - low) / 2 / _Z95


def _pooled(estimates: Sequence[tuple[float, float] | None]) -> tuple[float, float] | None:
    """Inverse-variance pooling of independent estimates (value, standard error)."""
    known = [e for e in estimates if e is not None]
    if not known:
        return None
    weights = [1 / error**2 for _, error in known]
    total = sum(weights)
    value = sum(w * v for w, (v, _) in zip(weights, known, strict=True)) / total
    return value, math.sqrt(1 / total)
