"""A run's series: their key hashes, and their ids, creating the missing ones race-safely.

Part of :func:`perfci.store.runs.write_run`. A series is one metric of one benchmark, found by
the hash of its key (:func:`~perfci.store.schema.series_parts_hash`).
"""

from __future__ import annotations

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from perfci.core.model import SERIES_FIELDS, Metric, SeriesParts
from perfci.store import _bulk
from perfci.store.prepared import PreparedRun
from perfci.store.run_resolve import table_of as _table
from perfci.store.schema import Series, series_parts_hash

_LOOKUP_CHUNK = 5000  # ids per IN (...) list: well under SQLite's 32,766 parameters


def series_ids_of(
    session: Session, benchmark_id: int, prepared: PreparedRun, hashes: list[str]
) -> list[int]:
    """The ids of the run's series, in order, creating the missing ones."""
    found = _lookup_series(session, benchmark_id, hashes)
    missing = {i for i, key_hash in enumerate(hashes) if key_hash not in found}
    if missing:
        new = [
            (hashes[i], parts, cell[0][1])
            for i, (parts, cell) in enumerate(prepared.cells.items())
            if i in missing
        ]
        found.update(_create_series(session, benchmark_id, new))
    return [found[key_hash] for key_hash in hashes]


_HASH_CACHE: dict[SeriesParts, str] = {}
_HASH_CACHE_SIZE = 50_000  # series keys; a key with a long kernel name is ~1 kB


def key_hashes(keys: list[SeriesParts]) -> list[str]:
    """The key hashes of ``keys``, remembered: a benchmark's series recur in every run.

    A pure function of the strings, so it is safe to keep for the life of the process,
    unlike database ids (which a rolled back transaction or a deleted project invalidates).
    """
    cache = _HASH_CACHE
    if len(cache) > _HASH_CACHE_SIZE:
        cache.clear()
    hashes = []
    for parts in keys:
        key_hash = cache.get(parts)
        if key_hash is None:
            key_hash = cache[parts] = series_parts_hash(*parts)
        hashes.append(key_hash)
    return hashes


def _create_series(
    session: Session, benchmark_id: int, new: list[tuple[str, SeriesParts, Metric]]
) -> dict[str, int]:
    """Insert the benchmark's new series (race-safe) and return their ids by key hash.

    In the order of the run, so that later runs, listing their metrics alike, COPY their
    samples in primary key order (cheaper index inserts). On PostgreSQL, ingests creating
    series of one benchmark take turns (a transaction-scoped advisory lock): two of them
    inserting overlapping new series in different orders would otherwise deadlock.
    """
    if session.get_bind().dialect.name == "postgresql":
        session.execute(select(func.pg_advisory_xact_lock(_SERIES_LOCK, benchmark_id)))
    rows = [
        dict(
            zip(SERIES_FIELDS, parts, strict=True),
            benchmark_id=benchmark_id,
            key_hash=key_hash,
            unit=metric.unit,
            better=metric.better.value,
        )
        for key_hash, parts, metric in new
    ]
    _bulk.insert_rows_ignore(session, _table(Series), rows, ["benchmark_id", "key_hash"])
    return _lookup_series(session, benchmark_id, [key_hash for key_hash, _, _ in new])


_SERIES_LOCK = 0x7065_7266  # "perf": the advisory lock class of series creation


def _lookup_series(session: Session, benchmark_id: int, hashes: list[str]) -> dict[str, int]:
    found: dict[str, int] = {}
    for start in range(0, len(hashes), _LOOKUP_CHUNK):
        chunk = hashes[start : start + _LOOKUP_CHUNK]
        table = _table(Series)
        query = select(table.c.key_hash, table.c.id).where(
            table.c.benchmark_id == benchmark_id, _bulk.in_values(session, table.c.key_hash, chunk)
        )
        found.update(session.execute(query).all())
    return found
