"""Runs as the unit of noise: run summaries and outlier repeats.

Repeats inside one run share the runner, the process start and the GPU; runs differ from one
another. So every run — each baseline run and the candidate — becomes ONE value per metric,
a robust mean of its repeats' logs (several steps inside a repeat were already averaged into
the repeat's value), and noise is judged between runs. What this module prepares:

Run values are trimmed means of the repeats' logs (:func:`summarise`).

- **Outlier repeats**: a repeat that is slower in everything than the other repeats of its
  run (a load spike during that one process) is left out of its run, never a majority of it.
  One-sided: noise on a runner (another process, throttling, a cold cache) only adds time,
  so a repeat *faster* in everything is the truest measure there is and is kept.

Which baseline runs then form the baseline (wrecked runs, the base branch's last level) is
:mod:`.baseline_runs`' job.

References: Tukey (1977), *Exploratory Data Analysis*, ch. 11 (median polish); Iglewicz &
Hoaglin (1993), *How to Detect and Handle Outliers* (robust z-scores from the MAD).
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from itertools import chain

import numpy as np
from numpy.typing import NDArray

from perfci.analysis.stats import MAD_TO_SD, validate_sample
from perfci.core.errors import SampleError
from perfci.core.model import Better, SeriesKey

FloatArray = NDArray[np.float64]

#: A repeat or run must be at least this far off in everything (log scale) to be left out,
#: whatever the spread: a quiet machine's 1 % is not a wreck.
WRECK_FLOOR = math.log(1.05)
#: ... and this many robust standard deviations beyond the others.
WRECK_SIGMAS = 4.0
#: Fewest metrics for telling a repeat that is off in everything from a noisy metric.
MIN_METRICS_FOR_REPEATS = 5


@dataclass(slots=True)
class RunTable:
    """One comparison's data, summarised per run (rows = metrics in ``keys`` order).

    ``base`` holds each baseline run's log value (NaN where the metric is absent from the
    run), oldest run first; ``cand`` the candidate run's. ``within_var`` is the pooled
    variance of log repeats inside baseline runs, and ``base_repeats`` / ``cand_repeats``
    the repeats each summary was taken over. ``used`` indexes the given baseline runs that
    survive as columns of ``base``.
    """

    keys: list[SeriesKey]
    base: FloatArray
    cand: FloatArray
    within_var: FloatArray
    base_repeats: FloatArray
    cand_repeats: FloatArray
    used: list[int]
    notes: list[str] = field(default_factory=list)
    level_start: int | None = None
    #: Each baseline run's value from only its first ``few_repeats`` repeats, outliers kept,
    #: when the candidate has fewer repeats (1 or 2) than the baseline's runs: what a run of
    #: the candidate's size looks like, for calibrating tails (:func:`few_repeat_values`).
    base_few: FloatArray | None = None
    few_repeats: int | None = None


def build_run_table(
    baseline: Mapping[SeriesKey, Sequence[Sequence[float]]],
    candidate: Mapping[SeriesKey, Sequence[float]],
) -> RunTable:
    """Summarise every run; lists shorter than the longest are aligned on the newest run.

    An empty list stands for a run in which the metric is absent. Values are validated
    (:class:`~perfci.analysis.stats.SampleError` names the metric and value); zeros are
    offset per metric by 1 % of its positive median before taking logs.
    """
    keys = sorted({*baseline, *candidate}, key=lambda k: k.key)
    runs = max((len(v) for v in baseline.values()), default=0)
    # One matrix per run (metrics × repeats, NaN-padded) built from the lists in one go: a
    # numpy call per run, not per metric and run.
    series = [baseline.get(k, ()) for k in keys]  # one lookup per key: hashing keys is slow
    raw, counts = _run_matrices(series, runs)
    cand_raw, cand_count = _padded_lists([list(candidate.get(k, ())) for k in keys])
    counts = [*counts, cand_count]
    if not _all_valid([*raw, cand_raw], counts):
        _name_bad_value(keys, baseline, candidate)
    offsets = _zero_offsets([*raw, cand_raw])
    logs = [np.log(m + offsets[:, None]) for m in raw]
    return _summarise(keys, logs, np.log(cand_raw + offsets[:, None]), runs)


def _run_matrices(
    series: Sequence[Sequence[Sequence[float]]], runs: int
) -> tuple[list[FloatArray], list[int]]:
    """Each baseline run's metrics × repeats matrix (NaN-padded, :func:`_padded_lists`) and
    how many values it was given.

    When every series has every run with the same number of repeats (the usual stored
    baseline), the whole baseline is one numpy call, not one per run.
    """
    cube = _cube(series, runs)
    if cube is not None:
        stack = np.ascontiguousarray(cube.transpose(1, 0, 2))  # runs × metrics × repeats
        return list(stack), [cube.shape[0] * cube.shape[2]] * runs
    built = [_padded_lists(runs_at(series, j, runs)) for j in range(runs)]
    return [matrix for matrix, _ in built], [count for _, count in built]


def stacked_totals(series: Sequence[Sequence[Sequence[float]]], runs: int) -> list[list[float]]:
    """Per run, each repeat's sum over the parts of ``series`` (parts × runs × repeats), when
    every part has every run with the same repeats (a stored baseline: one numpy call, not
    one per run); ``[]`` otherwise, and the caller sums run by run.

    The parts are added one after another in the given order (a cumulative sum down the parts
    is sequential, so the floats are those of a loop; numpy's ``sum`` adds pairwise for some
    shapes); ``+ 0.0`` is the loop's start, which turns a ``-0.0`` sum into ``0.0``.
    """
    cube = _cube(series, runs)
    if cube is None or not cube.shape[2]:
        return []
    return list((np.cumsum(cube, axis=0)[-1] + 0.0).tolist())


def _cube(series: Sequence[Sequence[Sequence[float]]], runs: int) -> FloatArray | None:
    """``series`` (each a list of ``runs`` runs' repeats) as one series × runs × repeats
    array; ``None`` when some run or repeat is missing, or a value is not a number."""
    if not runs or not series:
        return None
    try:
        if set(map(len, series)) != {runs}:
            return None
        repeats = set(map(len, chain.from_iterable(series)))
        if len(repeats) != 1:
            return None
        shape = (len(series), runs, repeats.pop())
        # One pass of the flattened lists (np.array's walk of nested lists measured slower).
        values = np.fromiter(chain.from_iterable(chain.from_iterable(series)), np.float64)
    except (TypeError, ValueError):  # not lists of numbers
        return None
    return values.reshape(shape) if values.size == math.prod(shape) else None


def run_of(given: Sequence[Sequence[float]], j: int, runs: int) -> Sequence[float]:
    """Run ``j`` of a series with ``len(given)`` runs, aligned on the newest run."""
    index = j - (runs - len(given))
    return given[index] if index >= 0 else ()


def runs_at(
    series: Sequence[Sequence[Sequence[float]]], j: int, runs: int
) -> list[Sequence[float]]:
    """:func:`run_of` of every series at once (10,000 series × 30 runs: no call per cell)."""
    return [given[j - runs + len(given)] if j - runs + len(given) >= 0 else () for given in series]


def _padded_lists(rows: Sequence[Sequence[float]]) -> tuple[FloatArray, int]:
    """Rows of numbers as one float matrix, NaN-padded on the right, and how many values were
    given (equal rows: one numpy call). A value that is not a number becomes ``inf``, which
    the check then refuses with the metric named."""
    lengths = [len(r) for r in rows]
    width = max(lengths, default=0)
    if rows and min(lengths) == width:
        try:
            return np.array(rows, dtype=np.float64).reshape(len(rows), width), width * len(rows)
        except (TypeError, ValueError):
            pass
    out = np.full((len(rows), width), np.nan)
    for i, row in enumerate(rows):
        try:
            out[i, : len(row)] = row
        except (TypeError, ValueError):
            out[i, : len(row)] = np.inf
    return out, sum(lengths)


def _all_valid(matrices: Sequence[FloatArray], counts: Sequence[int]) -> bool:
    """Every given value finite and non-negative: a NaN value shows as one present cell too
    few (NaN is also the padding)."""
    for matrix, count in zip(matrices, counts, strict=True):
        present = matrix[~np.isnan(matrix)]
        if present.size != count:
            return False
        if present.size and not (np.isfinite(present).all() and present.min() >= 0):
            return False
    return True


def _name_bad_value(
    keys: Sequence[SeriesKey],
    baseline: Mapping[SeriesKey, Sequence[Sequence[float]]],
    candidate: Mapping[SeriesKey, Sequence[float]],
) -> None:
    """The slow path, only when the bulk check failed: a SampleError naming the first bad one."""
    for key in keys:
        validate_sample(key.key, [v for run in baseline.get(key, ()) for v in run], role="baseline")
        validate_sample(key.key, list(candidate.get(key, ())), role="candidate")
    raise SampleError("a value is not a finite, non-negative number")  # not reached


def _zero_offsets(matrices: Sequence[FloatArray]) -> FloatArray:
    """Per metric: 1 % of its positive median when it holds a zero (a memcpy that did not
    happen), else 0; all-zero metrics get 1.0."""
    rows = matrices[0].shape[0] if matrices else 0
    offsets = np.zeros(rows)
    if not rows:
        return offsets
    given = [m for m in matrices if m.size]
    if not given:
        return offsets  # no values at all: nothing to offset
    every = np.concatenate(given, axis=1)
    zero_rows = np.flatnonzero(np.nanmin(np.where(np.isnan(every), np.inf, every), axis=1) <= 0)
    for i in zero_rows:
        offsets[i] = _zero_offset(every[i][~np.isnan(every[i])])
    return offsets


def _zero_offset(values: FloatArray) -> float:
    """1 % of the positive median when a value is zero (a memcpy that did not happen)."""
    if values.size == 0 or values.min() > 0:
        return 0.0
    positive = values[values > 0]
    return 0.01 * float(np.median(positive)) if positive.size else 1.0


def _summarise(
    keys: list[SeriesKey], matrices: list[FloatArray], cand_matrix: FloatArray, runs: int
) -> RunTable:
    slower = orientation(keys)
    plain, oriented = _factors_by_run(matrices, slower)
    spread = _repeat_factor_spread(plain)
    notes: list[str] = []
    dropped = 0
    kept = []
    for raw, factors in zip(matrices, oriented, strict=True):
        matrix, gone = _drop_outlier_repeats(raw, spread, slower, factors)
        dropped += len(gone)
        kept.append(matrix)
    base, base_repeats, within_ss, within_dof = _run_summaries(kept, len(keys))
    if dropped:
        notes.append(
            f"{dropped} baseline repeat{'s' if dropped != 1 else ''} left out: off in "
            "every metric against the other repeats of their run."
        )
    cand_matrix, gone = _drop_outlier_repeats(cand_matrix, spread, slower)
    if gone:
        notes.append(_repeat_note(gone, cand_matrix.shape[1] + len(gone)))
    with np.errstate(divide="ignore", invalid="ignore"):
        within_var = np.where(within_dof > 0, within_ss / np.maximum(within_dof, 1), 0.0)
    cand_repeats = np.sum(~np.isnan(cand_matrix), axis=1).astype(np.float64)
    few = few_repeat_values(matrices, cand_repeats, base_repeats)
    return RunTable(
        keys=keys,
        base=base,
        cand=summarise(cand_matrix),
        within_var=within_var,
        base_repeats=base_repeats,
        cand_repeats=cand_repeats,
        used=list(range(runs)),
        notes=notes,
        base_few=few[0] if few else None,
        few_repeats=few[1] if few else None,
    )


#: Candidates of at most this many repeats get tails calibrated on runs of their size: from
#: three repeats on, the run value is a median or a trimmed mean and one wild repeat moves it
#: little, as it moves the baseline's.
FEW_REPEATS = 2


def few_repeat_values(
    matrices: Sequence[FloatArray], cand_repeats: FloatArray, base_repeats: FloatArray
) -> tuple[FloatArray, int] | None:
    """Each baseline run's value from its first ``m`` repeats, ``m`` the candidate's typical
    repeat count, when ``m`` ≤ :data:`FEW_REPEATS` and the baseline's runs have more.

    A candidate of one repeat is one draw of a repeat, not a trimmed mean of five: when
    repeats have heavy tails (a wild process now and then), its value lies out far more often
    than the baseline's run values do, and tails fitted to those (:mod:`.tails`) would be too
    light. Simulated with Student-t repeats (3 dof), a one-repeat candidate failed 18.5 % of
    unchanged runs against tails fitted to run values. Outlier repeats are kept here: the
    candidate's one or two repeats cannot be screened either.
    """
    given = cand_repeats[cand_repeats > 0]
    if not given.size or not len(matrices):
        return None
    m = int(np.median(given))
    typical_base = float(np.median(base_repeats[base_repeats > 0])) if base_repeats.any() else 0
    if m > FEW_REPEATS or typical_base <= m:
        return None
    few = np.full((len(matrices[0]), len(matrices)), np.nan)
    for j, matrix in enumerate(matrices):
        few[:, j] = summarise(_first_present(matrix, m))
    return few, m


def _first_present(matrix: FloatArray, m: int) -> FloatArray:
    """Each row's first ``m`` present values (NaN-padded), in the order they were given."""
    order = np.argsort(np.isnan(matrix), axis=1, kind="stable")
    return np.take_along_axis(matrix, order, axis=1)[:, :m]


def summarise(matrix: FloatArray) -> FloatArray:
    """Each row's run value: the mean of its log repeats without the highest and lowest.

    A trimmed mean: one bad repeat per run moves it little (like a median), while it keeps
    more of the mean's precision (variance ≈ 1.2·σ²/n for five normal repeats against the
    median's 1.43·σ²/n). Rows of up to four repeats take the median (three or four) or the
    mean (one or two). Rows with different repeat counts are handled one count at a time.
    """
    out = np.full(matrix.shape[0], np.nan)
    counts = np.sum(~np.isnan(matrix), axis=1)
    for count in np.unique(counts):
        rows = counts == count
        if count == 0:
            continue
        values = np.sort(matrix[rows], axis=1)[:, :count]  # NaNs sort last
        if count >= 5:
            out[rows] = values[:, 1 : count - 1].mean(axis=1)
        elif count == 4:  # the median of sorted values, without np.median's partition
            out[rows] = values[:, 1:3].mean(axis=1)
        elif count == 3:
            out[rows] = values[:, 1]
        else:
            out[rows] = values.mean(axis=1)
    return out


def _nanmedian(matrix: FloatArray) -> FloatArray:
    if matrix.shape[1] == 0:
        return np.full(matrix.shape[0], np.nan)
    if not np.isnan(matrix).any():  # numpy's NaN-aware median is many times slower
        return np.asarray(np.median(matrix, axis=1), dtype=np.float64)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN rows: absent metrics
        return np.asarray(np.nanmedian(matrix, axis=1), dtype=np.float64)


def _within(matrix: FloatArray) -> tuple[FloatArray, FloatArray]:
    """Sum of squares around each row's mean, and its degrees of freedom (count − 1)."""
    count = np.sum(~np.isnan(matrix), axis=1)
    if matrix.shape[1] == 0:
        return np.zeros(len(matrix)), np.zeros(len(matrix))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        mean = np.nanmean(matrix, axis=1, keepdims=True)
    ss = np.nansum((matrix - mean) ** 2, axis=1)
    return np.where(count > 1, ss, 0.0), np.maximum(count - 1, 0).astype(np.float64)


def repeat_factors(matrix: FloatArray) -> FloatArray:
    """Each repeat's factor: the median over metrics of its distance from the metric's median."""
    return _nanmedian((matrix - _nanmedian(matrix)[:, None]).T)


def _usable_for_repeats(matrix: FloatArray) -> bool:
    rows = int(np.sum(np.all(~np.isnan(matrix), axis=1)))
    return matrix.shape[1] >= 3 and rows >= MIN_METRICS_FOR_REPEATS


def _factors_by_run(
    matrices: Sequence[FloatArray], slower: FloatArray
) -> tuple[list[FloatArray | None], list[FloatArray | None]]:
    """Per run, :func:`repeat_factors` of its matrix, and of its matrix turned so that
    slower is positive; ``None`` where the run cannot tell its repeats apart.

    Runs of equal shape without a gap are done as one stack (a baseline of 30 runs: two
    numpy medians instead of sixty); the numbers are those of the run-by-run way.
    """
    if not matrices:
        return [], []
    first = matrices[0]
    if all(m.shape == first.shape for m in matrices):
        stack = np.stack(matrices)
        if not np.isnan(stack).any():
            if not _usable_for_repeats(first):  # without gaps, every run is as usable
                return [None] * len(matrices), [None] * len(matrices)
            plain = _stacked_factors(stack)
            turned = plain if (slower > 0).all() else _stacked_factors(stack * slower[:, None])
            return list(plain), list(turned)
    usable = [_usable_for_repeats(m) for m in matrices]
    return (
        [repeat_factors(m) if ok else None for m, ok in zip(matrices, usable, strict=True)],
        [
            repeat_factors(m * slower[:, None]) if ok else None
            for m, ok in zip(matrices, usable, strict=True)
        ],
    )


def _stacked_factors(stack: FloatArray) -> FloatArray:
    """:func:`repeat_factors` of each run of a runs × metrics × repeats stack without NaN."""
    return np.asarray(np.median(stack - np.median(stack, axis=2, keepdims=True), axis=1))


def _run_summaries(
    matrices: Sequence[FloatArray], n: int
) -> tuple[FloatArray, FloatArray, FloatArray, FloatArray]:
    """Per metric and run: the run value (:func:`summarise`) and its repeat count; per
    metric: the within-run sum of squares and its degrees of freedom, pooled over runs.

    Runs of equal width are summarised as one matrix (every function here works row by
    row), their sums of squares added run after run as before.
    """
    runs = len(matrices)
    if runs and all(m.shape == matrices[0].shape for m in matrices):
        flat = np.concatenate(matrices)
        # C order, as the matrices filled column by column were: a row's reductions over
        # runs then add in the same order.
        base = np.ascontiguousarray(summarise(flat).reshape(runs, n).T)
        counts = np.sum(~np.isnan(flat), axis=1).reshape(runs, n).T
        ss, dof = (part.reshape(runs, n) for part in _within(flat))
        return (
            base,
            np.ascontiguousarray(counts, dtype=np.float64),
            np.cumsum(ss, axis=0)[-1] + 0.0,
            np.cumsum(dof, axis=0)[-1],
        )
    base = np.full((n, runs), np.nan)
    base_repeats = np.zeros((n, runs))
    within_ss, within_dof = np.zeros(n), np.zeros(n)
    for j, matrix in enumerate(matrices):
        base[:, j], base_repeats[:, j] = summarise(matrix), np.sum(~np.isnan(matrix), axis=1)
        ss, dof = _within(matrix)
        within_ss += ss
        within_dof += dof
    return base, base_repeats, within_ss, within_dof


def _repeat_factor_spread(factors: Sequence[FloatArray | None]) -> float:
    """Robust sd of repeat factors around their run's median, pooled over baseline runs
    (``factors``: per run, its :func:`repeat_factors`, ``None`` where it has none)."""
    deviations = [f - np.median(f) for f in factors if f is not None and np.isfinite(f).all()]
    if not deviations:
        return 0.0
    every = np.concatenate(deviations)
    return float(MAD_TO_SD * np.median(np.abs(every)))


def orientation(keys: Sequence[SeriesKey]) -> FloatArray:
    """Per row, the sign that makes "slower" positive: −1 where higher is better."""
    return np.array([-1.0 if k.better is Better.HIGHER else 1.0 for k in keys])


def _drop_outlier_repeats(
    matrix: FloatArray, spread: float, slower: FloatArray, factors: FloatArray | None = None
) -> tuple[FloatArray, list[float]]:
    """``matrix`` without repeats slower in everything; their factors (log) for the note.

    ``factors``: the run's :func:`repeat_factors` with slower positive, when the caller has
    them (:func:`_factors_by_run`); computed here otherwise.

    One-sided: another process on the runner, a throttled GPU or a cold cache only ever add
    time, so a repeat faster in everything than its run's others is the best evidence of
    the work's own speed, never a wreck.
    """
    if factors is None:
        if not _usable_for_repeats(matrix):
            return matrix, []
        factors = repeat_factors(matrix * slower[:, None])
    if not np.isfinite(factors).all():
        return matrix, []
    distance = factors - np.median(factors)
    limit = max(WRECK_FLOOR, WRECK_SIGMAS * spread)
    order = np.argsort(-distance)[: (matrix.shape[1] - 1) // 2]  # never a majority
    gone = [int(i) for i in order if distance[i] > limit]
    if not gone:
        return matrix, []
    keep = [i for i in range(matrix.shape[1]) if i not in gone]
    return matrix[:, keep], [float(factors[i] - np.median(factors)) for i in gone]


def _repeat_note(factors: Sequence[float], total: int) -> str:
    return (
        f"{len(factors)} of {total} repeats of this run left out: "
        f"{range_words(factors)} across all metrics than its other repeats."
    )


def range_words(log_factors: Sequence[float]) -> str:
    """``30–60 % slower`` (or faster) from log factors."""
    pct = sorted(abs(math.expm1(f)) * 100 for f in log_factors)
    way = "slower" if np.median(log_factors) > 0 else "faster"
    low, high = round(pct[0]), round(pct[-1])
    return f"{low} % {way}" if low == high else f"{low}–{high} % {way}"
