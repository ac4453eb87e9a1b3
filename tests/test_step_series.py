"""One step for every view (issue 36): the dashboard charts, and lists for every run, and the
weekly report follows, the step series the comment judged
(:func:`perfci.analysis.steps.primary_step`, the longest), not the first step series stored."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from db_fixtures import make_context
from sqlalchemy.orm import Session

from perfci.core.model import Metric, MetricKind, Profile
from perfci.store import dashboard
from perfci.usecases.browse import pages as browse
from perfci.usecases.submit.compare import compare_stored_run
from perfci.usecases.submit.ingest import ingest_run
from perfci.usecases.weekly.report import build_weekly_report

PROJECT = "acme/model"
BENCHMARK = "train"
START = datetime(2026, 11, 2, 10, tzinfo=UTC)


def _profile(forward_ns: float, iteration_ns: float) -> Profile:
    # The short sub-step comes first, so it is stored (and gets its id) before the iteration.
    metrics = [
        Metric(kind=MetricKind.STEP, name=name, calls=4, total_ns=4 * ns, avg_ns=ns)
        for name, ns in (("forward", forward_ns), ("iteration", iteration_ns))
    ]
    metrics.append(
        Metric(kind=MetricKind.KERNEL, name="gemm", calls=4, total_ns=2 * iteration_ns, avg_ns=1)
    )
    return Profile(label="p", format="synthetic", source="p.json", metrics=metrics, steps=4)


def _ingest(session: Session, n: int, *, slow: float = 1.0, **context: object) -> int:
    repeats = [
        [_profile(3e6 * (1 + r / 200), 10e6 * slow * (1 + (r + n % 3) / 300))] for r in range(3)
    ]
    when = START + timedelta(hours=n)
    result = ingest_run(
        session,
        context=make_context(
            commit=f"{n:040x}", ci_run_id=f"run-{n}", commit_time=when.isoformat(), **context
        ),
        benchmark=BENCHMARK,
        repeats=repeats,
        created_at=when,
    )
    return result.run_id


@pytest.mark.parametrize("slow", [1.0, 1.2])
def test_the_dashboard_charts_and_lists_the_step_the_comment_judged(
    session: Session, slow: float
) -> None:
    main_runs = [_ingest(session, n, branch="main") for n in range(6)]
    pr_run = _ingest(session, 10, slow=slow, branch="feature", pr_number=7, base_branch="main")
    judged = compare_stored_run(session, pr_run)
    assert judged.primary_step is not None and "iteration" in judged.primary_step

    series, points = browse.step_history(session, PROJECT, BENCHMARK, branch="main")
    assert series is not None and series.key == judged.primary_step
    assert [p.run_id for p in points] == main_runs

    # The runs table: the pull request's run has its step time too, the judged one's value.
    times = browse.step_times(session, PROJECT, BENCHMARK, [pr_run, *main_runs])
    assert set(times) == {pr_run, *main_runs}
    step = next(m for m in judged.metrics if m.key == judged.primary_step)
    assert times[pr_run] == pytest.approx(step.candidate_median)


def test_the_weekly_report_follows_the_step_the_comment_judged(session: Session) -> None:
    main_runs = [_ingest(session, n, branch="main") for n in range(6)]
    pr_run = _ingest(session, 10, branch="feature", pr_number=7, base_branch="main")
    judged = compare_stored_run(session, pr_run)
    assert judged.primary_step is not None
    # The case that tells them apart: the forward step is stored first, the iteration is longer.
    benchmark_id = dashboard.benchmark_id(session, PROJECT, BENCHMARK)
    assert benchmark_id is not None
    first_stored = dashboard.step_series(session, benchmark_id)[0][1]
    assert first_stored.name == "forward" and first_stored.key != judged.primary_step

    report = build_weekly_report(
        session, project=PROJECT, since=START, until=START + timedelta(days=1), record=False
    )
    (trend,) = report.benchmarks
    assert trend.step is not None and trend.step.key == judged.primary_step
    assert [p.run_id for p in trend.points] == main_runs
    charted, _ = browse.step_history(session, PROJECT, BENCHMARK, branch="main")
    assert charted == trend.step
