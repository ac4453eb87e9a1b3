"""Which baseline runs form the baseline: wrecked runs left out, the base branch's last level.

- **Wrecked runs**: a baseline run whose factor — the median over metrics of how far each
  metric of the run lies from its own centre, one sweep of Tukey's median polish — lies far
  above the spread of the other runs' factors (a loaded runner, a throttled GPU) is left
  out, at most a third of the runs. One-sided, as for repeats (:mod:`.runs`): a run faster
  in everything is the truest measure there is and is kept.
- **The baseline's level**: when the base branch's primary step changed level inside the
  window (an accepted change), only the runs from that change on form the baseline.

References: Tukey (1977), *Exploratory Data Analysis*, ch. 11 (median polish); Iglewicz &
Hoaglin (1993), *How to Detect and Handle Outliers* (robust z-scores from the MAD).
"""

from __future__ import annotations

import math

import numpy as np

from perfci.analysis.changepoints import ChangePointOptions, detect_change_points
from perfci.analysis.runs import (
    WRECK_FLOOR,
    WRECK_SIGMAS,
    FloatArray,
    RunTable,
    orientation,
    range_words,
    repeat_factors,
)
from perfci.analysis.stats import MAD_TO_SD
from perfci.analysis.steps import primary_step
from perfci.core.model import MetricKind

__all__ = ["drop_wrecked_runs", "primary_step_row", "run_factors", "start_at_last_level"]

#: Fewest baseline runs for telling a wrecked run from the rest.
MIN_RUNS_FOR_WRECKS = 5
#: Fewest runs at a new level of the step for it to start the baseline whatever this run
#: shows: fewer, at the end of the window, may be one loaded runner's episode.
MIN_RUNS_AT_LEVEL = 5


def run_factors(base: FloatArray) -> FloatArray:
    """Each run's factor: the median over metrics of its distance from the metric's centre."""
    if base.shape[1] == 0:
        return np.zeros(0)
    return repeat_factors(base)


def drop_wrecked_runs(table: RunTable) -> RunTable:
    """Leave out baseline runs slower in everything (see the module docstring); note how many.

    One-sided, as for repeats: load and throttling only add time, so a run faster in
    everything than the others is the truest measure of the base branch's level, and
    leaving it out (as a "36 % faster, loaded runner") would make the rest look like the
    level and an unchanged pull request run on a quieter runner look like an improvement.
    """
    runs = table.base.shape[1]
    if runs < MIN_RUNS_FOR_WRECKS:
        return table
    factors = run_factors(table.base * orientation(table.keys)[:, None])
    if not np.isfinite(factors).all():
        return table
    centre = float(np.median(factors))
    spread = MAD_TO_SD * float(np.median(np.abs(factors - centre)))
    distance = factors - centre
    limit = max(WRECK_FLOOR, WRECK_SIGMAS * spread)
    worst = np.argsort(-distance)[: runs // 3]
    gone = sorted(int(j) for j in worst if distance[j] > limit)
    if not gone:
        return table
    words = range_words([float(factors[j] - centre) for j in gone])
    table.notes.append(
        f"{len(gone)} of {runs} baseline runs left out: {words} across all "
        "metrics (a loaded runner or a throttled GPU)."
    )
    return _keep_columns(table, [j for j in range(runs) if j not in gone])


def _keep_columns(table: RunTable, columns: list[int]) -> RunTable:
    table.base = table.base[:, columns]
    table.base_repeats = table.base_repeats[:, columns]
    if table.base_few is not None:
        table.base_few = table.base_few[:, columns]
    table.used = [table.used[j] for j in columns]
    return table


def primary_step_row(table: RunTable) -> int | None:
    """Row of the primary step (:func:`.steps.primary_step`: the longest, then the one seen in
    more runs, then the smaller key), if any."""
    rows = []
    for i, key in enumerate(table.keys):
        values = table.base[i][np.isfinite(table.base[i])]
        if key.kind is MetricKind.STEP and values.size:
            rows.append((key, float(np.exp(np.median(values))), int(values.size)))
    chosen = primary_step(rows)
    return None if chosen is None else table.keys.index(chosen)


def start_at_last_level(table: RunTable, *, delta: float) -> RunTable:
    """Keep only the runs since the primary step's last change of level (if any).

    The change-point detector (PELT with a corrected t-test, :mod:`.changepoints`) runs on
    the primary step's run values; changes smaller than the practical margin ``delta`` are
    ignored, since they cannot make a verdict wrong. A new level held by fewer than
    :data:`MIN_RUNS_AT_LEVEL` runs at the end of the window may as well be a loaded runner's
    episode: it starts the baseline only when this run's step sits nearer to it than to the
    level before (the pull request holds the base branch's change); otherwise those runs are
    left out, so that an episode of slow runs neither hides a regression nor makes an
    unchanged run an "improvement".
    """
    row = primary_step_row(table)
    if row is None:
        return table
    present = np.flatnonzero(np.isfinite(table.base[row]))
    if present.size < 4:
        return table
    values = np.exp(table.base[row, present])
    found = detect_change_points(values, options=ChangePointOptions(min_magnitude=delta))
    if not found:
        return table
    last = found[-1]
    if present.size - last.index < MIN_RUNS_AT_LEVEL:
        before = found[-2].index if len(found) > 1 else 0
        new = float(np.mean(table.base[row, present[last.index :]]))
        old = float(np.mean(table.base[row, present[before : last.index]]))
        cand = float(table.cand[row])
        if math.isfinite(cand) and abs(cand - old) < abs(cand - new):
            start = int(present[last.index])
            episode = table.base.shape[1] - start
            table.notes.append(
                f"The base branch's last {episode} run{'s' if episode != 1 else ''} had "
                f"{table.keys[row].display_name} {last.change:+.1%} off its level before, "
                "too few to tell a new level from a loaded runner, and this run's step is "
                "at the earlier level: those runs are left out."
            )
            return start_at_last_level(_keep_columns(table, list(range(start))), delta=delta)
    first_column = int(present[last.index])
    kept = list(range(first_column, table.base.shape[1]))
    table.notes.append(
        f"The base branch's {table.keys[row].display_name} changed level {last.change:+.1%} "
        f"{len(kept)} run{'s' if len(kept) != 1 else ''} ago; the baseline starts there "
        f"({len(kept)} of {table.base.shape[1]} runs)."
    )
    table.level_start = table.used[first_column]
    return _keep_columns(table, kept)
