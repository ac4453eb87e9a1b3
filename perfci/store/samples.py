"""Reading the stored values of runs: every series of a set of runs, or one series of them.

Samples are read through :func:`_value_rows` (issue 17): a run's per-repeat values from
``sample`` while it has them, else the one summary value (``sample_summary.median``) that
``perfci db prune`` kept of them. On PostgreSQL the reads of ``sample`` name the month of each
run (``run_day`` ranges, one arm per month), so that they touch only those months' partitions
whatever the size of the table. Every series of a run that an upload stored is read from its
``run_arrays`` row instead, one row a run (issue 35): :func:`keep_run_arrays` writes it in the
upload's transaction, from the values the upload's comparison read back.
"""

from __future__ import annotations

import heapq
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from operator import itemgetter
from typing import Any

import numpy as np
from numpy.typing import NDArray
from sqlalchemy import delete
from sqlalchemy.orm import Session

from perfci.core.allocation import no_cycle_collection
from perfci.core.model import Better, Device, MetricKind, SeriesKey
from perfci.store import _bulk
from perfci.store.partitions import Month, day_number
from perfci.store.run_resolve import table_of
from perfci.store.schema import RunArrays


@dataclass(frozen=True, slots=True)
class CheckedSamples:
    """:func:`run_samples_checked`'s answer: the samples, and the runs left out of them."""

    samples: dict[SeriesKey, dict[int, list[float]]]
    #: Runs holding a value that is not a finite, non-negative number (stored by a perfci
    #: older than issue 13's checks), ascending; none of their values is in ``samples``.
    skipped: list[int] = field(default_factory=list)
    #: Runs read from their summaries (pruned, issue 17), ascending: one value per series,
    #: the median of the repeats they had.
    summarised: list[int] = field(default_factory=list)
    #: Per series that has them somewhere: run id → each repeat's time on its fastest
    #: profiled step (``None`` where that run's repeat has none: stored before revision 0007,
    #: or pruned), in the same order as ``samples``.
    fastest: dict[SeriesKey, dict[int, list[float | None]]] = field(default_factory=dict)
    #: The values of the run ``arrays_of`` names, as :func:`keep_run_arrays` stores them: when
    #: it was read from its ``sample`` rows (not from stored arrays, a summary or a bad value).
    arrays: RunValues | None = None


@dataclass(frozen=True, slots=True)
class RunValues:
    """Of each sample with a value in (run, series, repeat) order: its run, series, value and
    fastest-step value (NaN where it has none; ``None`` when no sample has one)."""

    runs: NDArray[np.int64]
    series: NDArray[np.int64]
    values: NDArray[np.float64]
    fastest: NDArray[np.float64] | None

    def __len__(self) -> int:
        return len(self.values)

    def taken(self, keep: NDArray[np.bool_] | NDArray[np.intp]) -> RunValues:
        """The samples that ``keep`` (a mask or indices) selects, in its order."""
        fastest = None if self.fastest is None else self.fastest[keep]
        return RunValues(self.runs[keep], self.series[keep], self.values[keep], fastest)


def run_samples(
    session: Session, run_ids: Sequence[int]
) -> dict[SeriesKey, dict[int, list[float]]]:
    """Per series: run id → that run's per-step values in repeat order.

    Runs appear in ascending id order; samples without a time (bytes only) are left out, and
    so are runs holding a bad value (see :func:`run_samples_checked`, which says which). A
    pruned run has one value per series: the median of its repeats.
    """
    return run_samples_checked(session, run_ids).samples


def run_samples_checked(
    session: Session,
    run_ids: Sequence[int],
    *,
    series_ids: Sequence[int] | None = None,
    arrays_of: int | None = None,
) -> CheckedSamples:
    """:func:`run_samples`, and which runs were left out for a bad stored value.

    ``series_ids`` keeps those series only (a long history's step times, without the kernels
    behind them): then only their values are checked, and every run is read from its rows.
    ``arrays_of``: a run whose values to return as :func:`keep_run_arrays` stores them, when
    it has no stored arrays (:attr:`CheckedSamples.arrays`).

    A run stored before values were checked at ingest may hold a negative, infinite or NaN
    value; one such run must not break every later comparison or chart of its benchmark
    (issue 13), so the whole run is left out (its other values are suspect too) and named.
    This is the baseline query (30 runs × 1,000 series): each run's stored arrays where it
    has them (``run_arrays``, one row a run), else its rows as plain driver tuples with one
    parameter for all ids (an ``IN`` list would be a new statement for every baseline); one
    vectorised check of the values, and the values grouped in one pass in (run, series,
    repeat) order.
    """
    ids = sorted(set(run_ids))
    if not ids:
        return CheckedSamples({})
    postgres = session.get_bind().dialect.name == "postgresql"
    with _bulk.driver_cursor(session) as cursor, no_cycle_collection():
        stored = {} if series_ids is not None else _stored_arrays(cursor, ids, postgres=postgres)
        rest = [run_id for run_id in ids if run_id not in stored]
        found = (
            _value_rows(cursor, rest, postgres=postgres, series_ids=series_ids)
            if rest
            else _Values([], [])
        )
        table = _in_order(_from_rows(found.rows), *stored.values())
        table, skipped = _drop_bad_runs(table)
        grouped, fastest_ids = _group_samples(table)
        if not grouped:
            return CheckedSamples({}, skipped, found.summarised)
        keys = _series_keys(cursor, list(grouped), postgres=postgres)
    samples = {keys[series_id]: per_run for series_id, per_run in grouped.items()}
    fastest = {keys[series_id]: per_run for series_id, per_run in fastest_ids.items()}
    arrays = None
    if arrays_of in rest and arrays_of not in found.summarised and arrays_of not in skipped:
        arrays = table.taken(table.runs == arrays_of)
    return CheckedSamples(samples, skipped, found.summarised, fastest, arrays)


def keep_run_arrays(session: Session, run_id: int, values: RunValues) -> None:
    """Store ``values`` (:attr:`CheckedSamples.arrays` of run ``run_id``) as the run's
    ``run_arrays`` row, in the session's transaction: the one that stored the run."""
    _bulk.insert_rows_ignore(session, table_of(RunArrays), [arrays_row(run_id, values)], ["run_id"])


def arrays_row(run_id: int, values: RunValues) -> dict[str, Any]:
    """The ``run_arrays`` row of run ``run_id`` holding ``values``."""
    fastest = values.fastest
    if fastest is not None and np.isnan(fastest).all():
        fastest = None
    return {
        "run_id": run_id,
        "series_ids": values.series.astype(_SERIES_DTYPE).tobytes(),
        "value": values.values.astype(_VALUE_DTYPE).tobytes(),
        "fastest": None if fastest is None else fastest.astype(_VALUE_DTYPE).tobytes(),
    }


def arrays_from_rows(session: Session, run_ids: Sequence[int]) -> dict[int, RunValues]:
    """Of ``run_ids``, each run's values as :func:`keep_run_arrays` stores them, read from its
    ``sample`` rows as an upload's comparison reads them: for runs stored without arrays
    (``perfci ingest``, ``perfci import``, or before revision 0010). None for a run pruned
    (its summaries are no per-repeat values) or holding a bad value; a run without a value
    gets empty arrays, as an upload of it would have."""
    ids = sorted(set(run_ids))
    if not ids:
        return {}
    postgres = session.get_bind().dialect.name == "postgresql"
    with _bulk.driver_cursor(session) as cursor, no_cycle_collection():
        found = _value_rows(cursor, ids, postgres=postgres)
    table, skipped = _drop_bad_runs(_from_rows(found.rows))
    left_out = {*found.summarised, *skipped}
    starts = np.searchsorted(table.runs, ids, side="left")
    stops = np.searchsorted(table.runs, ids, side="right")
    return {
        run_id: table.taken(np.arange(start, stop))
        for run_id, start, stop in zip(ids, starts.tolist(), stops.tolist(), strict=True)
        if run_id not in left_out
    }


def delete_run_arrays(session: Session, run_ids: Sequence[int]) -> None:
    """Remove the stored arrays of ``run_ids``: their ``sample`` rows are going."""
    table = table_of(RunArrays)
    for start in range(0, len(run_ids), _ID_CHUNK):
        chunk = list(run_ids[start : start + _ID_CHUNK])
        session.execute(delete(table).where(table.c.run_id.in_(chunk)))


_ID_CHUNK = 5000  # ids per IN (...) list: well under SQLite's 32,766 parameters
#: How ``run_arrays`` holds its numbers: the same bytes on every platform.
_SERIES_DTYPE = np.dtype("<i4")
_VALUE_DTYPE = np.dtype("<f8")


def _stored_arrays(cursor: Any, run_ids: list[int], *, postgres: bool) -> dict[int, RunValues]:
    """The values of those of ``run_ids`` with a ``run_arrays`` row, each run's in (series,
    repeat) order: the order its rows were read in when they were kept."""
    if postgres:
        cursor.execute(_PG_ARRAYS, (run_ids,), binary=True)
    else:
        cursor.execute(_SQLITE_ARRAYS, (json.dumps(run_ids),))
    found = {}
    for run_id, series_bytes, value_bytes, fastest_bytes in cursor.fetchall():
        series = np.frombuffer(series_bytes, dtype=_SERIES_DTYPE).astype(np.int64)
        # Copied only where the machine's floats are not little-endian.
        values = np.frombuffer(value_bytes, dtype=_VALUE_DTYPE).astype(np.float64, copy=False)
        fastest = (
            None
            if fastest_bytes is None
            else np.frombuffer(fastest_bytes, dtype=_VALUE_DTYPE).astype(np.float64, copy=False)
        )
        runs = np.full(len(series), run_id, dtype=np.int64)
        found[int(run_id)] = RunValues(runs, series, values, fastest)
    return found


def _from_rows(rows: Sequence[tuple[int, int, float, float | None]]) -> RunValues:
    count = len(rows)
    quickest = list(map(itemgetter(3), rows))
    return RunValues(
        np.fromiter(map(itemgetter(0), rows), dtype=np.int64, count=count),
        np.fromiter(map(itemgetter(1), rows), dtype=np.int64, count=count),
        np.fromiter(map(itemgetter(2), rows), dtype=np.float64, count=count),
        None if quickest.count(None) == count else np.array(quickest, dtype=np.float64),
    )


def _in_order(*parts: RunValues) -> RunValues:
    """``parts`` (each in (run, series, repeat) order, of runs no other part has) as one, in
    that order."""
    kept = [part for part in parts if len(part)]
    if len(kept) == 1:
        return kept[0]
    if not kept:
        return parts[0]
    fastest = None
    if any(part.fastest is not None for part in kept):
        fastest = np.concatenate(
            [np.full(len(p), np.nan) if p.fastest is None else p.fastest for p in kept]
        )
    joined = RunValues(
        np.concatenate([p.runs for p in kept]),
        np.concatenate([p.series for p in kept]),
        np.concatenate([p.values for p in kept]),
        fastest,
    )
    return joined.taken(np.argsort(joined.runs, kind="stable"))


def _series_keys(cursor: Any, series_ids: list[int], *, postgres: bool) -> dict[int, SeriesKey]:
    if postgres:
        cursor.execute(_PG_SERIES, (series_ids,), binary=True)
    else:
        cursor.execute(_SQLITE_SERIES, (json.dumps(series_ids),))
    return {
        series_id: SeriesKey(
            kind=_KINDS[kind],
            name=name,
            device=_DEVICES[device],
            scope=scope,
            section=section,
            unit=unit,
            better=_BETTER[better],
        )
        for series_id, kind, name, device, scope, section, unit, better in cursor.fetchall()
    }


def series_values(
    session: Session, series_id: int, created: Mapping[int, datetime]
) -> dict[int, list[float]]:
    """Run id → the values of series ``series_id`` in that run (repeat order; a pruned run's
    median alone), for the runs of ``created`` (run id → its ``created_at``) that have one."""
    if not created:
        return {}
    postgres = session.get_bind().dialect.name == "postgresql"
    with _bulk.driver_cursor(session) as cursor:
        found = _value_rows(
            cursor, sorted(created), postgres=postgres, series_ids=[series_id], created=created
        )
    values: dict[int, list[float]] = {}
    for run_id, _, value, _fastest in found.rows:
        values.setdefault(run_id, []).append(value)
    return values


@dataclass(frozen=True, slots=True)
class _Values:
    """(run, series, value, fastest) rows in (run, series, repeat) order, and the runs
    summarised."""

    rows: list[tuple[int, int, float, float | None]]
    summarised: list[int]


def _value_rows(
    cursor: Any,
    run_ids: list[int],
    *,
    postgres: bool,
    series_ids: Sequence[int] | None = None,
    created: Mapping[int, datetime] | None = None,
) -> _Values:
    """The values of ``run_ids`` (ascending), raw samples and summaries of pruned runs.

    ``series_ids`` keeps those series; ``created`` (run id → ``created_at``), when the caller
    has it, spares PostgreSQL's lookup of the runs' months. A run has samples or summaries,
    never both (the prune swaps them in one transaction), so the two reads merge without
    duplicates, and a run being pruned meanwhile is found in one or the other.
    """
    # Literal ids (ints, formatted here): a handful at most, and the statement's parameters
    # stay those of every other read.
    one = "" if series_ids is None else f" AND series_id IN ({_id_list(series_ids)})"
    if postgres:
        arms = _month_arms(cursor, run_ids, created)
        raw: list[tuple[int, int, float, float | None]] = []
        if arms:
            sql, params = _pg_samples(arms, one)
            cursor.execute(sql, params, binary=True)
            raw = cursor.fetchall()
        cursor.execute(_PG_SUMMARIES.format(one), (run_ids,), binary=True)
    else:
        cursor.execute(_SQLITE_SAMPLES.format(one), (json.dumps(run_ids),))
        raw = cursor.fetchall()
        cursor.execute(_SQLITE_SUMMARIES.format(one), (json.dumps(run_ids),))
    summaries = cursor.fetchall()
    if not summaries:  # the common case: every run still has its samples
        return _Values(raw, [])
    merged = list(heapq.merge(raw, summaries, key=itemgetter(0, 1)))
    return _Values(merged, sorted({row[0] for row in summaries}))


def _id_list(ids: Sequence[int]) -> str:
    """``1, 2, 3``; ``NULL`` for none (``IN (NULL)`` keeps no row)."""
    return ", ".join(str(int(i)) for i in ids) or "NULL"


def _month_arms(
    cursor: Any, run_ids: list[int], created: Mapping[int, datetime] | None
) -> list[tuple[Month, list[int]]]:
    """The runs grouped by the month of their samples' partition, oldest first."""
    if created is None:
        cursor.execute(_PG_RUN_TIMES, (run_ids,), binary=True)
        created = dict(cursor.fetchall())
    by_month: dict[Month, list[int]] = {}
    for run_id in run_ids:
        moment = created.get(run_id)
        if moment is not None:
            by_month.setdefault(Month.of_day(day_number(moment)), []).append(run_id)
    return sorted(by_month.items())


def _pg_samples(arms: list[tuple[Month, list[int]]], one: str) -> tuple[str, list[list[int]]]:
    """The samples of each month's runs, each arm on its month's partition alone.

    The month bounds are literals (numbers computed here), so the planner prunes at plan
    time; each arm probes only its own runs' ids, where one ``run_id = ANY(all ids)`` would
    probe every month's index with every id.
    """
    selects = [
        _PG_SAMPLES_ARM.format(lo=month.first_day, hi=month.end_day, one=one) for month, _ in arms
    ]
    params = [ids for _, ids in arms]
    if len(selects) == 1:
        return selects[0].replace(", repeat", "", 1) + _ORDER, params
    union = " UNION ALL ".join(selects)
    return f"SELECT run_id, series_id, value, fastest FROM ({union}) AS s{_ORDER}", params


def _drop_bad_runs(table: RunValues) -> tuple[RunValues, list[int]]:
    """``table`` without the runs holding a value that is not finite and non-negative."""
    values = table.values
    bad = ~(values >= 0) | np.isinf(values)  # NaN fails ">= 0"
    if not bad.any():
        return table, []
    skipped = sorted(int(run_id) for run_id in np.unique(table.runs[bad]))
    return table.taken(~np.isin(table.runs, skipped)), skipped


# Primary key order: SQLite reads it straight off the key (ordering by series first costs a
# sort there), PostgreSQL sorts nearly sorted rows.
_ORDER = " ORDER BY run_id, series_id, repeat"
_PG_SAMPLES_ARM = (
    "SELECT run_id, series_id, repeat, value, fastest FROM sample "
    "WHERE run_day >= {lo} AND run_day < {hi} AND run_id = ANY(%s::int4[]){one} "
    "AND value IS NOT NULL"
)
_PG_RUN_TIMES = "SELECT id, created_at FROM run WHERE id = ANY(%s::int4[])"
_SQLITE_SAMPLES = (
    "SELECT run_id, series_id, value, fastest FROM sample "
    "WHERE run_id IN (SELECT value FROM json_each(?)){} AND value IS NOT NULL" + _ORDER
)
_SUMMARIES = (
    "SELECT run_id, series_id, median, NULL FROM sample_summary WHERE run_id {}{{}} "
    "ORDER BY run_id, series_id"
)
_PG_SUMMARIES = _SUMMARIES.format("= ANY(%s::int4[])")
_SQLITE_SUMMARIES = _SUMMARIES.format("IN (SELECT value FROM json_each(?))")
_ARRAYS = "SELECT run_id, series_ids, value, fastest FROM run_arrays WHERE run_id {}"
_PG_ARRAYS = _ARRAYS.format("= ANY(%s::int4[])")
_SQLITE_ARRAYS = _ARRAYS.format("IN (SELECT value FROM json_each(?))")
_SERIES = "SELECT id, kind, name, device, scope, section, unit, better FROM series WHERE id {}"
_PG_SERIES = _SERIES.format("= ANY(%s::int4[])")
_SQLITE_SERIES = _SERIES.format("IN (SELECT value FROM json_each(?))")
_KINDS = {kind.value: kind for kind in MetricKind}  # MetricKind(value) is a slow call
_DEVICES = {device.value: device for device in Device}
_BETTER = {better.value: better for better in Better}


def _group_samples(
    table: RunValues,
) -> tuple[dict[int, dict[int, list[float]]], dict[int, dict[int, list[float | None]]]]:
    """Samples in (run, series, repeat) order → series → run → values by repeat; and the same
    of the fastest-step values, for the series that have any.

    The (run, series) groups' bounds are found in numpy and each group's values taken as one
    slice (issue 35: a 10,000-series baseline is 1.5 M samples, and a Python step per sample
    was a large share of a comparison); where every run has the same series and repeats (the
    usual baseline), all the lists are made at once from one array.
    """
    grouped: dict[int, dict[int, list[float]]] = {}
    fastest: dict[int, dict[int, list[float | None]]] = {}
    count = len(table)
    if not count:
        return grouped, fastest
    runs, series = table.runs, table.series
    changed = (runs[1:] != runs[:-1]) | (series[1:] != series[:-1])
    starts = np.concatenate(([0], np.flatnonzero(changed) + 1))
    group_runs, group_series = runs[starts], series[starts]
    quickest: list[float | None] = []
    if table.fastest is not None and not np.isnan(table.fastest).all():
        quickest = [None if v != v else v for v in table.fastest.tolist()]  # NaN: none
    alike = _alike_runs(table, starts, group_runs, group_series)
    if alike is not None:
        run_ids, series_ids, nested = alike
        grouped = {
            series_id: dict(zip(run_ids, lists, strict=True))
            for series_id, lists in zip(series_ids, nested, strict=True)
        }
    values = table.values.tolist() if alike is None else []
    if alike is None or quickest:
        bounds = [*starts.tolist(), count]
        for start, end, run_id, series_id in zip(
            bounds[:-1], bounds[1:], group_runs.tolist(), group_series.tolist(), strict=True
        ):
            if alike is None:
                per_run = grouped.get(series_id)
                if per_run is None:
                    per_run = grouped[series_id] = {}
                per_run[run_id] = values[start:end]
            if quickest and (quickest[start] is not None or series_id in fastest):
                fastest.setdefault(series_id, {})[run_id] = quickest[start:end]
    return grouped, {s: runs for s, runs in fastest.items() if _any_value(runs)}


def _alike_runs(
    table: RunValues,
    starts: NDArray[np.intp],
    run_of_group: NDArray[np.int64],
    heads: NDArray[np.int64],
) -> tuple[list[int], list[int], list[list[list[float]]]] | None:
    """When every run holds the same series with the same number of repeats each: the runs,
    the series and, per series, per run, its values; else ``None``. ``starts``: where each
    (run, series) group begins; ``run_of_group`` and ``heads``: its run and its series."""
    groups = len(starts)
    repeats = len(table) // groups
    if repeats * groups != len(table) or np.any(np.diff(starts) != repeats):
        return None
    per_run = int(np.count_nonzero(run_of_group == run_of_group[0]))
    if groups % per_run:
        return None
    shape = (groups // per_run, per_run)
    heads, owners = heads.reshape(shape), run_of_group.reshape(shape)
    # Each row one run's groups (a row could span two runs whose series add up alike), and
    # every run's series the first's.
    if not ((owners == owners[:, :1]).all() and (heads == heads[0]).all()):
        return None
    nested = table.values.reshape(*shape, repeats).transpose(1, 0, 2).tolist()
    return run_of_group[::per_run].tolist(), heads[0].tolist(), nested


def _any_value(runs: Mapping[int, list[float | None]]) -> bool:
    return any(v is not None for values in runs.values() for v in values)
