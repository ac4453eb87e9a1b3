"""Dialect-specific bulk writes: INSERT … ON CONFLICT DO NOTHING and the sample fast path.

Both dialects support ``ON CONFLICT DO NOTHING`` (SQLite ≥ 3.24), which lets concurrent
ingests race safely: the loser's insert is a no-op and it reads the winner's row.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from sqlalchemy import ColumnElement, Table, func, select
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.exc import DBAPIError, IntegrityError
from sqlalchemy.orm import Session
from sqlalchemy.sql.dml import Insert
from sqlalchemy.sql.elements import ColumnClause

from perfci.store.schema import SAMPLE_COLUMNS, Sample

SampleRow = tuple[Any, ...]  # values in SAMPLE_COLUMNS order

# Binary COPY needs the exact PostgreSQL type of each column, in SAMPLE_COLUMNS order.
_PG_SAMPLE_TYPES = ("int4", "int4", "int2", "float8", "int8", *["float8"] * 8)


def insert_ignore(session: Session, table: Table, conflict: Sequence[str]) -> Insert:
    """``INSERT INTO table … ON CONFLICT (conflict) DO NOTHING`` for the session's dialect."""
    dialect = session.get_bind().dialect.name
    if dialect == "postgresql":
        return postgresql.insert(table).on_conflict_do_nothing(index_elements=list(conflict))
    if dialect == "sqlite":
        return sqlite.insert(table).on_conflict_do_nothing(index_elements=list(conflict))
    raise NotImplementedError(f"perfci does not support the {dialect} database")


def insert_rows_ignore(session: Session, table: Table, rows: Sequence[Mapping[str, Any]],
                       conflict: Sequence[str]) -> None:
    """Insert ``rows`` in one executemany, skipping those that already exist."""
    if rows:
        session.execute(insert_ignore(session, table, conflict), list(rows))


def in_values(session: Session, column: ColumnClause[Any],
              values: Sequence[str]) -> ColumnElement[bool]:
    """``column IN values`` as ONE bound parameter (a joined string, or a JSON list on SQLite).

    A plain ``IN`` renders a parameter per value: with a thousand series that is a new,
    uncached statement for SQLAlchemy and the driver on every ingest, and the slowest step.
    """
    if session.get_bind().dialect.name == "postgresql":
        # One text parameter split by the server (dumping a Python list as an array costs more
        # than the query), as a sub-select: the planner hashes it, where `= ANY(param)` would
        # compare every row with every value. Hex digests and names never hold a "\x1f".
        values_ = func.unnest(func.string_to_array("\x1f".join(values), "\x1f"))
        return column.in_(select(values_))
    each = func.json_each(json.dumps(list(values))).table_valued("value")
    return column.in_(select(each.c.value))


def write_samples(session: Session, rows: Sequence[SampleRow]) -> None:
    """Write sample rows in bulk: binary COPY on PostgreSQL, one executemany on SQLite.

    Raises ``sqlalchemy.exc.IntegrityError`` on a duplicate key on both dialects.
    """
    if not rows:
        return
    connection = session.connection()
    if connection.dialect.name == "postgresql":
        _copy_samples(connection.connection.driver_connection, rows)
        return
    placeholders = ", ".join("?" * len(SAMPLE_COLUMNS))
    connection.exec_driver_sql(
        f"INSERT INTO {Sample.__tablename__} ({', '.join(SAMPLE_COLUMNS)}) "
        f"VALUES ({placeholders})", list(rows))


def _copy_samples(driver_connection: Any, rows: Sequence[SampleRow]) -> None:
    import psycopg

    statement = (f"COPY {Sample.__tablename__} ({', '.join(SAMPLE_COLUMNS)}) "
                 "FROM STDIN (FORMAT BINARY)")
    try:
        with driver_connection.cursor() as cursor, cursor.copy(statement) as copy:
            copy.set_types(_PG_SAMPLE_TYPES)
            for row in rows:
                copy.write_row(row)
    except psycopg.errors.IntegrityError as exc:
        # The driver is used directly here; give callers the error SQLAlchemy would raise.
        raise IntegrityError(statement, None, exc) from exc
    except psycopg.Error as exc:
        raise DBAPIError(statement, None, exc) from exc
