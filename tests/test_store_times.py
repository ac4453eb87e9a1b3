"""Times come back from the store as UTC-aware datetimes, to the microsecond, on both dialects."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

from db_fixtures import make_context, make_profile
from sqlalchemy.orm import Session

from perfci.store import queries
from perfci.store.schema import _sqlite_utc
from perfci.usecases.submit.ingest import ingest_run


def test_a_run_time_with_an_offset_and_microseconds_comes_back_in_utc(session: Session) -> None:
    stored_at = datetime(2025, 3, 1, 14, 5, 7, 123456, tzinfo=timezone(timedelta(hours=2)))
    run_id = ingest_run(
        session,
        context=make_context(),
        benchmark="b",
        repeats=[[make_profile({"gemm": 1e6})]],
        created_at=stored_at,
    ).run_id
    session.commit()
    run = queries.get_run(session, run_id)
    assert run.created_at == datetime(2025, 3, 1, 12, 5, 7, 123456, tzinfo=UTC)
    assert run.created_at.tzinfo is UTC  # the same zone object whatever the dialect
    assert run.created_at.utcoffset() == timedelta(0)


def test_sqlite_text_in_other_forms_is_read_by_its_own_zone() -> None:
    # SQLAlchemy writes "YYYY-MM-DD HH:MM:SS.ffffff" (UTC): read with the zone added.
    assert _sqlite_utc("2025-01-06 06:30:00.000001") == datetime(2025, 1, 6, 6, 30, 0, 1, UTC)
    # Text written by hand: an offset is honoured, a date alone is midnight UTC.
    assert _sqlite_utc("2025-01-06 06:30:00+02:00") == datetime(2025, 1, 6, 4, 30, tzinfo=UTC)
    assert _sqlite_utc("2025-01-06") == datetime(2025, 1, 6, tzinfo=UTC)
    assert _sqlite_utc(None) is None
