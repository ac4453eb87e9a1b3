"""A run's series: their key hashes, and their ids, creating the missing ones race-safely.

Part of :func:`perfci.store.runs.write_run`. A series is one metric of one benchmark, found by
the hash of its key (:func:`~perfci.store.schema.series_parts_hash`).
"""

from __future__ import annotations

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from perfci.core.model import KEY_SEPARATOR, SERIES_FIELDS, Metric, SeriesParts
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
        if _insert_series_postgres(session, benchmark_id, new):
            return _lookup_series(session, benchmark_id, [key_hash for key_hash, _, _ in new])
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

# One statement for all the new series, each column one text of its values joined by
# KEY_SEPARATOR and split by the server: an executemany sent a statement per series (10,000
# round trips in the pipeline, a second of the client's CPU for a new benchmark of 10,000
# kernels), and psycopg dumps a list as an array element by element in Python (0.4 s for
# those 10,000; benchmarks/store_speed.py). A series' key parts cannot hold the separator
# (refused at submit); a unit holding it takes the executemany. In the run's order, so that
# the ids are too.
_PG_COLUMNS = ("key_hash", *SERIES_FIELDS, "unit", "better")
_PG_SPLIT = ", ".join(
    f"(string_to_array(%({c})s::text, %(separator)s::text))[2:]" for c in _PG_COLUMNS
)
_PG_INSERT_SERIES = f"""
INSERT INTO {Series.__tablename__} (benchmark_id, {", ".join(_PG_COLUMNS)})
SELECT %(benchmark_id)s::int4, {", ".join(_PG_COLUMNS)}
FROM unnest({_PG_SPLIT}) WITH ORDINALITY AS new ({", ".join(_PG_COLUMNS)}, n)
ORDER BY n
ON CONFLICT (benchmark_id, key_hash) DO NOTHING
"""


def _insert_series_postgres(
    session: Session, benchmark_id: int, new: list[tuple[str, SeriesParts, Metric]]
) -> bool:
    """Insert ``new`` in one statement; ``False`` (nothing sent) when a value holds the
    separator."""
    columns = [
        [key_hash, *parts, metric.unit, metric.better.value] for key_hash, parts, metric in new
    ]
    # Each value after a separator, the first one's empty part dropped by the server
    # (``[2:]``): split alone, one empty value would be an array of none.
    texts = [KEY_SEPARATOR + KEY_SEPARATOR.join(column) for column in zip(*columns, strict=True)]
    if any(text.count(KEY_SEPARATOR) != len(new) for text in texts):
        return False
    params = {"benchmark_id": benchmark_id, "separator": KEY_SEPARATOR}
    params.update(zip(_PG_COLUMNS, texts, strict=True))
    with _bulk.driver_cursor(session, _PG_INSERT_SERIES) as cursor:
        cursor.execute(_PG_INSERT_SERIES, params)
    return True


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
