"""A run's profiles keyed by series and checked, with no SQL: what the store writes.

Everything is checked before a transaction opens (every value finite and non-negative, see
:func:`check_values`), so bad input writes nothing (:mod:`perfci.usecases.submit.ingest`).
"""

from __future__ import annotations

import math
import operator
from collections.abc import Sequence

import numpy as np

from perfci.analysis.values import compared_value
from perfci.core.errors import ConfigError, InvalidValue
from perfci.core.limits import MAX_VALUE
from perfci.core.model import MetricKind, Profile, SeriesParts
from perfci.store.prepared import Cell, PreparedRun, cell_values


def prepare_run(repeats: Sequence[Sequence[Profile]]) -> PreparedRun:
    """Key the metrics of ``repeats`` by series, no SQL: what
    :func:`perfci.store.runs.write_run` writes.

    Raises
    ------
    ConfigError
        No repeats, an empty repeat, or two profiles labelled alike in one repeat.
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
    return PreparedRun(
        cells=cells,
        samples=samples,
        merges=metrics != samples,
        profiles=profiles,
        repeats=len(repeats),
    )


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


def check_values(prepared: PreparedRun) -> None:
    """Refuse a run holding a number that is not finite and non-negative, before any SQL.

    Every number perfci stores is a time, a count or a size. A negative duration (clock skew
    between the host and the GPU timestamps) is refused with the metric named rather than
    clamped: a clamped 0 would pass as a real measurement and bend the baseline, while a
    refused upload is seen and fixed at its source. Derived numbers are checked too: the
    per-step value of a step metric (``[1.7e308, 1.7e308]`` averages to infinity), ``avg ×
    calls`` without a total, and the sums of a series listed twice in one repeat.

    One vectorised pass over the numbers; the search for the culprit, to name it, runs only
    when that pass fails.

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
    for _, profile in prepared.profiles:
        if profile.steps is not None:
            numbers.append(profile.steps)
        for m in profile.metrics:
            if m.samples_ns:
                numbers += m.samples_ns
            if m.samples:
                numbers += m.samples
            if m.step_totals_ns:
                numbers += m.step_totals_ns
            if m.value is not None:
                numbers.append(m.value)
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
    try:
        array = np.array(numbers, dtype=np.float64)
    except (OverflowError, TypeError, ValueError):  # an int beyond any float, or not a number
        raise _invalid_value(prepared) from None
    if not (
        np.isfinite(array).all()
        and (array.size == 0 or (array.min() >= 0 and array.max() <= MAX_VALUE))
    ):
        raise _invalid_value(prepared)


def _invalid_value(prepared: PreparedRun) -> InvalidValue:
    """The error naming the first bad number of ``prepared`` (the slow path of check_values)."""
    for repeat, profile in prepared.profiles:
        where = f"profile {profile.label!r} ({profile.source or 'upload'}, repeat {repeat + 1})"
        if profile.steps is not None and not _valid(profile.steps):
            return _refusal(f"{where}: steps is {profile.steps!r}")
        for metric in profile.metrics:
            fields = [(name, getattr(metric, name)) for name in _NUMBER_FIELDS]
            fields += [(f"samples_ns #{i}", v) for i, v in enumerate(metric.samples_ns or ())]
            fields += [(f"samples #{i}", v) for i, v in enumerate(metric.samples or ())]
            fields += [
                (f"step_totals_ns #{i}", v) for i, v in enumerate(metric.step_totals_ns or ())
            ]
            fields.append(("value", metric.value))
            fields.append((_VALUE_NAMES[0], compared_value(metric, profile.steps)))
            for name, value in fields:
                if value is not None and not _valid(value):
                    return _refusal(f"{where}, metric {metric.key!r}, {name} is {value!r}")
    for parts, cell in prepared.cells.items():
        for repeat, values in cell_values(cell):
            for name, value in zip(_VALUE_NAMES, values, strict=True):
                if value is not None and not _valid(value):
                    return _refusal(
                        f"repeat {repeat + 1}, metric {':'.join(parts)!r}: the "
                        f"sum of its entries, {name}, is {value!r}"
                    )
    return _refusal("a value is not a finite, non-negative number")  # not reached


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
