"""Keeping the arrays of runs stored without them (``perfci db arrays``, issue 35).

An upload keeps its run's values as a ``run_arrays`` row in the transaction that stores the
run (:func:`perfci.store.samples.keep_run_arrays`). Runs stored otherwise (``perfci ingest``,
``perfci import``, or before revision 0010) have none, and comparisons read them from their
``sample`` rows, a row at a time. This gives them theirs, in batches, each one transaction:

1. :func:`runs_without_arrays`: the next batch of unpruned runs without a row;
2. :func:`hold_runs`: of those, the ones still stored and unpruned, held until the end of the
   transaction: on PostgreSQL a prune waits for it (the prune's advisory lock), and so does a
   delete of one of them (the rows are locked ``FOR SHARE``; ``perfci runs delete`` locks its
   run before removing its arrays);
3. :func:`perfci.store.samples.arrays_from_rows`: their values, read as an upload reads them;
4. :func:`add_run_arrays`: their rows, each written only if its run is still there and
   unpruned at that moment (SQLite's reads take no lock: a prune may have committed since).

So a run's arrays never outlive its samples, as the upload's never do.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, cast

from sqlalchemy import text
from sqlalchemy.engine import CursorResult
from sqlalchemy.orm import Session

from perfci.store.retention import hold_prunes
from perfci.store.samples import RunValues, arrays_row

__all__ = ["add_run_arrays", "count_runs_without_arrays", "hold_runs", "runs_without_arrays"]

_WITHOUT = (
    "FROM run LEFT JOIN run_arrays ON run_arrays.run_id = run.id "
    "WHERE run.pruned_at IS NULL AND run_arrays.run_id IS NULL"
)


def count_runs_without_arrays(session: Session) -> int:
    """How many unpruned runs have no ``run_arrays`` row."""
    return int(session.execute(text(f"SELECT count(*) {_WITHOUT}")).scalar_one())


def runs_without_arrays(session: Session, *, after: int, limit: int) -> list[int]:
    """The ids above ``after`` of unpruned runs without a ``run_arrays`` row: the ``limit``
    lowest, ascending."""
    query = text(f"SELECT run.id {_WITHOUT} AND run.id > :after ORDER BY run.id LIMIT :limit")
    return [int(run_id) for (run_id,) in session.execute(query, {"after": after, "limit": limit})]


def hold_runs(session: Session, run_ids: Sequence[int]) -> list[int]:
    """Of ``run_ids``, those still stored and unpruned, ascending; on PostgreSQL held against
    prunes and deletes until the transaction ends (module doc)."""
    if not run_ids:
        return []
    postgres = session.get_bind().dialect.name == "postgresql"
    if postgres:
        hold_prunes(session)
    ids = ", ".join(str(int(run_id)) for run_id in run_ids)  # ints: formatted, not bound
    lock = " FOR SHARE" if postgres else ""
    query = text(f"SELECT id FROM run WHERE id IN ({ids}) AND pruned_at IS NULL ORDER BY id{lock}")
    return [int(run_id) for (run_id,) in session.execute(query)]


# Written only where the run is still there and unpruned, checked by the insert itself (one
# statement: on SQLite no other writer can come between the check and the row).
_INSERT = text(
    "INSERT INTO run_arrays (run_id, series_ids, value, fastest) "
    "SELECT :run_id, :series_ids, :value, :fastest "
    "WHERE EXISTS (SELECT 1 FROM run WHERE id = :run_id AND pruned_at IS NULL) "
    "ON CONFLICT (run_id) DO NOTHING"
)


def add_run_arrays(session: Session, arrays: Mapping[int, RunValues]) -> int:
    """Write each run's ``run_arrays`` row (:func:`~perfci.store.samples.arrays_row`) where
    the run is still stored and unpruned; how many were written."""
    written = 0
    for run_id, values in sorted(arrays.items()):
        result = session.execute(_INSERT, arrays_row(run_id, values))
        written += int(cast(CursorResult[Any], result).rowcount or 0)
    return written
