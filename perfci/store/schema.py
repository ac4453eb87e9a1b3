"""The store's tables as SQLAlchemy 2.0 typed ORM models.

The schema itself is owned by the Alembic migrations in ``migrations/`` (never ``create_all``);
these models must match them, which ``tests/test_store_migrations.py`` checks with autogenerate.

::

    project ─┬─ benchmark ─── series (kind × device × scope × section × name, stored once)
             ├─ commit                          │
             └─ run ── profile                  │   series_set (a run's series ids, in order,
                 │  (environment = fingerprint) │   by one digest of their keys)
                 ├──────────── sample ──────────┤  (run × series × repeat → numbers; on
                 │                              │   PostgreSQL partitioned by month)
                 └──────── sample_summary ──────┘  (run × series → median, spread, count:
                                                    what a pruned run keeps, issue 17)

The service's tables (api_token, audit_event, alert, comparison, answer) reference
``run``/``project`` ids; their models are in :mod:`perfci.store.schema_service`, which adds them
to the same ``Base.metadata``: import it too wherever the whole metadata is used (Alembic).
"""

from __future__ import annotations

import hashlib
import sys
from array import array
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    DateTime,
    Double,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    SmallInteger,
    String,
    Text,
    TypeDecorator,
    UniqueConstraint,
    false,
)
from sqlalchemy.engine import Dialect
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

from perfci.core.compat import UTC
from perfci.core.model import KEY_SEPARATOR, SeriesKey

# Deterministic constraint names, so that migrations can drop and alter them on both dialects.
NAMING_CONVENTION = {
    "ix": "ix_%(table_name)s_%(column_0_N_name)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}


class UTCDateTime(TypeDecorator[datetime]):
    """Timezone-aware UTC datetimes on both dialects.

    PostgreSQL stores ``timestamptz``; SQLite has no time zones and returns naive values, which
    are UTC by construction here, so they get their ``tzinfo`` back on the way out.
    """

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        return _as_utc(value)

    def process_result_value(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        return _as_utc(value)

    def result_processor(self, dialect: Dialect, coltype: object) -> Callable[[Any], Any] | None:
        if dialect.name == "sqlite":
            return _sqlite_utc
        return super().result_processor(dialect, coltype)


def _sqlite_utc(value: str | datetime | None) -> datetime | None:
    """A time SQLite hands back: the text SQLAlchemy wrote (``2025-01-06 06:30:00.000000``,
    UTC), parsed with its zone by ``datetime.fromisoformat``. Parsed naive, then given its
    zone with ``replace``, the times were a third of reading a year's runs (issue 35):
    ``replace`` alone costs four times the parse."""
    if isinstance(value, str):
        if len(value) == len("2025-01-06 06:30:00.000000") and value[10] == " ":
            return datetime.fromisoformat(value + "+00:00")
        value = datetime.fromisoformat(value)  # another form (written by hand): its own zone
    return _as_utc(value)


def _as_utc(value: datetime | None) -> datetime | None:
    """``value`` in UTC; a naive one is UTC already (SQLite keeps no zone)."""
    if value is None:
        return None
    if value.tzinfo is None:
        return value.replace(tzinfo=UTC)
    return value.astimezone(UTC)


def utcnow() -> datetime:
    return datetime.now(UTC)


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING_CONVENTION)


class Project(Base):
    __tablename__ = "project"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(String(200), unique=True)
    # Public projects' dashboards are readable without a token.
    public: Mapped[bool] = mapped_column(Boolean, default=False, server_default=false())
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)


class Environment(Base):
    """A hardware/software fingerprint; runs are only compared within one."""

    __tablename__ = "environment"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    fingerprint: Mapped[str] = mapped_column(String(64), unique=True)
    values: Mapped[dict[str, Any]] = mapped_column(JSON)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)


class Commit(Base):
    __tablename__ = "commit"
    __table_args__ = (UniqueConstraint("project_id", "sha"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    project_id: Mapped[int] = mapped_column(ForeignKey("project.id", ondelete="CASCADE"))
    sha: Mapped[str] = mapped_column(String(64))
    committed_at: Mapped[datetime | None] = mapped_column(UTCDateTime)


class Benchmark(Base):
    __tablename__ = "benchmark"
    __table_args__ = (UniqueConstraint("project_id", "name"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    project_id: Mapped[int] = mapped_column(ForeignKey("project.id", ondelete="CASCADE"))
    name: Mapped[str] = mapped_column(String(200))


class Run(Base):
    """One CI invocation of one benchmark: ``repeats`` repeats of its profiles.

    ``idempotency_key`` identifies the invocation (commit + CI run id + attempt, or the content
    when there is no CI run id); it is never NULL so that the unique constraint dedupes.
    """

    __tablename__ = "run"
    __table_args__ = (
        UniqueConstraint("project_id", "benchmark_id", "idempotency_key"),
        # Run lookups read an index range in the order they return (issue 35): a baseline
        # (same benchmark, branch and environment, newest first), a series' history (same
        # benchmark and branch) and a branch's runs of a period (the weekly report). The
        # order's tie-breakers are in the key so that no query sorts what it reads.
        Index(
            "ix_run_baseline",
            "benchmark_id",
            "branch",
            "environment_id",
            "ordered_at",
            "created_at",
            "id",
        ),
        Index(
            "ix_run_benchmark_ordered", "benchmark_id", "branch", "ordered_at", "created_at", "id"
        ),
        Index("ix_run_project_ordered", "project_id", "branch", "ordered_at", "created_at", "id"),
        Index("ix_run_project_created", "project_id", "created_at"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    project_id: Mapped[int] = mapped_column(ForeignKey("project.id", ondelete="CASCADE"))
    benchmark_id: Mapped[int] = mapped_column(ForeignKey("benchmark.id", ondelete="CASCADE"))
    environment_id: Mapped[int] = mapped_column(ForeignKey("environment.id"))
    commit_id: Mapped[int | None] = mapped_column(ForeignKey("commit.id"), index=True)
    branch: Mapped[str | None] = mapped_column(String(255))
    base_branch: Mapped[str | None] = mapped_column(String(255))
    merge_base: Mapped[str | None] = mapped_column(String(64))
    pr_number: Mapped[int | None] = mapped_column(Integer)
    ci_provider: Mapped[str | None] = mapped_column(String(50))
    ci_run_id: Mapped[str | None] = mapped_column(String(100))
    ci_run_attempt: Mapped[int | None] = mapped_column(Integer)
    ci_url: Mapped[str | None] = mapped_column(Text)
    repeats: Mapped[int] = mapped_column(Integer)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    idempotency_key: Mapped[str] = mapped_column(String(255))
    # The run's time: its commit's time when known, else ``created_at`` (issue 35). Written
    # at ingest, and rewritten for a commit's runs when its time arrives later
    # (:mod:`perfci.store.run_resolve`), so that every lookup by time reads an index range.
    # Never NULL, though nullable: see migration 0008 (SQLite would rebuild ``run``).
    ordered_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    # When ``perfci db prune`` rolled the run's raw samples up into ``sample_summary`` rows
    # (issue 17); NULL while its per-repeat samples are stored.
    pruned_at: Mapped[datetime | None] = mapped_column(UTCDateTime)


class ProfileRow(Base):
    """One parsed profile of one repeat (a file, or one section of a multi-profile file)."""

    __tablename__ = "profile"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    run_id: Mapped[int] = mapped_column(ForeignKey("run.id", ondelete="CASCADE"), index=True)
    repeat: Mapped[int] = mapped_column(Integer)
    label: Mapped[str] = mapped_column(String(255))
    format: Mapped[str] = mapped_column(String(50))
    source: Mapped[str] = mapped_column(Text)
    steps: Mapped[int | None] = mapped_column(Integer)
    # "metadata" is reserved on declarative classes; the column keeps the plain name.
    meta: Mapped[dict[str, Any]] = mapped_column("metadata", JSON)


class Series(Base):
    """A metric's identity within a benchmark; its (possibly very long) name is stored once.

    Kernel names can exceed PostgreSQL's B-tree entry limit, so uniqueness is on ``key_hash``
    (a digest of kind, device, scope, section and name) rather than on the text columns.
    """

    __tablename__ = "series"
    __table_args__ = (UniqueConstraint("benchmark_id", "key_hash"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    benchmark_id: Mapped[int] = mapped_column(ForeignKey("benchmark.id", ondelete="CASCADE"))
    key_hash: Mapped[str] = mapped_column(String(32))
    kind: Mapped[str] = mapped_column(String(16))
    device: Mapped[str] = mapped_column(String(8))
    scope: Mapped[str] = mapped_column(Text, default="", server_default="")
    section: Mapped[str] = mapped_column(Text, default="", server_default="")
    name: Mapped[str] = mapped_column(Text)
    # Not part of the key: what the values mean and which way is good (issue 15). Series
    # stored before units existed were all times, lower is better: the server defaults.
    unit: Mapped[str] = mapped_column(String(32), default="ns", server_default="ns")
    better: Mapped[str] = mapped_column(String(8), default="lower", server_default="lower")


class SeriesSet(Base):
    """The ids of one ordered list of series keys: what the runs of a benchmark repeat.

    Most runs of a benchmark measure the same kernels in the same order, so an ingest finds
    its thousand series ids by one digest of their key hashes instead of a thousand index
    lookups (half the server's work of an ingest, measured). Exact, not a cache that can go
    stale: a row is written in the transaction that resolved (or created) its series, never
    updated, and series are only ever deleted with their benchmark, which deletes these rows.
    """

    __tablename__ = "series_set"

    benchmark_id: Mapped[int] = mapped_column(
        ForeignKey("benchmark.id", ondelete="CASCADE"), primary_key=True
    )
    list_hash: Mapped[str] = mapped_column(String(32), primary_key=True)
    #: The series ids in key order, packed by :func:`pack_series_ids`.
    series_ids: Mapped[bytes] = mapped_column(LargeBinary)


class Sample(Base):
    """The numbers of one series in one repeat of one run. ``value`` is the per-step time.

    No foreign keys on purpose: this is the one large table, and PostgreSQL checks a foreign
    key with a trigger per row, which made bulk ingest several times slower when measured
    (COPY with the primary key alone against both foreign keys). Rows are only written by
    :func:`perfci.store.runs.write_run`, with ids it has just resolved in the same transaction.

    ``run_day`` is the run's ``created_at`` as a day number (UTC days since 1970-01-01,
    :func:`perfci.store.partitions.day_number`): on PostgreSQL the table is partitioned by
    month on it (:mod:`perfci.store.partitions`), and PostgreSQL wants the partition key in
    the primary key. It sits in the alignment padding after ``repeat``, so rows and index
    entries are no larger for it; on SQLite it is a plain column.
    """

    __tablename__ = "sample"
    __table_args__ = {"postgresql_partition_by": "RANGE (run_day)"}  # noqa: RUF012

    run_id: Mapped[int] = mapped_column(Integer, primary_key=True)
    series_id: Mapped[int] = mapped_column(Integer, primary_key=True)
    repeat: Mapped[int] = mapped_column(SmallInteger, primary_key=True)
    run_day: Mapped[int] = mapped_column(Integer, primary_key=True)
    value: Mapped[float | None] = mapped_column(Double)
    calls: Mapped[int | None] = mapped_column(BigInteger)
    total_ns: Mapped[float | None] = mapped_column(Double)
    self_ns: Mapped[float | None] = mapped_column(Double)
    avg_ns: Mapped[float | None] = mapped_column(Double)
    min_ns: Mapped[float | None] = mapped_column(Double)
    max_ns: Mapped[float | None] = mapped_column(Double)
    std_ns: Mapped[float | None] = mapped_column(Double)
    median_ns: Mapped[float | None] = mapped_column(Double)
    bytes: Mapped[float | None] = mapped_column(Double)
    #: The time on the fastest profiled step, where the profile gave per-step totals (host-side
    #: operators, ranges and API calls of a torch trace): what comparisons use for such a series
    #: when every run in the window has it (issue 30; :mod:`perfci.analysis.values`).
    fastest: Mapped[float | None] = mapped_column(Double)


class SampleSummary(Base):
    """What a pruned run keeps of one series: its repeats' ``value`` rolled up (issue 17).

    Written by ``perfci db prune`` (:mod:`perfci.store.retention`) in the transaction that
    removes the run's raw samples, so a run has either samples or summaries, never both.
    ``median`` is the median of the repeats' values computed as Python's
    ``statistics.median`` does (the middle value, or the mean of the two middle ones), so
    every reader that takes a run's median (weekly reports, charts, change points) reads the
    same number before and after the prune. ``spread`` is max − min of the repeats, ``count``
    how many there were. A run holding a bad value (stored by an older perfci) keeps that
    value as its median, so readers leave it out as before. No foreign keys, like ``sample``.
    """

    __tablename__ = "sample_summary"

    run_id: Mapped[int] = mapped_column(Integer, primary_key=True)
    series_id: Mapped[int] = mapped_column(Integer, primary_key=True)
    median: Mapped[float] = mapped_column(Double)
    spread: Mapped[float] = mapped_column(Double)
    count: Mapped[int] = mapped_column(Integer)


class RunArrays(Base):
    """A run's compared values as three arrays: what comparisons read of a baseline run.

    A baseline of 30 runs × 300 series × 3 repeats is 27,000 ``sample`` rows, and a database
    driver builds a Python row for each: most of an upload's read (issue 35). One row per run
    holds the same numbers as arrays, read in one piece each. Derived, never the only copy:
    the run's ``sample`` rows hold every number, and a run without a row here is read from
    them. It is written in the transaction that stored the run, from the rows it had just
    written (the upload's comparison reads them back anyway,
    :func:`perfci.usecases.submit.compare.compare_stored_run`), and removed with them (``perfci
    db prune``, ``perfci runs delete``), so it never disagrees with them. A migration that
    changes stored values must delete these rows.

    ``series_ids`` are little-endian int32, ``value`` and ``fastest`` little-endian float64, one
    entry per sample with a value, in (series id, repeat) order; ``fastest`` is NaN where a sample
    has none and NULL when none has. No foreign key, like ``sample``.
    """

    __tablename__ = "run_arrays"

    run_id: Mapped[int] = mapped_column(Integer, primary_key=True)
    series_ids: Mapped[bytes] = mapped_column(LargeBinary)
    value: Mapped[bytes] = mapped_column(LargeBinary)
    fastest: Mapped[bytes | None] = mapped_column(LargeBinary)


#: Column order of ``sample`` rows as the bulk writers take them.
SAMPLE_COLUMNS: tuple[str, ...] = tuple(c.name for c in Sample.__table__.columns)


def series_key_hash(key: SeriesKey) -> str:
    """``series.key_hash``: 32 hex digits naming a series within its benchmark."""
    return series_parts_hash(*key.parts)


def series_parts_hash(kind: str, device: str, scope: str, section: str, name: str) -> str:
    """:func:`series_key_hash` from the plain strings (the ingest hot path)."""
    joined = KEY_SEPARATOR.join((kind, device, scope, section, name))
    return hashlib.blake2b(joined.encode(), digest_size=16).hexdigest()


def series_list_hash(key_hashes: Sequence[str]) -> str:
    """``series_set.list_hash``: 32 hex digits naming an ordered list of series key hashes."""
    # Key hashes are fixed-width hex, so plain concatenation is unambiguous.
    return hashlib.blake2b("".join(key_hashes).encode(), digest_size=16).hexdigest()


_ID_TYPE = "i"  # C int, like series.id (int4): 4 bytes on every platform CPython supports
if array(_ID_TYPE).itemsize != 4:  # pragma: no cover
    raise ImportError("perfci needs a 4-byte C int to pack series ids")


def pack_series_ids(ids: Sequence[int]) -> bytes:
    """``series_set.series_ids``: little-endian int32s, whatever the machine's byte order."""
    packed = array(_ID_TYPE, ids)
    if sys.byteorder == "big":
        packed.byteswap()
    return packed.tobytes()


def unpack_series_ids(data: bytes) -> list[int]:
    """The ids :func:`pack_series_ids` packed."""
    ids = array(_ID_TYPE)
    ids.frombytes(data)
    if sys.byteorder == "big":
        ids.byteswap()
    return ids.tolist()
