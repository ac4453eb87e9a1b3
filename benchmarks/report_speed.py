"""Speed of the weekly report: a year of main-branch runs in a scratch store (issue 35).

Usage::

    .venv/bin/python benchmarks/report_speed.py [--days 365] [--series 300] [--benchmarks 3]
        [--repeats 3] [--runs-per-day 1] [--store sqlite|postgres] [--budget 30]

``--series`` metrics in all (split over ``--benchmarks``; one of each benchmark's is its step time,
the rest kernels), ``--repeats`` repeats per run, ``--runs-per-day`` runs per benchmark per day
(a team's scale is 10), ingested through :func:`perfci.usecases.submit.ingest.ingest_run` (the
real use case; not timed in the budget) into a temp SQLite file or a scratch PostgreSQL database
beside ``PERFCI_TEST_POSTGRES_URL`` (analysed after filling, as autovacuum would). Each benchmark
gets two real level changes (a kernel × 1.3 from day 200, × 0.8 from day 330) so that attribution
does its work. Then, timed: :func:`build_weekly_report` for the last week with the whole year of
history (cold, then again), the same reading every series of every run (``zoom_window=None``),
with 8 weeks (the default) and with 1 week; and rendering HTML (with plots) and Markdown. Prints a
Markdown table; the budget is for the whole-year report + HTML; issue 35 asks the one-year report
within 2× of the one-week one.
"""

from __future__ import annotations

import argparse
import itertools
import math
import os
import platform
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
from sqlalchemy import create_engine, text

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from store_speed import DEFAULT_PG, analyze, scratch_database

from perfci.core.model import Metric, MetricKind, Profile, RunContext
from perfci.core.settings import Settings
from perfci.core.weekly import WeeklyReport
from perfci.report.weekly_html import render_html
from perfci.report.weekly_markdown import render_markdown
from perfci.store import engines, migrate
from perfci.usecases.submit.ingest import ingest_run
from perfci.usecases.submit.run import submit_run
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


def ingest_year(
    url: str,
    *,
    days: int,
    series: int,
    benchmarks: int,
    repeats: int,
    runs_per_day: int = 1,
    fill: str = "ingest",
) -> int:
    """Store the synthetic history; returns the number of sample rows written.

    ``fill``: ``ingest`` as ``perfci ingest`` does (rows only, fast to fill), ``upload`` as
    uploads do (each run compared, its values also kept as arrays: what a report reads of
    the runs it reads whole).
    """
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
            for d, n in itertools.product(range(days), range(runs_per_day)):
                factors = np.ones(per_benchmark)
                factors[0] *= 1.3 if d >= 200 else 1.0
                factors[1] *= 0.8 if d >= 330 else 1.0
                at = timedelta(days=d, minutes=n * 24 * 60 // runs_per_day)
                context = RunContext(
                    project=PROJECT,
                    commit=f"{b:02d}{d:04d}{n:03d}",
                    branch="main",
                    commit_time=(T0 + at).isoformat(),
                    environment=dict(ENVIRONMENT),
                )
                repeat = [[_profile(rng, base, factors, names)] for _ in range(repeats)]
                with sessions() as session:
                    if fill == "upload":
                        result = submit_run(
                            session,
                            context=context,
                            benchmark=f"bench_{b}",
                            repeats=repeat,
                            settings=Settings(),
                        ).ingest
                    else:
                        result = ingest_run(
                            session,
                            context=context,
                            benchmark=f"bench_{b}",
                            repeats=repeat,
                            created_at=T0 + at + timedelta(minutes=30),
                        )
                samples += result.samples
    finally:
        engine.dispose()
    return samples


@contextmanager
def _store(store: str, server: str, kept: Path | None) -> Iterator[tuple[str, int]]:
    """The store's URL and, when ``kept`` already holds a filled one, its sample count."""
    if kept is None:
        with scratch_database(store, server) as url:
            yield url, 0
        return
    if store != "sqlite":
        raise SystemExit("--store-file keeps a SQLite store")
    url = f"sqlite:///{kept}"
    if not kept.exists():
        yield url, 0
        return
    engine = create_engine(url)
    with engine.connect() as connection:
        count = int(connection.execute(text("SELECT count(*) FROM sample")).scalar_one())
    engine.dispose()
    print(f"reusing {kept}: {count:,} samples", file=sys.stderr)
    yield url, count


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
    parser.add_argument("--runs-per-day", type=int, default=1)
    parser.add_argument("--store", choices=("sqlite", "postgres"), default="sqlite")
    parser.add_argument("--budget", type=float, default=30.0)
    parser.add_argument(
        "--store-file",
        type=Path,
        help="SQLite store kept at this path: filled when absent, reused as it is after (a "
        "year at 50 runs a day takes long to fill), so that two checkouts can be timed in turn",
    )
    parser.add_argument(
        "--no-whole-read",
        action="store_true",
        help="skip the report that reads every series of every run (minutes on a long history)",
    )
    parser.add_argument(
        "--fill",
        choices=("ingest", "upload"),
        default="ingest",
        help="store the runs as `perfci ingest` does (rows only) or as uploads do (each "
        "compared, its values also kept as arrays); uploads take far longer to fill",
    )
    args = parser.parse_args(argv)

    server = os.environ.get("PERFCI_TEST_POSTGRES_URL", DEFAULT_PG)
    with _store(args.store, server, args.store_file) as (url, filled):
        migrate.upgrade(url)
        ingest_s, samples = _timed(
            lambda: (
                filled
                or ingest_year(
                    url,
                    days=args.days,
                    series=args.series,
                    benchmarks=args.benchmarks,
                    repeats=args.repeats,
                    runs_per_day=args.runs_per_day,
                    fill=args.fill,
                )
            )
        )
        if args.store == "postgres":  # what autovacuum does to a store filled over a year
            analyze(url)
        until = T0 + timedelta(days=args.days)
        until = datetime(until.year, until.month, until.day, tzinfo=UTC)
        since = until - timedelta(days=7)
        engine = engines.make_engine(url)
        sessions = engines.make_sessionmaker(engine)
        rows: list[tuple[str, float, str]] = []
        try:
            with sessions() as session:

                def report(weeks: int, **zoom: Any) -> tuple[float, WeeklyReport]:
                    return _timed(
                        lambda: build_weekly_report(
                            session,
                            project=PROJECT,
                            since=since,
                            until=until,
                            history_weeks=weeks,
                            record=False,
                            **zoom,
                        )
                    )

                # The whole year first, from a cold store: the figure the budget is about.
                t52, report_ = report(53)
                t52_whole = math.nan if args.no_whole_read else report(53, zoom_window=None)[0]
                t8, _ = report(8)
                t1, _ = report(1)
                t52_again, _ = report(53)
            report = report_
            html_s, html = _timed(lambda: render_html(report))
            md_s, _ = _timed(lambda: render_markdown(report))
        finally:
            engine.dispose()
        changes = sum(len(t.change_points) for t in report.benchmarks)
        rows += [
            ("build_weekly_report, whole year of history", t52, f"{changes} change points found"),
            ("… again, the store warm", t52_again, f"{t52_again / t1:.1f}× the one-week report"),
            ("… every series of every run read (`zoom_window=None`)", t52_whole, ""),
            ("build_weekly_report, 8 weeks of history (default)", t8, ""),
            ("build_weekly_report, 1 week of history", t1, ""),
            ("render HTML (plots inlined)", html_s, f"{len(html) / 1e3:.0f} kB"),
            ("render Markdown", md_s, ""),
        ]
        total = t52 + html_s
        verdict = "within" if total < args.budget else "OVER"
        print(
            f"Weekly report speed: {args.days} days × {args.runs_per_day} runs × {args.series} "
            f"series "
            f"({args.benchmarks} benchmarks, {args.repeats} repeats, {samples:,} samples), "
            f"{args.store}, Python {platform.python_version()}, {platform.machine()}; ingest "
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
