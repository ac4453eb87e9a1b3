"""A run's profiles keyed by series and checked, with no SQL: what the store writes.

Every value must be finite and non-negative (:func:`check_values`). An ingest checks them as its
sample rows are written (:func:`checks_while_written`); a bad value rolls the transaction
back, so bad input writes nothing (:mod:`perfci.usecases.submit.ingest`).
"""

from __future__ import annotations

import math
import operator
from collections.abc import Iterator, Sequence
from functools import partial
from itertools import chain, islice

import numpy as np

from perfci.analysis.values import compared_value
from perfci.core.errors import ConfigError, InvalidValue
from perfci.core.limits import MAX_VALUE
from perfci.core.model import KEY_SEPARATOR, Metric, MetricKind, Profile, SeriesParts
from perfci.core.storable import unstorable
from perfci.store.prepared import Cell, PreparedRun, RowCheck, SampleRow, cell_values


def prepare_run(repeats: Sequence[Sequence[Profile]]) -> PreparedRun:
    """Key the metrics of ``repeats`` by series, no SQL: what
    :func:`perfci.store.runs.write_run` writes.

    Raises
    ------
    ConfigError
        No repeats, an empty repeat, two profiles labelled alike in one repeat, or a metric's
        name, scope or profile label holding :data:`~perfci.core.model.KEY_SEPARATOR`, or
        one of those or its unit holding NUL or a lone surrogate.
    """
    if not repeats:
        raise ConfigError("a run needs at least one repeat")
    cells: dict[SeriesParts, list[Cell]] = {}
    profiles: list[tuple[int, Profile]] = []
    samples = metrics = 0
    for index, repeat in enumerate(repeats):
        if not repeat:
            raise ConfigError(f"repeat {index + 1} has no profiles")
        labels = [p.label for p in repeat]
        if len(repeat) > 1 and len(set(labels)) != len(labels):
            raise ConfigError(
                f"repeat {index + 1} has several profiles labelled alike "
                f"({', '.join(labels)}); their metrics would collide"
            )
        for profile in repeat:
            profiles.append((index, profile))
            samples += _add_profile(cells, index, profile, profile.label if len(repeat) > 1 else "")
            metrics += len(profile.metrics)
    if not cells:
        raise ConfigError(_nothing_to_store(profiles))
    _check_key_parts(cells)
    return PreparedRun(
        cells=cells,
        samples=samples,
        merges=metrics != samples,
        profiles=profiles,
        repeats=len(repeats),
    )


def _check_key_parts(cells: dict[SeriesParts, list[Cell]]) -> None:
    """Refuse a series whose key or unit holds what no series may: one scan of all the keys'
    text (3 ms for a 10,000-kernel run, most of it joining the keys).

    - The separator its parts are digested with: it could digest like another series of the
      run (a database error at the write) or of its benchmark's history (its values filed
      under that series).
    - NUL or half of a surrogate pair, which no store keeps in a text (PostgreSQL refused the
      write; SQLite's driver cannot encode a lone surrogate, which a JSON profile can hold as
      an escape). Unlike a profile's metadata (:mod:`perfci.store.json_text`), a series' name
      is what its values are filed under: it is not rewritten.
    """
    keys = "".join(chain.from_iterable(cells))
    # The unit a new series keeps: its first metric's.
    units = "".join(map(_UNIT, map(_METRIC, map(_FIRST, cells.values()))))
    if KEY_SEPARATOR in keys:
        raise ConfigError(
            f"{_series_named(next(p for p in cells if any(KEY_SEPARATOR in x for x in p)))}: "
            "holds the control character U+001F (unit separator), which perfci keeps to "
            "separate a series' name from its scope and profile label; remove it and upload "
            "again"
        )
    if unstorable(keys) is None and unstorable(units) is None:
        return
    for parts, cell in cells.items():  # the slow path: name the first
        unit = cell[0][1].unit
        where, bad = "it", unstorable("".join(parts))
        if bad is None:
            where, bad = f"its unit {unit!r}", unstorable(unit)
        if bad is not None:
            raise ConfigError(
                f"{_series_named(parts)}: {where} holds {bad}, which perfci cannot store; the "
                "profile is damaged or was not written as text"
            )


_FIRST, _METRIC, _UNIT = operator.itemgetter(0), operator.itemgetter(1), operator.attrgetter("unit")


def _series_named(parts: SeriesParts) -> str:
    """A series by its kind and name, with its scope and profile label where it has them."""
    kind, _, scope, section, name = parts
    where = "".join(
        f", {what} {value!r}" for what, value in (("scope", scope), ("profile", section)) if value
    )
    return f"{kind} {name!r}{where}"


def _nothing_to_store(profiles: Sequence[tuple[int, Profile]]) -> str:
    """Why a run of profiles without a single metric is refused: a run with nothing in it
    would only stand in the history as an empty baseline run."""
    sources = ", ".join(dict.fromkeys(p.source or p.label for _, p in profiles))
    why = next((w for _, p in profiles for w in p.warnings), "")
    return f"no metrics in {sources}: nothing to store" + (f" ({why})" if why else "")


# A metric's stored numbers: each a time in ns, a count or a size, so finite and non-negative.
_NUMBER_FIELDS = (
    "total_ns",
    "calls",
    "self_ns",
    "avg_ns",
    "min_ns",
    "max_ns",
    "std_ns",
    "median_ns",
    "bytes",
)
_VALUE_NAMES = ("value (per step)", *_NUMBER_FIELDS)
_numbers_of = operator.attrgetter(*_NUMBER_FIELDS)
_samples_ns_of = operator.attrgetter("samples_ns")
_samples_of = operator.attrgetter("samples")
_step_totals_of = operator.attrgetter("step_totals_ns")
_value_of = operator.attrgetter("value")


def check_values(prepared: PreparedRun) -> None:
    """Refuse a run holding a number that is not finite and non-negative, before any SQL.

    Every number perfci stores is a time, a count or a size. A negative duration (clock skew
    between the host and the GPU timestamps) is refused with the metric named rather than
    clamped: a clamped 0 would pass as a real measurement and bend the baseline, while a
    refused upload is seen and fixed at its source. Derived numbers are checked too: the
    per-step value of a step metric (``[1.7e308, 1.7e308]`` averages to infinity), ``avg ×
    calls`` without a total, and the sums of a series listed twice in one repeat.

    One vectorised pass over the numbers; the search for the culprit, to name it, runs only
    when that pass fails. An ingest checks the same numbers as it writes them instead
    (:func:`checks_while_written`).

    Raises
    ------
    InvalidValue
        Naming the profile, the metric, the field and the value.
    """
    # The stored fields of every metric: the one per-value Python pass, kept to a bare
    # comprehension (numpy's own None handling measured slower).
    numbers = [
        v for _, p in prepared.profiles for m in p.metrics for v in _numbers_of(m) if v is not None
    ]
    # Every metric's per-instance numbers, whatever its kind: a `bench` or `measure` metric
    # carrying a total was once let through with negative samples, which its comparison
    # uses, and a pull request 2x slower passed (issue 31). Derived values: only step metrics
    # (means of samples) and metrics without a total (avg × calls) can come out worse than
    # the fields they are made of.
    numbers += _unstored_numbers(prepared)
    # The given numbers first: derived from valid ones, the others cannot overflow a float
    # (a 400-digit total divided by the steps would raise rather than be refused).
    _check_numbers(prepared, numbers)
    numbers = []
    for _, profile in prepared.profiles:
        for m in profile.metrics:
            if m.kind is MetricKind.STEP or m.total_ns is None:
                value = compared_value(m, profile.steps)
                if value is not None:
                    numbers.append(value)
    if prepared.merges:
        numbers += [
            v
            for cell in prepared.cells.values()
            if len(cell) > 1
            for _, values in cell_values(cell)
            for v in values
            if v is not None
        ]
    _check_numbers(prepared, numbers)


def checks_while_written(prepared: PreparedRun) -> RowCheck | None:
    """:func:`check_values` for an ingest, as the run's sample rows are written: the returned
    check passes the rows on, each chunk's numbers checked before it goes, and what the rows
    do not hold (steps, samples, per-step totals, values) after the last.

    The rows hold every stored field of each metric, its compared value and its fastest step,
    so checking them is checking those. Each check runs while the database stores the chunks
    before it, not before the first row is sent (``benchmarks/store_speed.py``). Whatever it
    raises rolls the ingest back, so bad input still writes nothing. A run with a series
    listed twice in one repeat is checked whole now (``None`` returned): its rows hold the
    sums, which can be in range while an entry is not.

    Raises
    ------
    InvalidValue
        As :func:`check_values`: now for a run with a series listed twice, else from the
        returned check.
    """
    if prepared.merges:
        check_values(prepared)
        return None
    return partial(_checked_rows, prepared)


def _unstored_numbers(prepared: PreparedRun) -> list[object]:
    """The numbers of ``prepared`` that no sample row holds as they are: the profiles' steps,
    and their metrics' :func:`_source_numbers`."""
    numbers: list[object] = [p.steps for _, p in prepared.profiles if p.steps is not None]
    for _, profile in prepared.profiles:
        numbers += _source_numbers(profile.metrics)
    return numbers


def _source_numbers(metrics: list[Metric]) -> list[object]:
    """Each metric's samples, per-step totals and value: what stored numbers derive from."""
    numbers: list[object] = []
    # filter(None, …) keeps the non-empty lists, in C: most metrics have none. Of the values
    # it leaves out the zeros too, which are valid, and an empty string, which is no stored
    # number (a non-time value is the compared value, checked as such).
    for getter in (_samples_ns_of, _samples_of, _step_totals_of):
        numbers += chain.from_iterable(filter(None, map(getter, metrics)))
    numbers += filter(None, map(_value_of, metrics))
    return numbers


#: Rows per checked chunk: small enough that the database starts on the first ones early,
#: large enough that a chunk's vectorised check costs little more than its numbers.
CHECKED_CHUNK = 4096


def _checked_rows(prepared: PreparedRun, rows: Iterator[SampleRow]) -> Iterator[SampleRow]:
    """``rows``, each chunk checked before any row of it comes out (the :data:`RowCheck` of
    :func:`checks_while_written`)."""
    return chain.from_iterable(_checked_chunks(prepared, rows))


def _checked_chunks(prepared: PreparedRun, rows: Iterator[SampleRow]) -> Iterator[list[SampleRow]]:
    while True:
        try:
            chunk = list(islice(rows, CHECKED_CHUNK))
        except ArithmeticError:  # a field too large for a float, divided by the steps
            raise _invalid_value(prepared) from None
        if not chunk:
            break
        # The numbers after the four keys (run, series, repeat, day: ours, not the upload's).
        # A slice per row costs less than the keys' conversions in numpy.
        _check_numbers(prepared, [v for row in chunk for v in row[4:] if v is not None])
        yield chunk
    # Last, while the database stores the last chunks. Rows built from such numbers hold an
    # infinity or a NaN (refused above), or overflowed (refused above), or are in range: a
    # bad number found only here is refused all the same, before the COPY ends.
    _check_numbers(prepared, _unstored_numbers(prepared))


def _check_numbers(prepared: PreparedRun, numbers: list[object]) -> None:
    if not _all_valid(numbers):
        raise _invalid_value(prepared)


def _all_valid(numbers: list[object]) -> bool:
    """Every one of ``numbers`` finite and within ``0 … MAX_VALUE``, in one vectorised pass."""
    try:
        array = np.array(numbers, dtype=np.float64)
    except (OverflowError, TypeError, ValueError):  # an int beyond any float, or not a number
        return False
    return bool(
        np.isfinite(array).all()
        and (array.size == 0 or (array.min() >= 0 and array.max() <= MAX_VALUE))
    )


#: Metrics per block that the search for a bad number checks at once before it looks at each.
_SEARCH_BLOCK = 1024


def _invalid_value(prepared: PreparedRun) -> InvalidValue:
    """The error naming the first bad number of ``prepared`` (the slow path of check_values).

    Blocks of metrics are checked vectorised and only a bad one is walked field by field: a
    walk of all of a 50,000-metric run took 90 ms of every refusal of a late bad value.
    """
    for repeat, profile in prepared.profiles:
        where = f"profile {profile.label!r} ({profile.source or 'upload'}, repeat {repeat + 1})"
        if profile.steps is not None and not _valid(profile.steps):
            return _refusal(f"{where}: steps is {_shown(profile.steps)}")
        for start in range(0, len(profile.metrics), _SEARCH_BLOCK):
            block = profile.metrics[start : start + _SEARCH_BLOCK]
            if not _block_is_valid(block, profile.steps):
                return _first_bad(where, block, profile.steps)
    for parts, cell in prepared.cells.items():
        for repeat, values in cell_values(cell):
            for name, value in zip(_VALUE_NAMES, values, strict=True):
                if value is not None and not _valid(value):
                    return _refusal(
                        f"repeat {repeat + 1}, metric {':'.join(parts)!r}: the "
                        f"sum of its entries, {name}, is {_shown(value)}"
                    )
    return _refusal("a value is not a finite, non-negative number")  # not reached


def _block_is_valid(metrics: list[Metric], steps: int | None) -> bool:
    """Every number :func:`_first_bad` would look at in ``metrics`` is valid."""
    numbers: list[object] = [v for m in metrics for v in _numbers_of(m) if v is not None]
    if not _all_valid(numbers + _source_numbers(metrics)):
        return False
    # Derived from numbers just found valid, so they cannot overflow a float.
    derived = [compared_value(m, steps) for m in metrics]
    return _all_valid([v for v in derived if v is not None])


def _first_bad(where: str, metrics: list[Metric], steps: int | None) -> InvalidValue:
    """The refusal naming the first bad number of ``metrics``, field by field."""
    for metric in metrics:
        fields = [(name, getattr(metric, name)) for name in _NUMBER_FIELDS]
        fields += [(f"samples_ns #{i}", v) for i, v in enumerate(metric.samples_ns or ())]
        fields += [(f"samples #{i}", v) for i, v in enumerate(metric.samples or ())]
        fields += [(f"step_totals_ns #{i}", v) for i, v in enumerate(metric.step_totals_ns or ())]
        fields.append(("value", metric.value))
        for name, value in fields:
            if value is not None and not _valid(value):
                return _refusal(f"{where}, metric {metric.key!r}, {name} is {_shown(value)}")
        # Derived from numbers just found valid, so it cannot overflow a float.
        value = compared_value(metric, steps)
        if value is not None and not _valid(value):
            return _refusal(f"{where}, metric {metric.key!r}, {_VALUE_NAMES[0]} is {_shown(value)}")
    return _refusal(f"{where}: a value is not a finite, non-negative number")  # not reached


def _shown(value: object) -> str:
    """``value`` as the refusal names it: an integer of hundreds of digits by its first ones."""
    text = repr(value)
    if isinstance(value, int) and len(text) > 24:
        return f"{text[:8]}… ({len(text)} digits)"
    return text


def _valid(value: float) -> bool:
    try:
        return math.isfinite(value) and 0 <= value <= MAX_VALUE
    except (TypeError, OverflowError):  # an int beyond any float is not a plausible number
        return False


def _refusal(what: str) -> InvalidValue:
    return InvalidValue(
        f"{what}: expected a finite, non-negative number of at most 1e18 (a "
        f"time in ns, a count or bytes); nothing was stored"
    )


def _add_profile(
    cells: dict[SeriesParts, list[Cell]], repeat: int, profile: Profile, section: str
) -> int:
    """Key ``profile``'s metrics into ``cells`` (the per-metric loop of every ingest).

    Returns the number of new (series, repeat) pairs.
    """
    steps = profile.steps
    added = 0
    for metric in profile.metrics:
        # ``_value_``: the plain string (``.value`` is a slow descriptor, and the members
        # themselves would reach the driver as enums).
        parts = (
            metric.kind._value_,
            metric.device._value_,
            metric.scope or "",
            section,
            metric.name,
        )
        cell = cells.get(parts)
        if cell is None:
            cells[parts] = [(repeat, metric, steps)]
            added += 1
        else:
            added += cell[-1][0] != repeat
            cell.append((repeat, metric, steps))
    return added
