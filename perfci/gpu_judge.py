"""Which repeats ran on a throttled GPU, judged against what is usual for the benchmark.

A repeat that ran on a throttled GPU (too hot, at its power cap, slowed by the hardware) is
slower for reasons that have nothing to do with the code under test (issue 12 point 10): the
comparison leaves such repeats out and names them. Pure functions of the ``gpu_state``
summaries (:func:`perfci.gpu_readings.summarise`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from perfci.gpu_readings import (
    CLOCK_DROP,
    SLOWDOWN_REASONS,
    THROTTLE_REASONS,
    THROTTLED_SHARE,
    median,
)

__all__ = ["RepeatJudgement", "StateJudge", "repeat_clock"]


@dataclass(frozen=True, slots=True)
class RepeatJudgement:
    """Why one repeat's GPU state makes its numbers suspect (``suspect`` False: it does not)."""

    suspect: bool
    reasons: tuple[str, ...] = ()
    sm_clock_mhz: float | None = None
    usual_clock_mhz: float | None = None

    def describe(self) -> str:
        """``"1410 MHz against 1980 MHz (hw_slowdown)"``, or the reasons alone."""
        reasons = f"({', '.join(self.reasons)})" if self.reasons else ""
        if (
            self.sm_clock_mhz is not None
            and self.usual_clock_mhz is not None
            and (self.sm_clock_mhz < (1 - CLOCK_DROP) * self.usual_clock_mhz)
        ):
            clock = f"{self.sm_clock_mhz:.0f} MHz against {self.usual_clock_mhz:.0f} MHz"
            return f"{clock} {reasons}".strip()
        return reasons or "a low SM clock"


@dataclass(slots=True)
class StateJudge:
    """Judges repeats against what is usual for this benchmark's GPUs.

    ``usual_clock_mhz`` is the median SM clock of the baseline's repeats (the candidate's own
    repeats when the baseline has none); ``usual_reasons`` are slowdown reasons that hold in
    most baseline runs: a GPU that always runs at its power cap is this runner's normal state,
    not a wrecked measurement, so only an unusual reason makes a repeat suspect.
    """

    usual_clock_mhz: float | None = None
    usual_reasons: frozenset[str] = field(default_factory=frozenset)

    @classmethod
    def from_history(
        cls,
        baseline_runs: Sequence[Sequence[Mapping[str, Any] | None]],
        candidate: Sequence[Mapping[str, Any] | None] = (),
    ) -> StateJudge:
        """The usual state, from the baseline runs' per-repeat states (and the candidate's)."""
        clocks = [c for run in baseline_runs for s in run if s and (c := repeat_clock(s))]
        if not clocks:
            clocks = [c for s in candidate if s and (c := repeat_clock(s))]
        per_run = [
            set().union(*(_slowdowns(s) for s in run if s)) if any(run) else None
            for run in baseline_runs
        ]
        known = [reasons for reasons in per_run if reasons is not None]
        usual = frozenset(
            r
            for r in SLOWDOWN_REASONS
            if known and sum(r in reasons for reasons in known) > len(known) / 2
        )
        return cls(usual_clock_mhz=median(clocks), usual_reasons=usual)

    def judge(self, state: Mapping[str, Any] | None) -> RepeatJudgement:
        """Whether a repeat with ``state`` ran throttled (no state: never suspect)."""
        if not state:
            return RepeatJudgement(suspect=False)
        reasons = tuple(r for r in _slowdowns(state) if r not in self.usual_reasons)
        clock = repeat_clock(state)
        usual = self.usual_clock_mhz or _limit(state)
        slow = clock is not None and usual is not None and clock < (1 - CLOCK_DROP) * usual
        return RepeatJudgement(
            suspect=bool(reasons) or slow,
            reasons=reasons,
            sm_clock_mhz=clock,
            usual_clock_mhz=usual,
        )


def _slowdowns(state: Mapping[str, Any]) -> list[str]:
    """Slowdown reasons that held in more than ``THROTTLED_SHARE`` of some GPU's samples."""
    found: dict[str, None] = {}
    for gpu in _gpus(state):
        fractions = gpu.get("throttle_fractions") or {}
        for name in THROTTLE_REASONS.values():
            share = fractions.get(name, 0) if isinstance(fractions, Mapping) else 0
            if (
                name in SLOWDOWN_REASONS
                and isinstance(share, int | float)
                and (share > THROTTLED_SHARE)
            ):
                found[name] = None
    return list(found)


def repeat_clock(state: Mapping[str, Any]) -> float | None:
    """The repeat's median SM clock: the slowest GPU's, since a step waits for every GPU."""
    clocks = [
        float(c)
        for gpu in _gpus(state)
        if isinstance(c := gpu.get("sm_clock_median_mhz"), int | float)
    ]
    return min(clocks) if clocks else None


def _limit(state: Mapping[str, Any]) -> float | None:
    limits = [
        float(c)
        for gpu in _gpus(state)
        if isinstance(c := gpu.get("sm_clock_limit_mhz"), int | float)
    ]
    return min(limits) if limits else None


def _gpus(state: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    gpus = state.get("gpus")
    return [g for g in gpus if isinstance(g, Mapping)] if isinstance(gpus, list) else []
