"""A PostgreSQL store growing to a year of a team's history (issue 17): ingest, baseline, history
and weekly-report times at 1 M, 10 M and 50 M samples, measured side by side; sizes per million
samples; and ``perfci db prune`` on the full year.

Usage::

    nice -n 19 .venv/bin/python benchmarks/store_growth.py \\
        [--postgres-url postgresql+psycopg://root@127.0.0.1:5432/test] [--rows 50000000]
        [--checkpoints 1000000,10000000] [--benchmarks 5] [--series 1000] [--repeats 5]

**The store.** ``--benchmarks`` benchmarks of ``--series`` kernels and a step each, ``--repeats``
repeats per run, runs spread evenly over 2025 until the store holds ``--rows`` samples; the
flagship benchmark (``bench_0``) gets 40 % of the runs, 60 % of all runs are pushes to ``main``
and the rest pull requests. Each benchmark's first run goes in through the real ingest (its
series, series list, project, environment); the rest are written by the server itself, a day at
a time (run, commit and profile rows, then ``INSERT … SELECT`` of the samples into the monthly
partitions), which is what makes 50 M rows take minutes. From day 200 the step and every 50th
kernel of ``bench_0`` are 8 % slower, so the weekly report has a change to find.

**Side by side.** When the store passes each checkpoint it is copied (``CREATE DATABASE …
TEMPLATE``); with a fresh empty store, that makes four stores measured in the same minutes,
round by round, rotating which goes first (a shared VM drifts by 2× within minutes):

- *ingest*: a new main run of ``bench_0`` through :func:`perfci.usecases.submit.ingest.ingest_run`
  (1,000 kernels and the step, ``--repeats`` repeats: 5,005 samples), one transaction, stored
  on the last day of the year; after warm-up runs;
- *baseline*: :func:`baseline_run_ids` (30 runs) + :func:`run_samples_checked`, as a comparison
  reads it;
- *history*: :func:`perfci.store.queries.series_history` of one kernel of ``bench_0`` on
  ``main`` over the whole year;
- *weekly*: :func:`perfci.usecases.weekly.report.build_weekly_report` of ``bench_0`` on ``main`` for
  the last week (eight weeks of history, as by default);
- *sizes*: heap and index bytes of ``sample``'s partitions per million samples.

**Prune** (unless ``--no-prune``): on the full store, ``prune --keep 90d --keep-base 180d`` then
``--keep 90d``, each timed, with the space before and after; every weekly report of ``main`` (one
per ISO week of the year, ``bench_0``) and the step's one-year history are computed before and
after each prune and must be equal.

The databases are dropped at the end (``--keep-databases`` keeps them). Prints Markdown tables.
"""

from __future__ import annotations

import argparse
import math
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np
from sqlalchemy import Engine, create_engine, text

from perfci.core.fingerprint import fingerprint_hash
from perfci.core.model import Metric, MetricKind, Profile, RunContext, SeriesKey
from perfci.store import engines, migrate, partitions
from perfci.store.queries import baseline_run_ids, environment_id, series_history
from perfci.store.samples import run_samples_checked
from perfci.usecases.admin.prune import prune_store
from perfci.usecases.submit.ingest import ingest_run
from perfci.usecases.weekly.report import build_weekly_report
from perfci.usecases.weekly.report_json import report_to_dict

PROJECT = "growth"
ENVIRONMENT = {"gpu": "H100", "driver": "550.54", "cuda": "12.4", "torch": "2.4.0"}
T0 = datetime(2025, 1, 1, tzinfo=UTC)
DAYS = 365
END = T0 + timedelta(days=DAYS - 1, hours=12)  # the measured runs: the year's last day
STEPS, CALLS = 10, 20
SHIFT_DAY = 200
DEFAULT_PG = "postgresql+psycopg://root@127.0.0.1:5432/test"
KERNEL = SeriesKey(kind=MetricKind.KERNEL, name="void kernel_7<float, 128>(...)")
STEP = SeriesKey(kind=MetricKind.STEP, name="train_step")


# --- the store's runs -------------------------------------------------------------------------


def kernel_name(j: int) -> str:
    return f"void kernel_{j}<float, 128>(...)"


def make_profile(series: int, rng: np.random.Generator) -> Profile:
    """One repeat of a benchmark: ``series`` kernels and the step (10 steps, 20 calls each)."""
    metrics = []
    total_step = 0.0
    for j in range(series):
        avg = 1_000.0 * (1 + (j * 7919) % 997) * float(rng.lognormal(0, 0.01))
        metrics.append(
            Metric(
                kind=MetricKind.KERNEL,
                name=kernel_name(j),
                calls=CALLS,
                total_ns=avg * CALLS,
                avg_ns=avg,
                min_ns=avg * 0.9,
                max_ns=avg * 1.1,
                std_ns=avg * 0.05,
            )
        )
        total_step += avg * CALLS
    step = total_step * 1.1
    metrics.append(Metric(kind=MetricKind.STEP, name="train_step", calls=STEPS, total_ns=step))
    return Profile(
        label="bench", format="synthetic", source="run.json", metrics=metrics, steps=STEPS
    )


def context(sha: str, when: datetime, key: str, *, branch: str = "main") -> RunContext:
    return RunContext(
        project=PROJECT,
        commit=sha,
        branch=branch,
        commit_time=(when - timedelta(minutes=10)).isoformat(),
        ci_provider="growth",
        ci_run_id=key,
        ci_run_attempt=1,
        environment=dict(ENVIRONMENT),
    )


# One day's runs, written by the server: commits, runs and profiles, their ids back.
_RUNS_SQL = """
WITH n AS (
    SELECT * FROM unnest(%(bench)s::int4[], %(branch)s::text[], %(pr)s::int4[],
                         %(created)s::timestamptz[], %(sha)s::text[])
        AS x(benchmark_id, branch, pr, created_at, sha)),
c AS (
    INSERT INTO "commit" (project_id, sha, committed_at)
    SELECT %(project)s, sha, created_at - interval '10 minutes' FROM n RETURNING id, sha),
r AS (
    INSERT INTO run (project_id, benchmark_id, environment_id, commit_id, branch, base_branch,
                     pr_number, ci_provider, ci_run_id, ci_run_attempt, repeats, created_at,
                     idempotency_key, ordered_at)
    SELECT %(project)s, n.benchmark_id, %(environment)s, c.id, n.branch,
           CASE WHEN n.pr IS NULL THEN NULL ELSE 'main' END, n.pr, 'growth', n.sha, 1,
           %(repeats)s, n.created_at, n.sha, n.created_at - interval '10 minutes'
    FROM n JOIN c ON c.sha = n.sha RETURNING id, benchmark_id, created_at),
f AS (
    INSERT INTO profile (run_id, repeat, label, format, source, steps, metadata)
    SELECT r.id, k, 'bench', 'synthetic', 'run.json', %(steps)s, '{}'::json
    FROM r CROSS JOIN generate_series(0, %(repeats)s - 1) AS k)
SELECT id, benchmark_id, ((created_at AT TIME ZONE 'UTC')::date - DATE '1970-01-01')
FROM r ORDER BY id
"""

# Their samples: the same columns a kernel's ingest fills, a level per series, 1 % noise, and
# bench_0's step and every 50th kernel 8 % slower from day SHIFT_DAY.
_SAMPLES_SQL = """
INSERT INTO sample (run_id, series_id, repeat, run_day, value, calls, total_ns, avg_ns,
                    min_ns, max_ns, std_ns)
SELECT r.id, s.id, k, r.day, v.avg * %(calls)s / %(steps)s, %(calls)s, v.avg * %(calls)s,
       v.avg, v.avg * 0.9, v.avg * 1.1, v.avg * 0.05
FROM unnest(%(ids)s::int4[], %(bench)s::int4[], %(days)s::int4[], %(shift)s::float8[])
    AS r(id, benchmark_id, day, shift)
JOIN series s ON s.benchmark_id = r.benchmark_id
CROSS JOIN generate_series(0, %(repeats)s - 1) AS k
CROSS JOIN LATERAL (
    SELECT (CASE WHEN s.kind = 'step' THEN 1.1 * %(step_level)s ELSE
                 1000.0 * (1 + (s.id * 7919) %% 997) END)
           * (CASE WHEN s.kind = 'step' OR s.id %% 50 = 0 THEN r.shift ELSE 1 END)
           * (1 + 0.02 * (random() - 0.5)) AS avg) AS v
ORDER BY r.id, s.id, k
"""


@dataclass
class Filler:
    """Writes the year's runs a day at a time; knows the ids the first real ingests made."""

    url: str
    args: argparse.Namespace
    project_id: int = 0
    environment_id: int = 0
    benchmark_ids: list[int] = field(default_factory=list)
    rows: int = 0
    runs: int = 0
    seconds: float = 0.0

    def setup(self) -> None:
        """Each benchmark's first run through the real ingest: its series and ids."""
        engine = engines.make_engine(self.url)
        sessions = engines.make_sessionmaker(engine)
        rng = np.random.default_rng(1)
        try:
            for b in range(self.args.benchmarks):
                repeats = [[make_profile(self.args.series, rng)] for _ in range(self.args.repeats)]
                sha = f"{b:040x}"
                with sessions() as session:
                    result = ingest_run(
                        session,
                        context=context(sha, T0, f"setup-{b}"),
                        benchmark=f"bench_{b}",
                        repeats=repeats,
                        created_at=T0,
                    )
                self.rows += result.samples
                self.runs += 1
            with engine.connect() as connection:
                self.project_id = connection.execute(
                    text("SELECT id FROM project WHERE name = :p"), {"p": PROJECT}
                ).scalar_one()
                self.environment_id = connection.execute(
                    text("SELECT id FROM environment WHERE fingerprint = :f"),
                    {"f": fingerprint_hash(ENVIRONMENT)},
                ).scalar_one()
                self.benchmark_ids = [
                    connection.execute(
                        text("SELECT id FROM benchmark WHERE name = :n"), {"n": f"bench_{b}"}
                    ).scalar_one()
                    for b in range(self.args.benchmarks)
                ]
        finally:
            engine.dispose()

    def fill_days(self, days: range, runs_per_day: Callable[[int], int]) -> None:
        """Write the runs of ``days``; commits after each day."""
        import psycopg

        rng = np.random.default_rng(17 + days.start)
        conninfo = self.url.replace("postgresql+psycopg://", "postgresql://")
        step_level = 1.1 * sum(1_000.0 * (1 + (j * 7919) % 997) for j in range(self.args.series))
        with psycopg.connect(conninfo) as connection:
            connection.execute("SELECT setseed(0.17)")
            for day in days:
                started = time.perf_counter()
                count = runs_per_day(day)
                if count <= 0:
                    continue
                minutes = np.sort(rng.uniform(0, 24 * 60, count))
                created = [T0 + timedelta(days=day, minutes=float(m)) for m in minutes]
                weights = [0.4] + [0.6 / (self.args.benchmarks - 1)] * (self.args.benchmarks - 1)
                bench = rng.choice(self.benchmark_ids, size=count, p=weights).tolist()
                main = rng.random(count) < 0.6
                prs = rng.integers(1, 5000, count).tolist()
                shas = [f"{self.runs + i + 1:040x}" for i in range(count)]
                rows = connection.execute(
                    _RUNS_SQL,
                    {
                        "bench": bench,
                        "branch": [
                            "main" if m else f"pr-{p}" for m, p in zip(main, prs, strict=True)
                        ],
                        "pr": [None if m else p for m, p in zip(main, prs, strict=True)],
                        "created": created,
                        "sha": shas,
                        "project": self.project_id,
                        "environment": self.environment_id,
                        "repeats": self.args.repeats,
                        "steps": STEPS,
                    },
                ).fetchall()
                shift = 1.08 if day >= SHIFT_DAY else 1.0
                inserted = connection.execute(
                    _SAMPLES_SQL,
                    {
                        "ids": [r[0] for r in rows],
                        "bench": [r[1] for r in rows],
                        "days": [r[2] for r in rows],
                        "shift": [shift if r[1] == self.benchmark_ids[0] else 1.0 for r in rows],
                        "repeats": self.args.repeats,
                        "calls": CALLS,
                        "steps": STEPS,
                        "step_level": step_level,
                    },
                ).rowcount
                connection.commit()
                self.rows += inserted
                self.runs += count
                self.seconds += time.perf_counter() - started


def runs_per_day_for(total_runs: int) -> Callable[[int], int]:
    """``total_runs`` spread evenly over the year's days."""
    return lambda day: (day + 1) * total_runs // DAYS - day * total_runs // DAYS


# --- databases -------------------------------------------------------------------------------


@dataclass
class Server:
    """The PostgreSQL server: creates, copies and drops this benchmark's databases."""

    url: str
    made: list[str] = field(default_factory=list)

    def _admin(self) -> Engine:
        return create_engine(self.url, isolation_level="AUTOCOMMIT")

    def url_of(self, name: str) -> str:
        return self._admin().url.set(database=name).render_as_string(hide_password=False)

    def create(self, name: str, template: str | None = None) -> str:
        admin = self._admin()
        try:
            with admin.connect() as connection:
                connection.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
                copy = f' TEMPLATE "{template}" STRATEGY FILE_COPY' if template else ""
                connection.execute(text(f'CREATE DATABASE "{name}"{copy}'))
        finally:
            admin.dispose()
        self.made.append(name)
        return self.url_of(name)

    def drop_all(self) -> None:
        admin = self._admin()
        try:
            with admin.connect() as connection:
                for name in self.made:
                    connection.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        finally:
            admin.dispose()


def analyze(url: str) -> None:
    engine = create_engine(url, isolation_level="AUTOCOMMIT")
    try:
        with engine.connect() as connection:
            for table in ("run", "commit", "profile", "series", "sample", "sample_summary"):
                connection.execute(text(f'ANALYZE "{table}"'))
    finally:
        engine.dispose()


# --- measurements ----------------------------------------------------------------------------


@dataclass
class Store:
    name: str
    url: str
    engine: Engine
    samples: int = 0
    ingest_s: list[float] = field(default_factory=list)
    baseline_ms: list[float] = field(default_factory=list)
    baseline_values: int = 0
    history_ms: list[float] = field(default_factory=list)
    history_points: int = 0
    weekly_s: list[float] = field(default_factory=list)
    weekly_runs: int = 0
    sizes: dict[str, int] = field(default_factory=dict)


def rotate(stores: list[Store], round_: int) -> list[Store]:
    shift = round_ % len(stores)
    return stores[shift:] + stores[:shift]


def measure_ingest(stores: list[Store], args: argparse.Namespace) -> None:
    rng = np.random.default_rng(5)
    repeats = [[make_profile(args.series, rng)] for _ in range(args.repeats)]
    total = args.warmup + args.ingest_rounds
    for i in range(total):
        for store in rotate(stores, i):
            when = END + timedelta(minutes=i)
            key = f"measured-{i}"
            sessions = engines.make_sessionmaker(store.engine)
            started = time.perf_counter()
            with sessions() as session:
                result = ingest_run(
                    session,
                    context=context(f"{10**9 + i:040x}", when, key),
                    benchmark="bench_0",
                    repeats=repeats,
                    created_at=when,
                )
            elapsed = time.perf_counter() - started
            assert result.created, store.name
            if i >= args.warmup:
                store.ingest_s.append(elapsed)


def measure_queries(stores: list[Store], args: argparse.Namespace) -> None:
    for i in range(args.query_rounds):
        for store in rotate(stores, i):
            sessions = engines.make_sessionmaker(store.engine)
            started = time.perf_counter()
            with sessions() as session:
                env = environment_id(session, fingerprint_hash(ENVIRONMENT))
                ids = baseline_run_ids(
                    session,
                    project=PROJECT,
                    benchmark="bench_0",
                    environment_id=env,
                    branch="main",
                    limit=30,
                )
                found = run_samples_checked(session, ids)
            store.baseline_ms.append((time.perf_counter() - started) * 1000)
            store.baseline_values = sum(
                len(v) for per_run in found.samples.values() for v in per_run.values()
            )
            del found
    for i in range(args.history_rounds):
        for store in rotate(stores, i):
            sessions = engines.make_sessionmaker(store.engine)
            started = time.perf_counter()
            with sessions() as session:
                points = series_history(
                    session, project=PROJECT, benchmark="bench_0", series=KERNEL, branch="main"
                )
            store.history_ms.append((time.perf_counter() - started) * 1000)
            store.history_points = len(points)


def last_week() -> tuple[datetime, datetime]:
    """The ISO week holding the measured runs (the year's last day)."""
    monday = (END - timedelta(days=END.weekday())).replace(hour=0, minute=0)
    return monday, monday + timedelta(days=7)


def measure_weekly(stores: list[Store], args: argparse.Namespace) -> None:
    since, until = last_week()
    for i in range(args.weekly_rounds):
        for store in rotate(stores, i):
            sessions = engines.make_sessionmaker(store.engine)
            started = time.perf_counter()
            with sessions() as session:
                report = build_weekly_report(
                    session,
                    project=PROJECT,
                    since=since,
                    until=until,
                    branch="main",
                    benchmarks=["bench_0"],
                    record=False,
                )
            store.weekly_s.append(time.perf_counter() - started)
            store.weekly_runs = sum(len(t.points) for t in report.benchmarks)


def measure_sizes(store: Store) -> None:
    with store.engine.connect() as connection:
        heap, index = connection.execute(
            text(
                "SELECT coalesce(sum(pg_relation_size(c.oid)), 0), "
                "coalesce(sum(pg_indexes_size(c.oid)), 0) "
                "FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid "
                "WHERE i.inhparent = 'sample'::regclass"
            )
        ).one()
        count = connection.execute(text("SELECT count(*) FROM sample")).scalar_one()
        parts = connection.execute(
            text("SELECT count(*) FROM pg_inherits WHERE inhparent = 'sample'::regclass")
        ).scalar_one()
    store.samples = int(count)
    store.sizes = {"heap": int(heap), "index": int(index), "partitions": int(parts)}


# --- prune -----------------------------------------------------------------------------------


def what_main_shows(engine: Engine, every: int) -> dict[str, Any]:
    """Every ``every``-th weekly report of main (bench_0) over the year, and the step's
    history medians."""
    sessions = engines.make_sessionmaker(engine)
    reports = []
    with sessions() as session:
        week = T0 - timedelta(days=T0.weekday())
        while week < END:
            report = build_weekly_report(
                session,
                project=PROJECT,
                since=week,
                until=week + timedelta(days=7),
                branch="main",
                benchmarks=["bench_0"],
                record=False,
            )
            reports.append(report_to_dict(report))
            week += timedelta(days=7 * every)
        history = series_history(
            session, project=PROJECT, benchmark="bench_0", series=STEP, branch="main"
        )
    return {
        "reports": reports,
        "step": [(p.run_id, statistics.median(p.values)) for p in history],
    }


@dataclass
class PruneStep:
    label: str
    seconds: float
    runs: int
    summaries: int
    samples: int
    actions: dict[str, int]
    before: tuple[int, int]
    after: tuple[int, int]
    same: bool
    check_s: float


def prune_year(url: str, engine: Engine, args: argparse.Namespace) -> list[PruneStep]:
    started = time.perf_counter()
    reference = what_main_shows(engine, args.report_every)
    reference_s = time.perf_counter() - started
    print(f"  weekly reports and step history before pruning: {reference_s:.0f} s", file=sys.stderr)
    steps = []
    now = END + timedelta(days=1)
    for label, keep, keep_base in (
        (
            f"--keep {args.keep_days}d --keep-base {args.keep_base_days}d",
            args.keep_days,
            args.keep_base_days,
        ),
        (f"--keep {args.keep_days}d", args.keep_days, None),
    ):
        started = time.perf_counter()
        report = prune_store(url, keep=keep, keep_base=keep_base, now=now)
        seconds = time.perf_counter() - started
        started = time.perf_counter()
        same = what_main_shows(engine, args.report_every) == reference
        check_s = time.perf_counter() - started
        actions: dict[str, int] = {}
        for month in report.months:
            actions[month.action] = actions.get(month.action, 0) + 1
        steps.append(
            PruneStep(
                label=label,
                seconds=seconds,
                runs=sum(m.runs for m in report.months),
                summaries=sum(m.summaries for m in report.months),
                samples=sum(m.samples for m in report.months),
                actions=actions,
                before=report.bytes_before,
                after=report.bytes_after,
                same=same,
                check_s=check_s,
            )
        )
        print(f"  prune {label}: {seconds:.0f} s, same reports: {same}", file=sys.stderr)
    return steps


# --- tables ----------------------------------------------------------------------------------


def _gb(n: float) -> str:
    return f"{n / 1e9:,.2f} GB" if n >= 1e8 else f"{n / 1e6:,.1f} MB"


def _med(values: list[float]) -> float:
    return statistics.median(values) if values else math.nan


def report_tables(
    stores: list[Store], steps: list[PruneStep], filler: Filler, args: argparse.Namespace
) -> str:
    per_run = (args.series + 1) * args.repeats
    empty = next(s for s in stores if s.name == "empty")
    first = next(s for s in stores if s.name != "empty")
    lines = [
        f"{args.benchmarks} benchmarks × {args.series} kernels + step, {args.repeats} repeats "
        f"({per_run:,} samples a run); {filler.runs:,} runs over {DAYS} days; filled in "
        f"{filler.seconds / 60:.1f} min ({filler.rows / max(filler.seconds, 1e-9):,.0f} rows/s, "
        f"server-side); {platform.machine()}, {os.cpu_count()} CPUs, Python "
        f"{platform.python_version()}, load average {_load()}",
        "",
        "| store | samples | partitions | ingest rows/s (median of "
        f"{args.ingest_rounds}) | vs empty | baseline ms (30 runs, median of "
        f"{args.query_rounds}) | vs {first.name} | history ms (one kernel, a year of main) "
        "| weekly report s (bench_0, main) | heap bytes / M samples | index bytes / M samples |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for s in stores:
        rate = per_run / _med(s.ingest_s)
        base_rate = per_run / _med(empty.ingest_s)
        million = max(s.samples, 1) / 1e6
        lines.append(
            f"| {s.name} | {s.samples:,} | {s.sizes['partitions']} | {rate:,.0f} | "
            f"{rate / base_rate:.2f} | {_med(s.baseline_ms):.1f} ({s.baseline_values:,} values) | "
            f"{_med(s.baseline_ms) / _med(first.baseline_ms):.2f} | "
            f"{_med(s.history_ms):.1f} ({s.history_points:,} runs) | "
            f"{_med(s.weekly_s):.2f} ({s.weekly_runs} runs) | "
            f"{s.sizes['heap'] / million:,.0f} | {s.sizes['index'] / million:,.0f} |"
        )
    if steps:
        lines += [
            "",
            "| prune (on the full store) | time | runs rolled up | samples → summaries "
            "| months | samples table | summaries table | freed | weekly reports and step "
            "history of main unchanged |",
            "|---|---:|---:|---|---|---|---|---:|---|",
        ]
        for p in steps:
            months = ", ".join(f"{n} {a}" for a, n in sorted(p.actions.items()))
            lines.append(
                f"| `{p.label}` | {p.seconds:.0f} s | {p.runs:,} | {p.samples:,} → "
                f"{p.summaries:,} | {months} | {_gb(p.before[0])} → {_gb(p.after[0])} | "
                f"{_gb(p.before[1])} → {_gb(p.after[1])} | "
                f"{_gb(sum(p.before) - sum(p.after))} | "
                f"{'yes' if p.same else '**no**'} ({math.ceil(53 / args.report_every)} weekly "
                f"reports, checked in {p.check_s:.0f} s) |"
            )
    lines += ["", capacity(stores, steps, args)]
    return "\n".join(lines)


def capacity(stores: list[Store], steps: list[PruneStep], args: argparse.Namespace) -> str:
    """The arithmetic for the issue's team: 100 benchmarks × 1,000 series × 5 repeats × 50 runs
    a day = 25 M samples a day, 9.1 G a year, from the bytes measured here."""
    full = max(stores, key=lambda s: s.samples)
    raw = (full.sizes["heap"] + full.sizes["index"]) / max(full.samples, 1)
    rows_day = 100 * 1000 * 5 * 50
    rows_year = rows_day * 365
    summary_bytes = None
    if steps and steps[-1].summaries:
        last = steps[-1]
        summary_bytes = last.after[1] / max(sum(p.summaries for p in steps), 1)
    out = [
        "Capacity for 100 benchmarks × 1,000 series × 5 repeats × 50 runs a day "
        f"({rows_day / 1e6:.0f} M samples a day, {rows_year / 1e9:.1f} G a year), from the "
        f"bytes measured above ({raw:.0f} bytes per sample with its index"
        + (f", {summary_bytes:.0f} per summary row" if summary_bytes else "")
        + "):",
        "",
        f"- raw samples, no roll-up: {_gb(raw * rows_year)} a year; a monthly partition "
        f"{_gb(raw * rows_year / 12)} ({rows_year / 12 / 1e6:,.0f} M rows).",
    ]
    if summary_bytes:
        kept = raw * rows_day * (args.keep_days + 31)
        summaries_year = summary_bytes * rows_year / 5
        out += [
            f"- with `--keep {args.keep_days}d`: at most {args.keep_days + 31} days of raw samples "
            f"({_gb(kept)}) plus {_gb(summaries_year)} of summaries a year "
            f"(one row per run and series, {rows_year / 5 / 1e9:.1f} G rows): "
            f"{_gb(kept + summaries_year)} after the first year, growing by "
            f"{_gb(summaries_year)} a year.",
        ]
    live = math.ceil((args.keep_days + 31) / 30) + 1 + partitions.MONTHS_AHEAD
    out += [
        f"- partitions: 12 a year, plus {partitions.MONTHS_AHEAD} made ahead; with the "
        f"retention above about {live} exist at any time.",
        "- a streaming replica is a second copy of all of it (the same disk again) and "
        f"receives the write-ahead log: about {_gb(raw * rows_day)} a day of samples "
        "(more with full-page writes after each checkpoint).",
    ]
    return "\n".join(out)


# --- main ------------------------------------------------------------------------------------


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--postgres-url", default=os.environ.get("PERFCI_TEST_POSTGRES_URL", DEFAULT_PG)
    )
    parser.add_argument("--database", default="perfci_growth")
    parser.add_argument("--rows", type=int, default=50_000_000)
    parser.add_argument("--checkpoints", default="1000000,10000000")
    parser.add_argument("--benchmarks", type=int, default=5)
    parser.add_argument("--series", type=int, default=1000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--ingest-rounds", type=int, default=40)
    parser.add_argument("--query-rounds", type=int, default=20)
    parser.add_argument("--history-rounds", type=int, default=5)
    parser.add_argument("--weekly-rounds", type=int, default=3)
    parser.add_argument("--keep-days", type=int, default=90)
    parser.add_argument("--keep-base-days", type=int, default=180)
    parser.add_argument(
        "--report-every", type=int, default=1, help="check every N-th weekly report after a prune"
    )
    parser.add_argument("--no-prune", action="store_true")
    parser.add_argument("--keep-databases", action="store_true")
    args = parser.parse_args()
    checkpoints = sorted(int(c) for c in args.checkpoints.split(",") if c)

    server = Server(args.postgres_url)
    try:
        return run(server, args, checkpoints)
    finally:
        if not args.keep_databases:
            server.drop_all()


def run(server: Server, args: argparse.Namespace, checkpoints: list[int]) -> int:
    started = time.perf_counter()
    url = server.create(args.database)
    migrate.upgrade(url)
    engine = engines.make_engine(url)
    try:
        with engines.make_sessionmaker(engine)() as session:
            partitions.ensure_months(session, partitions.months_from(partitions.Month.of(T0), 13))
            session.commit()
    finally:
        engine.dispose()
    filler = Filler(url, args)
    filler.setup()
    per_run = (args.series + 1) * args.repeats
    total_runs = max(1, (args.rows - filler.rows) // per_run + 1)
    per_day = runs_per_day_for(total_runs)
    copies: list[tuple[str, str]] = []
    day, pending = 0, list(checkpoints)
    while day < DAYS:
        filler.fill_days(range(day, day + 1), per_day)
        day += 1
        if pending and filler.rows >= pending[0]:
            name = f"{args.database}_{_short(pending.pop(0))}"
            analyze(url)
            copies.append((name, server.create(name, template=args.database)))
            print(
                f"  {filler.rows:,} samples ({filler.runs:,} runs, day {day}) -> {name}",
                file=sys.stderr,
            )
        if day % 30 == 0:
            print(
                f"  day {day}: {filler.rows:,} samples, {filler.rows / filler.seconds:,.0f} rows/s",
                file=sys.stderr,
            )
    analyze(url)
    print(
        f"filled {filler.rows:,} samples in {(time.perf_counter() - started) / 60:.1f} min",
        file=sys.stderr,
    )
    empty_url = server.create(f"{args.database}_empty")
    migrate.upgrade(empty_url)
    stores = [
        Store("empty", empty_url, engines.make_engine(empty_url)),
        *(
            Store(name.removeprefix(f"{args.database}_"), u, engines.make_engine(u))
            for name, u in copies
        ),
        Store(_short(filler.rows), url, engines.make_engine(url)),
    ]
    steps: list[PruneStep] = []
    try:
        measure_ingest(stores, args)
        print("  ingest measured", file=sys.stderr)
        measure_queries(stores, args)
        print("  queries measured", file=sys.stderr)
        measure_weekly(stores, args)
        for store in stores:
            measure_sizes(store)
        print("  weekly reports and sizes measured", file=sys.stderr)
        if not args.no_prune:
            steps = prune_year(url, stores[-1].engine, args)
    finally:
        for store in stores:
            store.engine.dispose()
    print(report_tables(stores, steps, filler, args))
    print(f"\n(whole run: {(time.perf_counter() - started) / 60:.1f} min)")
    return 0


def _load() -> str:
    return " ".join(f"{x:.1f}" for x in os.getloadavg())


def _short(rows: int) -> str:
    return f"{rows / 1e6:.0f}m" if rows >= 1e6 else f"{rows / 1e3:.0f}k"


if __name__ == "__main__":
    sys.exit(main())
