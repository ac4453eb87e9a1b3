"""Which step series is "the step" of a benchmark: one rule for every view.

The PR comment, the terminal report, the weekly report and the dashboard all speak of one
step time. A benchmark may report several step series (an iteration and its forward step,
or one per section); the primary one is the longest, because an iteration contains its
sub-steps. Ties go to the series seen in more runs, then to the smaller key, so every view
picks the same series from the same data.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Mapping

from perfci.core.model import MetricKind, SeriesKey

__all__ = ["primary_step", "primary_step_in"]


def primary_step(candidates: Iterable[tuple[SeriesKey, float | None, int]]) -> SeriesKey | None:
    """The primary step among ``(series, typical value, runs seen)`` rows, or ``None``.

    Rows that are not step series, or have no value, are ignored.
    """
    rows = [
        (value, runs, key.key, key)
        for key, value, runs in candidates
        if key.kind is MetricKind.STEP and value is not None
    ]
    if not rows:
        return None
    return max(rows, key=lambda row: (row[0], row[1], row[2]))[3]


def primary_step_in(series: Mapping[SeriesKey, Iterable[float | None]]) -> SeriesKey | None:
    """The primary step among series given by their values (typical value: the median of the
    known ones; seen: how many). Only step series' values are read."""
    rows = []
    for key, values in series.items():
        if key.kind is MetricKind.STEP:
            known = [v for v in values if v is not None]
            if known:
                rows.append((key, statistics.median(known), len(known)))
    return primary_step(rows)
