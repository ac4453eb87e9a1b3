"""Adaptive repeats: run more repeats (or A/B pairs) only while that can still settle the verdict.

A check whose gated metrics are inconclusive only because their intervals are too wide runs
another batch of repeats and looks again, up to ``max_repeats`` and the time ``budget``; it
stops as soon as every gated metric is decided. Looking at the data several times and stopping
when it looks decided inflates the false-alarm rate of a test done at level ``alpha`` at every
look, so the looks follow a **fixed plan with Bonferroni alpha spending**:

- the looks are fixed before the first repeat runs: after ``n``, ``2n``, ``3n`` … repeats (``n``
  the configured repeats or pairs) up to ``max_repeats``, ``L`` looks in all;
- every look, the last one included, tests at ``alpha / L`` (the false-discovery level of
  Benjamini–Hochberg across the run's metrics);
- so the probability that *any* look raises a false alarm is at most ``L · alpha / L = alpha``,
  whatever the looks' dependence and whenever the loop stops (Bonferroni's inequality).

This is the simplest valid alpha-spending plan; group-sequential boundaries (Pocock 1977,
O'Brien & Fleming 1979) spend the same alpha less conservatively but need the looks' joint
distribution, which the moderated, BH-adjusted tests here do not give in closed form. The
``unchanged`` verdict (the interval inside the margin) is an equivalence claim made at the
usual confidence at each look; stopping on it cannot raise a false alarm, it can only end the
search for a real change early. Details and numbers: ``docs/adaptive.md``.

References: Bonferroni (1936); Lan & DeMets (1983), "Discrete sequential boundaries for
clinical trials", *Biometrika* 70:659 (alpha spending); Jennison & Turnbull (2000),
*Group Sequential Methods with Applications to Clinical Trials*, ch. 2.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from perfci.core.model import MetricComparison, RunComparison, Verdict

#: Why the loop stopped, as the result's note says it.
DECIDED = "every gated metric is decided"
REGRESSION_FOUND = "a gated regression was found"
NO_BASELINE = "there is no baseline to compare with"
NOT_BY_REPEATS = (
    "the gated metrics still open would need more repeats than allowed, or their "
    "run-to-run spread alone is too wide"
)
AT_MAXIMUM = "the most repeats allowed (--max-repeats) were run"
OVER_BUDGET = "another batch would exceed the time budget (--budget)"
SETTLED = "the metric followed is settled"
ALREADY_STORED = "this run was already stored (a retried job)"


@dataclass(frozen=True, slots=True)
class LookPlan:
    """When to look: the cumulative repeats (or pairs) at each look, fixed up front."""

    sizes: tuple[int, ...]

    @property
    def looks(self) -> int:
        return len(self.sizes)

    @property
    def maximum(self) -> int:
        return self.sizes[-1]

    def alpha(self, alpha: float) -> float:
        """The level every look tests at (Bonferroni spending: ``alpha / L``)."""
        return alpha / self.looks


def plan_looks(initial: int, maximum: int | None) -> LookPlan:
    """Looks after ``initial``, ``2·initial`` … repeats, the last at ``maximum``.

    ``maximum`` ``None`` means three times ``initial``; a maximum at or below ``initial`` means
    one look (adaptive repeats off, the full ``alpha`` on it).
    """
    if initial < 1:
        raise ValueError("a plan needs at least one repeat")
    top = 3 * initial if maximum is None else maximum
    sizes = list(range(initial, top, initial)) or [initial]
    if top > sizes[-1]:
        sizes.append(top)
    return LookPlan(tuple(sizes))


def single_look(initial: int) -> LookPlan:
    """One look at ``initial`` repeats: profiles read from files, remote mode."""
    return LookPlan((initial,))


def open_gated(result: RunComparison) -> list[MetricComparison]:
    """The gated metrics still inconclusive."""
    return [m for m in result.metrics if m.gated and m.verdict is Verdict.INCONCLUSIVE]


def settleable(result: RunComparison, maximum: int) -> list[MetricComparison]:
    """Gated inconclusive metrics that more repeats, up to ``maximum``, would settle.

    Their ``repeats_needed`` says how many repeats (or pairs) would narrow the interval
    enough; ``None`` means no number would (the run-to-run spread alone is too wide).
    """
    return [
        m
        for m in open_gated(result)
        if m.repeats_needed is not None and m.repeats_needed <= maximum
    ]


def next_reason(
    result: RunComparison,
    *,
    done: int,
    plan: LookPlan,
    seconds_per_repeat: float,
    spent: float,
    budget: float | None,
) -> str | None:
    """Why to stop after a look at ``done`` repeats, or ``None`` to run the next batch.

    A gated regression ends the search (the check fails; more repeats cannot undo a finding
    made at the spent level). Otherwise the loop goes on while some gated metric is
    inconclusive and settleable within the plan: an improvement or an ``unchanged`` step
    does not hide a kernel that might have regressed.
    """
    if result.verdict is Verdict.REGRESSION:
        return REGRESSION_FOUND
    if result.verdict is Verdict.NO_BASELINE:
        return NO_BASELINE
    if not open_gated(result):
        return DECIDED
    if not settleable(result, plan.maximum):
        return NOT_BY_REPEATS
    return room_left(
        done=done, plan=plan, seconds_per_repeat=seconds_per_repeat, spent=spent, budget=budget
    )


def room_left(
    *, done: int, plan: LookPlan, seconds_per_repeat: float, spent: float, budget: float | None
) -> str | None:
    """Why no further look fits (the plan's maximum, the time budget), or ``None``."""
    later = [size for size in plan.sizes if size > done]
    if not later:
        return AT_MAXIMUM
    if budget is not None and spent + (later[0] - done) * seconds_per_repeat > budget:
        return OVER_BUDGET
    return None


def note(
    *, done: int, plan: LookPlan, looks: int, alpha: float, reason: str, unit: str = "repeats"
) -> str:
    """The result's line about the adaptive repeats: how many ran, at what level, why stopped."""
    if plan.looks == 1:
        return f"{done} {unit}, one look (adaptive {unit} off): tested at alpha {alpha:g}."
    level = plan.alpha(alpha)
    looked = "1 look" if looks == 1 else f"{looks} looks"
    return (
        f"Adaptive {unit}: {done} of at most {plan.maximum} run, {looked} of "
        f"{plan.looks} planned (after {', '.join(map(str, plan.sizes))}); each look "
        f"tested at alpha {alpha:g}/{plan.looks} = {_digits(level)}; stopped: {reason}."
    )


def _digits(value: float) -> str:
    return f"{value:.{max(2, 1 - math.floor(math.log10(value)))}f}"
