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
Change points in the period become alerts (:func:`perfci.usecases.browse.alerts.record_alerts`);
an alert at the merge of a change accepted on its pull request is acknowledged, and the
answers given on pull requests are tallied per benchmark (:mod:`perfci.usecases.weekly.answers`).

Speed: one query for the runs (an index range, issue 35) and one (chunked) query for each
benchmark's samples; the statistics then work on a series × runs matrix in numpy.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from datetime import date, datetime, timedelta
from typing import Any

import numpy as np

from perfci.analysis import trends
from perfci.analysis.changepoints import (
    ChangePoint,
    ChangePointOptions,
    detect_change_points,
    segment_levels,
)
from perfci.core.answers import BenchmarkAnswers
from perfci.core.compat import UTC
from perfci.core.errors import ConfigError
from perfci.core.model import MetricKind, SeriesKey
from perfci.core.weekly import (
    BenchmarkTrend,
    ChangePointReport,
    Coverage,
    DayCount,
    DayStretch,
    EnvironmentSeen,
    KernelContribution,
    MeasureChange,
    Noise,
    SeriesNoise,
    ShareMove,
    TrendPoint,
    WeeklyReport,
)
from perfci.store import queries
from perfci.store.queries import RunInfo
from perfci.store.samples import run_samples_checked
from perfci.store.work import Session
from perfci.usecases.browse.alerts import AlertInfo, NewAlert, record_alerts
from perfci.usecases.weekly.answers import acknowledge_accepted, tally_answers
from perfci.usecases.weekly.weeks import iso_week, period_label, week_bounds

# The report's types live in perfci.core.weekly; they are re-exported here for callers that
# import them beside build_weekly_report.
__all__ = [
    "BenchmarkTrend",
    "ChangePointReport",
    "Coverage",
    "DayCount",
    "DayStretch",
    "EnvironmentSeen",
    "KernelContribution",
    "Noise",
    "SeriesNoise",
    "ShareMove",
    "TrendPoint",
    "WeeklyReport",
    "build_weekly_report",
    "iso_week",
    "period_label",
    "report_to_dict",
    "week_bounds",
]


# --- building ---------------------------------------------------------------------------------


def build_weekly_report(
    session: Session,
    *,
    project: str,
    since: datetime,
    until: datetime,
    branch: str = "main",
    benchmarks: Sequence[str] | None = None,
    history_weeks: int = 8,
    options: ChangePointOptions | None = None,
    record: bool = True,
) -> WeeklyReport:
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
    runs = _history_runs(
        session,
        project=project,
        branch=branch,
        since=history_since,
        until=until,
        benchmarks=benchmarks,
    )
    report = WeeklyReport(
        project=project,
        branch=branch,
        week=period_label(since, until),
        since=since,
        until=until,
        history_since=history_since,
    )
    by_benchmark: dict[str, list[RunInfo]] = {}
    for run in runs:
        by_benchmark.setdefault(run.benchmark, []).append(run)
    for name in sorted(by_benchmark):
        report.benchmarks.extend(
            _benchmark_trends(session, by_benchmark[name], since, until, options)
        )
    report.coverage = _coverage(runs, since, until)
    if not runs:
        report.notes.append(
            f"No runs of {project} on {branch} between "
            f"{history_since:%Y-%m-%d} and {until:%Y-%m-%d}."
        )
    if record:
        report.alerts = _record(session, report)
        acknowledge_accepted(session, report)
    report.answers = tally_answers(session, project=project, since=history_since, until=until)
    return report


def _utc(moment: datetime) -> datetime:
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)


def run_time(run: RunInfo) -> datetime:
    """When a run's code was written: its commit's time, else when the run was stored."""
    return _utc(run.commit_time or run.created_at)


def _history_runs(
    session: Session,
    *,
    project: str,
    branch: str,
    since: datetime,
    until: datetime,
    benchmarks: Sequence[str] | None,
) -> list[RunInfo]:
    """The branch's runs with a run time (commit time, else stored) in ``[since, until)``."""
    found = queries.runs_by_time(session, project=project, since=since, until=until, branch=branch)
    wanted = set(benchmarks) if benchmarks else None
    kept = [r for r in found if wanted is None or r.benchmark in wanted]
    return sorted(kept, key=lambda r: (run_time(r), _utc(r.created_at), r.id))


def _benchmark_trends(
    session: Session,
    runs: list[RunInfo],
    since: datetime,
    until: datetime,
    options: ChangePointOptions | None,
) -> list[BenchmarkTrend]:
    checked = run_samples_checked(session, [r.id for r in runs])  # one query
    # A run stored with a bad value by an older perfci is left out with a note (issue 13).
    skipped = set(checked.skipped)
    by_environment: dict[int, list[RunInfo]] = {}
    for run in runs:
        if run.id not in skipped:
            by_environment.setdefault(run.environment_id, []).append(run)
    trends_ = []
    for environment_id in sorted(by_environment):
        found = by_environment[environment_id]
        trend = _trend(found, _matrix(found, checked.samples), since, until, options)
        if skipped:
            trend.notes.append(_skipped_note(checked.skipped))
        trends_.append(trend)
    return trends_


def _skipped_note(run_ids: list[int]) -> str:
    listed = ", ".join(str(r) for r in run_ids)
    return (
        f"Left out run{'s' if len(run_ids) > 1 else ''} {listed}: a stored value is not a "
        f"finite, non-negative number (stored before perfci checked values); remove it "
        f"with `perfci runs delete`."
    )


def _matrix(
    runs: list[RunInfo], samples: dict[SeriesKey, dict[int, list[float]]]
) -> trends.SeriesMatrix:
    """The series × ``runs`` matrix of per-run medians (a column per run, in order)."""
    column = {run.id: i for i, run in enumerate(runs)}
    by_column = {
        key: {column[run_id]: values for run_id, values in by_run.items() if run_id in column}
        for key, by_run in samples.items()
    }
    return trends.series_matrix(len(runs), by_column)


def _trend(
    runs: list[RunInfo],
    matrix: trends.SeriesMatrix,
    since: datetime,
    until: datetime,
    options: ChangePointOptions | None,
) -> BenchmarkTrend:
    first = runs[0]
    in_period = [since <= run_time(r) < until for r in runs]
    trend = BenchmarkTrend(
        benchmark=first.benchmark,
        environment_id=first.environment_id,
        environment=dict(first.environment),
        step=trends.step_series(matrix),
        runs_in_period=sum(in_period),
    )
    trend.measure_changes = _measure_changes(runs, matrix, in_period, trend.step, options)
    if trend.step is None:
        if not trend.measure_changes:
            trend.notes.append("No step-time series: change points need one.")
        return trend
    # Only the runs that measured the step time: the series must have no holes.
    keep = [i for i, v in enumerate(matrix.row(trend.step)) if not math.isnan(v)]
    runs, matrix = [runs[i] for i in keep], matrix.columns(keep)
    flags = [in_period[i] for i in keep]
    steps = [float(v) for v in matrix.row(trend.step)]
    found = detect_change_points(steps, options=options)
    levels = segment_levels(steps, found)
    trend.points = [
        TrendPoint(
            run_id=r.id, commit=r.commit, time=run_time(r), value=v, level=level, in_period=flag
        )
        for r, v, level, flag in zip(runs, steps, levels, flags, strict=True)
    ]
    bounds = [0, *(cp.index for cp in found), len(steps)]
    trend.change_points = [
        _change_point(runs, matrix, trend.step, cp, bounds[i], bounds[i + 2], flags[cp.index])
        for i, cp in enumerate(found)
    ]
    period = [i for i, flag in enumerate(flags) if flag]
    trends.mark_late(trend.change_points, steps, period[0] if period else len(steps), options)
    trend.share_movers = trends.share_movers(matrix, trend.step, period)
    trend.new_kernels, trend.vanished_kernels = trends.new_and_vanished(matrix, period)
    trend.noise = trends.noise(matrix, trend.step, bounds)
    return trend


#: At most this many benchmark cases / headline values per benchmark get a change-point scan.
_MAX_MEASURES = 200
_MEASURE_KINDS = frozenset({MetricKind.BENCH, MetricKind.MEASURE})


def _measure_changes(
    runs: list[RunInfo],
    matrix: trends.SeriesMatrix,
    in_period: list[bool],
    step: SeriesKey | None,
    options: ChangePointOptions | None,
) -> list[MeasureChange]:
    """The period's changes of level of every benchmark case and headline value.

    Throughput, peak memory, accuracy and the cases of a pytest-benchmark or Google Benchmark
    suite are what such projects track; each is scanned like the step time, on its own runs.
    """
    found: list[MeasureChange] = []
    keys = [k for k in matrix.keys if k.kind in _MEASURE_KINDS and k != step][:_MAX_MEASURES]
    for key in keys:
        row = matrix.row(key)
        kept = [i for i, v in enumerate(row) if not math.isnan(v)]
        values = [float(row[i]) for i in kept]
        for cp in detect_change_points(values, options=options):
            run = runs[kept[cp.index]]
            if not in_period[kept[cp.index]]:
                continue
            previous = runs[kept[cp.index - 1]] if cp.index > 0 else None
            found.append(
                MeasureChange(
                    name=key.display_name,
                    kind=key.kind.value,
                    unit=key.unit,
                    better=key.better.value,
                    run_id=run.id,
                    commit=run.commit,
                    previous_commit=previous.commit if previous else None,
                    time=run_time(run),
                    before=cp.before,
                    after=cp.after,
                    change=cp.change,
                    p_value=cp.p_value,
                    in_period=True,
                )
            )
    return sorted(found, key=lambda c: (not c.worse, -abs(c.change), c.name))


def _change_point(
    runs: list[RunInfo],
    matrix: trends.SeriesMatrix,
    step: SeriesKey,
    cp: ChangePoint,
    start: int,
    stop: int,
    in_period: bool,
) -> ChangePointReport:
    run = runs[cp.index]
    previous = runs[cp.index - 1] if cp.index > 0 else None
    report = ChangePointReport(
        index=cp.index,
        run_id=run.id,
        commit=run.commit,
        previous_commit=previous.commit if previous else None,
        time=run_time(run),
        before=cp.before,
        after=cp.after,
        change=cp.change,
        p_value=cp.p_value,
        in_period=in_period,
    )
    found = trends.contributors(matrix, step, start, cp.index, stop)
    if found is not None:
        report.explained, report.contributors = found
    return report


# --- coverage ---------------------------------------------------------------------------------


def _coverage(runs: list[RunInfo], since: datetime, until: datetime) -> Coverage:
    period = [r for r in runs if since <= run_time(r) < until]
    per_day = Counter(run_time(r).date() for r in period)
    first, last = since.date(), (until - timedelta(microseconds=1)).date()
    days = [first + timedelta(days=i) for i in range((last - first).days + 1)]
    environments: dict[int, list[RunInfo]] = {}
    for run in period:
        environments.setdefault(run.environment_id, []).append(run)
    seen = [
        EnvironmentSeen(
            id=env_id,
            values=dict(found[0].environment),
            runs=len(found),
            benchmarks=sorted({r.benchmark for r in found}),
        )
        for env_id, found in sorted(environments.items())
    ]
    return Coverage(
        runs=len(period),
        days=[DayCount(day, per_day.get(day, 0)) for day in days],
        days_without_runs=[day for day in days if not per_day.get(day)],
        environments=seen,
    )


# --- alerts -----------------------------------------------------------------------------------


def _record(session: Session, report: WeeklyReport) -> list[AlertInfo]:
    pending: list[tuple[ChangePointReport, NewAlert]] = []
    for trend in report.benchmarks:
        if trend.step is None:
            continue
        for cp in trend.period_change_points:
            # A point that moves by one run as history grows is the same change, not a new one.
            nearby = [p.run_id for p in trend.points[max(0, cp.index - 1) : cp.index + 2]]
            pending.append(
                (
                    cp,
                    NewAlert(
                        benchmark=trend.benchmark,
                        series=trend.step,
                        environment_id=trend.environment_id,
                        branch=report.branch,
                        run_id=cp.run_id,
                        commit=cp.commit,
                        previous_commit=cp.previous_commit,
                        before=cp.before,
                        after=cp.after,
                        change=cp.change,
                        p_value=cp.p_value,
                        nearby_run_ids=tuple(nearby),
                    ),
                )
            )
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
    data["change_points"] = [
        {"benchmark": t.benchmark, "environment_id": t.environment_id, "run_id": cp.run_id}
        for t, cp in report.change_points()
    ]
    return data


def _plain(value: Any) -> Any:
    if hasattr(value, "__dataclass_fields__"):
        out = {name: _plain(getattr(value, name)) for name in value.__dataclass_fields__}
        if isinstance(value, SeriesKey):
            out["key"] = value.key
        if isinstance(value, ShareMove):
            out["change"] = _plain(value.change)
        if isinstance(value, BenchmarkAnswers):
            out["precision"] = _plain(value.precision)
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
