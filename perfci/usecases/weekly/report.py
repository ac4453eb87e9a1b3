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

from collections import Counter
from collections.abc import Sequence
from datetime import datetime, timedelta

from perfci.analysis.changepoints import ChangePointOptions
from perfci.core.errors import ConfigError
from perfci.core.weekly import (
    ChangePointReport,
    Coverage,
    DayCount,
    EnvironmentSeen,
    WeeklyReport,
)
from perfci.store import queries
from perfci.store.queries import RunInfo
from perfci.store.work import Session
from perfci.usecases.browse.alerts import AlertInfo, NewAlert, record_alerts
from perfci.usecases.weekly.answers import acknowledge_accepted, tally_answers
from perfci.usecases.weekly.trend import ZOOM_WINDOW, benchmark_trends, run_time, utc
from perfci.usecases.weekly.weeks import period_label

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
    zoom_window: int | None = ZOOM_WINDOW,
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
    zoom_window
        On a benchmark's history of more than four times this many runs, read the kernels of
        only the period's runs and of this many on each side of every change point
        (:func:`perfci.usecases.weekly.trend.benchmark_trends`); ``None`` reads them all.
    """
    since, until = utc(since), utc(until)
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
            benchmark_trends(
                session, by_benchmark[name], since, until, options, zoom_window=zoom_window
            )
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
    found = queries.runs_in_period(
        session, project=project, since=since, until=until, by_run_time=True, branch=branch
    )
    wanted = set(benchmarks) if benchmarks else None
    kept = [r for r in found if wanted is None or r.benchmark in wanted]
    return sorted(kept, key=lambda r: (run_time(r), utc(r.created_at), r.id))


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
