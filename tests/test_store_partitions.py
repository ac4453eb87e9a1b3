"""Samples partitioned by month on PostgreSQL (issue 17): the migration converts a populated
store and back, ingest makes a missing month's partition itself (also when several ingests race
for it), reads name their months so that only those partitions are touched, ``perfci db
upgrade`` / ``maintain`` make months ahead, and SQLite keeps one plain table.
"""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest
from db_fixtures import make_context, make_profile
from sqlalchemy import Engine, func, inspect, select, text
from sqlalchemy.orm import Session

from perfci.cli.main import main
from perfci.store import _bulk, engines, migrate, partitions, samples
from perfci.store.partitions import Month
from perfci.store.schema import Run, Sample
from perfci.usecases.submit.ingest import ingest_run

# Three runs in three months (January, February, April 2025), two series, two repeats.
WHEN = [
    datetime(2025, 1, 31, 23, 30, tzinfo=UTC),
    datetime(2025, 2, 1, 0, 30, tzinfo=UTC),
    datetime(2025, 4, 15, 12, 0, tzinfo=UTC),
]


def _ingest(engine: Engine, when: datetime, i: int, *, branch: str = "main") -> int:
    with engines.make_sessionmaker(engine)() as session:
        result = ingest_run(
            session,
            context=make_context(
                commit=f"{i:040x}",
                ci_provider="t",
                ci_run_id=f"{branch}{i}",
                ci_run_attempt=1,
                branch=branch,
            ),
            benchmark="b",
            repeats=[
                [make_profile({"gemm": 100.0 + i, "softmax": 7.0})],
                [make_profile({"gemm": 110.0 + i, "softmax": 8.0})],
            ],
            created_at=when,
        )
    return result.run_id


def _samples(engine: Engine, run_ids: list[int]) -> Any:
    with Session(engine) as session:
        return samples.run_samples(session, run_ids)


def _postgres(engine: Engine) -> bool:
    return engine.dialect.name == "postgresql"


def test_day_numbers_and_months() -> None:
    assert partitions.day_number(datetime(1970, 1, 2, tzinfo=UTC)) == 1
    # A run at 23:30 in New York on Jan 31 is Feb 1 in UTC: its day is the UTC one.
    eastern = datetime(2025, 1, 31, 23, 30, tzinfo=timezone(timedelta(hours=-5)))
    assert partitions.day_number(eastern) == partitions.day_number(datetime(2025, 2, 1))
    assert partitions.day_date(partitions.day_number(eastern)).isoformat() == "2025-02-01"
    month = Month.of(WHEN[0])
    assert (month.name, month.first_day, month.end_day) == ("sample_y2025m01", 20089, 20120)
    assert Month(2025, 12).next() == Month(2026, 1)
    assert str(Month.of_day(20120)) == "2025-02"


def test_a_populated_store_converts_down_to_0005_and_back_up(migrated_url: str) -> None:
    engine = engines.make_engine(migrated_url)
    try:
        ids = [_ingest(engine, when, i) for i, when in enumerate(WHEN)]
        before = _samples(engine, ids)
        assert len(before) == 2 and all(len(v) == 3 for v in before.values())

        assert migrate.downgrade(migrated_url, "0005") == "0005"
        columns = {c["name"] for c in inspect(engine).get_columns("sample")}
        assert "run_day" not in columns and "pruned_at" not in {
            c["name"] for c in inspect(engine).get_columns("run")
        }
        with engine.connect() as connection:
            assert connection.execute(text("SELECT count(*) FROM sample")).scalar_one() == 12
            if _postgres(engine):  # a plain table again, no partition left behind
                kind = connection.execute(
                    text("SELECT relkind FROM pg_class WHERE oid = 'sample'::regclass")
                ).scalar_one()
                schema = connection.execute(
                    text("SELECT count(*) FROM pg_namespace WHERE nspname = 'perfci_partitions'")
                ).scalar_one()
                assert (kind, schema) == ("r", 0)

        # The conversion of a store at 0005 holding runs: the rows keep their numbers and get
        # their run's day; on PostgreSQL each lands in its month's partition.
        assert migrate.upgrade(migrated_url) == migrate.head_revision()
        assert _samples(engine, ids) == before
        with Session(engine) as session:
            days = session.execute(
                select(Sample.run_id, Sample.run_day).distinct().order_by(Sample.run_id)
            ).all()
            assert days == [(r, partitions.day_number(w)) for r, w in zip(ids, WHEN, strict=True)]
            found = partitions.list_partitions(session)
        key = inspect(engine).get_pk_constraint("sample")["constrained_columns"]
        assert key == ["run_id", "series_id", "repeat", "run_day"]
        if _postgres(engine):
            rows = {p.name: _count(engine, p.name) for p in found}
            assert {k: v for k, v in rows.items() if v} == {
                "sample_y2025m01": 4,
                "sample_y2025m02": 4,
                "sample_y2025m04": 4,
            }
            this_month = Month.of(datetime.now(UTC))
            assert {m.name for m in partitions.months_from(this_month, 4)} <= set(rows)
        else:
            assert found == []
    finally:
        engine.dispose()


def _count(engine: Engine, partition: str) -> int:
    with engine.connect() as connection:
        return int(
            connection.execute(
                text(f"SELECT count(*) FROM {partitions.PARTITION_SCHEMA}.{partition}")
            ).scalar_one()
        )


def test_a_downgrade_is_refused_once_runs_were_pruned(
    migrated_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    engine = engines.make_engine(migrated_url)
    try:
        _ingest(engine, WHEN[0], 0)
        assert main(["db", "prune", "--keep", "30d", "--database-url", migrated_url]) == 0
        capsys.readouterr()
        code = main(["db", "downgrade", "0005", "--database-url", migrated_url])
        err = capsys.readouterr().err
        assert code == 2
        assert "cannot downgrade below 0006: 1 runs were pruned" in err
        assert "Traceback" not in err
        assert migrate.current(migrated_url) == migrate.head_revision()  # nothing changed
    finally:
        engine.dispose()


def test_an_ingest_makes_its_months_partition_when_there_is_none(migrated_url: str) -> None:
    engine = engines.make_engine(migrated_url)
    try:
        old = datetime(2019, 3, 10, tzinfo=UTC)
        run_id = _ingest(engine, old, 7)
        assert _samples(engine, [run_id])  # stored and read back
        with Session(engine) as session:
            names = {p.name for p in partitions.list_partitions(session)}
        assert ("sample_y2019m03" in names) == _postgres(engine)
    finally:
        engine.dispose()


def test_ingests_racing_for_a_new_months_partition_all_succeed(migrated_url: str) -> None:
    engine = engines.make_engine(migrated_url, pool_size=8)
    try:
        when = datetime(2018, 6, 1, tzinfo=UTC)
        barrier, results, errors = threading.Barrier(6), [], []

        def ingest(i: int) -> None:
            barrier.wait()
            try:
                results.append(_ingest(engine, when + timedelta(hours=i), i, branch=f"b{i}"))
            except Exception as exc:  # noqa: BLE001 - reported below
                errors.append(exc)

        threads = [threading.Thread(target=ingest, args=(i,)) for i in range(6)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert errors == [] and len(results) == 6
        with Session(engine) as session:
            assert session.execute(select(func.count()).select_from(Sample)).scalar_one() == 24
            names = [p.name for p in partitions.list_partitions(session)]
        assert names.count("sample_y2018m06") == (1 if _postgres(engine) else 0)
    finally:
        engine.dispose()


def test_reads_name_their_months_so_only_those_partitions_are_read(migrated_url: str) -> None:
    engine = engines.make_engine(migrated_url)
    if not _postgres(engine):
        engine.dispose()
        pytest.skip("partitions are PostgreSQL's")
    try:
        ids = [_ingest(engine, when, i) for i, when in enumerate(WHEN)]
        with Session(engine) as session, _bulk.driver_cursor(session) as cursor:
            # The baseline of one run in April, and two runs in January and February.
            for runs, wanted in (
                ([ids[2]], {"sample_y2025m04"}),
                (ids[:2], {"sample_y2025m01", "sample_y2025m02"}),
            ):
                arms = samples._month_arms(cursor, runs, None)
                statement, params = samples._pg_samples(arms, "")
                cursor.execute("EXPLAIN " + statement, params)
                plan = "\n".join(row[0] for row in cursor.fetchall())
                read = {name for name in _partition_names(session) if f" {name} " in plan}
                assert read == wanted, plan
    finally:
        engine.dispose()


def _partition_names(session: Session) -> list[str]:
    return [p.name for p in partitions.list_partitions(session)]


def test_upgrade_and_maintain_make_months_ahead(
    empty_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["db", "upgrade", "--database-url", empty_url]) == 0
    capsys.readouterr()
    now = Month.of(datetime.now(UTC))
    assert main(["db", "maintain", "--ahead", "5", "--database-url", empty_url]) == 0
    out = capsys.readouterr().out
    assert main(["db", "partitions", "--database-url", empty_url]) == 0
    listing = capsys.readouterr().out
    if empty_url.startswith("sqlite"):
        assert "partitions made: none needed" in out and "SQLite has no partitions" in out
        assert "no partitions" in listing
        return
    # The migration made this month and three more; maintain adds the fifth and fourth ahead.
    made = partitions.months_from(now, 6)[4:]
    assert f"partitions made: {made[0]}, {made[1]}" in out
    assert "no retention period set" in out
    for month in partitions.months_from(now, 6):
        assert month.name in listing
    assert main(["db", "maintain", "--ahead", "5", "--database-url", empty_url]) == 0
    assert "partitions made: none needed" in capsys.readouterr().out


def test_sqlite_keeps_one_plain_table_with_the_days(tmp_path: Any) -> None:
    from db_fixtures import create_sqlite

    url = create_sqlite(tmp_path)
    engine = engines.make_engine(url)
    try:
        run_id = _ingest(engine, WHEN[1], 1)
        with Session(engine) as session:
            assert not partitions.is_partitioned(session)
            days = session.execute(select(Sample.run_day).where(Sample.run_id == run_id)).scalars()
            assert set(days) == {partitions.day_number(WHEN[1])}
            created = session.execute(select(Run.created_at).where(Run.id == run_id)).scalar_one()
        assert partitions.day_number(created) == partitions.day_number(WHEN[1])
    finally:
        engine.dispose()
