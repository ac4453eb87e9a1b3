"""Samples by month and their roll-up (issue 17): ``sample.run_day``, ``sample_summary``,
``run.pruned_at``; on PostgreSQL ``sample`` becomes range-partitioned by month.

``run_day`` is the run's ``created_at`` as UTC days since 1970-01-01; it joins the primary key
because PostgreSQL requires the partition key in every unique index. A populated store is
converted in place: its samples are copied into the new table with their run's day (rows of
runs that no longer exist are left behind), one partition per month that holds runs, plus the
current month and three more (``perfci db upgrade`` and ``perfci db maintain`` keep making
them ahead). The copy is the migration's cost: it rewrites every sample once, and the primary
key is built after the copy (one sort per partition instead of a row-by-row index insert).
Partitions live in their own schema, ``perfci_partitions``. SQLite gets the column and the
key, no partitions.

Downgrade is supported while no run has been pruned; a store holding summaries of pruned
runs refuses, since revision 0005 has no place for them.

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-24 09:00:00
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, date, datetime

import sqlalchemy as sa
from alembic import op

revision: str = "0006"
down_revision: str | Sequence[str] | None = "0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# perfci.store.partitions.PARTITION_SCHEMA and MONTHS_AHEAD (migrations never import perfci).
PARTITION_SCHEMA = "perfci_partitions"
MONTHS_AHEAD = 3
EPOCH = date(1970, 1, 1)

VALUE_COLUMNS = (
    ("value", sa.Double),
    ("calls", sa.BigInteger),
    ("total_ns", sa.Double),
    ("self_ns", sa.Double),
    ("avg_ns", sa.Double),
    ("min_ns", sa.Double),
    ("max_ns", sa.Double),
    ("std_ns", sa.Double),
    ("median_ns", sa.Double),
    ("bytes", sa.Double),
)
VALUES = ", ".join(name for name, _ in VALUE_COLUMNS)
DAY_SQL = {
    "postgresql": "((r.created_at AT TIME ZONE 'UTC')::date - DATE '1970-01-01')",
    # julianday of 1970-01-01 00:00 is 2440587.5; date() applies a stored UTC offset.
    "sqlite": "CAST(julianday(date(r.created_at)) - 2440587.5 AS INTEGER)",
}


def _sample_columns(with_day: bool) -> list[sa.Column[object]]:
    ids = [
        sa.Column("run_id", sa.Integer(), nullable=False),
        sa.Column("series_id", sa.Integer(), nullable=False),
        sa.Column("repeat", sa.SmallInteger(), nullable=False),
    ]
    # run_day right after repeat: on PostgreSQL it fills the padding before the first double.
    day = [sa.Column("run_day", sa.Integer(), nullable=False)] if with_day else []
    values = [sa.Column(name, kind(), nullable=True) for name, kind in VALUE_COLUMNS]
    return [*ids, *day, *values]


def upgrade() -> None:
    bind = op.get_bind()
    with op.batch_alter_table("run") as batch:
        batch.add_column(sa.Column("pruned_at", sa.DateTime(timezone=True), nullable=True))
    op.create_table(
        "sample_summary",
        sa.Column("run_id", sa.Integer(), nullable=False),
        sa.Column("series_id", sa.Integer(), nullable=False),
        sa.Column("median", sa.Double(), nullable=False),
        sa.Column("spread", sa.Double(), nullable=False),
        sa.Column("count", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint("run_id", "series_id", name="pk_sample_summary"),
    )
    if bind.dialect.name == "postgresql":
        _partition_postgres(bind)
    else:
        _add_day_sqlite()


def _partition_postgres(bind: sa.Connection) -> None:
    op.execute("ALTER TABLE sample RENAME TO sample_0005")
    op.execute("ALTER TABLE sample_0005 RENAME CONSTRAINT pk_sample TO pk_sample_0005")
    op.execute(f"CREATE SCHEMA IF NOT EXISTS {PARTITION_SCHEMA}")
    # No key yet: it is built after the copy.
    op.create_table(
        "sample", *_sample_columns(with_day=True), postgresql_partition_by="RANGE (run_day)"
    )
    found = bind.execute(
        sa.text("SELECT DISTINCT date_trunc('month', created_at AT TIME ZONE 'UTC') FROM run")
    ).scalars()
    months = {(moment.year, moment.month) for moment in found}
    now = datetime.now(UTC)
    year, month = now.year, now.month
    for _ in range(MONTHS_AHEAD + 1):
        months.add((year, month))
        year, month = year + month // 12, month % 12 + 1
    for year, month in sorted(months):
        first = (date(year, month, 1) - EPOCH).days
        end = (date(year + month // 12, month % 12 + 1, 1) - EPOCH).days
        op.execute(
            f"CREATE TABLE {PARTITION_SCHEMA}.sample_y{year:04d}m{month:02d} "
            f"PARTITION OF sample FOR VALUES FROM ({first}) TO ({end})"
        )
    op.execute(
        f"INSERT INTO sample (run_id, series_id, repeat, run_day, {VALUES}) "
        f"SELECT s.run_id, s.series_id, s.repeat, {DAY_SQL['postgresql']}, "
        f"{', '.join('s.' + name for name, _ in VALUE_COLUMNS)} "
        "FROM sample_0005 s JOIN run r ON r.id = s.run_id"
    )
    op.execute("DROP TABLE sample_0005")
    op.create_primary_key("pk_sample", "sample", ["run_id", "series_id", "repeat", "run_day"])


def _add_day_sqlite() -> None:
    op.create_table(
        "sample_0006",
        *_sample_columns(with_day=True),
        sa.PrimaryKeyConstraint("run_id", "series_id", "repeat", "run_day", name="pk_sample"),
    )
    op.execute(
        f"INSERT INTO sample_0006 (run_id, series_id, repeat, run_day, {VALUES}) "
        f"SELECT s.run_id, s.series_id, s.repeat, {DAY_SQL['sqlite']}, "
        f"{', '.join('s.' + name for name, _ in VALUE_COLUMNS)} "
        "FROM sample s JOIN run r ON r.id = s.run_id"
    )
    op.drop_table("sample")
    op.rename_table("sample_0006", "sample")


def downgrade() -> None:
    bind = op.get_bind()
    pruned = bind.execute(sa.text("SELECT count(*) FROM run WHERE pruned_at IS NOT NULL")).scalar()
    if pruned:
        raise RuntimeError(
            f"cannot downgrade below 0006: {pruned} runs were pruned (`perfci db prune`): "
            "their raw samples were rolled up into sample_summary, which revision 0005 has no "
            "place for. Restore a backup taken before the prune to go back"
        )
    postgres = bind.dialect.name == "postgresql"
    # An index's name is unique per PostgreSQL schema: the old key is renamed once the
    # partitioned table is gone. SQLite names constraints per table.
    key = "pk_sample_0005" if postgres else "pk_sample"
    op.create_table(
        "sample_0005",
        *_sample_columns(with_day=False),
        sa.PrimaryKeyConstraint("run_id", "series_id", "repeat", name=key),
    )
    op.execute(
        f"INSERT INTO sample_0005 (run_id, series_id, repeat, {VALUES}) "
        f"SELECT run_id, series_id, repeat, {VALUES} FROM sample"
    )
    op.drop_table("sample")  # on PostgreSQL its partitions go with it
    op.rename_table("sample_0005", "sample")
    if postgres:
        op.execute(f"DROP SCHEMA IF EXISTS {PARTITION_SCHEMA}")
        op.execute("ALTER TABLE sample RENAME CONSTRAINT pk_sample_0005 TO pk_sample")
    op.drop_table("sample_summary")
    with op.batch_alter_table("run") as batch:
        batch.drop_column("pruned_at")
