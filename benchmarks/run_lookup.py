"""Run lookups against the number of stored runs (issue 35): indexed ``run.ordered_at`` beside the
``coalesce(commit.committed_at, run.created_at)`` queries it replaced, on the same data.

Usage::

    PERFCI_TEST_POSTGRES_URL=postgresql+psycopg://root@127.0.0.1:5432/test \\
        .venv/bin/python benchmarks/run_lookup.py [--runs 10000,200000,1000000] [--calls 20]

A scratch PostgreSQL database at head gets run rows only (no samples), as a team writes them:
100 benchmarks × 50 runs a day, a fifth of them on ``main`` and the rest on pull-request
branches, each run with its commit (committed 10 minutes before). At each size (runs added up to
it, then ``ANALYZE``), interleaved call by call:

- **baseline**: :func:`perfci.store.queries.baseline_run_ids` (30 newest main runs of one
  benchmark before a time in the history) against the old statement, which filtered and sorted
  on the coalesce, with the old index ``(benchmark_id, branch, environment_id, created_at)``
  made for it;
- **weekly**: :func:`perfci.store.queries.runs_in_period` by run time (one week of ``main``, the
  weekly report's first query) against the old statement, built and read the same way (ORM
  rows to ``RunInfo``).

Prints the median milliseconds of ``--calls`` calls per query and size, and in brackets the
server's execution time of the statement alone (``EXPLAIN ANALYZE``, median of 5); target: the
new queries within 1.3× from the smallest to the largest size.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

from sqlalchemy import create_engine, event, func, text, type_coerce
from sqlalchemy.orm import Session

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from perfci.store import engines, migrate, queries
from perfci.store.schema import Commit, Project, Run, UTCDateTime

DEFAULT_PG = "postgresql+psycopg://root@127.0.0.1:5432/test"
T0 = datetime(2024, 1, 1, tzinfo=UTC)
BENCHMARKS = 100
PER_DAY = 50 * BENCHMARKS

_ADD = """
WITH n AS (
    SELECT i, 1 + i %% {b} AS benchmark_id,
           CASE WHEN i %% 5 = 0 THEN 'main' ELSE 'pr-' || (i / 500) END AS branch,
           %(t0)s::timestamptz + (i * 86400.0 / {d}) * interval '1 second' AS created_at
    FROM generate_series(%(lo)s::int8, %(hi)s::int8 - 1) AS i),
c AS (
    INSERT INTO "commit" (project_id, sha, committed_at)
    SELECT 1, 'c' || i, created_at - interval '10 minutes' FROM n RETURNING id, sha)
INSERT INTO run (project_id, benchmark_id, environment_id, commit_id, branch, repeats,
                 created_at, idempotency_key, ordered_at)
SELECT 1, n.benchmark_id, 1, c.id, n.branch, 5, n.created_at, 'k' || n.i,
       n.created_at - interval '10 minutes'
FROM n JOIN c ON c.sha = 'c' || n.i
"""
_WHEN = 'coalesce("commit".committed_at, run.created_at)'
_OLD_BASELINE = f"""
SELECT run.id FROM run JOIN project ON project.id = run.project_id
LEFT OUTER JOIN "commit" ON "commit".id = run.commit_id
JOIN benchmark ON benchmark.id = run.benchmark_id
WHERE project.name = :p AND benchmark.name = :b AND run.branch = 'main'
  AND run.environment_id = 1 AND {_WHEN} <= :before
ORDER BY {_WHEN} DESC, run.created_at DESC, run.id DESC LIMIT 30
"""


def _setup(url: str) -> None:
    engine = engines.make_engine(url)
    with engine.begin() as c:
        c.execute(text("INSERT INTO project (id, name, created_at) VALUES (1, 'p', now())"))
        c.execute(
            text(
                'INSERT INTO environment (id, fingerprint, "values", created_at) '
                "VALUES (1, 'f', '{}', now())"
            )
        )
        for b in range(1, BENCHMARKS + 1):
            c.execute(text(f"INSERT INTO benchmark (id, project_id, name) VALUES ({b}, 1, 'b{b}')"))
        c.execute(
            text(
                "CREATE INDEX ix_run_baseline_old ON run "
                "(benchmark_id, branch, environment_id, created_at)"
            )
        )
    engine.dispose()


def _grow(url: str, lo: int, hi: int) -> None:
    engine = engines.make_engine(url)
    step = 200_000
    with engine.connect() as c:
        for start in range(lo, hi, step):
            sql = _ADD.format(b=BENCHMARKS, d=PER_DAY)
            params = {"t0": T0, "lo": start, "hi": min(hi, start + step)}
            c.exec_driver_sql(sql, params)
            c.commit()
        # Both tables, as autovacuum would after a growth this size: with ``commit``'s
        # statistics left at an earlier size, the weekly query's plan hash-joins the whole
        # commit table (a sequential scan growing with history) instead of looking up the
        # week's commits by index.
        c.execution_options(isolation_level="AUTOCOMMIT").exec_driver_sql(
            'VACUUM ANALYZE run, "commit"'
        )
    engine.dispose()


def _median_ms(work: list[Callable[[], object]], calls: int) -> list[float]:
    """Median ms of each callable, called in turn ``calls`` times."""
    times: list[list[float]] = [[] for _ in work]
    for _ in range(calls):
        for i, one in enumerate(work):
            start = time.perf_counter()
            one()
            times[i].append((time.perf_counter() - start) * 1000)
    return [statistics.median(t) for t in times]


def _measure(url: str, runs: int, calls: int) -> None:
    rng = random.Random(runs)
    days = runs / PER_DAY
    engine = engines.make_engine(url)
    with Session(engine) as session:

        def pick() -> tuple[str, datetime]:
            return f"b{rng.randint(1, BENCHMARKS)}", T0 + timedelta(days=rng.uniform(7, days))

        def new_baseline() -> object:
            name, before = pick()
            return queries.baseline_run_ids(
                session,
                project="p",
                benchmark=name,
                environment_id=1,
                branch="main",
                before=before,
            )

        def old_baseline() -> object:
            name, before = pick()
            return session.execute(text(_OLD_BASELINE), {"p": "p", "b": name, "before": before})

        def week() -> tuple[datetime, datetime]:
            since = T0 + timedelta(days=rng.uniform(0, max(days - 7, 0)))
            return since, since + timedelta(weeks=1)

        def new_weekly() -> object:
            since, until = week()
            return queries.runs_in_period(
                session, project="p", since=since, until=until, by_run_time=True, branch="main"
            )

        def old_weekly() -> object:
            since, until = week()
            when = type_coerce(func.coalesce(Commit.committed_at, Run.created_at), UTCDateTime())
            query = (
                queries._run_info_query()
                .where(Project.name == "p", when >= since, when < until, Run.branch == "main")
                .order_by(when, Run.created_at, Run.id)
            )
            return queries._run_infos(session, query)

        new_b, old_b = _median_ms([new_baseline, old_baseline], calls)
        new_w, old_w = _median_ms([new_weekly, old_weekly], max(3, calls // 4))
        server = [
            statistics.median(_server_ms(session, one) for _ in range(5))
            for one in (new_baseline, old_baseline, new_weekly, old_weekly)
        ]
    engine.dispose()
    print(
        f"| {runs:,} ({days:.0f} days) | {new_b:.2f} ({server[0]:.2f}) | "
        f"{old_b:.2f} ({server[1]:.2f}) | {new_w:.0f} ({server[2]:.1f}) | "
        f"{old_w:.0f} ({server[3]:.1f}) |",
        flush=True,
    )


def _server_ms(session: Session, lookup: Callable[[], object]) -> float:
    """The server's execution time (EXPLAIN ANALYZE) of the statements on ``run`` that
    ``lookup`` sends: the query alone, without the client's building and reading."""
    seen: list[tuple[str, object]] = []

    def record(_c: object, _cur: object, statement: str, parameters: object, *_: object) -> None:
        if "FROM run" in statement:
            seen.append((statement, parameters))

    engine = session.get_bind()
    event.listen(engine, "before_cursor_execute", record)
    try:
        lookup()
    finally:
        event.remove(engine, "before_cursor_execute", record)
    total = 0.0
    for statement, parameters in seen:
        explain = "EXPLAIN (ANALYZE, FORMAT JSON) " + statement
        (plan,) = session.connection().exec_driver_sql(explain, parameters).one()  # type: ignore[arg-type]
        total += float(plan[0]["Execution Time"])
    return total


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", default="10000,200000,1000000")
    parser.add_argument("--calls", type=int, default=20)
    args = parser.parse_args(argv)
    admin = create_engine(
        os.environ.get("PERFCI_TEST_POSTGRES_URL", DEFAULT_PG), isolation_level="AUTOCOMMIT"
    )
    name = f"perfci_run_lookup_{os.getpid()}"
    with admin.connect() as c:
        c.execute(text(f'CREATE DATABASE "{name}"'))
    url = admin.url.set(database=name).render_as_string(hide_password=False)
    try:
        migrate.upgrade(url)
        _setup(url)
        print("median ms per call (new: indexed ordered_at; old: the coalesce statement)")
        print("| runs stored | baseline new | baseline old | weekly runs new | weekly runs old |")
        print("|---|---:|---:|---:|---:|")
        done = 0
        for size in (int(s) for s in args.runs.split(",")):
            _grow(url, done, size)
            done = size
            _measure(url, size, args.calls)
    finally:
        with admin.connect() as c:
            c.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
