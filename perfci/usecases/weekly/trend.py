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
from perfci.store import queries
from perfci.store.queries import RunInfo
from perfci.store.samples import CheckedSamples, run_samples_checked
from perfci.store.work import Session


def utc(moment: datetime) -> datetime:
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)


def run_time(run: RunInfo) -> datetime:
    """When a run's code was written: its commit's time, else when the run was stored."""
    return utc(run.commit_time or run.created_at)


#: Runs on each side of a change point (and at the end of the stable level) whose every series
#: a long history's report reads (:func:`perfci.analysis.trends.zoom_columns`): a month of
#: daily runs. A history of at most ``4 ×`` as many runs is read whole.
ZOOM_WINDOW = 30
#: Change points found per step history (its values): a long history's zoom and its trend
#: search the same one (the three searches were a quarter of a year's report, stop 44).
_Searched = dict[tuple[float, ...], list[ChangePoint]]


@no_cycle_collection()  # the history's samples are many lists: see compare_stored_run
def benchmark_trends(
    session: Session,
    runs: list[RunInfo],
    since: datetime,
    until: datetime,
    options: ChangePointOptions | None,
    *,
    zoom_window: int | None = ZOOM_WINDOW,
) -> list[BenchmarkTrend]:
    """The trends of one benchmark's ``runs`` (oldest first), one per environment.

    ``zoom_window``: on a history longer than four of it, every run's headline series are
    read, and the kernels of only the runs the report looks at (:func:`_read`); ``None``
    reads every series of every run.
    """
    searched: _Searched = {}
    checked = _read(session, runs, since, until, options, zoom_window, searched)
    # A run stored with a bad value by an older perfci is left out with a note (issue 13).
    skipped = set(checked.skipped)
    trends_ = []
    for found in _by_environment(runs, skipped):
        trend = _trend(found, _matrix(found, checked.samples), since, until, options, searched)
        if skipped:
            trend.notes.append(_skipped_note(checked.skipped))
        trends_.append(trend)
    return trends_


def _by_environment(runs: list[RunInfo], skipped: set[int]) -> list[list[RunInfo]]:
    """``runs`` but ``skipped``, by environment (ascending id), each in the order given."""
    by_environment: dict[int, list[RunInfo]] = {}
    for run in runs:
        if run.id not in skipped:
            by_environment.setdefault(run.environment_id, []).append(run)
    return [by_environment[i] for i in sorted(by_environment)]


def _read(
    session: Session,
    runs: list[RunInfo],
    since: datetime,
    until: datetime,
    options: ChangePointOptions | None,
    window: int | None,
    searched: _Searched,
) -> CheckedSamples:
    """The values the report of ``runs`` needs, in two reads when the history is long.

    A year of a team's runs is hundreds of millions of kernel values (issue 35), of which the
    report shows the step's history and, of the kernels, the period and what explains each
    change of level. So a long history reads first every run's headline series, finds the
    step's change points on them, and then reads every series of only the runs around those
    points, in the period and at the end of the stable level; the matrix holds no kernel
    value for the others.
    """
    ids = [r.id for r in runs]
    if window is None or len(runs) <= 4 * window:
        return run_samples_checked(session, ids)
    first = runs[0]
    headline = queries.series_ids_of_kinds(
        session, project=first.project, benchmark=first.benchmark, kinds=_HEADLINE_KINDS
    )
    head = run_samples_checked(session, ids, series_ids=headline)
    zoom = [
        run_id
        for found in _by_environment(runs, set(head.skipped))
        for run_id in _zoom_run_ids(found, head.samples, since, until, options, window, searched)
    ]
    full = run_samples_checked(session, zoom)
    samples = {key: dict(by_run) for key, by_run in head.samples.items()}
    for key, by_run in full.samples.items():
        samples.setdefault(key, {}).update(by_run)
    return CheckedSamples(
        samples,
        sorted({*head.skipped, *full.skipped}),
        sorted({*head.summarised, *full.summarised}),
    )


def _zoom_run_ids(
    runs: list[RunInfo],
    samples: dict[SeriesKey, dict[int, list[float]]],
    since: datetime,
    until: datetime,
    options: ChangePointOptions | None,
    window: int,
    searched: _Searched,
) -> list[int]:
    """The runs of one environment's history whose every series :func:`_trend` looks at."""
    matrix = _matrix(runs, samples)
    step = trends.step_series(matrix)
    if step is None:  # no change points, no share of a step: the headline values are all
        return []
    kept, _, steps = _step_history(runs, matrix, step)
    period = [i for i, flag in enumerate(_in_period(kept, since, until)) if flag]
    indices = [cp.index for cp in _change_points(steps, options, searched)]
    return [kept[i].id for i in trends.zoom_columns(len(steps), indices, period, window)]


def _in_period(runs: list[RunInfo], since: datetime, until: datetime) -> list[bool]:
    return [since <= run_time(r) < until for r in runs]


def _change_points(
    steps: list[float], options: ChangePointOptions | None, searched: _Searched
) -> list[ChangePoint]:
    key = tuple(steps)
    if key not in searched:
        searched[key] = detect_change_points(steps, options=options)
    return searched[key]


def _step_history(
    runs: list[RunInfo], matrix: trends.SeriesMatrix, step: SeriesKey
) -> tuple[list[RunInfo], trends.SeriesMatrix, list[float]]:
    """The runs that measured the step time, their matrix and their step times: a change-point
    search needs a series without holes."""
    keep = [i for i, v in enumerate(matrix.row(step)) if not math.isnan(v)]
    matrix = matrix.columns(keep)
    return [runs[i] for i in keep], matrix, [float(v) for v in matrix.row(step)]


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
    searched: _Searched,
) -> BenchmarkTrend:
    first = runs[0]
    in_period = _in_period(runs, since, until)
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
    runs, matrix, steps = _step_history(runs, matrix, trend.step)
    flags = _in_period(runs, since, until)
    found = _change_points(steps, options, searched)
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
#: What a long history reads of every run: the step times, the benchmark cases and headline
#: values (their change points are scanned over the whole history), not the kernels.
_HEADLINE_KINDS = _MEASURE_KINDS | {MetricKind.STEP}


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
