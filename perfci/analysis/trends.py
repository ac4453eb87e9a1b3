"""The weekly report's statistics over one benchmark's history: a series × runs matrix.

Pure numpy on per-run medians, no store: which series is the step, what explains a change of
step-time level, whose share of step time moved over the period, which kernels appeared or
vanished, and how noisy the stable segment is. The use case builds the matrix from stored
runs (:mod:`perfci.usecases.weekly.trend`) and assembles the report
(:mod:`perfci.usecases.weekly.report`).
"""

from __future__ import annotations

import itertools
import math
import statistics
import warnings
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from perfci.analysis.attribution import PRIMARY_KINDS, Attribution, MetricDelta, attribute
from perfci.analysis.changepoints import ChangePointOptions, detect_change_points
from perfci.analysis.steps import primary_step
from perfci.core.model import SeriesKey
from perfci.core.weekly import ChangePointReport, KernelContribution, Noise, SeriesNoise, ShareMove

__all__ = [
    "EDGE_RUNS",
    "MIN_NOISE_RUNS",
    "MIN_SHARE_MOVE",
    "NOISY_MIN_SHARE",
    "TOP_CONTRIBUTORS",
    "TOP_MOVERS",
    "TOP_NOISY",
    "SeriesMatrix",
    "contributors",
    "mark_late",
    "new_and_vanished",
    "noise",
    "series_matrix",
    "share_movers",
    "step_series",
    "zoom_columns",
]

FloatArray = NDArray[np.float64]

#: Kernels per change point, share movers each way, noisiest series: rows a reader can scan.
TOP_CONTRIBUTORS = 10
TOP_MOVERS = 5
TOP_NOISY = 5
#: Runs at each end of the period whose medians are compared for share movers.
EDGE_RUNS = 3
#: Share-of-step moves smaller than this (0.2 percentage points) are noise, not news.
MIN_SHARE_MOVE = 0.002
#: Series below this share of step time are left out of "noisiest": a 2 µs kernel is always
#: noisy and never matters.
NOISY_MIN_SHARE = 0.01
#: A stable segment needs this many runs for a coefficient of variation worth printing.
MIN_NOISE_RUNS = 5


@contextmanager
def _quiet_nan() -> Iterator[None]:
    """numpy warns on all-NaN slices; here an absent series is expected, not an error."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        yield


@dataclass(slots=True)
class SeriesMatrix:
    """One benchmark × environment: per-run medians, series × runs (NaN: no value)."""

    keys: list[SeriesKey]
    values: FloatArray

    def row(self, key: SeriesKey) -> FloatArray:
        return np.asarray(self.values[self.keys.index(key)], dtype=np.float64)

    def medians(self, columns: slice | Sequence[int]) -> FloatArray:
        with _quiet_nan():
            return np.asarray(np.nanmedian(self.values[:, columns], axis=1), dtype=np.float64)

    def columns(self, keep: Sequence[int]) -> SeriesMatrix:
        """The matrix of the runs ``keep`` only, in that order."""
        return SeriesMatrix(self.keys, self.values[:, list(keep)])


def series_matrix(
    columns: int, samples: Mapping[SeriesKey, Mapping[int, list[float]]]
) -> SeriesMatrix:
    """The matrix of ``columns`` runs from each series' values by column (run) index.

    Each cell is the median of the run's repeats; series without any value are left out.
    """
    keys: list[SeriesKey] = []
    rows: list[FloatArray] = []
    for key, by_column in samples.items():
        row = np.full(columns, np.nan)
        for index, values in by_column.items():
            if values:
                row[index] = statistics.median(values)
        if not np.isnan(row).all():
            keys.append(key)
            rows.append(row)
    matrix = np.vstack(rows) if rows else np.empty((0, columns))
    return SeriesMatrix(keys=keys, values=matrix)


def step_series(matrix: SeriesMatrix) -> SeriesKey | None:
    """The primary step series (:func:`perfci.analysis.steps.primary_step`) by its median."""
    candidates = []
    for key, row in zip(matrix.keys, matrix.values, strict=True):
        present = row[~np.isnan(row)]
        candidates.append((key, float(np.median(present)) if present.size else None, len(present)))
    return primary_step(candidates)


# --- change points and attribution ------------------------------------------------------------


def mark_late(
    found: list[ChangePointReport],
    steps: list[float],
    period_start: int,
    options: ChangePointOptions | None,
) -> None:
    """Flag change points before the period that the history up to the period did not show.

    A new level needs a few runs to become significant, so a change late in one week is only
    found the week after, when it lies before that week's period. Re-running the detection on
    the history as the previous report saw it (deterministic, no state kept) tells which
    earlier change points are news; one run of slack allows for a point placed one run off.
    """
    earlier = [c for c in found if not c.in_period and c.index < period_start]
    if not earlier:
        return
    known = [c.index for c in detect_change_points(steps[:period_start], options=options)]
    for cp in earlier:
        cp.late = not any(abs(cp.index - k) <= 1 for k in known)


def contributors(
    matrix: SeriesMatrix, step: SeriesKey, start: int, index: int, stop: int
) -> tuple[float | None, list[KernelContribution]] | None:
    """What explains the change of level at run ``index`` (segments ``[start, index)`` vs
    ``[index, stop)``): the explained share and the primary contributors, ``None`` when the
    step time did not move (:func:`perfci.analysis.attribution.attribute`)."""
    before = matrix.medians(slice(start, index))
    after = matrix.medians(slice(index, stop))
    found: Attribution | None = attribute(
        _delta(matrix, step, before, after),
        _attribution_candidates(matrix, step, before, after),
        top=TOP_CONTRIBUTORS,
    )
    if found is None:
        return None
    return found.explained, [
        _contribution(c.series, c.delta_ns, c.share, matrix, before, after)
        for c in found.primary
        if c.series is not None
    ]


def _value(array: FloatArray, index: int) -> float | None:
    value = float(array[index])
    return None if math.isnan(value) else value


def _delta(
    matrix: SeriesMatrix, key: SeriesKey, before: FloatArray, after: FloatArray
) -> MetricDelta:
    index = matrix.keys.index(key)
    return MetricDelta(key, _value(before, index), _value(after, index))


def _primary_rows(matrix: SeriesMatrix, section: str | None = None) -> list[int]:
    """Rows of the kernels, memory operations and collectives (of ``section`` when given).

    Scoped series (nvprof's per-NVTX-range kernel tables) break down the same GPU time as the
    unscoped ones; adding both would explain a change twice and list every kernel once per
    range, so they are used only when a profile has nothing else.
    """
    rows = [
        i
        for i, key in enumerate(matrix.keys)
        if key.kind in PRIMARY_KINDS and (section is None or key.section == section)
    ]
    top_level = [i for i in rows if not matrix.keys[i].scope]
    return top_level or rows


def _attribution_candidates(
    matrix: SeriesMatrix, step: SeriesKey, before: FloatArray, after: FloatArray
) -> list[MetricDelta]:
    """The per-step medians of the primary series of the step's section, before and after."""
    return [
        MetricDelta(matrix.keys[i], _value(before, i), _value(after, i))
        for i in _primary_rows(matrix, step.section)
    ]


def _contribution(
    series: SeriesKey,
    delta_ns: float,
    share: float,
    matrix: SeriesMatrix,
    before: FloatArray,
    after: FloatArray,
) -> KernelContribution:
    index = matrix.keys.index(series)
    return KernelContribution(
        name=series.display_name,
        kind=series.kind.value,
        key=series.key,
        before_ns=_value(before, index),
        after_ns=_value(after, index),
        delta_ns=delta_ns,
        share=share,
    )


# --- share movers, new and vanished kernels ---------------------------------------------------


def _edges(period: list[int]) -> tuple[list[int], list[int]] | None:
    if len(period) < 2:
        return None
    width = min(EDGE_RUNS, len(period) // 2)
    return period[:width], period[-width:]


def share_movers(matrix: SeriesMatrix, step: SeriesKey, period: list[int]) -> list[ShareMove]:
    """Kernels whose share of step time grew most, then those that shrank most."""
    edges = _edges(period)
    if edges is None:
        return []
    index = matrix.keys.index(step)
    start, end = matrix.medians(edges[0]), matrix.medians(edges[1])
    if not start[index] > 0 or not end[index] > 0:
        return []
    moves = []
    for i in _primary_rows(matrix, step.section):
        key = matrix.keys[i]
        before, after = _value(start, i), _value(end, i)
        share_before = (before or 0.0) / float(start[index])
        share_after = (after or 0.0) / float(end[index])
        if abs(share_after - share_before) >= MIN_SHARE_MOVE:
            moves.append(
                ShareMove(
                    name=key.display_name,
                    kind=key.kind.value,
                    key=key.key,
                    share_before=share_before,
                    share_after=share_after,
                    ns_before=before,
                    ns_after=after,
                )
            )
    grew = sorted((m for m in moves if m.change > 0), key=lambda m: (-m.change, m.key))
    shrank = sorted((m for m in moves if m.change < 0), key=lambda m: (m.change, m.key))
    return grew[:TOP_MOVERS] + shrank[:TOP_MOVERS]


def new_and_vanished(matrix: SeriesMatrix, period: list[int]) -> tuple[list[str], list[str]]:
    """Kernels in the period's last run but not in the last run before it, and the reverse.

    Without a run before the period there is nothing to compare with: both lists are empty.
    """
    if not period or period[0] == 0:
        return [], []
    primary = _primary_rows(matrix)
    before = {i for i in primary if not math.isnan(matrix.values[i, period[0] - 1])}
    after = {i for i in primary if not math.isnan(matrix.values[i, period[-1]])}
    return (
        sorted(matrix.keys[i].display_name for i in after - before),
        sorted(matrix.keys[i].display_name for i in before - after),
    )


# --- noise ------------------------------------------------------------------------------------


def _stable_segment(bounds: list[int]) -> tuple[int, int]:
    """The current level when it is long enough to measure, else the longest segment."""
    segments = list(itertools.pairwise(bounds))
    last = segments[-1]
    if last[1] - last[0] >= MIN_NOISE_RUNS:
        return last
    return max(segments, key=lambda s: (s[1] - s[0], s[0]))


def zoom_columns(
    runs: int, indices: Sequence[int], period: Sequence[int], window: int
) -> list[int]:
    """The runs (columns, ascending) whose every series a report reads, of ``runs`` whose step
    times changed level at ``indices``, for the report's ``period``.

    The period and the run before it (share movers, new and vanished kernels); on each side
    of every change point, the ``window`` runs nearest it within its segments (what explains
    the change: :func:`contributors`); and the last ``window`` runs of the stable segment
    (:func:`noise`). The other runs of a long history add only their step times and headline
    values: the kernels' medians over a segment are taken from the runs next to its change,
    which a level that holds by definition does not need more of.
    """
    bounds = [0, *indices, runs]
    keep = set(period)
    if period and period[0] > 0:
        keep.add(period[0] - 1)
    for i, index in enumerate(indices):
        keep.update(range(max(bounds[i], index - window), min(bounds[i + 2], index + window)))
    start, stop = _stable_segment(bounds)
    keep.update(range(max(start, stop - window), stop))
    return sorted(keep)


def noise(matrix: SeriesMatrix, step: SeriesKey, bounds: list[int]) -> Noise:
    """Run-to-run spread of the step and the noisiest series that matter, in the stable
    segment between the change points ``bounds`` (``[0, *indices, runs]``)."""
    start, stop = _stable_segment(bounds)
    block = matrix.values[:, start:stop]
    with _quiet_nan():
        mean = np.nanmean(block, axis=1)
        std = np.nanstd(block, axis=1, ddof=1)
    counts = np.sum(~np.isnan(block), axis=1)
    step_index = matrix.keys.index(step)
    step_mean = float(mean[step_index])
    runs = stop - start
    found = Noise(
        step_cv=_cv(std[step_index], mean[step_index]) if runs >= 2 else None, segment_runs=runs
    )
    candidates = []
    for i, key in enumerate(matrix.keys):
        cv = _cv(std[i], mean[i])
        if cv is None or counts[i] < min(MIN_NOISE_RUNS, runs):
            continue
        share = float(mean[i]) / step_mean if step_mean > 0 else None
        if share is not None and share < NOISY_MIN_SHARE:
            continue
        candidates.append(
            SeriesNoise(name=key.display_name, kind=key.kind.value, key=key.key, cv=cv, share=share)
        )
    candidates.sort(key=lambda s: (-s.cv, s.key))
    found.noisiest = candidates[:TOP_NOISY]
    return found


def _cv(std: float, mean: float) -> float | None:
    if math.isnan(std) or math.isnan(mean) or mean <= 0:
        return None
    return float(std / mean)
