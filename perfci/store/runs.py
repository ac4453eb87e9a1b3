"""Write a prepared run: its ids, its series, its samples — the store's half of an ingest.

:func:`write_run` is the one entry: it resolves (or creates) the project, benchmark,
environment, commit and run (:mod:`perfci.store.run_resolve`), finds or creates the run's
series (:mod:`perfci.store.run_series`), and writes its samples in bulk (binary COPY on
PostgreSQL). It never commits: the use case that called it owns the transaction, and adds the
run's comparison to it.

A run is stored once per key: when the key is already there, the stored run is returned
(``created=False``) if it holds the same numbers, else :class:`~perfci.core.errors.RunConflict`.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import select
from sqlalchemy.orm import Session

from perfci.core.allocation import no_cycle_collection
from perfci.core.errors import RunConflict, StorageError
from perfci.core.model import RunContext
from perfci.store import _bulk, partitions
from perfci.store.prepared import PreparedRun, RowCheck, Values, cell_values
from perfci.store.prepared import sample_rows as _sample_rows
from perfci.store.run_resolve import NewRun, resolve_generic, resolve_postgres
from perfci.store.run_resolve import table_of as _table
from perfci.store.run_series import key_hashes, series_ids_of
from perfci.store.schema import (
    Benchmark,
    Commit,
    Project,
    Run,
    Sample,
    SampleSummary,
    Series,
    SeriesSet,
    pack_series_ids,
    series_list_hash,
)


@dataclass(frozen=True, slots=True)
class IngestResult:
    """What an ingest stored: ``created`` is False when the run was already there."""

    run_id: int
    created: bool
    series: int
    samples: int


@no_cycle_collection()
def write_run(
    session: Session,
    *,
    context: RunContext,
    benchmark: str,
    prepared: PreparedRun,
    key: str,
    created_at: datetime,
    check_rows: RowCheck | None = None,
) -> IngestResult:
    """Write ``prepared`` as the run ``key`` of ``benchmark`` in the session's transaction.

    Nothing is committed or rolled back here: the caller owns the transaction.

    Parameters
    ----------
    session
        The unit of work the run is written in.
    context
        Project, commit, branch, CI ids and the environment fingerprint of the run.
    benchmark
        The benchmark's name within the project.
    prepared
        The run's series and metrics, checked (:func:`perfci.usecases.submit.prepare.check_values`)
        or with ``check_rows`` for the numbers of its sample rows.
    key
        The run's idempotency key, unique per project and benchmark.
    created_at
        When the run was made.
    check_rows
        The sample rows pass through it on their way to the database; what it raises ends the
        write (the caller rolls back). Not called when no row is written (the run was stored
        already).

    Returns
    -------
    IngestResult
        The run's id and counts; ``created`` is False when ``key`` was stored already.

    Raises
    ------
    sqlalchemy.exc.IntegrityError
        A concurrent ingest of the same key committed first (:func:`stored_run` answers).
    RunConflict
        ``key`` is stored with other numbers.
    ConfigError
        The context's commit time is not an ISO 8601 date.
    """
    # No cyclic collections (the decorator): an ingest allocates thousands of short-lived,
    # acyclic objects while the caller's parsed profiles are alive, and collections meanwhile
    # walk (and promote) all of them, a large share of the ingest's Python time. Refcounting
    # frees the garbage.
    keys = list(prepared.cells)
    hashes = key_hashes(keys)
    run = NewRun(context, benchmark, prepared, key, created_at, series_list_hash(hashes))
    resolve = (
        resolve_postgres if session.get_bind().dialect.name == "postgresql" else resolve_generic
    )
    found = resolve(session, run)
    if found is None:  # the run is already stored
        existing = _find_run(session, context.project, benchmark, key)
        assert existing is not None  # the conflicting row is visible once the insert returns
        return _existing_result(session, existing, prepared, context)
    run_id, benchmark_id, series_ids = found
    if series_ids is None:
        # A list of series not seen before in this benchmark: each series by its key.
        series_ids = series_ids_of(session, benchmark_id, prepared, hashes)
        _bulk.insert_rows_ignore(
            session,
            _table(SeriesSet),
            [
                {
                    "benchmark_id": benchmark_id,
                    "list_hash": run.list_hash,
                    "series_ids": pack_series_ids(series_ids),
                }
            ],
            ["benchmark_id", "list_hash"],
        )
    if prepared.samples:
        run_day = partitions.day_number(created_at)
        rows = _sample_rows(prepared, run_id, series_ids, run_day)
        _bulk.write_samples(session, rows if check_rows is None else check_rows(rows))
    return IngestResult(run_id=run_id, created=True, series=len(keys), samples=prepared.samples)


def stored_run(
    session: Session,
    *,
    context: RunContext,
    benchmark: str,
    key: str,
    prepared: PreparedRun,
) -> IngestResult | None:
    """The run stored under ``key`` as an ingest's result, ``None`` when there is none.

    Raises :class:`~perfci.core.errors.RunConflict` when its numbers are not ``prepared``'s, or it
    was stored for another commit, branch, pull request or CI run than ``context``'s.
    """
    project = context.project
    existing = _find_run(session, project, benchmark, key)
    if existing is None:
        return None
    return _existing_result(session, existing, prepared, context)


def storage_error(
    benchmark: str, prepared: PreparedRun, reason: str, shown: int = 3
) -> StorageError:
    """The error of a failed ingest, naming the run's files (the first few, then how many more)."""
    sources = list(dict.fromkeys(p.source or p.label for _, p in prepared.profiles))
    more = len(sources) - shown
    files = ", ".join(sources[:shown]) + (f" and {more} more" if more > 0 else "")
    return StorageError(f"could not store the run of {benchmark!r} ({files}): {reason}")


def _find_run(session: Session, project: str, benchmark: str, key: str) -> int | None:
    query = (
        select(Run.id)
        .join(Project, Project.id == Run.project_id)
        .join(Benchmark, Benchmark.id == Run.benchmark_id)
        .where(Project.name == project, Benchmark.name == benchmark, Run.idempotency_key == key)
    )
    found = session.execute(query).scalar()
    return None if found is None else int(found)


#: What a retry must share with the stored run, besides its numbers: a key reused for another
#: commit, branch, pull request or CI run is another run (issue 31), not a retry.
_IDENTITY = ("commit", "branch", "base_branch", "pr_number", "ci_run_id", "ci_run_attempt")


def _existing_result(
    session: Session, run_id: int, prepared: PreparedRun, context: RunContext
) -> IngestResult:
    """The stored run's result, or :class:`RunConflict` when its numbers are not ``prepared``'s
    or it was stored for another commit, branch, pull request or CI run than ``context``'s.

    Read only on a retry (rare), so it compares every number: a retried CI job that measured
    again under the same run id and attempt must not be dropped silently (issue 13).
    """
    _check_identity(session, run_id, context)
    if session.execute(select(Run.pruned_at).where(Run.id == run_id)).scalar() is not None:
        return _existing_pruned(session, run_id, prepared)
    stored = _stored_values(session, run_id)
    mine = {
        (key_hash, repeat): values
        for key_hash, cell in zip(
            key_hashes(list(prepared.cells)), prepared.cells.values(), strict=True
        )
        for repeat, values in cell_values(cell)
    }
    if stored.keys() != mine.keys() or not all(_same_numbers(stored[k], mine[k]) for k in mine):
        if stored.keys() == mine.keys():
            differ = sum(not _same_numbers(stored[k], mine[k]) for k in mine)
            what = f"{differ} of {len(mine)} samples differ"
        else:
            what = "other metrics or repeats"
        raise RunConflict(
            f"run {run_id} is already stored under this run's key (same CI run id and "
            f"attempt, or Idempotency-Key) with different data ({what}): nothing was "
            f"written. Re-run with a new CI attempt, or delete run {run_id} first "
            f"(perfci runs delete {run_id})",
            run_id=run_id,
        )
    series = len({key_hash for key_hash, _ in stored})
    return IngestResult(run_id=run_id, created=False, series=series, samples=len(stored))


def _check_identity(session: Session, run_id: int, context: RunContext) -> None:
    query = (
        select(
            Commit.sha,
            Run.branch,
            Run.base_branch,
            Run.pr_number,
            Run.ci_run_id,
            Run.ci_run_attempt,
        )
        .outerjoin(Commit, Commit.id == Run.commit_id)
        .where(Run.id == run_id)
    )
    stored = dict(zip(_IDENTITY, session.execute(query).one(), strict=True))
    differ = [
        f"{name} {_shown(stored[name])}, not {_shown(getattr(context, name))}"
        for name in _IDENTITY
        if _same(stored[name]) != _same(getattr(context, name))
    ]
    if differ:
        raise RunConflict(
            f"run {run_id} is already stored under this run's key (same CI run id and "
            f"attempt, or Idempotency-Key) for another run: {'; '.join(differ)}. Nothing was "
            "written; send this run with its own Idempotency-Key (or CI run id)",
            run_id=run_id,
        )


def _same(value: object) -> object:
    return None if value == "" else value


def _shown(value: object) -> str:
    return "none" if _same(value) is None else repr(value)


def _existing_pruned(session: Session, run_id: int, prepared: PreparedRun) -> IngestResult:
    """:func:`_existing_result` for a pruned run: only its summaries are left to compare.

    The median and count of each series' values are what ``sample_summary`` kept; the same
    numbers computed from ``prepared`` (as :mod:`perfci.store.retention` computes them)
    must match, else the retry carries other numbers.
    """
    query = (
        select(Series.key_hash, SampleSummary.median, SampleSummary.count)
        .join(Series, Series.id == SampleSummary.series_id)
        .where(SampleSummary.run_id == run_id)
    )
    stored = {key_hash: (median, count) for key_hash, median, count in session.execute(query)}
    mine = {}
    hashes = key_hashes(list(prepared.cells))
    for key_hash, cell in zip(hashes, prepared.cells.values(), strict=True):
        values = [v.value for _, v in cell_values(cell) if v.value is not None]
        if values:
            mine[key_hash] = (statistics.median(values), len(values))
    if stored != mine:
        raise RunConflict(
            f"run {run_id} is already stored under this run's key (same CI run id and "
            f"attempt, or Idempotency-Key), pruned to one summary per series, and this run's "
            f"numbers do not match those summaries: nothing was written. Re-run with a new CI "
            f"attempt, or delete run {run_id} first (perfci runs delete {run_id})",
            run_id=run_id,
        )
    count = sum(n for _, n in stored.values())
    return IngestResult(run_id=run_id, created=False, series=len(stored), samples=count)


def _same_numbers(stored: Values, mine: Values) -> bool:
    """Whether a stored sample holds ``mine``'s numbers. A sample stored before revision 0007
    has no fastest-step value: the rest must match."""
    if stored.fastest is None:
        return stored[:-1] == mine[:-1]
    return stored == mine


def _stored_values(session: Session, run_id: int) -> dict[tuple[str, int], Values]:
    """Every number of run ``run_id`` by (series key hash, repeat)."""
    columns = [
        Sample.value,
        Sample.calls,
        Sample.total_ns,
        Sample.self_ns,
        Sample.avg_ns,
        Sample.min_ns,
        Sample.max_ns,
        Sample.std_ns,
        Sample.median_ns,
        Sample.bytes,
        Sample.fastest,
    ]
    query = (
        select(Series.key_hash, Sample.repeat, *columns)
        .join(Series, Series.id == Sample.series_id)
        .where(Sample.run_id == run_id)
    )
    return {
        (key_hash, repeat): Values(*values) for key_hash, repeat, *values in session.execute(query)
    }
