"""Which repeats ran on a throttled GPU or a busy host, judged against what is usual.

A repeat that ran on a throttled GPU (too hot, at its power cap, slowed by the hardware), or while
other processes took a good part of the host's CPU, is slower for reasons that have nothing to do
with the code under test (issue 12 point 10): the comparison leaves such repeats out and names them.
Pure functions of the ``gpu_state`` summaries
(:func:`perfci.integrations.machine.gpu_readings.summarise`, with ``host`` from
:mod:`perfci.integrations.machine.host_load`).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from perfci.analysis.stats import MAD_TO_SD
from perfci.integrations.machine.gpu_readings import (
    CLOCK_DROP,
    SLOWDOWN_REASONS,
    THROTTLE_REASONS,
    THROTTLED_SHARE,
    median,
)
from perfci.integrations.machine.host_load import BUSY_EXCESS

__all__ = [
    "FREE_CPU_RATIO",
    "MIN_STEP_MOVE",
    "LoadShift",
    "RepeatJudgement",
    "StateJudge",
    "load_shift",
    "others_cpu",
    "repeat_clock",
    "step_moved",
    "step_tolerance",
]

#: A busy host is evidence against a repeat only when its step time moved with it: by at
#: least this much, or three times the step's usual spread (:func:`step_tolerance`). The load
#: of a neighbour that left the benchmark alone (one busy loop made the example's one-thread
#: step 10 % *faster*, ``benchmarks/RESULTS.md``; a job beside a GPU-bound benchmark) is no
#: reason to throw its numbers away, and leaving runs out on that ground alone once turned a
#: +30 % regression into a pass (a test run beside another).
MIN_STEP_MOVE = 0.05
#: A load shift is also a change of the CPU that other processes *left* by this factor or
#: more (on a quiet runner, others under 10 %, no stricter than :data:`BUSY_EXCESS`). What
#: slows a benchmark is the capacity it is left, not the others' share: on the example's real
#: runs (issue 30, ``benchmarks/RESULTS.md``) a baseline beside other jobs (others 50-69 % of
#: a 2-core host) and pull requests beside two more busy loops (77-89 %) differ by less than
#: :data:`BUSY_EXCESS`, but left the benchmark 0.31-0.50 against 0.11-0.23 of the host, and
#: the unchanged code's step read +107 %, its matrix products +40-80 %. A two-thread
#: benchmark on two cores waits for its slower thread, so a small loss of the CPU left
#: already costs much: the factor is small.
FREE_CPU_RATIO = 1.25


@dataclass(frozen=True, slots=True)
class RepeatJudgement:
    """Why one repeat's state makes its numbers suspect (``suspect`` False: it does not).

    ``others_cpu_share`` is set when the host was busy: the share of its CPU other
    processes took, against ``usual_others_share``.
    """

    suspect: bool
    reasons: tuple[str, ...] = ()
    sm_clock_mhz: float | None = None
    usual_clock_mhz: float | None = None
    others_cpu_share: float | None = None
    usual_others_share: float | None = None

    @property
    def host_only(self) -> bool:
        """Whether only the busy host (not the GPU) made the repeat suspect."""
        return self.suspect and not self.gpu_suspect

    @property
    def gpu_suspect(self) -> bool:
        """Whether the GPU (not only the host) made the repeat suspect."""
        return self.suspect and (bool(self.reasons) or self._slow_clock())

    def _slow_clock(self) -> bool:
        return _below_usual(self.sm_clock_mhz, self.usual_clock_mhz)

    def host_words(self) -> str | None:
        """``"other processes took 48% of the host's CPU, usually 2%"`` when the host was busy."""
        if self.others_cpu_share is None:
            return None
        usual = self.usual_others_share or 0.0
        return (
            f"other processes took {self.others_cpu_share:.0%} of the host's CPU, "
            f"usually {usual:.0%}"
        )

    def what_happened(self) -> str:
        """``"ran at 1410 MHz against 1980 MHz (sw_thermal_slowdown)"``, ``"ran on a busy
        host: other processes took …"``, or both joined by "and"."""
        found = []
        if self.gpu_suspect:
            way = "ran at" if self._slow_clock() else "ran with the GPU throttled"
            found.append(f"{way} {self.describe()}")
        if (words := self.host_words()) is not None:
            found.append(f"ran on a busy host: {words}")
        return " and ".join(found)

    def describe(self) -> str:
        """``"1410 MHz against 1980 MHz (hw_slowdown)"``, or the reasons alone."""
        reasons = f"({', '.join(self.reasons)})" if self.reasons else ""
        if self._slow_clock():
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
    #: Median share of the host's CPU other processes took during the baseline's repeats
    #: (0 when none was measured: a runner's usual state is to run the benchmark alone).
    usual_others_share: float = 0.0

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
        shares = [v for run in baseline_runs for s in run if s and (v := others_cpu(s)) is not None]
        return cls(
            usual_clock_mhz=median(clocks),
            usual_reasons=usual,
            usual_others_share=median(shares) or 0.0,
        )

    def judge(self, state: Mapping[str, Any] | None) -> RepeatJudgement:
        """Whether a repeat with ``state`` ran throttled (no state: never suspect)."""
        if not state:
            return RepeatJudgement(suspect=False)
        reasons = tuple(r for r in _slowdowns(state) if r not in self.usual_reasons)
        clock = repeat_clock(state)
        usual = self.usual_clock_mhz or _limit(state)
        slow = _below_usual(clock, usual)
        others = others_cpu(state)
        busy = others is not None and others >= self.usual_others_share + BUSY_EXCESS
        return RepeatJudgement(
            suspect=bool(reasons) or slow or busy,
            reasons=reasons,
            sm_clock_mhz=clock,
            usual_clock_mhz=usual,
            others_cpu_share=others if busy else None,
            usual_others_share=self.usual_others_share if busy else None,
        )


def _below_usual(clock: float | None, usual: float | None) -> bool:
    """Whether an SM clock is more than ``CLOCK_DROP`` below the usual one."""
    return clock is not None and usual is not None and clock < (1 - CLOCK_DROP) * usual


def others_cpu(state: Mapping[str, Any]) -> float | None:
    """The share of the host's CPU other processes took during the repeat, if measured."""
    host = state.get("host")
    value = host.get("others_cpu_share") if isinstance(host, Mapping) else None
    return float(value) if isinstance(value, int | float) and 0 <= value <= 1 else None


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
    return _lowest(state, "sm_clock_median_mhz")


def _limit(state: Mapping[str, Any]) -> float | None:
    return _lowest(state, "sm_clock_limit_mhz")


def _lowest(state: Mapping[str, Any], field: str) -> float | None:
    """The lowest of the GPUs' numeric ``field``; ``None`` when no GPU reports it."""
    values = [float(v) for gpu in _gpus(state) if isinstance(v := gpu.get(field), int | float)]
    return min(values) if values else None


def _gpus(state: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    gpus = state.get("gpus")
    return [g for g in gpus if isinstance(g, Mapping)] if isinstance(gpus, list) else []


def step_tolerance(groups: Sequence[Sequence[float]]) -> float:
    """How far (log) a step may move without the host's load being the cause: three times the
    robust spread of the step inside ``groups`` (the repeats of each run, or the pairs'
    differences as one group), and at least :data:`MIN_STEP_MOVE`."""
    deviations: list[float] = []
    for group in groups:
        logs = [math.log(v) for v in group if v > 0]
        if len(logs) >= 2:
            centre = statistics.median(logs)
            deviations.extend(abs(x - centre) for x in logs)
    spread = MAD_TO_SD * statistics.median(deviations) if deviations else 0.0
    return max(MIN_STEP_MOVE, 3 * spread)


def step_moved(value: float | None, others: Sequence[float], tolerance: float) -> bool:
    """Whether ``value`` lies more than ``tolerance`` (log) from the median of ``others``;
    ``True`` when either is missing (no numbers to clear the repeat: the state decides)."""
    usable = [v for v in others if v > 0]
    if value is None or value <= 0 or not usable:
        return True
    return abs(math.log(value / statistics.median(usable))) > tolerance


@dataclass(frozen=True, slots=True)
class LoadShift:
    """The host's load during the candidate's repeats differed from the baseline runs'.

    ``quieter``: other processes took less of the host than in any baseline run (by
    :data:`~perfci.integrations.machine.host_load.BUSY_EXCESS`), or left the benchmark
    :data:`FREE_CPU_RATIO` times the CPU they usually left it (the baseline runs' median), so
    the baseline's times held load the candidate's do not, and a line the candidate ran faster
    may be that alone; ``busier`` the reverse. Shares are each run's median over its repeats.
    The usual level counts, not only the range: the baseline's level is what its typical runs
    measured, and one busy baseline run among quiet ones does not make a busy candidate fair.
    """

    quieter: bool
    candidate_share: float
    baseline_low: float
    baseline_high: float
    baseline_usual: float

    def words(self) -> str:
        """``"other processes took 2% of the host's CPU in this run, 48–71% (usually 60%) in
        the baseline runs"``."""
        low, high = round(self.baseline_low * 100), round(self.baseline_high * 100)
        usual = round(self.baseline_usual * 100)
        seen = f"{low}%" if low == high else f"{low}–{high}% (usually {usual}%)"
        return (
            f"other processes took {self.candidate_share:.0%} of the host's CPU in this run, "
            f"{seen} in the baseline runs"
        )


def load_shift(
    baseline_runs: Sequence[Sequence[Mapping[str, Any] | None]],
    candidate: Sequence[Mapping[str, Any] | None],
) -> LoadShift | None:
    """Whether the candidate's host load lay beyond what the baseline runs saw or usually
    left the benchmark (see :class:`LoadShift`); ``None`` when it did not, or when either side
    was not measured."""
    levels = [
        median(shares)
        for run in baseline_runs
        if (shares := [v for s in run if s and (v := others_cpu(s)) is not None])
    ]
    own = median([v for s in candidate if s and (v := others_cpu(s)) is not None])
    known = [v for v in levels if v is not None]
    if own is None or not known:
        return None
    low, high, usual = min(known), max(known), median(known) or 0.0
    quieter = own < low - BUSY_EXCESS or _free(own) > _free(usual) * FREE_CPU_RATIO
    busier = own > high + BUSY_EXCESS or _free(own) < _free(usual) / FREE_CPU_RATIO
    if quieter or busier:
        return LoadShift(
            quieter=quieter,
            candidate_share=own,
            baseline_low=low,
            baseline_high=high,
            baseline_usual=usual,
        )
    return None


def _free(others_share: float) -> float:
    """The share of the host's CPU that other processes left over."""
    return max(1.0 - others_share, 0.0)
