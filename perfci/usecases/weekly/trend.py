"""One benchmark's trend on one environment for the weekly report (:mod:`.report`).

The step-time history as a series × runs matrix of per-run medians, its change points with the
kernels that explain them, the changes of level of every benchmark case and headline value,
share movers and noise (:mod:`perfci.analysis.trends` does the statistics).
"""

from __future__ import annotations

import math
from datetime import datetime
from typing import Any

from perfci.analysis import trends
from perfci.analysis.changepoints import (
    ChangePoint,
    ChangePointOptions,
    detect_change_points,
    segment_levels,
)
from perfci.core.allocation import no_cycle_collection
from perfci.core.compat import UTC
from perfci.core.model import MetricKind, SeriesKey
from perfci.core.weekly import BenchmarkTrend, ChangePointReport, MeasureChange, TrendPoint
from perfci.store.queries import RunInfo
from perfci.store.samples import run_samples_checked
from perfci.store.work import Session


def utc(moment: datetime) -> datetime:
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)


def run_time(run: RunInfo) -> datetime:
    """When a run's code was written: its commit's time, else when the run was stored."""
    return utc(run.commit_time or run.created_at)


@no_cycle_collection()  # the history's samples are many lists: see compare_stored_run
def benchmark_trends(
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
        measured = [runs[i] for i in kept]
        for cp in detect_change_points(values, options=options):
            if not in_period[kept[cp.index]]:
                continue
            found.append(
                MeasureChange(
                    name=key.display_name,
                    kind=key.kind.value,
                    unit=key.unit,
                    better=key.better.value,
                    in_period=True,
                    **_located(measured, cp),
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
    report = ChangePointReport(index=cp.index, in_period=in_period, **_located(runs, cp))
    found = trends.contributors(matrix, step, start, cp.index, stop)
    if found is not None:
        report.explained, report.contributors = found
    return report


def _located(runs: list[RunInfo], cp: ChangePoint) -> dict[str, Any]:
    """What every change report says of change point ``cp`` of ``runs``: the run its new level
    starts at, the run before it, and the levels on either side."""
    run = runs[cp.index]
    previous = runs[cp.index - 1] if cp.index > 0 else None
    return {
        "run_id": run.id,
        "commit": run.commit,
        "previous_commit": previous.commit if previous else None,
        "time": run_time(run),
        "before": cp.before,
        "after": cp.after,
        "change": cp.change,
        "p_value": cp.p_value,
    }
