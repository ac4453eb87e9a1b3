"""Monthly partitions of ``sample`` on PostgreSQL (issue 17): names, bounds, creation.

``sample`` is range-partitioned on ``run_day`` (the run's ``created_at`` as UTC days since
1970-01-01), one partition per calendar month, named ``sample_yYYYYmMM`` and kept in the schema
:data:`PARTITION_SCHEMA`, so that perfci's own tables stay alone in the store's schema (and
Alembic's autogenerate, which compares that schema with the models, never sees them).

Partitions are made ahead of time (``perfci db upgrade``, ``perfci db maintain``: the current
month and :data:`MONTHS_AHEAD` more), and on demand by an ingest whose run falls in a month
without one (an import of old runs), inside the ingest's transaction: an ingest never fails for
a missing partition. There is no DEFAULT partition: rows in it would have to be moved out before
a partition for their month could be made, and every query not pruned to a month would read it.

A partition is made as a plain table and then attached, which locks ``sample`` in SHARE UPDATE
EXCLUSIVE mode (concurrent reads and writes go on); ``CREATE TABLE … PARTITION OF`` would take
ACCESS EXCLUSIVE and stall every reader behind it. Creators take turns on an advisory lock.

SQLite has no partitions: every function here is a no-op there (``is_partitioned`` is False).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import date, datetime

from sqlalchemy import text
from sqlalchemy.orm import Session

from perfci.core.compat import UTC

#: Where the partitions live (created by migration 0006).
PARTITION_SCHEMA = "perfci_partitions"
#: Months made ahead of the current one by ``perfci db upgrade`` and ``perfci db maintain``.
MONTHS_AHEAD = 3
#: Advisory lock class of partition creation ("part"), so that creators take turns.
_PARTITION_LOCK = 0x7061_7274
_EPOCH = date(1970, 1, 1)
_NAME = re.compile(r"^sample_y(\d{4})m(\d{2})$")
_BOUNDS = re.compile(r"FROM \('?(-?\d+)'?\) TO \('?(-?\d+)'?\)")


def day_number(moment: datetime) -> int:
    """``sample.run_day`` of a run made at ``moment``: its UTC date as days since 1970-01-01.

    A naive ``moment`` is UTC (as the store keeps times).
    """
    utc = moment.astimezone(UTC) if moment.tzinfo else moment.replace(tzinfo=UTC)
    return (utc.date() - _EPOCH).days


def day_date(day: int) -> date:
    """The UTC date of day number ``day``."""
    return date.fromordinal(_EPOCH.toordinal() + day)


@dataclass(frozen=True, order=True, slots=True)
class Month:
    """A calendar month (UTC): the span of one partition."""

    year: int
    month: int

    @classmethod
    def of(cls, moment: datetime | date) -> Month:
        if isinstance(moment, datetime):
            return cls.of_day(day_number(moment))
        return cls(moment.year, moment.month)

    @classmethod
    def of_day(cls, day: int) -> Month:
        found = day_date(day)
        return cls(found.year, found.month)

    @property
    def first_day(self) -> int:
        """The month's first day number (inclusive bound)."""
        return (date(self.year, self.month, 1) - _EPOCH).days

    @property
    def end_day(self) -> int:
        """The next month's first day number (exclusive bound)."""
        return self.next().first_day

    @property
    def start(self) -> datetime:
        """Midnight UTC on the month's first day."""
        return datetime(self.year, self.month, 1, tzinfo=UTC)

    @property
    def end(self) -> datetime:
        """Midnight UTC on the next month's first day."""
        return self.next().start

    @property
    def name(self) -> str:
        """The partition's table name, ``sample_y2025m01``."""
        return f"sample_y{self.year:04d}m{self.month:02d}"

    @property
    def qualified(self) -> str:
        """The partition's schema-qualified name."""
        return f"{PARTITION_SCHEMA}.{self.name}"

    def next(self) -> Month:
        return Month(self.year + self.month // 12, self.month % 12 + 1)

    def __str__(self) -> str:
        return f"{self.year:04d}-{self.month:02d}"


def months_from(first: Month, count: int) -> list[Month]:
    """``count`` consecutive months from ``first``."""
    found, month = [], first
    for _ in range(count):
        found.append(month)
        month = month.next()
    return found


@dataclass(frozen=True, slots=True)
class Partition:
    """One partition of ``sample`` as the catalog describes it.

    ``month`` is None for a partition perfci did not name (an operator's own); ``rows`` is
    PostgreSQL's estimate (None before the partition was first analysed).
    """

    name: str
    month: Month | None
    first_day: int
    end_day: int
    rows: int | None
    bytes: int


def is_partitioned(session: Session) -> bool:
    """Whether ``sample`` is a partitioned table here (PostgreSQL at revision 0006 or later)."""
    if session.get_bind().dialect.name != "postgresql":
        return False
    kind = session.execute(
        text("SELECT relkind FROM pg_class WHERE oid = to_regclass('sample')")
    ).scalar()
    return kind == "p"


def list_partitions(session: Session) -> list[Partition]:
    """The partitions of ``sample``, oldest first (none on SQLite)."""
    if not is_partitioned(session):
        return []
    rows = session.execute(
        text(
            "SELECT c.relname, c.reltuples::bigint, pg_total_relation_size(c.oid), "
            "pg_get_expr(c.relpartbound, c.oid) "
            "FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid "
            "WHERE i.inhparent = to_regclass('sample')"
        )
    ).all()
    found = []
    for name, rows_estimate, size, bound in rows:
        bounds = _BOUNDS.search(bound or "")
        if bounds is None:
            continue  # not a range bound perfci can read (a DEFAULT partition an operator made)
        match = _NAME.match(name)
        found.append(
            Partition(
                name=name,
                month=Month(int(match[1]), int(match[2])) if match else None,
                first_day=int(bounds[1]),
                end_day=int(bounds[2]),
                rows=None if rows_estimate is None or rows_estimate < 0 else int(rows_estimate),
                bytes=int(size),
            )
        )
    return sorted(found, key=lambda p: (p.first_day, p.name))


def partition_exists(session: Session, month: Month) -> bool:
    """Whether the partition of ``month`` exists (a catalog lookup by name)."""
    found = session.execute(
        text("SELECT to_regclass(:name) IS NOT NULL"), {"name": month.qualified}
    ).scalar()
    return bool(found)


def create_partition(session: Session, month: Month) -> bool:
    """Make the partition of ``month`` unless it exists; whether it was made.

    In the session's transaction (the caller commits): an ingest makes its month's partition
    in its own transaction, so a rolled back ingest leaves none behind.
    """
    if partition_exists(session, month):
        return False
    session.execute(text("SELECT pg_advisory_xact_lock(:c, 0)"), {"c": _PARTITION_LOCK})
    if partition_exists(session, month):  # made meanwhile by another creator
        return False
    session.execute(text(f"CREATE TABLE {month.qualified} (LIKE sample INCLUDING DEFAULTS)"))
    # Empty, so attaching scans nothing; SHARE UPDATE EXCLUSIVE on sample (see module docs).
    session.execute(
        text(
            f"ALTER TABLE sample ATTACH PARTITION {month.qualified} "
            f"FOR VALUES FROM ({month.first_day}) TO ({month.end_day})"
        )
    )
    return True


def ensure_months(session: Session, months: list[Month]) -> list[Month]:
    """Make the partitions of ``months`` that are missing; the months made."""
    if not is_partitioned(session):
        return []
    return [month for month in months if create_partition(session, month)]


def ensure_ahead(session: Session, now: datetime, ahead: int = MONTHS_AHEAD) -> list[Month]:
    """Make the partitions of the current month and ``ahead`` more; the months made."""
    return ensure_months(session, months_from(Month.of(now), ahead + 1))
