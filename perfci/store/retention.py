"""Retention (issue 17): old runs' raw samples rolled up into one summary per series.

A run older than the retention period loses its per-repeat ``sample`` rows and keeps one
``sample_summary`` row per series: the median of its repeats' values (computed exactly as
``statistics.median`` does, so per-run medians — what weekly reports, charts and change points
read — are the same numbers after the prune), their spread (max − min) and count. Base-branch
runs (pushes to a branch the ``base_branches`` patterns name, such as ``main``, ``master`` and
``release/*``, or to a branch that pull requests target) may keep their raw samples longer than
the others.

Pruning goes by whole calendar months, the partitions of ``sample`` on PostgreSQL:

- a month whose every run is past its period is rolled up and its partition **dropped**;
- a month past the period of other runs but not of base-branch runs has its other runs rolled
  up and its partition **rewritten** with the base-branch runs' rows alone (a new table swapped
  in: deleting rows would leave the space inside the partition, which is never written again);
- on SQLite, the rolled up runs' rows are deleted (the use case vacuums the file afterwards).

Each month is one transaction (:func:`prune_month`, uncommitted here): the summaries appear,
the runs are marked (``run.pruned_at``) and the samples go at once, so a reader finds every run
in one table or the other. The month's partition is locked against writes first (an ingest of
an old run into it waits), and the swap of partitions waits at most :data:`LOCK_TIMEOUT_S` for
readers of ``sample`` to finish.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from fnmatch import fnmatchcase
from typing import Any, Literal, cast

from sqlalchemy import func, select, text, update
from sqlalchemy.engine import CursorResult, Engine, Result
from sqlalchemy.orm import Session

from perfci.store.partitions import PARTITION_SCHEMA, Month, Partition, list_partitions
from perfci.store.samples import delete_run_arrays
from perfci.store.schema import SAMPLE_COLUMNS, Run, SampleSummary

#: Seconds the partition swap waits for its lock on ``sample`` before giving up (the month
#: is then left as it was, for the next prune).
LOCK_TIMEOUT_S = 10

Scope = Literal["all", "not-base"]
_PRUNE_LOCK = 0x7072_756E  # "prun": the advisory lock class of a month's prune


@dataclass(frozen=True, slots=True)
class Policy:
    """How long raw samples are kept: ``keep`` for every run, ``keep_base`` (when longer)
    for base-branch runs. ``base_branches`` are glob patterns (``release/*``, as
    :func:`fnmatch.fnmatchcase` reads them) of base branches besides those that pull
    requests name as theirs (``run.base_branch``, matched as they are)."""

    keep: timedelta
    keep_base: timedelta | None = None
    base_branches: tuple[str, ...] = ("main", "master", "release/*")

    def is_base(self, branch: str | None, targets: Collection[str] = ()) -> bool:
        """Whether ``branch`` is a base branch: a pattern's, or one of ``targets``."""
        return branch is not None and (
            branch in targets or any(fnmatchcase(branch, p) for p in self.base_branches)
        )

    def cutoffs(self, now: datetime) -> tuple[datetime, datetime]:
        """(cutoff of other runs, cutoff of base-branch runs): older runs are rolled up."""
        cutoff = now - self.keep
        base = now - self.keep_base if self.keep_base and self.keep_base > self.keep else cutoff
        return cutoff, base


@dataclass(frozen=True, slots=True)
class MonthPlan:
    """A month to prune: every run (``all``) or the runs not on a base branch."""

    month: Month
    scope: Scope


@dataclass(slots=True)
class MonthResult:
    """What pruning one month did (or, in a dry run, would do)."""

    month: Month
    scope: Scope
    runs: int = 0  # runs rolled up
    kept_runs: int = 0  # base-branch runs whose raw samples stay
    summaries: int = 0  # summary rows written
    samples: int = 0  # raw sample rows removed
    bytes_before: int | None = None  # the month's partition (PostgreSQL)
    bytes_after: int | None = None
    action: str = ""  # "dropped", "rewritten", "deleted", "nothing to do"
    notes: list[str] = field(default_factory=list)


def plan(session: Session, policy: Policy, now: datetime) -> list[MonthPlan]:
    """The months past the retention period, oldest first, with what goes in each."""
    cutoff, base_cutoff = policy.cutoffs(now)
    months = set(_run_months(session, cutoff))
    months.update(p.month for p in list_partitions(session) if p.month is not None)
    found = []
    for month in sorted(months):
        if month.end > cutoff:
            continue  # a month is pruned whole, once all of it is past the period
        found.append(MonthPlan(month, "all" if month.end <= base_cutoff else "not-base"))
    return found


def prune_month(
    session: Session, month_plan: MonthPlan, policy: Policy, now: datetime, *, dry_run: bool = False
) -> MonthResult:
    """Roll up and remove the raw samples of one month's runs, in the session's transaction.

    The caller commits (or, for ``dry_run``, which changes nothing, ends the transaction).
    """
    month, scope = month_plan.month, month_plan.scope
    postgres = session.get_bind().dialect.name == "postgresql"
    if postgres and not dry_run:
        # Two prunes at once (a cron job and an operator) take turns, month by month: the
        # second then finds the month done, not a partition dropped under it.
        hold_prunes(session)
    partition = _partition(session, month) if postgres else None
    if partition is not None and not dry_run:
        # No ingest of an old run may add rows between the roll-up and the drop.
        session.execute(text(f"LOCK TABLE {_qualified(partition)} IN SHARE MODE"))
    runs, kept = _month_runs(session, month, scope, policy)
    result = MonthResult(month, scope, runs=len(runs), kept_runs=len(kept))
    if partition is not None:
        result.bytes_before = partition.bytes
    if not runs and (partition is None or kept):
        result.action = "nothing to do"
        result.bytes_after = result.bytes_before
        return result
    result.action = _action(partition, kept, postgres)
    if dry_run:
        result.samples = _count_samples(session, month, runs, partition, whole=not kept)
        return result
    # The whole partition's rows belong to the month's unpruned runs: no need to name them.
    whole = postgres and not kept
    result.summaries = _roll_up(session, month, None if whole else runs, postgres)
    _mark_pruned(session, runs, now)
    delete_run_arrays(session, runs)  # derived from the rows that go now
    if not postgres:
        result.samples = _delete_samples(session, runs)
        return result
    result.samples = _rolled_up_values(session, runs)
    if partition is None:
        return result
    session.execute(text(f"SET LOCAL lock_timeout = '{LOCK_TIMEOUT_S}s'"))
    if kept:
        result.bytes_after = _rewrite(session, partition, kept)
    else:
        session.execute(text(f"DROP TABLE {_qualified(partition)}"))
        result.bytes_after = 0
    return result


def hold_prunes(session: Session) -> None:
    """Make prunes wait until the session's transaction ends (PostgreSQL): what a prune and
    a writer of run arrays (:mod:`perfci.store.arrays_backfill`) take turns on."""
    session.execute(text("SELECT pg_advisory_xact_lock(:c, 0)"), {"c": _PRUNE_LOCK})


def _action(partition: Partition | None, kept: list[int], postgres: bool) -> str:
    if not postgres:
        return "deleted"
    if partition is None:
        return "marked"  # runs without samples: nothing to remove
    return "rewritten" if kept else "dropped"


def sample_bytes(session: Session) -> tuple[int, int]:
    """(bytes of ``sample``, bytes of ``sample_summary``) with their indexes.

    PostgreSQL: the partitions' and the summary table's sizes. SQLite: the pages of each
    table and its indexes (``dbstat``), or the whole file's pages when that is unavailable.
    """
    if session.get_bind().dialect.name == "postgresql":
        raw = sum(p.bytes for p in list_partitions(session))
        summary = session.execute(
            text("SELECT pg_total_relation_size('sample_summary')")
        ).scalar_one()
        return int(raw), int(summary)
    return _sqlite_table_bytes(session, "sample"), _sqlite_table_bytes(session, "sample_summary")


# --- the month's runs ---------------------------------------------------------------------


def _run_months(session: Session, cutoff: datetime) -> Iterable[Month]:
    """The months of runs stored before ``cutoff`` that still have their raw samples."""
    query = select(Run.created_at).where(Run.pruned_at.is_(None), Run.created_at < cutoff)
    return {Month.of(moment) for moment in session.execute(query).scalars()}


def _targets(session: Session) -> set[str]:
    """The branches pull requests name as their base."""
    query = select(Run.base_branch).where(Run.base_branch.is_not(None)).distinct()
    return {str(b) for b in session.execute(query).scalars()}


def _month_runs(
    session: Session, month: Month, scope: Scope, policy: Policy
) -> tuple[list[int], list[int]]:
    """(runs of ``month`` to roll up, unpruned base-branch runs of it that stay)."""
    query = (
        select(Run.id, Run.branch, Run.pr_number)
        .where(Run.pruned_at.is_(None), Run.created_at >= month.start, Run.created_at < month.end)
        .order_by(Run.id)
    )
    rows = session.execute(query).all()
    if scope == "all":
        return [int(r[0]) for r in rows], []
    go: list[int] = []
    stay: list[int] = []
    targets = _targets(session)
    for run_id, branch, pr_number in rows:
        base = pr_number is None and policy.is_base(branch, targets)
        (stay if base else go).append(int(run_id))
    return go, stay


def _partition(session: Session, month: Month) -> Partition | None:
    return next((p for p in list_partitions(session) if p.month == month), None)


def _qualified(partition: Partition) -> str:
    return f"{PARTITION_SCHEMA}.{partition.name}"


# --- the work -------------------------------------------------------------------------------

# The median as statistics.median computes it: the middle value, or the mean of the two
# middle ones (AVG of two doubles is their sum over two on both databases). A run holding a
# bad value (negative, infinite, NaN: stored by a perfci older than issue 13's checks) keeps
# that value as its median, so that readers leave the run out exactly as they did.
_ROLL_UP = """
INSERT INTO sample_summary (run_id, series_id, median, spread, count)
SELECT run_id, series_id,
       CASE WHEN MIN(value) < 0 THEN MIN(value)
            WHEN MAX(value) >= {inf} THEN MAX(value)
            ELSE AVG(CASE WHEN rn = (n + 1) / 2 OR rn = (n + 2) / 2 THEN value END) END,
       CASE WHEN MIN(value) < 0 OR MAX(value) >= {inf} THEN 0
            ELSE MAX(value) - MIN(value) END,
       COUNT(*)
FROM (SELECT run_id, series_id, value,
             ROW_NUMBER() OVER (PARTITION BY run_id, series_id ORDER BY value) AS rn,
             COUNT(*) OVER (PARTITION BY run_id, series_id) AS n
      FROM sample WHERE value IS NOT NULL AND {where}) AS ranked
GROUP BY run_id, series_id
"""


def _roll_up(session: Session, month: Month, runs: list[int] | None, postgres: bool) -> int:
    """Write the summaries of ``runs`` (every run of the month when ``None``); how many."""
    if postgres:
        where = _pg_month(month)
        params: dict[str, Any] = {}
        if runs is not None:
            where += " AND run_id = ANY(:ids)"
            params["ids"] = runs
        # The window sort of a month's samples: in memory rather than in temporary files.
        session.execute(text("SET LOCAL work_mem = '256MB'"))
        statement = _ROLL_UP.format(inf="'Infinity'::float8", where=where)
    else:
        statement = _ROLL_UP.format(inf="9e999", where=_SQLITE_RUNS)
        params = {"ids": json.dumps(runs or [])}
    return _rowcount(session.execute(text(statement), params))


_SQLITE_RUNS = "run_id IN (SELECT value FROM json_each(:ids))"


def _pg_month(month: Month) -> str:
    return f"run_day >= {month.first_day} AND run_day < {month.end_day}"


def _mark_pruned(session: Session, runs: list[int], now: datetime) -> None:
    for start in range(0, len(runs), _CHUNK):
        chunk = runs[start : start + _CHUNK]
        session.execute(update(Run).where(Run.id.in_(chunk)).values(pruned_at=now))


_CHUNK = 5000  # ids per IN (...) list: well under SQLite's 32,766 parameters


def _rolled_up_values(session: Session, runs: list[int]) -> int:
    """How many per-repeat values the summaries of ``runs`` stand for."""
    total = 0
    for start in range(0, len(runs), _CHUNK):
        chunk = runs[start : start + _CHUNK]
        query = select(func.coalesce(func.sum(SampleSummary.count), 0)).where(
            SampleSummary.run_id.in_(chunk)
        )
        total += int(session.execute(query).scalar_one())
    return total


def _count_samples(
    session: Session, month: Month, runs: list[int], partition: Partition | None, *, whole: bool
) -> int:
    """The raw samples of ``runs`` (a dry run's count): the whole partition's estimate when
    every row of it goes (a count of a month of samples reads all of them)."""
    if partition is not None and whole and partition.rows is not None:
        return partition.rows
    if not runs:
        return 0
    if partition is not None:
        statement = f"SELECT count(*) FROM sample WHERE {_pg_month(month)} AND run_id = ANY(:ids)"
        params: dict[str, Any] = {"ids": runs}
    else:
        statement = f"SELECT count(*) FROM sample WHERE {_SQLITE_RUNS}"
        params = {"ids": json.dumps(runs)}
    return int(session.execute(text(statement), params).scalar_one())


def _delete_samples(session: Session, runs: list[int]) -> int:
    return _rowcount(
        session.execute(text(f"DELETE FROM sample WHERE {_SQLITE_RUNS}"), {"ids": json.dumps(runs)})
    )


def _rowcount(result: Result[Any]) -> int:
    return int(cast(CursorResult[Any], result).rowcount or 0)


def _rewrite(session: Session, partition: Partition, kept: list[int]) -> int:
    """Swap ``partition`` for a new table holding the rows of the ``kept`` runs alone; its
    size in bytes."""
    old, name = _qualified(partition), partition.name
    new = f"{PARTITION_SCHEMA}.{name}_keep"
    columns = ", ".join(SAMPLE_COLUMNS)
    bounds = f"FROM ({partition.first_day}) TO ({partition.end_day})"
    for statement in (
        f"CREATE TABLE {new} (LIKE sample INCLUDING DEFAULTS)",
        f"INSERT INTO {new} ({columns}) SELECT {columns} FROM {old} "
        f"WHERE run_id = ANY(:ids) ORDER BY run_id, series_id, repeat",
        # The key built once after the copy, and the bounds proven by a constraint, so that
        # attaching scans nothing.
        f"ALTER TABLE {new} ADD CONSTRAINT {name}_keep_pkey "
        f"PRIMARY KEY (run_id, series_id, repeat, run_day)",
        f"ALTER TABLE {new} ADD CONSTRAINT {name}_keep_bounds CHECK "
        f"(run_day >= {partition.first_day} AND run_day < {partition.end_day})",
        f"ALTER TABLE sample DETACH PARTITION {old}",
        f"DROP TABLE {old}",
        f"ALTER TABLE sample ATTACH PARTITION {new} FOR VALUES {bounds}",
        f"ALTER TABLE {new} DROP CONSTRAINT {name}_keep_bounds",
        f"ALTER TABLE {new} RENAME TO {name}",
        f"ALTER TABLE {old} RENAME CONSTRAINT {name}_keep_pkey TO {name}_pkey",
    ):
        session.execute(text(statement), {"ids": kept} if ":ids" in statement else {})
    size = session.execute(text("SELECT pg_total_relation_size(:t)"), {"t": old}).scalar_one()
    return int(size)


def _sqlite_table_bytes(session: Session, table: str) -> int:
    try:
        found = session.execute(
            text(
                "SELECT coalesce(sum(pgsize), 0) FROM dbstat WHERE name = :t OR name IN "
                "(SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = :t)"
            ),
            {"t": table},
        ).scalar_one()
    except Exception:  # noqa: BLE001 - SQLite built without dbstat: the whole file instead
        found = session.execute(
            text("SELECT page_count * page_size FROM pragma_page_count(), pragma_page_size()")
        ).scalar_one()
    return int(found)


def vacuum_sqlite(engine: Engine) -> None:
    """Give the pages a prune freed back to the file system: SQLite keeps them otherwise.

    VACUUM rewrites the file and cannot run inside a transaction: a connection of its own,
    in the autocommit mode perfci's SQLite connections are in outside SQLAlchemy's
    transactions.
    """
    connection = engine.raw_connection()
    try:
        cursor = connection.cursor()
        cursor.execute("VACUUM")
        cursor.close()
    finally:
        connection.close()
