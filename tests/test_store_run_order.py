"""Each run's time is stored and indexed (issue 35): ``run.ordered_at`` is the commit's time,
else when the run was stored, at ingest and when a commit's time arrives later; migration 0008
fills it for the runs already stored and keeps every row; and the baseline lookup, a series'
history and the weekly report's run query read an index range of ``run``, not the table.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from typing import Any

from db_fixtures import make_context, make_profile
from sqlalchemy import Connection, Engine, event, func, insert, select, text
from sqlalchemy.orm import Session

from perfci.core.model import MetricKind, SeriesKey
from perfci.store import engines, migrate, queries
from perfci.store.schema import Commit, ProfileRow, Run, Sample
from perfci.usecases.submit.ingest import ingest_run

T0 = datetime(2025, 3, 3, 12, 0, tzinfo=UTC)


def _ingest(
    session: Session,
    i: int,
    *,
    commit: str | None,
    commit_day: float | None = None,
    branch: str = "main",
    benchmark: str = "train",
) -> int:
    context = make_context(
        commit=commit,
        branch=branch,
        commit_time=None if commit_day is None else (T0 + timedelta(days=commit_day)).isoformat(),
        ci_run_id=f"ci-{i}",
    )
    return ingest_run(
        session,
        context=context,
        benchmark=benchmark,
        repeats=[[make_profile({"gemm": 10.0 + i, "relu": 3.0})]] * 2,
        created_at=T0 + timedelta(days=i, hours=1),
    ).run_id


def _ordered(session: Session) -> dict[int, datetime]:
    return {int(i): t for i, t in session.execute(select(Run.id, Run.ordered_at))}


def _expected(session: Session) -> dict[int, datetime]:
    """What the queries ordered by before issue 35: coalesce(commit time, stored time)."""
    query = select(Run.id, Commit.committed_at, Run.created_at).outerjoin(
        Commit, Commit.id == Run.commit_id
    )
    return {int(i): committed or created for i, committed, created in session.execute(query)}


def test_a_run_is_ordered_by_its_commits_time_else_when_stored(session: Session) -> None:
    timed = _ingest(session, 1, commit="a1", commit_day=-5)
    bare = _ingest(session, 2, commit="b2")  # a bare --commit: no time yet
    no_commit = _ingest(session, 3, commit=None)
    ordered = _ordered(session)
    assert ordered[timed] == T0 + timedelta(days=-5)
    assert ordered[bare] == T0 + timedelta(days=2, hours=1)
    assert ordered[no_commit] == T0 + timedelta(days=3, hours=1)


def test_a_commits_time_arriving_later_reorders_its_stored_runs(session: Session) -> None:
    first = _ingest(session, 1, commit="b2")
    second = _ingest(session, 2, commit="b2")
    other = _ingest(session, 3, commit="c3")
    later = _ingest(session, 4, commit="b2", commit_day=-10)  # now the commit's time is known
    ordered = _ordered(session)
    for run_id in (first, second, later):
        assert ordered[run_id] == T0 + timedelta(days=-10)
    assert ordered[other] == T0 + timedelta(days=3, hours=1)
    assert ordered == _expected(session)
    # ... and the lookups follow: the baseline's newest run is now the one of commit c3.
    baseline = queries.baseline_run_ids(
        session, project="acme/model", benchmark="train", environment_id=None, branch="main"
    )
    assert baseline == [other, later, second, first]


def _counts(engine: Engine) -> dict[str, int]:
    with Session(engine) as session:
        return {
            model.__tablename__: int(
                session.execute(select(func.count()).select_from(model)).one()[0]
            )
            for model in (Run, Commit, ProfileRow, Sample)
        }


def test_migration_0008_fills_every_runs_time_and_keeps_every_row(migrated_url: str) -> None:
    engine = engines.make_engine(migrated_url)
    try:
        with engines.make_sessionmaker(engine)() as session:
            _ingest(session, 1, commit="a1", commit_day=-5)
            _ingest(session, 2, commit="b2")
            _ingest(session, 3, commit=None)
            _ingest(session, 4, commit="a1", commit_day=-5, branch="feature")
            before = _counts(engine)
            expected = _expected(session)
        engine.dispose()
        assert migrate.downgrade(migrated_url, "0007") == "0007"
        with engine.connect() as connection:
            columns = connection.execute(text("SELECT * FROM run")).keys()
            assert "ordered_at" not in columns
        engine.dispose()
        assert migrate.upgrade(migrated_url) == migrate.HEAD_REVISION
        assert _counts(engine) == before == {"run": 4, "commit": 2, "profile": 8, "sample": 16}
        with Session(engine) as session:
            assert _ordered(session) == expected
    finally:
        engine.dispose()


# --- the plans ---------------------------------------------------------------------------


def _many_runs(session: Session, count: int = 4000) -> None:
    """``count`` runs beside one ingested run, over two benchmarks, three branches and a
    year: enough that a plan reading the whole table costs more than an index range."""
    _ingest(session, 0, commit="a0", commit_day=0)
    _ingest(session, 0, commit="a0", commit_day=0, benchmark="infer")
    one = session.execute(select(Run)).scalars().first()
    assert one is not None
    benchmarks = sorted({int(b) for b in session.execute(select(Run.benchmark_id)).scalars()})
    rows = [
        {
            "project_id": one.project_id,
            "benchmark_id": benchmarks[i % 2],
            "environment_id": one.environment_id,
            "branch": ("main", "feature", f"pr-{i % 97}")[i % 3],
            "repeats": 1,
            "created_at": T0 + timedelta(hours=2 * i),
            "ordered_at": T0 + timedelta(hours=2 * i),
            "idempotency_key": f"k{i}",
        }
        for i in range(count)
    ]
    session.execute(insert(Run), rows)
    session.flush()
    postgres = session.get_bind().dialect.name == "postgresql"
    session.execute(text("ANALYZE run" if postgres else "ANALYZE"))


@contextmanager
def _statements(connection: Connection) -> Iterator[list[tuple[str, Any]]]:
    """The SQL statements (with parameters) run on ``connection`` meanwhile."""
    seen: list[tuple[str, Any]] = []

    def record(_conn: Any, _cursor: Any, statement: str, parameters: Any, *_: Any) -> None:
        seen.append((statement, parameters))

    engine = connection.engine
    event.listen(engine, "before_cursor_execute", record)
    try:
        yield seen
    finally:
        event.remove(engine, "before_cursor_execute", record)


def _plan(session: Session, lookup: Callable[[], object]) -> str:
    """The query plan of the one statement on ``run`` that ``lookup`` runs."""
    connection = session.connection()
    with _statements(connection) as seen:
        lookup()
    on_run = [(s, p) for s, p in seen if "FROM run" in s]
    assert len(on_run) == 1, seen
    statement, parameters = on_run[0]
    postgres = connection.dialect.name == "postgresql"
    explain = "EXPLAIN " if postgres else "EXPLAIN QUERY PLAN "
    rows = connection.exec_driver_sql(explain + statement, parameters).all()
    return "\n".join(str(row[-1]) for row in rows)


ORDERED_INDEXES = ("ix_run_baseline", "ix_run_benchmark_ordered", "ix_run_project_ordered")


def _reads_an_index_range(plan: str, postgres: bool, *, by_time: bool = True) -> None:
    """``run`` is read through one of its ordered indexes, never scanned whole; ``by_time``:
    the range is bounded on ``ordered_at`` in the index (not filtered row by row)."""
    lines = plan.splitlines()
    if postgres:
        assert "Seq Scan on run" not in plan, plan
        used = [
            i
            for i, line in enumerate(lines)
            # "Index [Only] Scan [Backward] using <index> on run", "Bitmap Index Scan on <index>"
            if any(f"{name} on run" in line or f"on {name}" in line for name in ORDERED_INDEXES)
        ]
        assert used, plan
        conditions = [line for line in lines[used[0] :] if "Index Cond" in line]
        assert not by_time or "ordered_at" in conditions[0], plan
    else:
        assert "SCAN run" not in plan, plan
        used = [
            line
            for line in lines
            if line.startswith("SEARCH run USING")
            and any(f"INDEX {name} (" in line for name in ORDERED_INDEXES)
        ]
        assert used, plan
        assert not by_time or "ordered_at" in used[0], plan


def test_the_baseline_lookup_reads_an_index_range_without_sorting(session: Session) -> None:
    _many_runs(session)
    postgres = session.get_bind().dialect.name == "postgresql"
    env = session.execute(select(Run.environment_id)).scalars().first()

    def lookup() -> object:
        return queries.baseline_run_ids(
            session,
            project="acme/model",
            benchmark="train",
            environment_id=env,
            branch="main",
            before=T0 + timedelta(days=200),
        )

    plan = _plan(session, lookup)
    _reads_an_index_range(plan, postgres)
    assert "Sort" not in plan and "TEMP B-TREE" not in plan, plan
    assert len(lookup()) == 30  # type: ignore[arg-type]

    def any_environment() -> object:
        return queries.baseline_run_ids(
            session, project="acme/model", benchmark="train", environment_id=None, branch="main"
        )

    plan = _plan(session, any_environment)
    _reads_an_index_range(plan, postgres, by_time=False)  # newest first, up to the limit
    assert "Sort" not in plan and "TEMP B-TREE" not in plan, plan


def test_the_weekly_reports_run_query_reads_an_index_range(session: Session) -> None:
    _many_runs(session)
    postgres = session.get_bind().dialect.name == "postgresql"
    since = T0 + timedelta(days=100)

    def lookup() -> object:
        return queries.runs_in_period(
            session,
            project="acme/model",
            since=since,
            until=since + timedelta(weeks=1),
            by_run_time=True,
            branch="main",
        )

    plan = _plan(session, lookup)
    _reads_an_index_range(plan, postgres)
    found = lookup()
    assert isinstance(found, list) and len(found) == 28  # 84 runs a week, a third on main
    assert all(since <= r.created_at < since + timedelta(weeks=1) for r in found)


def test_a_series_history_reads_an_index_range(session: Session) -> None:
    _many_runs(session)
    postgres = session.get_bind().dialect.name == "postgresql"
    since = T0 + timedelta(days=100)

    def lookup() -> object:
        return queries.series_history(
            session,
            project="acme/model",
            benchmark="train",
            series=SeriesKey(MetricKind.KERNEL, "gemm"),
            branch="main",
            since=since,
            until=since + timedelta(weeks=1),
        )

    plan = _plan(session, lookup)
    _reads_an_index_range(plan, postgres)
