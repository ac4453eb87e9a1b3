"""``perfci db arrays``: give runs stored without them the arrays comparisons read (issue 35).

Runs stored by ``perfci ingest`` or ``perfci import``, and every run stored before revision
0010, have no ``run_arrays`` row, and every comparison that takes them as baseline runs reads
them from their ``sample`` rows (:mod:`perfci.store.samples`). :func:`keep_missing_arrays`
writes theirs, a batch of runs per transaction, safe beside uploads, prunes and deletes
(:mod:`perfci.store.arrays_backfill`); running it again goes on where it stopped.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from perfci.core.errors import ConfigError, DatabaseFailure, StorageError
from perfci.core.settings import get_settings, redact_url
from perfci.store import arrays_backfill
from perfci.store.db import open_store
from perfci.store.samples import arrays_from_rows
from perfci.store.work import unit_of_work

__all__ = ["ArraysReport", "keep_missing_arrays"]

#: Runs per transaction: a few seconds of work, so that a prune or a delete waits little.
DEFAULT_BATCH = 100


@dataclass(frozen=True, slots=True)
class ArraysReport:
    """What :func:`keep_missing_arrays` did: ``missing`` unpruned runs had no arrays; it wrote
    them for ``kept``, and left ``left_out`` without (a bad stored value, or pruned or
    deleted meanwhile). A dry run writes nothing."""

    url: str
    missing: int
    kept: int
    left_out: int
    dry_run: bool


def keep_missing_arrays(
    database_url: str | None,
    *,
    batch: int = DEFAULT_BATCH,
    dry_run: bool = False,
    progress: Callable[[int, int], None] | None = None,
) -> ArraysReport:
    """Write the ``run_arrays`` rows of every unpruned run without one, ``batch`` runs per
    transaction; ``progress(done, missing)`` after each batch.

    Raises
    ------
    ConfigError
        ``batch`` is not a positive number.
    StorageError
        The database failed; the batches before are kept, and running it again goes on.
    """
    if batch < 1:
        raise ConfigError(f"--batch must be at least 1, got {batch}")
    store = open_store(get_settings({"database_url": database_url}))
    kept = left_out = done = 0
    try:
        with store.sessions() as session:
            missing = arrays_backfill.count_runs_without_arrays(session)
        after = 0
        while not dry_run:
            with store.sessions() as session, unit_of_work(session):
                ids = arrays_backfill.runs_without_arrays(session, after=after, limit=batch)
                if not ids:
                    break
                held = arrays_backfill.hold_runs(session, ids)
                written = arrays_backfill.add_run_arrays(session, arrays_from_rows(session, held))
            kept += written
            left_out += len(ids) - written
            done += len(ids)
            after = ids[-1]
            if progress is not None:
                progress(done, missing)
    except DatabaseFailure as exc:
        raise StorageError(
            f"could not keep the runs' arrays: {exc.reason}; the {kept} runs given theirs "
            "keep them, and running it again goes on from there"
        ) from exc
    finally:
        store.close()
    return ArraysReport(
        url=redact_url(store.url), missing=missing, kept=kept, left_out=left_out, dry_run=dry_run
    )
