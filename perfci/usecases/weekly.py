"""Build the weekly trend report: what changed on a branch (``main``) during one period.

Per benchmark and environment (runs are never compared across hardware):

- the step-time history over the last ``history_weeks``: one value per run (the median of its
  repeats), oldest first, with its change points (:func:`perfci.analysis.changepoints
  .detect_change_points`) and the fitted segment levels;
- the change points that fall in the period, each with its commit range (the previous run's
  commit .. the first commit of the new level), magnitude and the kernels, memory operations and
  collectives that explain it (:func:`perfci.analysis.attribution.attribute` over the per-step
  medians of the runs of the segment before vs the segment after);
- the kernels whose share of step time grew or shrank most over the period (its first runs vs
  its last runs), and the kernels that appeared or vanished;
- noise: the coefficient of variation of step time within a stable segment, and the noisiest
  series that matter (at least 1 % of step time);

and for the whole project: coverage (runs per day, days without runs, environments seen).
Change points in the period become alerts (:func:`perfci.usecases.alerts.record_alerts`).

Speed: one query for the runs and one (chunked) query for each benchmark's samples; the
statistics then work on a series × runs matrix in numpy.
"""

from __future__ import annotations

import itertools
import math
import statistics
import warnings
from collections import Counter
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from typing import Any

import numpy as np
from numpy.typing import NDArray
from sqlalchemy.orm import Session

from perfci.analysis.attribution import PRIMARY_KINDS, MetricDelta, attribute
from perfci.analysis.changepoints import (
    ChangePoint,
    ChangePointOptions,
    detect_change_points,
    segment_levels,
)
from perfci.errors import ConfigError
from perfci.model import MetricKind, SeriesKey
from perfci.store import queries
from perfci.store.queries import RunInfo
from perfci.usecases.alerts import AlertInfo, NewAlert, record_alerts

__all__ = ["BenchmarkTrend", "ChangePointReport", "Coverage", "DayCount", "DayStretch",
           "EnvironmentSeen", "KernelContribution", "Noise", "SeriesNoise", "ShareMove",
           "TrendPoint", "WeeklyReport", "build_weekly_report", "iso_week", "period_label",
           "report_to_dict", "week_bounds"]

FloatArray = NDArray[np.float64]

#: Kernels per change point, share movers each way, noisiest series: rows a reader can scan.
TOP_CONTRIBUTORS = 10
TOP_MOVERS = 5
TOP_NOISY = 5
#: Runs at each end of the period whose medians are compared for share movers.
EDGE_RUNS = 3
#: Share-of-step moves smaller than this (0.2 percentage points) are noise, not news.
MIN_SHARE_MOVE = 0.002
#: Series below this share of step time are left out of "noisiest": a 2 µs kernel is always
#: noisy and never matters.
NOISY_MIN_SHARE = 0.01
#: A stable segment needs this many runs for a coefficient of variation worth printing.
MIN_NOISE_RUNS = 5


# --- the report (plain dataclasses, JSON-ready through report_to_dict) ------------------------


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
            if (day.runs == 0 and previous is not None and previous.runs == 0
                    and previous.last + timedelta(days=1) == day.day):
                merged[-1] = DayStretch(previous.first, day.day, 0)
            else:
                merged.append(DayStretch(day.day, day.day, day.runs))
        out = []
        for stretch in merged:
            if stretch.runs or stretch.days >= COLLAPSE_EMPTY_DAYS:
                out.append(stretch)
            else:  # a weekend is clearer as its two days than as a range
                out.extend(DayStretch(d, d, 0) for d in
                           (stretch.first + timedelta(days=i) for i in range(stretch.days)))
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

    def change_points(self) -> list[tuple[BenchmarkTrend, ChangePointReport]]:
        """The period's change points, largest |change| first."""
        found = [(t, cp) for t in self.benchmarks for cp in t.period_change_points]
        return sorted(found, key=lambda item: (-abs(item[1].change), item[0].benchmark,
                                               item[1].index))


# --- weeks ------------------------------------------------------------------------------------


def iso_week(moment: datetime | date) -> str:
    """``2024-W05``: the ISO year and week of ``moment``."""
    year, week, _ = moment.isocalendar()
    return f"{year}-W{week:02d}"


#: The years ``--week`` accepts: a report also reads weeks of history before its week and
#: runs are timestamps, so weeks near the ends of the calendar (0001-W01, 9999-W52) overflow
#: (issue 13: an ``OverflowError`` traceback, a 500 from the API).
WEEK_YEARS = (1971, 9998)


def week_bounds(week: str) -> tuple[datetime, datetime]:
    """``[Monday 00:00 UTC, next Monday)`` of ISO week ``YYYY-Www``.

    Raises
    ------
    ConfigError
        Malformed, or a year outside :data:`WEEK_YEARS`.
    """
    try:
        year, number = (int(part) for part in week.strip().upper().split("-W"))
        if not WEEK_YEARS[0] <= year <= WEEK_YEARS[1]:
            raise ConfigError(f"week {week!r} is out of range: perfci reports weeks of the "
                              f"years {WEEK_YEARS[0]} to {WEEK_YEARS[1]}")
        monday = date.fromisocalendar(year, number, 1)
    except ValueError:
        raise ConfigError(f"week {week!r} is not an ISO week such as 2024-W05") from None
    start = datetime(monday.year, monday.month, monday.day, tzinfo=UTC)
    return start, start + timedelta(days=7)


def period_label(since: datetime, until: datetime) -> str:
    """The label of ``[since, until)``: its last ISO week, ``2026-W47``.

    The label keys the GitHub issue a report edits and names its files, so it must name the
    period's end (issue 16: ``--since 30d`` on 2026-11-23 was labelled by its middle,
    2026-W45, and edited that week's issue). The week is the one holding the middle of the
    period's last 7 days: a rolling "last 7 days" run on Monday morning is last week, the one
    its data come from, and ``--week W`` is ``W``.
    """
    return iso_week(until - min(until - since, timedelta(days=7)) / 2)


# --- building ---------------------------------------------------------------------------------


def build_weekly_report(session: Session, *, project: str, since: datetime, until: datetime,
                        branch: str = "main", benchmarks: Sequence[str] | None = None,
                        history_weeks: int = 8, options: ChangePointOptions | None = None,
                        record: bool = True) -> WeeklyReport:
    """The trend report of ``project`` on ``branch`` for the period ``[since, until)``.

    Parameters
    ----------
    session
        A unit of work; committed once when ``record`` stores alerts.
    project, branch
        Whose history, and which branch (the one pull requests are compared with).
    since, until
        The period (timezone-aware; naive values are taken as UTC). A run belongs to it by its
        commit's time, else by when it was stored.
    benchmarks
        Only these benchmarks (default: every benchmark with runs in the history).
    history_weeks
        Weeks of history before ``until`` that change points are searched in (at least the
        period itself).
    options
        Change-point thresholds; the defaults of :class:`ChangePointOptions` when ``None``.
    record
        Store the period's change points as alerts (never twice; a dismissed alert stays
        dismissed) and fill ``alert_id``/``alert_status`` on them.
    """
    since, until = _utc(since), _utc(until)
    if until <= since:
        raise ConfigError(f"the report period is empty: {since:%Y-%m-%d} .. {until:%Y-%m-%d}")
    if history_weeks < 1:
        raise ConfigError(f"history_weeks must be at least 1, got {history_weeks}")
    history_since = min(since, until - timedelta(weeks=history_weeks))
    runs = _history_runs(session, project=project, branch=branch, since=history_since,
                         until=until, benchmarks=benchmarks)
    report = WeeklyReport(project=project, branch=branch, week=period_label(since, until),
                          since=since, until=until, history_since=history_since)
    by_benchmark: dict[str, list[RunInfo]] = {}
    for run in runs:
        by_benchmark.setdefault(run.benchmark, []).append(run)
    for name in sorted(by_benchmark):
        report.benchmarks.extend(_benchmark_trends(session, by_benchmark[name], since, until,
                                                   options))
    report.coverage = _coverage(runs, since, until)
    if not runs:
        report.notes.append(f"No runs of {project} on {branch} between "
                            f"{history_since:%Y-%m-%d} and {until:%Y-%m-%d}.")
    if record:
        report.alerts = _record(session, report)
    return report


def _utc(moment: datetime) -> datetime:
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)


def run_time(run: RunInfo) -> datetime:
    """When a run's code was written: its commit's time, else when the run was stored."""
    return _utc(run.commit_time or run.created_at)


def _history_runs(session: Session, *, project: str, branch: str, since: datetime,
                  until: datetime, benchmarks: Sequence[str] | None) -> list[RunInfo]:
    """The branch's runs with a run time (commit time, else stored) in ``[since, until)``."""
    found = queries.runs_by_time(session, project=project, since=since, until=until,
                                 branch=branch)
    wanted = set(benchmarks) if benchmarks else None
    kept = [r for r in found if wanted is None or r.benchmark in wanted]
    return sorted(kept, key=lambda r: (run_time(r), _utc(r.created_at), r.id))


@contextmanager
def _quiet_nan() -> Iterator[None]:
    """numpy warns on all-NaN slices; here an absent series is expected, not an error."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        yield


@dataclass(slots=True)
class _Matrix:
    """One benchmark × environment: per-run medians, series × runs (NaN: no value)."""

    runs: list[RunInfo]
    keys: list[SeriesKey]
    values: FloatArray

    def row(self, key: SeriesKey) -> FloatArray:
        return np.asarray(self.values[self.keys.index(key)], dtype=np.float64)

    def medians(self, columns: slice | Sequence[int]) -> FloatArray:
        with _quiet_nan():
            return np.asarray(np.nanmedian(self.values[:, columns], axis=1), dtype=np.float64)


def _benchmark_trends(session: Session, runs: list[RunInfo], since: datetime, until: datetime,
                      options: ChangePointOptions | None) -> list[BenchmarkTrend]:
    checked = queries.run_samples_checked(session, [r.id for r in runs])  # one query
    # A run stored with a bad value by an older perfci is left out with a note (issue 13).
    skipped = set(checked.skipped)
    by_environment: dict[int, list[RunInfo]] = {}
    for run in runs:
        if run.id not in skipped:
            by_environment.setdefault(run.environment_id, []).append(run)
    trends = []
    for environment_id in sorted(by_environment):
        matrix = _matrix(by_environment[environment_id], checked.samples)
        trend = _trend(matrix, since, until, options)
        if skipped:
            trend.notes.append(_skipped_note(checked.skipped))
        trends.append(trend)
    return trends


def _skipped_note(run_ids: list[int]) -> str:
    listed = ", ".join(str(r) for r in run_ids)
    return (f"Left out run{'s' if len(run_ids) > 1 else ''} {listed}: a stored value is not a "
            f"finite, non-negative number (stored before perfci checked values); remove it "
            f"with `perfci runs delete`.")


def _matrix(runs: list[RunInfo], samples: dict[SeriesKey, dict[int, list[float]]]) -> _Matrix:
    column = {run.id: i for i, run in enumerate(runs)}
    keys: list[SeriesKey] = []
    rows: list[FloatArray] = []
    for key, by_run in samples.items():
        row = np.full(len(runs), np.nan)
        for run_id, values in by_run.items():
            index = column.get(run_id)
            if index is not None and values:
                row[index] = statistics.median(values)
        if not np.isnan(row).all():
            keys.append(key)
            rows.append(row)
    matrix = np.vstack(rows) if rows else np.empty((0, len(runs)))
    return _Matrix(runs=runs, keys=keys, values=matrix)


def _primary_step(matrix: _Matrix) -> SeriesKey | None:
    """The longest step series (an iteration contains its sub-steps), as comparisons pick it."""
    best: tuple[float, int, str] | None = None
    chosen = None
    for key, row in zip(matrix.keys, matrix.values, strict=True):
        if key.kind is not MetricKind.STEP:
            continue
        present = row[~np.isnan(row)]
        rank = (float(np.median(present)), len(present), key.key)
        if best is None or rank > best:
            best, chosen = rank, key
    return chosen


def _trend(matrix: _Matrix, since: datetime, until: datetime,
           options: ChangePointOptions | None) -> BenchmarkTrend:
    first = matrix.runs[0]
    in_period = [since <= run_time(r) < until for r in matrix.runs]
    trend = BenchmarkTrend(benchmark=first.benchmark, environment_id=first.environment_id,
                           environment=dict(first.environment), step=_primary_step(matrix),
                           runs_in_period=sum(in_period))
    if trend.step is None:
        trend.notes.append("No step-time series: change points need one.")
        return trend
    # Only the runs that measured the step time: the series must have no holes.
    keep = [i for i, v in enumerate(matrix.row(trend.step)) if not math.isnan(v)]
    matrix = _Matrix([matrix.runs[i] for i in keep], matrix.keys, matrix.values[:, keep])
    flags = [in_period[i] for i in keep]
    steps = [float(v) for v in matrix.row(trend.step)]
    found = detect_change_points(steps, options=options)
    levels = segment_levels(steps, found)
    trend.points = [TrendPoint(run_id=r.id, commit=r.commit, time=run_time(r), value=v,
                               level=level, in_period=flag)
                    for r, v, level, flag in zip(matrix.runs, steps, levels, flags, strict=True)]
    bounds = [0, *(cp.index for cp in found), len(steps)]
    trend.change_points = [_change_point(matrix, trend.step, cp, bounds[i], bounds[i + 2],
                                         flags[cp.index])
                           for i, cp in enumerate(found)]
    period = [i for i, flag in enumerate(flags) if flag]
    _mark_late(trend.change_points, steps, period[0] if period else len(steps), options)
    trend.share_movers = _share_movers(matrix, trend.step, period)
    trend.new_kernels, trend.vanished_kernels = _new_and_vanished(matrix, period)
    trend.noise = _noise(matrix, trend.step, bounds)
    return trend


# --- change points and attribution ------------------------------------------------------------


def _mark_late(found: list[ChangePointReport], steps: list[float], period_start: int,
               options: ChangePointOptions | None) -> None:
    """Flag change points before the period that the history up to the period did not show.

    A new level needs a few runs to become significant, so a change late in one week is only
    found the week after, when it lies before that week's period. Re-running the detection on
    the history as the previous report saw it (deterministic, no state kept) tells which
    earlier change points are news; one run of slack allows for a point placed one run off.
    """
    earlier = [c for c in found if not c.in_period and c.index < period_start]
    if not earlier:
        return
    known = [c.index for c in detect_change_points(steps[:period_start], options=options)]
    for cp in earlier:
        cp.late = not any(abs(cp.index - k) <= 1 for k in known)


def _change_point(matrix: _Matrix, step: SeriesKey, cp: ChangePoint, start: int, stop: int,
                  in_period: bool) -> ChangePointReport:
    run = matrix.runs[cp.index]
    previous = matrix.runs[cp.index - 1] if cp.index > 0 else None
    report = ChangePointReport(index=cp.index, run_id=run.id, commit=run.commit,
                               previous_commit=previous.commit if previous else None,
                               time=run_time(run), before=cp.before, after=cp.after,
                               change=cp.change, p_value=cp.p_value, in_period=in_period)
    before = matrix.medians(slice(start, cp.index))
    after = matrix.medians(slice(cp.index, stop))
    found = attribute(_delta(matrix, step, before, after),
                      _attribution_candidates(matrix, step, before, after),
                      top=TOP_CONTRIBUTORS)
    if found is not None:
        report.explained = found.explained
        report.contributors = [_contribution(c.series, c.delta_ns, c.share, matrix, before,
                                             after)
                               for c in found.primary if c.series is not None]
    return report


def _value(array: FloatArray, index: int) -> float | None:
    value = float(array[index])
    return None if math.isnan(value) else value


def _delta(matrix: _Matrix, key: SeriesKey, before: FloatArray,
           after: FloatArray) -> MetricDelta:
    index = matrix.keys.index(key)
    return MetricDelta(key, _value(before, index), _value(after, index))


def _primary_rows(matrix: _Matrix, section: str | None = None) -> list[int]:
    """Rows of the kernels, memory operations and collectives (of ``section`` when given).

    Scoped series (nvprof's per-NVTX-range kernel tables) break down the same GPU time as the
    unscoped ones; adding both would explain a change twice and list every kernel once per
    range, so they are used only when a profile has nothing else.
    """
    rows = [i for i, key in enumerate(matrix.keys) if key.kind in PRIMARY_KINDS
            and (section is None or key.section == section)]
    top_level = [i for i in rows if not matrix.keys[i].scope]
    return top_level or rows


def _attribution_candidates(matrix: _Matrix, step: SeriesKey, before: FloatArray,
                            after: FloatArray) -> list[MetricDelta]:
    """The per-step medians of the primary series of the step's section, before and after."""
    return [MetricDelta(matrix.keys[i], _value(before, i), _value(after, i))
            for i in _primary_rows(matrix, step.section)]


def _contribution(series: SeriesKey, delta_ns: float, share: float, matrix: _Matrix,
                  before: FloatArray, after: FloatArray) -> KernelContribution:
    index = matrix.keys.index(series)
    return KernelContribution(name=series.display_name, kind=series.kind.value, key=series.key,
                              before_ns=_value(before, index), after_ns=_value(after, index),
                              delta_ns=delta_ns, share=share)


# --- share movers, new and vanished kernels ---------------------------------------------------


def _edges(period: list[int]) -> tuple[list[int], list[int]] | None:
    if len(period) < 2:
        return None
    width = min(EDGE_RUNS, len(period) // 2)
    return period[:width], period[-width:]


def _share_movers(matrix: _Matrix, step: SeriesKey, period: list[int]) -> list[ShareMove]:
    """Kernels whose share of step time grew most, then those that shrank most."""
    edges = _edges(period)
    if edges is None:
        return []
    index = matrix.keys.index(step)
    start, end = matrix.medians(edges[0]), matrix.medians(edges[1])
    if not start[index] > 0 or not end[index] > 0:
        return []
    moves = []
    for i in _primary_rows(matrix, step.section):
        key = matrix.keys[i]
        before, after = _value(start, i), _value(end, i)
        share_before = (before or 0.0) / float(start[index])
        share_after = (after or 0.0) / float(end[index])
        if abs(share_after - share_before) >= MIN_SHARE_MOVE:
            moves.append(ShareMove(name=key.display_name, kind=key.kind.value, key=key.key,
                                   share_before=share_before, share_after=share_after,
                                   ns_before=before, ns_after=after))
    grew = sorted((m for m in moves if m.change > 0), key=lambda m: (-m.change, m.key))
    shrank = sorted((m for m in moves if m.change < 0), key=lambda m: (m.change, m.key))
    return grew[:TOP_MOVERS] + shrank[:TOP_MOVERS]


def _new_and_vanished(matrix: _Matrix, period: list[int]) -> tuple[list[str], list[str]]:
    """Kernels in the period's last run but not in the last run before it, and the reverse.

    Without a run before the period there is nothing to compare with: both lists are empty.
    """
    if not period or period[0] == 0:
        return [], []
    primary = _primary_rows(matrix)
    before = {i for i in primary if not math.isnan(matrix.values[i, period[0] - 1])}
    after = {i for i in primary if not math.isnan(matrix.values[i, period[-1]])}
    return (sorted(matrix.keys[i].display_name for i in after - before),
            sorted(matrix.keys[i].display_name for i in before - after))


# --- noise ------------------------------------------------------------------------------------


def _stable_segment(bounds: list[int]) -> tuple[int, int]:
    """The current level when it is long enough to measure, else the longest segment."""
    segments = list(itertools.pairwise(bounds))
    last = segments[-1]
    if last[1] - last[0] >= MIN_NOISE_RUNS:
        return last
    return max(segments, key=lambda s: (s[1] - s[0], s[0]))


def _noise(matrix: _Matrix, step: SeriesKey, bounds: list[int]) -> Noise:
    start, stop = _stable_segment(bounds)
    block = matrix.values[:, start:stop]
    with _quiet_nan():
        mean = np.nanmean(block, axis=1)
        std = np.nanstd(block, axis=1, ddof=1)
    counts = np.sum(~np.isnan(block), axis=1)
    step_index = matrix.keys.index(step)
    step_mean = float(mean[step_index])
    runs = stop - start
    noise = Noise(step_cv=_cv(std[step_index], mean[step_index]) if runs >= 2 else None,
                  segment_runs=runs)
    candidates = []
    for i, key in enumerate(matrix.keys):
        cv = _cv(std[i], mean[i])
        if cv is None or counts[i] < min(MIN_NOISE_RUNS, runs):
            continue
        share = float(mean[i]) / step_mean if step_mean > 0 else None
        if share is not None and share < NOISY_MIN_SHARE:
            continue
        candidates.append(SeriesNoise(name=key.display_name, kind=key.kind.value, key=key.key,
                                      cv=cv, share=share))
    candidates.sort(key=lambda s: (-s.cv, s.key))
    noise.noisiest = candidates[:TOP_NOISY]
    return noise


def _cv(std: float, mean: float) -> float | None:
    if math.isnan(std) or math.isnan(mean) or mean <= 0:
        return None
    return float(std / mean)


# --- coverage ---------------------------------------------------------------------------------


def _coverage(runs: list[RunInfo], since: datetime, until: datetime) -> Coverage:
    period = [r for r in runs if since <= run_time(r) < until]
    per_day = Counter(run_time(r).date() for r in period)
    first, last = since.date(), (until - timedelta(microseconds=1)).date()
    days = [first + timedelta(days=i) for i in range((last - first).days + 1)]
    environments: dict[int, list[RunInfo]] = {}
    for run in period:
        environments.setdefault(run.environment_id, []).append(run)
    seen = [EnvironmentSeen(id=env_id, values=dict(found[0].environment), runs=len(found),
                            benchmarks=sorted({r.benchmark for r in found}))
            for env_id, found in sorted(environments.items())]
    return Coverage(runs=len(period), days=[DayCount(day, per_day.get(day, 0)) for day in days],
                    days_without_runs=[day for day in days if not per_day.get(day)],
                    environments=seen)


# --- alerts -----------------------------------------------------------------------------------


def _record(session: Session, report: WeeklyReport) -> list[AlertInfo]:
    pending: list[tuple[ChangePointReport, NewAlert]] = []
    for trend in report.benchmarks:
        if trend.step is None:
            continue
        for cp in trend.period_change_points:
            # A point that moves by one run as history grows is the same change, not a new one.
            nearby = [p.run_id for p in trend.points[max(0, cp.index - 1):cp.index + 2]]
            pending.append((cp, NewAlert(
                benchmark=trend.benchmark, series=trend.step,
                environment_id=trend.environment_id, branch=report.branch, run_id=cp.run_id,
                commit=cp.commit, previous_commit=cp.previous_commit, before=cp.before,
                after=cp.after, change=cp.change, p_value=cp.p_value,
                nearby_run_ids=tuple(nearby))))
    if not pending:
        return []
    alerts = record_alerts(session, project=report.project, alerts=[a for _, a in pending])
    for (cp, _), alert in zip(pending, alerts, strict=True):
        cp.alert_id, cp.alert_status = alert.id, alert.status
    return alerts


# --- JSON -------------------------------------------------------------------------------------

SCHEMA_VERSION = 1


def report_to_dict(report: WeeklyReport) -> dict[str, Any]:
    """``report`` as JSON-ready dicts and lists: dates ISO 8601, NaN/inf as ``null``."""
    data: dict[str, Any] = _plain(report)
    data["schema_version"] = SCHEMA_VERSION
    data["change_points"] = [{"benchmark": t.benchmark, "environment_id": t.environment_id,
                              "run_id": cp.run_id}
                             for t, cp in report.change_points()]
    return data


def _plain(value: Any) -> Any:
    if hasattr(value, "__dataclass_fields__"):
        out = {name: _plain(getattr(value, name)) for name in value.__dataclass_fields__}
        if isinstance(value, SeriesKey):
            out["key"] = value.key
        if isinstance(value, ShareMove):
            out["change"] = _plain(value.change)
        return out
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if isinstance(value, datetime | date):
        return value.isoformat()
    if isinstance(value, float | np.floating):
        number = float(value)
        return number if math.isfinite(number) else None
    if isinstance(value, np.integer):
        return int(value)
    if isinstance(value, str):
        return str(value)  # StrEnum → its plain value
    return value
