"""The columns of a small trace's events reduced in plain Python (``_chrome_numpy`` does the same
with numpy for large ones; ``_chrome_events.columns_for`` picks by the file's size).

Every figure equals numpy's to the bit, so that a trace reads the same whichever side of the
threshold it falls on: sums, minima, maxima and medians are exact, and the standard deviation
adds in numpy's own order (``_pairwise``: its pairwise summation, in buffers of 8,192 values
where it casts). ``tests/test_chrome_readers.py`` checks both against each other.
"""

from __future__ import annotations

import math
from array import array
from bisect import bisect_right
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

# numpy's pairwise summation: blocks of this many values are added in 8 interleaved sums.
_BLOCK = 128
_UNROLL = 8
# What numpy's iterator hands a reduction at a time when it has to cast (int64 → float64).
_CAST_BUFFER = 8192


@dataclass(frozen=True, slots=True)
class Summary:
    """One metric's durations in ns, as its ``Metric`` shows them."""

    count: int
    total: int
    minimum: float
    maximum: float
    median: float
    std: float | None  # sample standard deviation; None for one value


@dataclass
class Columns:
    """Every complete event's key id (int32), duration and start (float64 µs; NaN when
    unknown), in compact arrays: 20 bytes an event, whatever the file's size."""

    ids: array[int] = field(default_factory=lambda: array("i"))
    micros: array[float] = field(default_factory=lambda: array("d"))
    starts: array[float] = field(default_factory=lambda: array("d"))

    def add(self, ids: list[int], micros: list[float], starts: list[Any]) -> None:
        self.ids.extend(ids)
        self.micros.extend(micros)
        self.starts.extend(starts_of(starts))

    def grouped(self, keys: int) -> list[tuple[list[int], list[float]]]:
        """Per key id, its durations in ns and its starts in µs, in trace order; empties the
        columns."""
        durations: list[list[int]] = [[] for _ in range(keys)]
        begins: list[list[float]] = [[] for _ in range(keys)]
        for key, dur, start in zip(self.ids, self.micros, self.starts, strict=True):
            durations[key].append(round(dur * 1000.0))  # round half to even, as numpy's rint
            begins[key].append(start)
        self.ids, self.micros, self.starts = array("i"), array("d"), array("d")
        return list(zip(durations, begins, strict=True))

    @staticmethod
    def concat(parts: Sequence[Sequence[float]]) -> list[float]:
        return [value for part in parts for value in part]

    @staticmethod
    def summary(values: Sequence[int]) -> Summary:
        count = len(values)
        ordered = sorted(values)
        middle = count // 2
        if count % 2:
            median = float(ordered[middle])
        else:  # numpy's mean of the two middle values
            median = (0.0 + (-0.0 + float(ordered[middle - 1]) + float(ordered[middle]))) / 2.0
        return Summary(
            count=count,
            total=sum(values),
            minimum=float(ordered[0]),
            maximum=float(ordered[-1]),
            median=median,
            std=_std(values) if count > 1 else None,
        )

    @staticmethod
    def step_totals(
        spans: Sequence[tuple[float, float]],
        durations_ns: Sequence[int],
        starts_us: Sequence[float],
    ) -> list[float] | None:
        """The summed duration of the events that start inside each step, in step order;
        ``None`` when some step has none."""
        begins = [start for start, _ in spans]
        totals = [0.0] * len(spans)
        for duration, start in zip(durations_ns, starts_us, strict=True):
            index = bisect_right(begins, start) - 1
            if index >= 0 and start < spans[index][1]:  # a NaN start compares False: no step
                totals[index] += float(duration)
        if not all(total > 0 for total in totals):
            return None
        return totals


def starts_of(values: list[Any]) -> array[float]:
    """Events' ``ts`` as float µs, read as numpy reads a list into a float array: a missing
    one is NaN (in no step), a numeric string its number; when one of the batch is anything
    else, every value that is not a number is NaN."""
    try:
        return array("d", values)
    except (TypeError, OverflowError):
        pass
    try:
        if all(value is None or isinstance(value, int | float | str) for value in values):
            return array("d", [math.nan if value is None else float(value) for value in values])
    except (ValueError, OverflowError):
        pass
    return array("d", map(start_of, values))


def start_of(value: Any) -> float:
    """One ``ts`` as float µs, NaN when it is not a number."""
    try:
        return float(value) if is_number(value) else math.nan
    except OverflowError:  # an integer beyond any float
        return math.nan


def is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _std(values: Sequence[int]) -> float:
    """``numpy.std(values, ddof=1)`` of an int64 array, added in numpy's order."""
    floats = [float(value) for value in values]
    mean = 0.0
    for start in range(0, len(floats), _CAST_BUFFER):
        mean += _pairwise(floats, start, min(_CAST_BUFFER, len(floats) - start))
    mean /= len(floats)
    squares = [(value - mean) * (value - mean) for value in floats]
    return math.sqrt((0.0 + _pairwise(squares, 0, len(squares))) / (len(floats) - 1))


def _pairwise(values: Sequence[float], start: int, count: int) -> float:
    """numpy's ``pairwise_sum`` of ``values[start:start + count]``."""
    if count < _UNROLL:
        total = -0.0
        for index in range(start, start + count):
            total += values[index]
        return total
    if count <= _BLOCK:
        sums = list(values[start : start + _UNROLL])
        end = start + count - count % _UNROLL
        for block in range(start + _UNROLL, end, _UNROLL):
            for lane in range(_UNROLL):
                sums[lane] += values[block + lane]
        total = ((sums[0] + sums[1]) + (sums[2] + sums[3])) + (
            (sums[4] + sums[5]) + (sums[6] + sums[7])
        )
        for index in range(end, start + count):
            total += values[index]
        return total
    half = count // 2
    half -= half % _UNROLL
    return _pairwise(values, start, half) + _pairwise(values, start + half, count - half)
