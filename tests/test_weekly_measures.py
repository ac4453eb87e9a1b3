"""The weekly report tracks benchmark cases and headline values beside the step time (issue 15).

A project of throughput and peak-memory measures and no step (an LLM serving benchmark, a
pytest-benchmark suite) still gets its changes of level, in their units and with the direction
deciding which change is a regression. Real store (SQLite and PostgreSQL), real ingest.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import numpy as np
from sqlalchemy.orm import Session

from perfci.core.model import Better, Metric, MetricKind, Profile, RunContext
from perfci.report.weekly_html import render_html
from perfci.report.weekly_markdown import render_markdown
from perfci.usecases.submit.ingest import ingest_run
from perfci.usecases.weekly.report import build_weekly_report
from perfci.usecases.weekly.weeks import week_bounds

T0 = datetime(2024, 1, 1, 9, 0, tzinfo=UTC)  # day 21 starts 2024-W04
PROJECT, BENCHMARK = "acme/serve", "llm-serving"


def _profile(rng: np.random.Generator, tokens_per_s: float, peak: float) -> Profile:
    noise = lambda: float(rng.lognormal(0.0, 0.01))  # noqa: E731 - one line per metric below
    return Profile(
        label="serve",
        format="perfci_json",
        source="bench.json",
        metrics=[
            Metric(
                MetricKind.MEASURE,
                "throughput",
                unit="tokens/s",
                better=Better.HIGHER,
                value=tokens_per_s * noise(),
            ),
            Metric(MetricKind.MEASURE, "peak allocated memory", unit="bytes", value=peak * noise()),
            Metric(MetricKind.BENCH, "test_decode", avg_ns=2e6 * noise(), calls=100),
        ],
    )


def _history(session: Session, *, change_at: int = 23, runs: int = 35) -> None:
    rng = np.random.default_rng(11)
    for i in range(runs):
        slower = i >= change_at
        tokens = 12_000.0 * (0.9 if slower else 1.0)  # 10 % fewer tokens per second
        peak = 6.0 * 2**30  # unchanged
        context = RunContext(
            project=PROJECT,
            commit=f"c{i:03d}",
            branch="main",
            commit_time=(T0 + timedelta(days=i)).isoformat(),
            environment={"gpu": "H100"},
        )
        ingest_run(
            session,
            context=context,
            benchmark=BENCHMARK,
            repeats=[[_profile(rng, tokens, peak)] for _ in range(2)],
            created_at=T0 + timedelta(days=i, hours=1),
        )


def test_a_throughput_drop_is_a_regression_of_the_week_in_its_unit(session: Session) -> None:
    _history(session)
    since, until = week_bounds("2024-W04")[0], week_bounds("2024-W05")[1]
    report = build_weekly_report(session, project=PROJECT, since=since, until=until)
    changes = report.measure_changes()
    assert [c.name for _, c in changes] == ["throughput"]  # memory and the case held still
    ((trend, change),) = changes
    assert trend.benchmark == BENCHMARK
    assert change.commit == "c023" and change.previous_commit == "c022"
    assert change.worse and change.unit == "tokens/s"
    assert change.change == np.clip(change.change, -0.12, -0.08)
    assert "No step-time series: change points need one." not in trend.notes

    body = render_markdown(report)
    assert "### Benchmark cases and headline values" in body
    assert "throughput (higher is better)" in body
    assert "12 k tokens/s → 10.8 k tokens/s" in body
    assert "❌ regression" in body
    html = render_html(report, plots=False)
    assert 'id="measure-changes"' in html and "k tokens/s" in html and "regression" in html
