"""Speed of the weekly report: one year of daily main-branch runs in a temp SQLite store.

Usage::

    .venv/bin/python benchmarks/report_speed.py [--days 365] [--series 300] [--benchmarks 3]
        [--repeats 3] [--budget 30]

``--series`` metrics in all (split over ``--benchmarks``; one of each benchmark's is its step time,
the rest kernels), ``--repeats`` repeats per run, one run per benchmark per day, ingested through
:func:`perfci.usecases.submit.ingest.ingest_run` (the real use case; not timed in the budget). Each
benchmark gets two real level changes (a kernel × 1.3 from day 200, × 0.8 from day 330) so that
attribution does its work. Then, timed: :func:`build_weekly_report` for the last week with 8 weeks
of history (the default) and with the whole year, and rendering HTML (with plots) and Markdown.
Prints a Markdown table; the budget is for the whole-year report + HTML.
"""

from __future__ import annotations

import argparse
import platform
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from perfci.core.model import Metric, MetricKind, Profile, RunContext
from perfci.report.weekly_html import render_html
from perfci.report.weekly_markdown import render_markdown
from perfci.store import engines, migrate
from perfci.usecases.submit.ingest import ingest_run
from perfci.usecases.weekly.report import build_weekly_report

T0 = datetime(2025, 1, 6, 6, tzinfo=UTC)  # a Monday
PROJECT = "bench/report"
ENVIRONMENT = {"gpu": "H100", "torch": "2.4.0"}
STEPS = 10
CV = 0.01


def _profile(
    rng: np.random.Generator, base: np.ndarray, factors: np.ndarray, names: list[str]
) -> Profile:
    kernels = base * factors * rng.lognormal(0.0, CV, len(base))
    step = float(kernels.sum()) * 1.05 * rng.lognormal(0.0, CV)
    metrics = [
        Metric(kind=MetricKind.STEP, name="train_step", calls=STEPS, samples_ns=[step] * STEPS)
    ]
    metrics += [
        Metric(kind=MetricKind.KERNEL, name=name, calls=STEPS * 4, total_ns=float(value) * STEPS)
        for name, value in zip(names, kernels, strict=True)
    ]
    return Profile(
        label="p", format="synthetic", source="synthetic.json", metrics=metrics, steps=STEPS
    )


def ingest_year(url: str, *, days: int, series: int, benchmarks: int, repeats: int) -> int:
    """Ingest the synthetic history; returns the number of sample rows written."""
    rng = np.random.default_rng(1)
    per_benchmark = max(2, series // benchmarks) - 1  # the step time is one of the series
    engine = engines.make_engine(url)
    samples = 0
    try:
        sessions = engines.make_sessionmaker(engine)
        for b in range(benchmarks):
            names = [f"kernel_{b}_{i:03d}<float, {i % 7}>" for i in range(per_benchmark)]
            # ~0.4 ms per step with a long tail, largest first: the two that change matter.
            base = np.sort(rng.lognormal(13.0, 1.5, per_benchmark))[::-1]
            for d in range(days):
                factors = np.ones(per_benchmark)
                factors[0] *= 1.3 if d >= 200 else 1.0
                factors[1] *= 0.8 if d >= 330 else 1.0
                context = RunContext(
                    project=PROJECT,
                    commit=f"{b:02d}{d:04d}",
                    branch="main",
                    commit_time=(T0 + timedelta(days=d)).isoformat(),
                    environment=dict(ENVIRONMENT),
                )
                repeat = [[_profile(rng, base, factors, names)] for _ in range(repeats)]
                with sessions() as session:
                    result = ingest_run(
                        session,
                        context=context,
                        benchmark=f"bench_{b}",
                        repeats=repeat,
                        created_at=T0 + timedelta(days=d, hours=2),
                    )
                samples += result.samples
    finally:
        engine.dispose()
    return samples


def _timed(call: Callable[[], Any]) -> tuple[float, Any]:
    start = time.perf_counter()
    value = call()
    return time.perf_counter() - start, value


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--days", type=int, default=365)
    parser.add_argument("--series", type=int, default=300)
    parser.add_argument("--benchmarks", type=int, default=3)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--budget", type=float, default=30.0)
    args = parser.parse_args(argv)

    with tempfile.TemporaryDirectory() as folder:
        url = f"sqlite:///{Path(folder) / 'report.db'}"
        migrate.upgrade(url)
        ingest_s, samples = _timed(
            lambda: ingest_year(
                url,
                days=args.days,
                series=args.series,
                benchmarks=args.benchmarks,
                repeats=args.repeats,
            )
        )
        until = T0 + timedelta(days=args.days)
        until = datetime(until.year, until.month, until.day, tzinfo=UTC)
        since = until - timedelta(days=7)
        engine = engines.make_engine(url)
        sessions = engines.make_sessionmaker(engine)
        rows: list[tuple[str, float, str]] = []
        try:
            with sessions() as session:
                # The whole year first, from a cold store: the figure the budget is about.
                t52, report = _timed(
                    lambda: build_weekly_report(
                        session, project=PROJECT, since=since, until=until, history_weeks=53
                    )
                )
                t8, _ = _timed(
                    lambda: build_weekly_report(session, project=PROJECT, since=since, until=until)
                )
            html_s, html = _timed(lambda: render_html(report))
            md_s, _ = _timed(lambda: render_markdown(report))
        finally:
            engine.dispose()
        changes = sum(len(t.change_points) for t in report.benchmarks)
        rows += [
            ("build_weekly_report, whole year of history", t52, f"{changes} change points found"),
            ("build_weekly_report, 8 weeks of history (default)", t8, ""),
            ("render HTML (plots inlined)", html_s, f"{len(html) / 1e3:.0f} kB"),
            ("render Markdown", md_s, ""),
        ]
        total = t52 + html_s
        verdict = "within" if total < args.budget else "OVER"
        print(
            f"Weekly report speed: {args.days} daily runs × {args.series} series "
            f"({args.benchmarks} benchmarks, {args.repeats} repeats, {samples:,} samples), "
            f"SQLite, Python {platform.python_version()}, {platform.machine()}; ingest "
            f"(setup, not in the budget) {ingest_s:.1f} s\n"
        )
        print("| Step | Time (s) | Notes |")
        print("|:--|--:|:--|")
        for name, seconds, note in rows:
            print(f"| {name} | {seconds:.2f} | {note} |")
        print(
            f"| **whole-year report + HTML** | **{total:.2f}** | {verdict} the "
            f"{args.budget:.0f} s budget |"
        )
    return 0 if total < args.budget else 1


if __name__ == "__main__":
    sys.exit(main())
