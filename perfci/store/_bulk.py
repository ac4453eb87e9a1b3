"""Dialect-specific bulk writes: INSERT … ON CONFLICT DO NOTHING and the sample fast path.

Both dialects support ``ON CONFLICT DO NOTHING`` (SQLite ≥ 3.24), which lets concurrent
ingests race safely: the loser's insert is a no-op and it reads the winner's row.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

from sqlalchemy import ColumnElement, Table, func, select
from sqlalchemy.dialects import postgresql
from sqlalchemy.exc import DBAPIError
from sqlalchemy.orm import Session
from sqlalchemy.sql.dml import Insert
from sqlalchemy.sql.elements import ColumnClause

from perfci.store.schema import SAMPLE_COLUMNS, Sample

SampleRow = tuple[Any, ...]  # values in SAMPLE_COLUMNS order

# Binary COPY needs the exact PostgreSQL type of each column, in SAMPLE_COLUMNS order.
_PG_SAMPLE_TYPES = ("int4", "int4", "int2", "int4", "float8", "int8", *["float8"] * 9)


def insert_ignore(session: Session, table: Table, conflict: Sequence[str]) -> Insert:
    """``INSERT INTO table … ON CONFLICT (conflict) DO NOTHING`` for the session's dialect."""
    dialect = session.get_bind().dialect.name
    if dialect == "postgresql":
        return postgresql.insert(table).on_conflict_do_nothing(index_elements=list(conflict))
    if dialect == "sqlite":
        # lazy: only the dialect in use loads (PostgreSQL's comes with the schema's types)
        from sqlalchemy.dialects import sqlite

        return sqlite.insert(table).on_conflict_do_nothing(index_elements=list(conflict))
    raise NotImplementedError(f"perfci does not support the {dialect} database")


def insert_rows_ignore(
    session: Session, table: Table, rows: Sequence[Mapping[str, Any]], conflict: Sequence[str]
) -> None:
    """Insert ``rows`` in one executemany, skipping those that already exist."""
    if rows:
        session.execute(insert_ignore(session, table, conflict), list(rows))


def in_values(
    session: Session, column: ColumnClause[Any], values: Sequence[str]
) -> ColumnElement[bool]:
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


@contextmanager
def driver_cursor(session: Session, statement: str | None = None) -> Iterator[Any]:
    """A DB-API cursor in the session's transaction, for the hot paths.

    SQLAlchemy's per-statement compile and per-row ``Row`` objects cost more than the queries
    themselves there (a baseline's tens of thousands of samples; benchmarks/store_speed.py).
    Driver errors come out as SQLAlchemy's (``IntegrityError``, ``OperationalError``…), as
    they would through ``session.execute``, so callers handle one family of errors.
    """
    connection = session.connection()
    base_error = connection.dialect.loaded_dbapi.Error
    cursor = connection.connection.driver_connection.cursor()  # type: ignore[union-attr]
    try:
        yield cursor
    except base_error as exc:
        raise DBAPIError.instance(statement, None, exc, base_error) from exc
    finally:
        cursor.close()


def write_samples(session: Session, rows: Iterable[SampleRow]) -> None:
    """Write sample rows in bulk: binary COPY on PostgreSQL, one executemany on SQLite.

    ``rows`` may be a generator: on PostgreSQL each row is formatted and sent as it comes, so
    producing the next ones overlaps with the server storing the previous ones.
    Raises ``sqlalchemy.exc.IntegrityError`` on a duplicate key on both dialects.
    """
    if session.get_bind().dialect.name == "postgresql":
        _copy_samples(session, rows)
        return
    with driver_cursor(session, _INSERT_SAMPLES) as cursor:
        cursor.executemany(_INSERT_SAMPLES, rows)


_INSERT_SAMPLES = (
    f"INSERT INTO {Sample.__tablename__} ({', '.join(SAMPLE_COLUMNS)}) "
    f"VALUES ({', '.join('?' * len(SAMPLE_COLUMNS))})"
)


_COPY_SAMPLES = (
    f"COPY {Sample.__tablename__} ({', '.join(SAMPLE_COLUMNS)}) FROM STDIN (FORMAT BINARY)"
)


def _copy_samples(session: Session, rows: Iterable[SampleRow]) -> None:
    # write_row formats in C; encoding the columns with numpy instead and writing one buffer
    # measured slower for a run's rows (benchmarks/store_speed.py).
    with driver_cursor(session, _COPY_SAMPLES) as cursor, cursor.copy(_COPY_SAMPLES) as copy:
        copy.set_types(_PG_SAMPLE_TYPES)
        write = copy.write_row
        for row in rows:
            write(row)
