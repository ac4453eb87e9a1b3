"""The weekly trend report's types: what changed on a branch during one period.

Plain dataclasses, built by :func:`perfci.usecases.weekly.report.build_weekly_report`, rendered by
:mod:`perfci.report.weekly_markdown` and :mod:`perfci.report.weekly_html`, and turned into JSON
by :func:`perfci.usecases.weekly.report_json.report_to_dict`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from typing import Literal

from perfci.core.answers import BenchmarkAnswers
from perfci.core.model import SeriesKey

__all__ = [
    "COLLAPSE_EMPTY_DAYS",
    "AlertInfo",
    "AlertStatus",
    "BenchmarkTrend",
    "ChangePointReport",
    "Coverage",
    "DayCount",
    "DayStretch",
    "EnvironmentSeen",
    "KernelContribution",
    "MeasureChange",
    "Noise",
    "SeriesNoise",
    "ShareMove",
    "TrendPoint",
    "WeeklyReport",
]


#: Where an alert stands: new, acknowledged (an accepted change), or dismissed (a false alarm).
AlertStatus = Literal["open", "acknowledged", "dismissed"]


@dataclass(frozen=True, slots=True)
class AlertInfo:
    """A stored alert. ``series`` is the metric's readable name (section ▸ scope ▸ name).

    The one alert record: the store returns it, reports and ``perfci alerts`` show it, and the
    API's ``AlertPublic`` takes its fields from it. :class:`NewAlert` is what is handed to the
    store to record (the series by key, the runs nearby that identify the same change); it
    has no id, status or timestamps yet.
    """

    id: int
    project: str
    benchmark: str
    series: str
    environment_id: int
    branch: str
    run_id: int
    commit: str | None
    previous_commit: str | None
    before: float
    after: float
    change: float
    p_value: float
    status: AlertStatus
    note: str | None
    created_at: datetime
    updated_at: datetime


@dataclass(frozen=True, slots=True)
class TrendPoint:
    """One run of the step-time history: ``value`` ns per step, ``level`` its segment's."""

    run_id: int
    commit: str | None
    time: datetime
    value: float
    level: float
    in_period: bool


@dataclass(frozen=True, slots=True)
class KernelContribution:
    """One kernel's (memory operation's, collective's) part of a step-time change, per step."""

    name: str
    kind: str
    key: str
    before_ns: float | None
    after_ns: float | None
    delta_ns: float
    share: float  # of the step-time change; negative when it moved the other way


@dataclass(slots=True)
class ChangePointReport:
    """A change of step-time level: the new level starts at run ``run_id`` / ``commit``."""

    index: int
    run_id: int
    commit: str | None
    previous_commit: str | None
    time: datetime
    before: float
    after: float
    change: float
    p_value: float
    in_period: bool
    late: bool = False  # began before the period, but the history up to it did not show it yet
    contributors: list[KernelContribution] = field(default_factory=list)
    explained: float | None = None  # sum of the primary shares (see perfci.analysis.attribution)
    alert_id: int | None = None
    alert_status: str | None = None


@dataclass(frozen=True, slots=True)
class MeasureChange:
    """A change of level of a benchmark case or headline value (throughput, peak memory ...).

    ``before`` and ``after`` are in ``unit``; ``worse`` says whether the change went the bad
    way for the metric's direction (a throughput falling, a peak memory rising).
    """

    name: str
    kind: str
    unit: str
    better: str
    run_id: int
    commit: str | None
    previous_commit: str | None
    time: datetime
    before: float
    after: float
    change: float
    p_value: float
    in_period: bool

    @property
    def worse(self) -> bool:
        return self.change < 0 if self.better == "higher" else self.change > 0


@dataclass(frozen=True, slots=True)
class ShareMove:
    """A kernel whose share of step time moved between the period's first and last runs."""

    name: str
    kind: str
    key: str
    share_before: float
    share_after: float
    ns_before: float | None
    ns_after: float | None

    @property
    def change(self) -> float:
        return self.share_after - self.share_before


@dataclass(frozen=True, slots=True)
class SeriesNoise:
    name: str
    kind: str
    key: str
    cv: float
    share: float | None


@dataclass(slots=True)
class Noise:
    """Run-to-run spread within the stable segment (``segment_runs`` runs)."""

    step_cv: float | None
    segment_runs: int
    noisiest: list[SeriesNoise] = field(default_factory=list)


@dataclass(slots=True)
class BenchmarkTrend:
    """Everything the report says about one benchmark in one environment."""

    benchmark: str
    environment_id: int
    environment: dict[str, str]
    step: SeriesKey | None
    runs_in_period: int
    points: list[TrendPoint] = field(default_factory=list)
    change_points: list[ChangePointReport] = field(default_factory=list)
    share_movers: list[ShareMove] = field(default_factory=list)
    new_kernels: list[str] = field(default_factory=list)
    vanished_kernels: list[str] = field(default_factory=list)
    noise: Noise | None = None
    notes: list[str] = field(default_factory=list)
    #: In-period changes of the benchmark cases and headline values beside the step time.
    measure_changes: list[MeasureChange] = field(default_factory=list)

    @property
    def step_name(self) -> str:
        return self.step.display_name if self.step else "—"

    @property
    def period_change_points(self) -> list[ChangePointReport]:
        """The change points this period reports: those in it, and the late ones."""
        return [cp for cp in self.change_points if cp.in_period or cp.late]


@dataclass(frozen=True, slots=True)
class DayCount:
    day: date
    runs: int


@dataclass(frozen=True, slots=True)
class EnvironmentSeen:
    id: int
    values: dict[str, str]
    runs: int
    benchmarks: list[str]


#: Consecutive days without runs that the coverage table shows as one "first … last" entry.
COLLAPSE_EMPTY_DAYS = 3


@dataclass(frozen=True, slots=True)
class DayStretch:
    """Consecutive days of the coverage table: one day, or a run of days without runs."""

    first: date
    last: date
    runs: int

    @property
    def days(self) -> int:
        return (self.last - self.first).days + 1


@dataclass(slots=True)
class Coverage:
    runs: int
    days: list[DayCount] = field(default_factory=list)
    days_without_runs: list[date] = field(default_factory=list)
    environments: list[EnvironmentSeen] = field(default_factory=list)

    def stretches(self) -> list[DayStretch]:
        """``days`` with each run of ``COLLAPSE_EMPTY_DAYS`` or more consecutive days without
        runs collapsed into one entry: a 30-day report of a weekly benchmark is 4 rows with
        runs and the gaps between them, not 26 rows of zero."""
        merged: list[DayStretch] = []
        for day in self.days:
            previous = merged[-1] if merged else None
            if (
                day.runs == 0
                and previous is not None
                and previous.runs == 0
                and previous.last + timedelta(days=1) == day.day
            ):
                merged[-1] = DayStretch(previous.first, day.day, 0)
            else:
                merged.append(DayStretch(day.day, day.day, day.runs))
        out = []
        for stretch in merged:
            if stretch.runs or stretch.days >= COLLAPSE_EMPTY_DAYS:
                out.append(stretch)
            else:  # a weekend is clearer as its two days than as a range
                out.extend(
                    DayStretch(d, d, 0)
                    for d in (stretch.first + timedelta(days=i) for i in range(stretch.days))
                )
        return out

    def empty_stretches(self) -> list[DayStretch]:
        """The stretches of days without runs, oldest first."""
        return [stretch for stretch in self.stretches() if stretch.runs == 0]


@dataclass(slots=True)
class WeeklyReport:
    """The weekly report of ``project`` on ``branch`` for ``[since, until)``."""

    project: str
    branch: str
    week: str  # period_label(): the period's last ISO week, "2024-W05"
    since: datetime
    until: datetime
    history_since: datetime
    benchmarks: list[BenchmarkTrend] = field(default_factory=list)
    coverage: Coverage = field(default_factory=lambda: Coverage(runs=0))
    alerts: list[AlertInfo] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    #: Per benchmark, what people answered to its pull requests' alerts (issue 34).
    answers: list[BenchmarkAnswers] = field(default_factory=list)

    def measure_changes(self) -> list[tuple[BenchmarkTrend, MeasureChange]]:
        """The period's changes of benchmark cases and headline values, worse ones first."""
        found = [(t, c) for t in self.benchmarks for c in t.measure_changes]
        return sorted(
            found, key=lambda item: (not item[1].worse, -abs(item[1].change), item[0].benchmark)
        )

    def change_points(self) -> list[tuple[BenchmarkTrend, ChangePointReport]]:
        """The period's change points, largest |change| first."""
        found = [(t, cp) for t in self.benchmarks for cp in t.period_change_points]
        return sorted(
            found, key=lambda item: (-abs(item[1].change), item[0].benchmark, item[1].index)
        )


# --- weeks ------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class NewAlert:
    """A detected change point, as :func:`perfci.usecases.browse.alerts.record_alerts` takes it
    (stored, it comes back as an :class:`AlertInfo`)."""

    benchmark: str
    series: SeriesKey
    environment_id: int
    branch: str
    run_id: int
    commit: str | None
    previous_commit: str | None
    before: float
    after: float
    change: float
    p_value: float
    nearby_run_ids: tuple[int, ...] = ()
