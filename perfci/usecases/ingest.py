"""Ingest a run: parsed profiles + run context → one transaction in the store.

Idempotent: a run is identified by its key (commit + CI run id + attempt, or the content when
there is no CI run id), unique in the database, so the same run ingested twice, even by two
processes at once, is stored once; the same key with different numbers is a
:class:`~perfci.errors.RunConflict` naming the stored run. Everything is parsed and checked
before the transaction opens (every value finite and non-negative, see :func:`check_values`),
so bad input writes nothing.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, cast

import numpy as np
from sqlalchemy import Table, func, select, update
from sqlalchemy.exc import DBAPIError, IntegrityError
from sqlalchemy.orm import Session

from perfci.analysis.values import per_step_ns
from perfci.context import fingerprint_hash
from perfci.errors import (
    ConfigError,
    InvalidValue,
    ParseError,
    RunConflict,
    StorageError,
    UnknownFormatError,
)
from perfci.formats.registry import parse_file
from perfci.model import Metric, MetricKind, Profile, RunContext
from perfci.store import _bulk
from perfci.store.db import error_reason
from perfci.store.schema import (
    Benchmark,
    Commit,
    Environment,
    ProfileRow,
    Project,
    Run,
    Sample,
    Series,
    SeriesSet,
    pack_series_ids,
    series_list_hash,
    series_parts_hash,
    unpack_series_ids,
)
from perfci.usecases.repeats import check_repeats_match

# value (per-step ns), calls, total, self, avg, min, max, std, median ns, bytes
Values = tuple[float | None, int | None, float | None, float | None, float | None,
               float | None, float | None, float | None, float | None, float | None]

# kind, device, scope, section, name: a series' identity as plain strings (cheap to hash)
SeriesParts = tuple[str, str, str, str, str]
_SERIES_FIELDS = ("kind", "device", "scope", "section", "name")

_LOOKUP_CHUNK = 5000  # ids per IN (...) list: well under SQLite's 32,766 parameters


@dataclass(frozen=True, slots=True)
class IngestResult:
    """What an ingest stored: ``created`` is False when the run was already there."""

    run_id: int
    created: bool
    series: int
    samples: int


# Where one sample's numbers come from: (repeat, metric, the profile's steps). A series appearing
# twice in one repeat (seed 003's cuda_api_sum) has consecutive cells of that repeat, summed.
_Cell = tuple[int, Metric, int | None]


@dataclass(frozen=True, slots=True)
class _Prepared:
    """The run's series, keyed and checked before any SQL, with the metrics behind each.

    The numbers themselves are computed as the rows are written (:func:`_sample_rows`): on
    PostgreSQL that is while the server is busy with the COPY's earlier rows, for free.
    """

    cells: dict[SeriesParts, list[_Cell]]  # distinct series in first-seen order
    samples: int  # rows to write: distinct (series, repeat) pairs
    merges: bool  # some series appears twice in one repeat: its cells are summed
    profiles: list[tuple[int, Profile]]
    repeats: int


def ingest_run(session: Session, *, context: RunContext, benchmark: str,
               repeats: Sequence[Sequence[Profile]], idempotency_key: str | None = None,
               created_at: datetime | None = None, commit: bool = True) -> IngestResult:
    """Store one run of ``benchmark`` in one transaction, and commit it.

    Parameters
    ----------
    session
        A fresh unit of work; it is committed on success and rolled back on any error.
    context
        Project, commit, branch, CI ids and the environment fingerprint of the run.
    benchmark
        The benchmark's name within the project.
    repeats
        The profiles of each repeat, in repeat order. A repeat with several profiles (seed 003:
        forward / backward / train) keys its series by section = profile label.
    idempotency_key
        Overrides the run key derived from the context (and the content, without a CI run id).
    created_at
        When the run was made (default: now); tests and imports of old runs pass it.
    commit
        ``False`` leaves the transaction open for the caller to add to and commit (the run and
        its comparison in one transaction, :func:`~perfci.usecases.submit.submit_run`); it is
        still rolled back here on any error.

    Raises
    ------
    ConfigError
        Empty repeats, or two profiles with the same label in one repeat.
    InvalidValue
        A value is not finite, is negative, or overflows; nothing was written.
    RunConflict
        The run's key (CI run id and attempt, or ``idempotency_key``) is stored with other
        numbers; ``run_id`` names the stored run.
    StorageError
        The database failed; nothing was written.
    """
    # An ingest allocates thousands of short-lived, acyclic objects while the caller's parsed
    # profiles are alive: cyclic collections meanwhile walk (and promote) all of them, 1.3 of
    # the ~3 ms of Python per 1,000-series run when measured. Refcounting frees the garbage.
    with _bulk.no_cycle_collection():
        return _ingest(session, context=context, benchmark=benchmark, repeats=repeats,
                       idempotency_key=idempotency_key, created_at=created_at, commit=commit)


def _ingest(session: Session, *, context: RunContext, benchmark: str,
            repeats: Sequence[Sequence[Profile]], idempotency_key: str | None,
            created_at: datetime | None, commit: bool) -> IngestResult:
    prepared = _prepare(repeats)
    check_values(prepared)
    key = idempotency_key or run_key(context, prepared)
    try:
        result = _write(session, context=context, benchmark=benchmark, prepared=prepared,
                        key=key, created_at=created_at or datetime.now(UTC))
        if commit:
            session.commit()
    except IntegrityError as exc:
        session.rollback()
        # A concurrent ingest of the same run committed between our checks: keep theirs.
        existing = _find_run(session, context.project, benchmark, key)
        if existing is None:
            raise _storage_error(benchmark, prepared, exc) from exc
        try:
            result = _existing_result(session, existing, prepared)
        finally:
            session.rollback()  # end the read transaction; nothing of ours to keep
        return result
    except DBAPIError as exc:
        session.rollback()
        raise _storage_error(benchmark, prepared, exc) from exc
    except BaseException:
        session.rollback()
        raise
    return result


def _storage_error(benchmark: str, prepared: _Prepared, exc: DBAPIError,
                   shown: int = 3) -> StorageError:
    """The error of a failed ingest, naming the run's files (the first few, then how many more)."""
    sources = list(dict.fromkeys(p.source or p.label for _, p in prepared.profiles))
    more = len(sources) - shown
    files = ", ".join(sources[:shown]) + (f" and {more} more" if more > 0 else "")
    return StorageError(f"could not store the run of {benchmark!r} ({files}): "
                        f"{error_reason(exc)}")


def parse_and_ingest(session: Session, files: Sequence[Path], *, benchmark: str,
                     context: RunContext, format: str | None = None,
                     repeat: int | None = None) -> IngestResult:
    """Parse ``files`` and ingest them as one run; a bad file stops before anything is written.

    With ``repeat=None`` each file is one repeat; with ``repeat=N`` the files hold N repeats,
    split into N consecutive groups of equal size (``r0_fwd r0_bwd r1_fwd r1_bwd``, N=2).
    """
    repeats = parse_repeats(files, format=format, repeat=repeat)
    return ingest_run(session, context=context, benchmark=benchmark, repeats=repeats)


def parse_repeats(files: Sequence[Path], *, format: str | None = None,
                  repeat: int | None = None) -> list[list[Profile]]:
    """The profiles of each repeat (see :func:`parse_and_ingest`); errors name the file."""
    groups = group_files(files, repeat)
    repeats = [[p for path in group for p in _parse_one(path, format)] for group in groups]
    check_repeats_match(repeats)  # unrelated profiles as repeats of one run (issue 16)
    return repeats


def group_files(files: Sequence[Path], repeats: int | None) -> list[list[Path]]:
    """Files per repeat: one each, or ``repeats`` equal consecutive groups."""
    if not files:
        raise ConfigError("no profile files given")
    if repeats is None:
        return [[Path(f)] for f in files]
    if repeats < 1 or len(files) % repeats:
        raise ConfigError(f"{len(files)} files cannot be split into {repeats} repeats of "
                          "equal size")
    size = len(files) // repeats
    return [[Path(f) for f in files[i:i + size]] for i in range(0, len(files), size)]


def _parse_one(path: Path, format: str | None) -> list[Profile]:
    try:
        profiles = parse_file(path, format=format)
    except UnknownFormatError as exc:
        if str(path) in str(exc):
            raise
        raise UnknownFormatError(f"{path}: {exc}") from exc
    if not profiles:
        raise ParseError("no profiles found in this file", source=str(path))
    return profiles


def run_key(context: RunContext, prepared: _Prepared) -> str:
    """The idempotency key: the CI invocation when known, else the run's content.

    Without a CI run id, ingesting the same files again is the same run, while new
    measurements at the same commit (a laptop re-run) are a new one.
    """
    commit = context.commit or ""
    if context.ci_run_id:
        provider = context.ci_provider or "ci"
        return f"ci:{provider}:{context.ci_run_id}:{context.ci_run_attempt or 0}:{commit}"[:255]
    digest = hashlib.sha256()
    for parts in sorted(prepared.cells):
        digest.update("\x1f".join(parts).encode())
        for repeat, values in _cell_values(prepared.cells[parts]):
            digest.update(repr((repeat, values)).encode())
    return f"content:{commit}:{digest.hexdigest()}"


# --- preparing (no SQL) -----------------------------------------------------------------------


def _prepare(repeats: Sequence[Sequence[Profile]]) -> _Prepared:
    if not repeats:
        raise ConfigError("a run needs at least one repeat")
    cells: dict[SeriesParts, list[_Cell]] = {}
    profiles: list[tuple[int, Profile]] = []
    samples = metrics = 0
    for index, repeat in enumerate(repeats):
        if not repeat:
            raise ConfigError(f"repeat {index + 1} has no profiles")
        labels = [p.label for p in repeat]
        if len(repeat) > 1 and len(set(labels)) != len(labels):
            raise ConfigError(f"repeat {index + 1} has several profiles labelled alike "
                              f"({', '.join(labels)}); their metrics would collide")
        for profile in repeat:
            profiles.append((index, profile))
            samples += _add_profile(cells, index, profile,
                                    profile.label if len(repeat) > 1 else "")
            metrics += len(profile.metrics)
    return _Prepared(cells=cells, samples=samples, merges=metrics != samples,
                     profiles=profiles, repeats=len(repeats))


# A metric's stored numbers: each a time in ns, a count or a size, so finite and non-negative.
_NUMBER_FIELDS = ("total_ns", "calls", "self_ns", "avg_ns", "min_ns", "max_ns", "std_ns",
                  "median_ns", "bytes")
_VALUE_NAMES = ("value (per step)", *_NUMBER_FIELDS)


def check_values(prepared: _Prepared) -> None:
    """Refuse a run holding a number that is not finite and non-negative, before any SQL.

    Every number perfci stores is a time, a count or a size. A negative duration (clock skew
    between the host and the GPU timestamps) is refused with the metric named rather than
    clamped: a clamped 0 would pass as a real measurement and bend the baseline, while a
    refused upload is seen and fixed at its source. Derived numbers are checked too: the
    per-step value of a step metric (``[1.7e308, 1.7e308]`` averages to infinity), ``avg ×
    calls`` without a total, and the sums of a series listed twice in one repeat.

    One vectorised pass over the numbers (about 0.5 ms per 1,000 metrics); the search for the
    culprit, to name it, runs only when that pass fails.

    Raises
    ------
    InvalidValue
        Naming the profile, the metric, the field and the value.
    """
    # The stored fields of every metric: the one per-value Python pass, kept to a bare
    # comprehension (about 0.45 ms per 1,000 metrics; numpy's own None handling is slower).
    numbers = [v for _, p in prepared.profiles for m in p.metrics
               for v in (m.total_ns, m.calls, m.self_ns, m.avg_ns, m.min_ns, m.max_ns,
                         m.std_ns, m.median_ns, m.bytes) if v is not None]
    # Derived values: only step metrics (means of samples) and metrics without a total
    # (avg × calls) can come out worse than the fields they are made of.
    for _, profile in prepared.profiles:
        if profile.steps is not None:
            numbers.append(profile.steps)
        for m in profile.metrics:
            if m.kind is MetricKind.STEP or m.total_ns is None:
                if m.samples_ns:
                    numbers += m.samples_ns
                value = per_step_ns(m, profile.steps)
                if value is not None:
                    numbers.append(value)
    if prepared.merges:
        numbers += [v for cell in prepared.cells.values() if len(cell) > 1
                    for _, values in _cell_values(cell) for v in values if v is not None]
    try:
        array = np.array(numbers, dtype=np.float64)
    except (OverflowError, TypeError, ValueError):  # an int beyond any float, or not a number
        raise _invalid_value(prepared) from None
    if not (np.isfinite(array).all() and (array.size == 0 or array.min() >= 0)):
        raise _invalid_value(prepared)


def _invalid_value(prepared: _Prepared) -> InvalidValue:
    """The error naming the first bad number of ``prepared`` (the slow path of check_values)."""
    for repeat, profile in prepared.profiles:
        where = f"profile {profile.label!r} ({profile.source or 'upload'}, repeat {repeat + 1})"
        if profile.steps is not None and not _valid(profile.steps):
            return _refusal(f"{where}: steps is {profile.steps!r}")
        for metric in profile.metrics:
            fields = [(name, getattr(metric, name)) for name in _NUMBER_FIELDS]
            fields += [(f"samples_ns #{i}", v) for i, v in enumerate(metric.samples_ns or ())]
            fields.append((_VALUE_NAMES[0], per_step_ns(metric, profile.steps)))
            for name, value in fields:
                if value is not None and not _valid(value):
                    return _refusal(f"{where}, metric {metric.key!r}, {name} is {value!r}")
    for parts, cell in prepared.cells.items():
        for repeat, values in _cell_values(cell):
            for name, value in zip(_VALUE_NAMES, values, strict=True):
                if value is not None and not _valid(value):
                    return _refusal(f"repeat {repeat + 1}, metric {':'.join(parts)!r}: the "
                                    f"sum of its entries, {name}, is {value!r}")
    return _refusal("a value is not a finite, non-negative number")  # not reached


def _valid(value: float) -> bool:
    try:
        return math.isfinite(value) and value >= 0
    except (TypeError, OverflowError):  # an int beyond any float is not a plausible number
        return False


def _refusal(what: str) -> InvalidValue:
    return InvalidValue(f"{what}: expected a finite, non-negative number (a time in ns, a "
                        f"count or bytes); nothing was stored")


def _add_profile(cells: dict[SeriesParts, list[_Cell]], repeat: int, profile: Profile,
                 section: str) -> int:
    """Key ``profile``'s metrics into ``cells`` (the per-metric loop of every ingest).

    Returns the number of new (series, repeat) pairs.
    """
    steps = profile.steps
    added = 0
    for metric in profile.metrics:
        # ``_value_``: the plain string (``.value`` is a slow descriptor, and the members
        # themselves would reach the driver as enums).
        parts = (metric.kind._value_, metric.device._value_, metric.scope or "", section,
                 metric.name)
        cell = cells.get(parts)
        if cell is None:
            cells[parts] = [(repeat, metric, steps)]
            added += 1
        else:
            added += cell[-1][0] != repeat
            cell.append((repeat, metric, steps))
    return added


def _values(metric: Metric, steps: int | None) -> Values:
    return (per_step_ns(metric, steps), metric.calls, metric.total_ns, metric.self_ns,
            metric.avg_ns, metric.min_ns, metric.max_ns, metric.std_ns, metric.median_ns,
            metric.bytes)


def _cell_values(cell: list[_Cell]) -> list[tuple[int, Values]]:
    """The numbers of each repeat of one series, in repeat order, duplicates summed."""
    out: list[tuple[int, Values]] = []
    for repeat, metric, steps in cell:
        values = _values(metric, steps)
        if out and out[-1][0] == repeat:
            out[-1] = (repeat, _merge(out[-1][1], values))
        else:
            out.append((repeat, values))
    return out


def _sample_rows(prepared: _Prepared, run_id: int,
                 series_ids: list[int]) -> Iterator[_bulk.SampleRow]:
    """The run's sample rows in primary key order for its series (series, then repeat)."""
    cells = zip(prepared.cells.values(), series_ids, strict=True)
    if prepared.merges:
        for cell, series_id in cells:
            for repeat, values in _cell_values(cell):
                # `(ids) + values`, not `(ids, *values)`: the unpacking goes through a list.
                yield (run_id, series_id, repeat) + values  # noqa: RUF005
        return
    # Each cell its own sample: the common case, the same numbers as _values, inlined.
    for cell, series_id in cells:
        for repeat, m, steps in cell:
            yield (run_id, series_id, repeat, per_step_ns(m, steps), m.calls, m.total_ns,
                   m.self_ns, m.avg_ns, m.min_ns, m.max_ns, m.std_ns, m.median_ns, m.bytes)


def _merge(a: Values, b: Values) -> Values:
    def add(x: Any, y: Any) -> Any:
        return None if x is None and y is None else (x or 0) + (y or 0)

    def pick(f: Any, x: Any, y: Any) -> Any:
        return x if y is None else y if x is None else f(x, y)

    value, calls, total, self_ns = (add(a[i], b[i]) for i in range(4))
    avg = total / calls if total is not None and calls else None
    return (value, calls, total, self_ns, avg, pick(min, a[5], b[5]), pick(max, a[6], b[6]),
            None, None, add(a[9], b[9]))


# --- writing ----------------------------------------------------------------------------------


def _write(session: Session, *, context: RunContext, benchmark: str, prepared: _Prepared,
           key: str, created_at: datetime) -> IngestResult:
    keys = list(prepared.cells)
    hashes = _hashes(keys)
    list_hash = series_list_hash(hashes)
    resolve = (_resolve_postgres if session.get_bind().dialect.name == "postgresql"
               else _resolve_generic)
    found = resolve(session, context=context, benchmark=benchmark, prepared=prepared, key=key,
                    created_at=created_at, list_hash=list_hash)
    if found is None:  # the run is already stored
        existing = _find_run(session, context.project, benchmark, key)
        assert existing is not None  # the conflicting row is visible once the insert returns
        return _existing_result(session, existing, prepared)
    run_id, benchmark_id, series_ids = found
    if series_ids is None:
        # A list of series not seen before in this benchmark: each series by its key.
        series_ids = _series_ids(session, benchmark_id, keys, hashes)
        _bulk.insert_rows_ignore(session, _table(SeriesSet),
                                 [{"benchmark_id": benchmark_id, "list_hash": list_hash,
                                   "series_ids": pack_series_ids(series_ids)}],
                                 ["benchmark_id", "list_hash"])
    if prepared.samples:
        _bulk.write_samples(session, _sample_rows(prepared, run_id, series_ids))
    return IngestResult(run_id=run_id, created=True, series=len(keys), samples=prepared.samples)


def _series_ids(session: Session, benchmark_id: int, keys: list[SeriesParts],
                hashes: list[str]) -> list[int]:
    """The ids of the series ``keys`` of a benchmark, in order, creating the missing ones."""
    found = _lookup_series(session, benchmark_id, hashes)
    missing = [i for i, key_hash in enumerate(hashes) if key_hash not in found]
    if missing:
        found.update(_create_series(session, benchmark_id,
                                    [(hashes[i], keys[i]) for i in missing]))
    return [found[key_hash] for key_hash in hashes]


# A run's ids: (run, benchmark, series ids in the order of the keys when the benchmark knows
# this list of series, else None); None for all when the run is already stored.
_Resolved = tuple[int, int, list[int] | None] | None

_HASH_CACHE: dict[SeriesParts, str] = {}
_HASH_CACHE_SIZE = 50_000  # series keys; a key with a long kernel name is ~1 kB


def _hashes(keys: list[SeriesParts]) -> list[str]:
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


# PostgreSQL: everything an ingest needs before its COPY in ONE statement (each round trip is
# ~0.2 ms of a ~4 ms budget): get-or-create project, benchmark, environment and commit, insert
# the run and its profiles, and fetch the ids of the run's list of series (series_set). Each insert
# selects FROM the previous step's result, so every ingest takes the locks of new rows in the
# same order (project, benchmark, environment, commit, run) and concurrent first ingests
# cannot deadlock. A name inserted concurrently by an uncommitted transaction is neither in
# this statement's snapshot nor inserted (ON CONFLICT waits for it, then does nothing): the
# chain comes back empty and the statement is run again, which then sees it.
_PG_RESOLVE = """
WITH
p_old AS (SELECT id FROM project WHERE name = %(project)s::varchar),
p_new AS (
    INSERT INTO project (name, created_at)
    SELECT %(project)s::varchar, %(created_at)s::timestamptz
    WHERE NOT EXISTS (SELECT FROM p_old)
    ON CONFLICT (name) DO NOTHING RETURNING id),
p AS (SELECT id FROM p_old UNION ALL SELECT id FROM p_new),
b_old AS (
    SELECT benchmark.id FROM benchmark JOIN p ON benchmark.project_id = p.id
    WHERE benchmark.name = %(benchmark)s::varchar),
b_new AS (
    INSERT INTO benchmark (project_id, name)
    SELECT p.id, %(benchmark)s::varchar FROM p WHERE NOT EXISTS (SELECT FROM b_old)
    ON CONFLICT (project_id, name) DO NOTHING RETURNING id),
b AS (SELECT id FROM b_old UNION ALL SELECT id FROM b_new),
e_old AS (SELECT id FROM environment WHERE fingerprint = %(fingerprint)s::varchar),
e_new AS (
    INSERT INTO environment (fingerprint, "values", created_at)
    SELECT %(fingerprint)s::varchar, %(environment)s::json, %(created_at)s::timestamptz
    FROM b WHERE NOT EXISTS (SELECT FROM e_old)
    ON CONFLICT (fingerprint) DO NOTHING RETURNING id),
e AS (SELECT id FROM e_old UNION ALL SELECT id FROM e_new),
c_old AS (
    SELECT "commit".id, "commit".committed_at FROM "commit" JOIN p ON "commit".project_id = p.id
    WHERE "commit".sha = %(sha)s::varchar),
c_new AS (
    INSERT INTO "commit" (project_id, sha, committed_at)
    SELECT p.id, %(sha)s::varchar, %(committed_at)s::timestamptz FROM p, e
    WHERE %(sha)s::varchar IS NOT NULL AND NOT EXISTS (SELECT FROM c_old)
    ON CONFLICT (project_id, sha) DO NOTHING RETURNING id),
c AS (SELECT id FROM c_old UNION ALL SELECT id FROM c_new),
r AS (
    INSERT INTO run (project_id, benchmark_id, environment_id, commit_id, branch, base_branch,
                     merge_base, pr_number, ci_provider, ci_run_id, ci_run_attempt, ci_url,
                     repeats, created_at, idempotency_key)
    SELECT p.id, b.id, e.id, (SELECT id FROM c), %(branch)s::varchar,
           %(base_branch)s::varchar, %(merge_base)s::varchar, %(pr_number)s::int4,
           %(ci_provider)s::varchar, %(ci_run_id)s::varchar, %(ci_run_attempt)s::int4,
           %(ci_url)s::text, %(repeats)s::int4, %(created_at)s::timestamptz, %(key)s::varchar
    FROM p, b, e
    WHERE %(sha)s::varchar IS NULL OR EXISTS (SELECT FROM c)
    ON CONFLICT (project_id, benchmark_id, idempotency_key) DO NOTHING RETURNING id),
c_time AS (
    -- A commit first seen without its time (a bare --commit) gets it from a later run.
    UPDATE "commit" SET committed_at = %(committed_at)s::timestamptz
    FROM c_old
    WHERE "commit".id = c_old.id AND c_old.committed_at IS NULL
      AND %(committed_at)s::timestamptz IS NOT NULL),
f AS (
    INSERT INTO profile (run_id, repeat, label, format, source, steps, metadata)
    SELECT r.id, x.repeat, x.label, x.format, x.source, x.steps, x.metadata
    FROM r, json_to_recordset(%(profiles)s::json) AS x(
        repeat int4, label varchar, format varchar, source text, steps int4, metadata json))
SELECT (SELECT id FROM p), (SELECT id FROM b), (SELECT id FROM e), (SELECT id FROM c),
       (SELECT id FROM r),
       (SELECT series_ids FROM series_set
        WHERE benchmark_id = (SELECT id FROM b) AND list_hash = %(list_hash)s::varchar
          AND EXISTS (SELECT FROM r))
"""
_PG_RESOLVE_TRIES = 3


def _resolve_postgres(session: Session, *, context: RunContext, benchmark: str,
                      prepared: _Prepared, key: str, created_at: datetime,
                      list_hash: str) -> _Resolved:
    params = {
        "project": context.project, "benchmark": benchmark,
        "fingerprint": fingerprint_hash(context.environment),
        "environment": json.dumps(dict(context.environment)),
        "sha": context.commit or None, "committed_at": _parse_time(context.commit_time),
        "branch": context.branch, "base_branch": context.base_branch,
        "merge_base": context.merge_base, "pr_number": context.pr_number,
        "ci_provider": context.ci_provider, "ci_run_id": context.ci_run_id,
        "ci_run_attempt": context.ci_run_attempt, "ci_url": context.ci_url,
        "repeats": prepared.repeats, "created_at": _utc(created_at), "key": key,
        "profiles": json.dumps([{"repeat": repeat, "label": p.label[:255], "format": p.format,
                                 "source": p.source, "steps": p.steps, "metadata": p.metadata}
                                for repeat, p in prepared.profiles]),
        "list_hash": list_hash,
    }
    with _bulk.driver_cursor(session, _PG_RESOLVE) as cursor:
        for _ in range(_PG_RESOLVE_TRIES):
            cursor.execute(_PG_RESOLVE, params, binary=True)
            project_id, benchmark_id, environment_id, commit_id, run_id, packed_ids = (
                cursor.fetchone())
            if None in (project_id, benchmark_id, environment_id) or (
                    params["sha"] is not None and commit_id is None):
                continue  # lost a race to create one of them: run again, it is visible now
            if run_id is None:
                return None
            return run_id, benchmark_id, (None if packed_ids is None
                                          else unpack_series_ids(packed_ids))
    raise StorageError(f"could not resolve the project, benchmark, environment and commit of "
                       f"the run of {benchmark!r}: they kept being created concurrently")


def _utc(value: datetime) -> datetime:
    return value.astimezone(UTC) if value.tzinfo else value.replace(tzinfo=UTC)


def _resolve_generic(session: Session, *, context: RunContext, benchmark: str,
                     prepared: _Prepared, key: str, created_at: datetime,
                     list_hash: str) -> _Resolved:
    """Ids, get-or-create, one statement each (SQLite: in-process, statements are cheap)."""
    project_id = _get_or_create(session, Project, {"name": context.project},
                                {"created_at": created_at})
    benchmark_id = _get_or_create(session, Benchmark,
                                  {"project_id": project_id, "name": benchmark}, {})
    environment_id = _get_or_create(session, Environment,
                                    {"fingerprint": fingerprint_hash(context.environment)},
                                    {"values": dict(context.environment),
                                     "created_at": created_at})
    commit_id = _commit_id(session, project_id, context)
    run_id = _insert_run(session, context, project_id=project_id, benchmark_id=benchmark_id,
                         environment_id=environment_id, commit_id=commit_id, key=key,
                         repeats=prepared.repeats, created_at=created_at)
    if run_id is None:
        return None
    _insert_profiles(session, run_id, prepared.profiles)
    table = _table(SeriesSet)
    packed_ids = session.execute(select(table.c.series_ids).where(
        table.c.benchmark_id == benchmark_id, table.c.list_hash == list_hash)).scalar()
    return run_id, benchmark_id, None if packed_ids is None else unpack_series_ids(packed_ids)


def _get_or_create(session: Session, model: Any, match: dict[str, Any],
                   extra: dict[str, Any]) -> int:
    """The id of the row matching ``match``, inserting it (race-safe) when absent."""
    table = _table(model)
    query = select(table.c.id).where(*(table.c[k] == v for k, v in match.items()))
    found = session.execute(query).scalar()
    if found is None:
        _bulk.insert_rows_ignore(session, table, [{**match, **extra}], list(match))
        found = session.execute(query).scalar_one()
    return int(found)


def _commit_id(session: Session, project_id: int, context: RunContext) -> int | None:
    if not context.commit:
        return None
    committed_at = _parse_time(context.commit_time)
    table = _table(Commit)
    query = select(table.c.id, table.c.committed_at).where(table.c.project_id == project_id,
                                                           table.c.sha == context.commit)
    found = session.execute(query).first()
    if found is None:
        _bulk.insert_rows_ignore(session, table, [{"project_id": project_id,
                                                   "sha": context.commit,
                                                   "committed_at": committed_at}],
                                 ["project_id", "sha"])
        found = session.execute(query).one()
    if found.committed_at is None and committed_at is not None:
        # A commit first seen without its time (a bare --commit) gets it from a later run.
        session.execute(update(table).where(table.c.id == found.id,
                                            table.c.committed_at.is_(None))
                        .values(committed_at=committed_at))
    return int(found.id)


def _parse_time(value: str | None) -> datetime | None:
    if not value:
        return None
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        raise ConfigError(f"commit time {value!r} is not an ISO 8601 date") from None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def _insert_run(session: Session, context: RunContext, *, key: str, **ids: Any) -> int | None:
    values = dict(ids, branch=context.branch, base_branch=context.base_branch,
                  merge_base=context.merge_base, pr_number=context.pr_number,
                  ci_provider=context.ci_provider, ci_run_id=context.ci_run_id,
                  ci_run_attempt=context.ci_run_attempt, ci_url=context.ci_url,
                  idempotency_key=key)
    statement = _bulk.insert_ignore(session, _table(Run),
                                    ["project_id", "benchmark_id", "idempotency_key"])
    run_id = session.execute(statement.values(**values).returning(Run.id)).scalar()
    return None if run_id is None else int(run_id)


def _create_series(session: Session, benchmark_id: int,
                   new: list[tuple[str, SeriesParts]]) -> dict[str, int]:
    """Insert the benchmark's new series (race-safe) and return their ids by key hash.

    In the order of the run, so that later runs, listing their metrics alike, COPY their
    samples in primary key order (cheaper index inserts). On PostgreSQL, ingests creating
    series of one benchmark take turns (a transaction-scoped advisory lock): two of them
    inserting overlapping new series in different orders would otherwise deadlock.
    """
    if session.get_bind().dialect.name == "postgresql":
        session.execute(select(func.pg_advisory_xact_lock(_SERIES_LOCK, benchmark_id)))
    rows = [dict(zip(_SERIES_FIELDS, parts, strict=True), benchmark_id=benchmark_id,
                 key_hash=key_hash) for key_hash, parts in new]
    _bulk.insert_rows_ignore(session, _table(Series), rows, ["benchmark_id", "key_hash"])
    return _lookup_series(session, benchmark_id, [key_hash for key_hash, _ in new])


_SERIES_LOCK = 0x7065_7266  # "perf": the advisory lock class of series creation


def _lookup_series(session: Session, benchmark_id: int, hashes: list[str]) -> dict[str, int]:
    found: dict[str, int] = {}
    for start in range(0, len(hashes), _LOOKUP_CHUNK):
        chunk = hashes[start:start + _LOOKUP_CHUNK]
        table = _table(Series)
        query = select(table.c.key_hash, table.c.id).where(
            table.c.benchmark_id == benchmark_id,
            _bulk.in_values(session, table.c.key_hash, chunk))
        found.update(session.execute(query).all())
    return found


def _insert_profiles(session: Session, run_id: int,
                     profiles: Iterable[tuple[int, Profile]]) -> None:
    rows = [{"run_id": run_id, "repeat": repeat, "label": p.label[:255], "format": p.format,
             "source": p.source, "steps": p.steps, "metadata": p.metadata}
            for repeat, p in profiles]
    session.execute(_table(ProfileRow).insert(), rows)


def _find_run(session: Session, project: str, benchmark: str, key: str) -> int | None:
    query = (select(Run.id).join(Project, Project.id == Run.project_id)
             .join(Benchmark, Benchmark.id == Run.benchmark_id)
             .where(Project.name == project, Benchmark.name == benchmark,
                    Run.idempotency_key == key))
    found = session.execute(query).scalar()
    return None if found is None else int(found)


def _existing_result(session: Session, run_id: int, prepared: _Prepared) -> IngestResult:
    """The stored run's result, or :class:`RunConflict` when its numbers are not ``prepared``'s.

    Read only on a retry (rare), so it compares every number: a retried CI job that measured
    again under the same run id and attempt must not be dropped silently (issue 13).
    """
    stored = _stored_values(session, run_id)
    mine = {(key_hash, repeat): values
            for key_hash, cell in zip(_hashes(list(prepared.cells)), prepared.cells.values(),
                                      strict=True)
            for repeat, values in _cell_values(cell)}
    if stored != mine:
        if stored.keys() == mine.keys():
            what = f"{sum(stored[k] != mine[k] for k in mine)} of {len(mine)} samples differ"
        else:
            what = "other metrics or repeats"
        raise RunConflict(
            f"run {run_id} is already stored under this run's key (same CI run id and "
            f"attempt, or Idempotency-Key) with different data ({what}): nothing was "
            f"written. Re-run with a new CI attempt, or delete run {run_id} first "
            f"(perfci runs delete {run_id})", run_id=run_id)
    series = len({key_hash for key_hash, _ in stored})
    return IngestResult(run_id=run_id, created=False, series=series, samples=len(stored))


def _stored_values(session: Session, run_id: int) -> dict[tuple[str, int], Values]:
    """Every number of run ``run_id`` by (series key hash, repeat)."""
    columns = [Sample.value, Sample.calls, Sample.total_ns, Sample.self_ns, Sample.avg_ns,
               Sample.min_ns, Sample.max_ns, Sample.std_ns, Sample.median_ns, Sample.bytes]
    query = (select(Series.key_hash, Sample.repeat, *columns)
             .join(Series, Series.id == Sample.series_id).where(Sample.run_id == run_id))
    return {(key_hash, repeat): tuple(values)
            for key_hash, repeat, *values in session.execute(query)}



def _table(model: Any) -> Table:
    """The Core table of an ORM model (typed as the ``Table`` it always is here)."""
    return cast(Table, model.__table__)
