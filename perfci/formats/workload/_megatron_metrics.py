"""The metrics of one run of a Megatron-LM training log (``megatron_log``): how its logged
lines lie on the iterations (the schedule), and its measures, timers and peak memory.

``megatron_log`` reads the lines (``_megatron_reader``) and assembles the profile; what each
metric means is in its docstring."""

from __future__ import annotations

import statistics
from collections import Counter
from dataclasses import dataclass
from itertools import pairwise
from typing import Any

from perfci.core.model import Better, Device, Metric, MetricKind
from perfci.formats.workload._megatron_reader import MEMORY_FIELDS, NS_PER_MS, ONE_LINE, Run

#: Per-line fields that are performance: printed key → (metric name, unit, scale, better).
MEASURES: dict[str, tuple[str, str, float, Better]] = {
    "throughput per GPU (TFLOP/s/GPU)": ("throughput per GPU", "flop/s", 1e12, Better.HIGHER),
    "energy per GPU (J/iter/GPU)": ("energy per iteration per GPU", "J", 1.0, Better.LOWER),
    # microsoft/Megatron-DeepSpeed's training_log.
    "samples per second": ("samples per second", "samples/s", 1.0, Better.HIGHER),
    "tokens per gpu per second (tgs)": ("tokens per second per GPU", "tokens/s", 1, Better.HIGHER),
    # argonne-lcf/Megatron-DeepSpeed's spelling, seen in its README's logs.
    "tokens per gpu per second(tgs)": ("tokens per second per GPU", "tokens/s", 1, Better.HIGHER),
    "TFLOPs": ("TFLOPs", "flop/s", 1e12, Better.HIGHER),
}


@dataclass(frozen=True, slots=True)
class Schedule:
    """How a run's lines lie on its iterations."""

    log_interval: int
    from_arguments: bool
    off_grid_first: bool  # the first line is the run's first iteration alone
    start: int  # the iteration the run started after


def line_schedule(run: Run) -> Schedule:
    iterations = [interval.iteration for interval in run.intervals]
    given = int_value(run.args.get("log_interval"))
    interval = given if given and given > 0 else _inferred_interval(iterations, run.loaded)
    off_grid = len(iterations) > 1 and interval > 1 and iterations[0] % interval != 0
    if run.loaded is not None and run.loaded < iterations[0]:
        start = run.loaded
    elif off_grid:
        start = iterations[0] - 1
    else:
        start = max(iterations[0] - interval, 0)
    return Schedule(interval, bool(given and given > 0), off_grid, start)


def _inferred_interval(iterations: list[int], loaded: int | None) -> int:
    """The spacing of the lines after the first, else of the two lines, else of the first."""
    gaps = Counter(b - a for a, b in pairwise(iterations[1:]))
    if gaps:
        return max(1, min(gaps, key=lambda gap: (-gaps[gap], gap)))
    if len(iterations) == 2:
        first, second = iterations
        # "1, 10": the first-iteration line and then the grid.
        return max(1, second if first == 1 and second > 2 else second - first)
    return max(1, iterations[0] - (loaded or 0))


def averaged_over(run: Run, schedule: Schedule) -> list[int]:
    """How many iterations each line's elapsed time per iteration was divided by: those since
    the previous line (the first: since the run's start). A lone first-iteration line leaves
    Megatron's iteration counters as they were, so the next line divides its interval's time
    by the iterations since the start (its time holds iteration 1 once, in the first line):
    the samples times these counts add up to the run's time either way."""
    counts = []
    previous = schedule.start
    for index, interval in enumerate(run.intervals):
        since = schedule.start if schedule.off_grid_first and index == 1 else previous
        counts.append(max(interval.iteration - since, 1))
        previous = interval.iteration
    return counts


def measures(run: Run, warm: int) -> list[Metric]:
    """A ``measure`` per performance field, one sample per line that has it."""
    found: dict[str, list[tuple[int, float]]] = {}
    for index, interval in enumerate(run.intervals):
        for key, value in interval.fields.items():
            if key in MEASURES and value >= 0:
                found.setdefault(key, []).append((index, value))
    metrics = []
    for key, rows in found.items():
        name, unit, scale, better = MEASURES[key]
        values = [value * scale for _, value in rows]
        leading = sum(1 for index, _ in rows if index < warm)
        steady = values[leading:] or values
        metrics.append(
            Metric(
                kind=MetricKind.MEASURE,
                name=name,
                unit=unit,
                better=better,
                value=statistics.fmean(steady),
                samples=values,
                warmup=leading,
                calls=len(values),
                attrs={"source": key},
            )
        )
    return metrics


def timer_metric(
    name: str,
    entries: list[tuple[int, float, float | None]],
    *,
    shape: str,
    warm: int,
    schedule: Schedule,
) -> Metric:
    """A timer's ``range``: per interval its max across ranks, per iteration, in ns."""
    samples: list[float] = []
    mins: list[float] = []
    total = 0.0
    for index, max_ms, min_ms in entries:
        first_alone = schedule.off_grid_first and index == 0
        scale = NS_PER_MS * (schedule.log_interval if first_alone else 1)
        samples.append(max_ms * scale)
        if min_ms is not None:
            mins.append(min_ms * scale)
        if not first_alone:
            total += max_ms * NS_PER_MS * schedule.log_interval
    attrs: dict[str, Any] = {"across_ranks": "max", "log_interval": schedule.log_interval}
    if shape == ONE_LINE:
        attrs["across_ranks"] = "rank 0 only"
    if mins:
        attrs["min_across_ranks_ns"] = mins
    return Metric(
        kind=MetricKind.RANGE,
        name=name,
        device=Device.GPU,
        calls=len(samples),
        total_ns=total,
        avg_ns=statistics.fmean(samples),
        min_ns=min(samples),
        max_ns=max(samples),
        median_ns=statistics.median(samples),
        std_ns=statistics.stdev(samples) if len(samples) > 1 else None,
        samples_ns=samples,
        warmup=sum(1 for index, _, _ in entries if index < warm),
        attrs=attrs,
    )


def memory_metrics(run: Run) -> list[Metric]:
    """Peak memory over ranks (``measure``), and each rank's (``counter``) when several."""
    metrics = []
    ranks = sorted(run.memory, key=lambda rank: -1 if rank is None else rank)
    for key, name in MEMORY_FIELDS:
        per_rank = {rank: run.memory[rank][key] for rank in ranks if key in run.memory[rank]}
        if not per_rank:
            continue
        top = max(per_rank, key=lambda rank: per_rank[rank])
        attrs: dict[str, Any] = {"source": f"report_memory: {key} (MB)", "ranks": len(per_rank)}
        if top is not None:
            attrs["rank"] = top
        metrics.append(_bytes_metric(MetricKind.MEASURE, name, per_rank[top], attrs=attrs))
        if len(per_rank) > 1:
            metrics += [
                _bytes_metric(MetricKind.COUNTER, name, value, scope=f"rank {rank}")
                for rank, value in per_rank.items()
                if rank is not None
            ]
    return metrics


def _bytes_metric(
    kind: MetricKind,
    name: str,
    value: float,
    *,
    scope: str | None = None,
    attrs: dict[str, Any] | None = None,
) -> Metric:
    return Metric(
        kind=kind,
        name=name,
        scope=scope,
        unit="bytes",
        better=Better.LOWER,
        value=value,
        attrs=attrs or {},
    )


def int_value(text: str | None) -> int | None:
    if text is None:
        return None
    text = text.strip()
    return int(text) if text.isascii() and text.isdigit() and len(text) < 19 else None
