"""A run ready to write: its series keyed, the metrics behind each, and the numbers it stores.

The use case builds a :class:`PreparedRun` from parsed profiles
(:mod:`perfci.usecases.submit.ingest`); :func:`perfci.store.runs.write_run` writes it, its rows
passing through the use case's check (:data:`RowCheck`) on their way. The sample numbers are
computed here, once, for the checks, the run's content key and the rows.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any, NamedTuple

from perfci.analysis.values import compared_value, fastest_value
from perfci.core.model import Metric, Profile, SeriesParts
from perfci.store._bulk import SampleRow as SampleRow  # re-exported: the type of the rows made here


class Values(NamedTuple):
    """The numbers one sample stores, in the ``sample`` table's column order after its keys.

    A tuple, so that ``(run_id, series_id, repeat, run_day) + values`` is a sample row as it is.
    """

    value: float | None  # the compared value: per-step ns, or the value in its unit
    calls: int | None
    total_ns: float | None
    self_ns: float | None
    avg_ns: float | None
    min_ns: float | None
    max_ns: float | None
    std_ns: float | None
    median_ns: float | None
    bytes: float | None
    fastest: float | None  # the fastest profiled step's time, where per-step totals exist


_new_values = tuple.__new__

#: Passes the sample rows on to be written, checking them on the way: what it raises ends the
#: write, and the caller rolls the run back.
RowCheck = Callable[[Iterator[SampleRow]], Iterable[SampleRow]]


# Where one sample's numbers come from: (repeat, metric, the profile's steps). A series appearing
# twice in one repeat (a stats table listing one API twice) has consecutive cells of that
# repeat, summed.
Cell = tuple[int, Metric, int | None]


@dataclass(frozen=True, slots=True)
class PreparedRun:
    """The run's series, keyed and checked before any SQL, with the metrics behind each.

    The numbers themselves are computed as the rows are written (:func:`sample_rows`): on
    PostgreSQL that is while the server is busy with the COPY's earlier rows, for free.
    """

    cells: dict[SeriesParts, list[Cell]]  # distinct series in first-seen order
    samples: int  # rows to write: distinct (series, repeat) pairs
    merges: bool  # some series appears twice in one repeat: its cells are summed
    profiles: list[tuple[int, Profile]]
    repeats: int


def values_of(metric: Metric, steps: int | None) -> Values:
    """The stored numbers of ``metric`` in a profile of ``steps`` steps."""
    # tuple.__new__ directly: a NamedTuple's own __new__ is a Python function, and this runs
    # once per sample when the run's content is hashed (no CI run id).
    return _new_values(
        Values,
        (
            compared_value(metric, steps),
            metric.calls,
            metric.total_ns,
            metric.self_ns,
            metric.avg_ns,
            metric.min_ns,
            metric.max_ns,
            metric.std_ns,
            metric.median_ns,
            metric.bytes,
            fastest_value(metric),
        ),
    )


def cell_values(cell: list[Cell]) -> list[tuple[int, Values]]:
    """The numbers of each repeat of one series, in repeat order, duplicates summed."""
    out: list[tuple[int, Values]] = []
    for repeat, metric, steps in cell:
        values = values_of(metric, steps)
        if out and out[-1][0] == repeat:
            out[-1] = (repeat, merge_values(out[-1][1], values))
        else:
            out.append((repeat, values))
    return out


def merge_values(a: Values, b: Values) -> Values:
    """One series listed twice in a repeat: times, calls and bytes add, extremes combine.

    The spread, the median and the fastest step of the union cannot be told from the parts:
    they are dropped.
    """

    def add(x: Any, y: Any) -> Any:
        return None if x is None and y is None else (x or 0) + (y or 0)

    def pick(f: Any, x: Any, y: Any) -> Any:
        return x if y is None else y if x is None else f(x, y)

    total = add(a.total_ns, b.total_ns)
    calls = add(a.calls, b.calls)
    avg = total / calls if total is not None and calls else None
    return Values(
        add(a.value, b.value),
        calls,
        total,
        add(a.self_ns, b.self_ns),
        avg,
        pick(min, a.min_ns, b.min_ns),
        pick(max, a.max_ns, b.max_ns),
        None,
        None,
        add(a.bytes, b.bytes),
        None,
    )


def sample_rows(
    prepared: PreparedRun, run_id: int, series_ids: list[int], run_day: int
) -> Iterator[SampleRow]:
    """The run's sample rows in primary key order for its series (series, then repeat).

    ``run_day`` is the run's day (:func:`perfci.store.partitions.day_number`), the same in
    every row: the partition key on PostgreSQL.
    """
    cells = zip(prepared.cells.values(), series_ids, strict=True)
    if prepared.merges:
        for cell, series_id in cells:
            for repeat, values in cell_values(cell):
                # `(ids) + values`, not `(ids, *values)`: the unpacking goes through a list.
                yield (run_id, series_id, repeat, run_day) + values  # noqa: RUF005
        return
    # Each cell its own sample: the common case, the same numbers as values_of, inlined
    # (this loop runs once per stored sample, and a NamedTuple per row would cost more).
    for cell, series_id in cells:
        for repeat, m, steps in cell:
            yield (
                run_id,
                series_id,
                repeat,
                run_day,
                compared_value(m, steps),
                m.calls,
                m.total_ns,
                m.self_ns,
                m.avg_ns,
                m.min_ns,
                m.max_ns,
                m.std_ns,
                m.median_ns,
                m.bytes,
                fastest_value(m),
            )
