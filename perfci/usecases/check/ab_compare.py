"""Comparing the pairs of an A/B check (:mod:`perfci.usecases.check.ab`): the per-repeat values,
the pairs left out for their machine state, the paired comparison and its notes."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from perfci.analysis.paired import compare_paired
from perfci.analysis.steps import primary_step_in
from perfci.analysis.values import PerStep, compared_value
from perfci.core.model import Profile, RunComparison, SeriesKey
from perfci.integrations.machine.gpu_state import StateJudge
from perfci.integrations.machine.host_load import BUSY_EXCESS
from perfci.integrations.machine.judge import others_cpu, step_moved, step_tolerance

if TYPE_CHECKING:
    from perfci.analysis.engine import CompareOptions
    from perfci.usecases.check.ab_git import ABSetup


@dataclass(slots=True)
class Pairs:
    """The parsed profiles of the pairs run so far, and the benchmark time they took."""

    base: list[list[Profile]] = dataclasses.field(default_factory=list)
    pr: list[list[Profile]] = dataclasses.field(default_factory=list)
    seconds: float = 0.0

    def __len__(self) -> int:
        return len(self.pr)


def series_values(
    repeats: Sequence[Sequence[Profile]], per_step: PerStep = PerStep.MEAN
) -> dict[SeriesKey, list[float | None]]:
    """Per series, its per-step value in each repeat (``None`` where the repeat lacks it).

    With ``per_step`` left at the mean, the values the store keeps
    (:mod:`perfci.usecases.submit.ingest`): a repeat with several profiles keys its series by
    section = profile label, and a series appearing twice in one repeat is summed.
    """
    out: dict[SeriesKey, list[float | None]] = {}
    for index, repeat in enumerate(repeats):
        for profile in repeat:
            section = profile.label if len(repeat) > 1 else ""
            for metric in profile.metrics:
                value = compared_value(metric, profile.steps, per_step)
                if value is None:
                    continue
                row = out.setdefault(SeriesKey.of(metric, section), [None] * len(repeats))
                previous = row[index]
                row[index] = value if previous is None else previous + value
    return out


def compare_pairs(
    pairs: Pairs, *, benchmark: str, options: CompareOptions, setup: ABSetup
) -> RunComparison:
    """The paired comparison of the pairs so far, with the A/B note first."""
    note = (
        f"Same-runner A/B comparison: {len(pairs)} pairs of the merge-base "
        f"{setup.base_sha[:12]} ({setup.base_branch}) and this pull request, run "
        "alternately on one runner (base first in even pairs, pull request first in odd "
        "ones) and compared pair by pair, so machine-level noise cancels."
    )
    kept, screened = screen_pairs(pairs.base, pairs.pr)
    base, pr = [pairs.base[k] for k in kept], [pairs.pr[k] for k in kept]
    fastest = _fastest_step_note(base + pr)
    return compare_paired(
        series_values(base, PerStep.FASTEST),
        series_values(pr, PerStep.FASTEST),
        benchmark=benchmark,
        options=options,
        notes=[note, *fastest, *screened],
    )


def _fastest_step_note(repeats: Sequence[Sequence[Profile]]) -> list[str]:
    """One line when some series are compared on their fastest step, saying which and why."""
    steps = [
        len(metric.step_totals_ns)
        for repeat in repeats
        for profile in repeat
        for metric in profile.metrics
        if metric.step_totals_ns
    ]
    if not steps:
        return []
    counts = f"{min(steps)}" if min(steps) == max(steps) else f"{min(steps)}–{max(steps)}"
    return [
        "Host-side operators and ranges that run in every profiled step are compared on "
        f"their fastest of the {counts} steps: another process on the runner only adds "
        "time, to some steps more than others. The step time is compared on its mean."
    ]


#: Fewest pairs kept when some are left out for their machine state.
MIN_SCREENED_PAIRS = 3


def screen_pairs(
    base: Sequence[Sequence[Profile]], pr: Sequence[Sequence[Profile]]
) -> tuple[list[int], list[str]]:
    """The pairs to compare, leaving out those whose two processes ran on different machines.

    A pair cancels what the machine did to both of its processes; when only one of them ran
    throttled or on a busy host (a neighbour's job started between the two), the pair's difference
    is the machine's, not the code's. Such a pair is left out and named, as long as
    :data:`MIN_SCREENED_PAIRS` remain. What is usual (the SM clock, the host's load) is learnt from
    every process of the comparison (:class:`perfci.integrations.machine.gpu_state.StateJudge`); a
    pair where both processes were suspect is kept: they shared the machine's state.
    """
    every = list(range(min(len(base), len(pr))))
    states = [(_state_of(base[k]), _state_of(pr[k])) for k in every]
    if not any(b or p for b, p in states):
        return every, []
    judge = StateJudge.from_history([[s for pair in states for s in pair if s]])
    busy = _busy_throughout([s for pair in states for s in pair if s])
    ratios = _step_ratios(base, pr)
    tolerance = step_tolerance([[r for r in ratios if r is not None]])
    kept, notes = [], []
    for k, (b, p) in enumerate(states):
        on_base, on_pr = judge.judge(b), judge.judge(p)
        side, judged = ("base", on_base) if on_base.suspect else ("pull request", on_pr)
        others = [r for i, r in enumerate(ratios) if i != k and r is not None]
        # A busy host alone counts only when the pair's step ratio moved with it.
        harmless = judged.host_only and not step_moved(ratios[k], others, tolerance)
        if on_base.suspect == on_pr.suspect or harmless:
            kept.append(k)
            continue
        notes.append(f"pair {k + 1} left out: only its {side} process {judged.what_happened()}")
    if len(kept) < MIN_SCREENED_PAIRS:
        return every, busy
    return kept, [*busy, *notes]


def _step_ratios(
    base: Sequence[Sequence[Profile]], pr: Sequence[Sequence[Profile]]
) -> list[float | None]:
    """Per pair, the primary step of the pull request's process over the base's."""
    pairs = min(len(base), len(pr))
    sides = series_values(base[:pairs]), series_values(pr[:pairs])
    step = primary_step_in(sides[0])
    if step is None or step not in sides[1]:
        return [None] * pairs
    return [p / b if b and p else None for b, p in zip(sides[0][step], sides[1][step], strict=True)]


def _busy_throughout(states: Sequence[Mapping[str, object]]) -> list[str]:
    """A note when the host was busy for the whole comparison: no pair stands out then, yet the
    intervals are wider (on an H200 with every CPU taken, one kernel's 95 % interval was ±13 %
    at 5 pairs, against ±1 % on the quiet host: ``benchmarks/RESULTS.md``)."""
    shares = [v for v in (others_cpu(s) for s in states) if v is not None]
    if len(shares) < len(states) or not shares or min(shares) < BUSY_EXCESS:
        return []
    low, high = f"{min(shares):.0%}", f"{max(shares):.0%}"
    took = low if low == high else f"{low} to {high}"
    return [
        f"Every process ran on a busy host (other processes took {took} of its CPU): pairing "
        "cancels what both processes of a pair shared, but the timings spread more than on a "
        "quiet runner."
    ]


def _state_of(profiles: Sequence[Profile]) -> dict[str, object] | None:
    state = profiles[0].metadata.get("gpu_state") if profiles else None
    return state if isinstance(state, dict) else None
