"""The tables of an SQLite profile export and the SQL that aggregates their events.

``Schema`` says which tables and columns a database has (they change across nsys versions and
between nsys and nvprof exports); a ``Source`` is one event table as an inner SELECT, and
``aggregate_metrics`` turns it into one metric per name: SQL does the counting, Python merges
names and, for tables of moderate size, takes medians from the per-event durations.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from perfci.core.model import Device, Metric, MetricKind

# Medians need every event's duration fetched into Python, one row at a time; above this many
# rows in one table the median / std are left out rather than making a large export slow to
# ingest.
DETAIL_ROW_LIMIT = 2_000_000

KERNEL, MEMCPY, MEMSET = (
    "CUPTI_ACTIVITY_KIND_KERNEL",
    "CUPTI_ACTIVITY_KIND_MEMCPY",
    "CUPTI_ACTIVITY_KIND_MEMSET",
)
RUNTIME, DRIVER = "CUPTI_ACTIVITY_KIND_RUNTIME", "CUPTI_ACTIVITY_KIND_DRIVER"
CONCURRENT_KERNEL, MARKER = "CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL", "CUPTI_ACTIVITY_KIND_MARKER"
NVTX, OSRT = "NVTX_EVENTS", "OSRT_API"
NSYS_EVENT_TABLES = (KERNEL, MEMCPY, MEMSET, RUNTIME, NVTX, OSRT)
# Newer exports name their metadata table META_DATA_EXPORT, those before schema 3.4
# EXPORT_META_DATA; either (or an event table) beside StringIds marks an nsys export.
NSYS_META_TABLES = ("META_DATA_EXPORT", "EXPORT_META_DATA")
NSYS_MARKER_TABLES = (*NSYS_EVENT_TABLES, *NSYS_META_TABLES)


@dataclass(slots=True)
class Schema:
    """Table names and (lazily) their columns; only real tables, never views."""

    tables: set[str]
    conn: sqlite3.Connection
    _columns: dict[str, set[str]] = field(default_factory=dict)

    @classmethod
    def read(cls, conn: sqlite3.Connection) -> Schema:
        rows = conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'").fetchall()
        return cls(tables={str(name) for (name,) in rows}, conn=conn)

    def has(self, table: str) -> bool:
        return table in self.tables

    def any_of(self, tables: tuple[str, ...]) -> bool:
        return any(table in self.tables for table in tables)

    def columns(self, table: str) -> set[str]:
        if table not in self.tables:
            return set()
        if table not in self._columns:
            rows = self.conn.execute(f'PRAGMA table_info("{table}")').fetchall()
            self._columns[table] = {str(row[1]) for row in rows}
        return self._columns[table]


# --------------------------------------------------------------------------- aggregation


def require(schema: Schema, table: str, columns: tuple[str, ...]) -> None:
    """Raise ``ValueError`` naming the columns of ``table`` this schema lacks."""
    missing = [c for c in columns if c not in schema.columns(table)]
    if missing:
        raise ValueError(f"table {table} lacks column(s) {', '.join(missing)}")


@dataclass(frozen=True, slots=True)
class Source:
    """One event source as data: an inner SELECT yielding ``key, d, b, extra`` per event.

    ``key`` groups events, ``d`` is the duration in ns, ``b`` bytes (or NULL), ``extra`` a token
    whose smallest and largest values are kept per group (kernel short name, NVTX event type:
    both styles show when a name is used as push-pop and as start-end); ``name`` turns a key into
    the metric name (several keys may share one name: they are merged).
    """

    kind: MetricKind
    device: Device
    sql: str
    name: Callable[[Any], str] = str


@dataclass(slots=True)
class _Group:
    calls: int = 0
    total: float = 0.0
    low: float = float("inf")
    high: float = float("-inf")
    bytes: float | None = None
    extras: set[str] = field(default_factory=set)
    durations: list[float] = field(default_factory=list)

    def add(
        self,
        calls: int,
        total: float,
        low: float,
        high: float,
        size: float | None,
        extras: list[str],
    ) -> None:
        self.calls += calls
        self.total += total
        self.low, self.high = min(self.low, low), max(self.high, high)
        if size is not None:
            self.bytes = (self.bytes or 0.0) + size
        self.extras.update(extras)


def number(value: Any, what: str) -> float:
    """A numeric cell; a text or blob where a number belongs means a damaged table."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"{what} is {value!r}, expected a number")
    return float(value)


def _aggregate(conn: sqlite3.Connection, source: Source, warnings: list[str]) -> dict[str, _Group]:
    """Per-name groups of ``source``: SQL does the counting, Python only merges names."""
    groups: dict[str, _Group] = {}
    names: dict[Any, str] = {}
    # MIN/MAX of ``extra`` rather than GROUP_CONCAT: no separator can clash with a name.
    query = (
        f"SELECT key, COUNT(*), SUM(d), MIN(d), MAX(d), SUM(b), MIN(extra), MAX(extra)"
        f" FROM ({source.sql}) WHERE d IS NOT NULL GROUP BY key"
    )
    for key, calls, total, low, high, size, *extras in conn.execute(query):
        name = names.setdefault(key, source.name(key))
        groups.setdefault(name, _Group()).add(
            int(calls),
            number(total, "a duration sum"),
            number(low, "a duration"),
            number(high, "a duration"),
            None if size is None else number(size, "a size"),
            [str(extra) for extra in extras if extra is not None],
        )
    rows = sum(group.calls for group in groups.values())
    if rows > DETAIL_ROW_LIMIT:
        warnings.append(
            f"{rows} {source.kind.value} events: median and std left out "
            f"(more than {DETAIL_ROW_LIMIT})"
        )
        return groups
    for key, duration in conn.execute(f"SELECT key, d FROM ({source.sql}) WHERE d IS NOT NULL"):
        known = names.get(key)
        if known is None:  # only a damaged database changes between two reads of a table
            continue
        groups[known].durations.append(number(duration, "a duration"))
    return groups


def _metric(source: Source, name: str, group: _Group) -> Metric:
    durations = np.asarray(group.durations, dtype=float)
    complete = len(durations) == group.calls
    return Metric(
        kind=source.kind,
        name=name,
        device=source.device,
        calls=group.calls,
        total_ns=group.total,
        avg_ns=group.total / group.calls,
        min_ns=group.low,
        max_ns=group.high,
        bytes=group.bytes,
        median_ns=float(np.median(durations)) if complete else None,
        std_ns=float(np.std(durations, ddof=1)) if complete and group.calls > 1 else None,
    )


def aggregate_metrics(
    conn: sqlite3.Connection, source: Source, warnings: list[str]
) -> list[Metric]:
    """One metric per name of ``source``; ``extra`` tokens stay in ``attrs`` for its ``Finish``."""
    groups = _aggregate(conn, source, warnings)
    metrics = []
    for name, group in groups.items():
        metric = _metric(source, name, group)
        if group.extras:
            metric.attrs["extra"] = sorted(group.extras)
        metrics.append(metric)
    return metrics


# --------------------------------------------------------------------------- nsys exports
