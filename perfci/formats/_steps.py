"""Iterations shared by every parser: recognise step ranges and mark warm-up steps.

A source's iterations come as numbered ranges (``Train step 0``, ``train_step-0``,
``ProfilerStep#12``, ``iteration_3``) or as repeated phases (Megatron ``forward_step``).
Both become one ``step`` metric per stem with per-step samples in numeric order.
"""

from __future__ import annotations

import re
import statistics
from collections.abc import Iterable

from perfci.core.model import Device, Metric, MetricKind

# A step-like stem followed by its number: "Train step 0", "train_step-0", "ProfilerStep#12".
_NUMBERED_STEP = re.compile(
    r"^(?P<stem>.*?(?:step|iter|iteration|Step|STEP|ITER|Iteration))[\s_\-#:]*(?P<n>\d+)$"
)

# A leading step this much slower than the median of the rest is warm-up (autotuning, cuDNN
# benchmark mode, allocator growth, lazy module init). 1.5x keeps ordinary noise (a few %) out.
WARMUP_RATIO = 1.5


def step_number(name: str) -> tuple[str, int] | None:
    """``("Train step", 0)`` for ``"Train step 0"``; ``None`` for names that are not steps."""
    match = _NUMBERED_STEP.match(name.strip())
    if not match:
        return None
    return match.group("stem").strip(" _-#:"), int(match.group("n"))


def detect_warmup(samples: list[float], ratio: float = WARMUP_RATIO) -> int:
    """How many leading samples are warm-up: each at least ``ratio`` x the median of the rest.

    At least one steady sample is always kept, so a profile of two steps keeps its second.
    """
    warmup = 0
    while warmup < len(samples) - 1:
        rest = samples[warmup + 1 :]
        if samples[warmup] >= ratio * statistics.median(rest):
            warmup += 1
        else:
            break
    return warmup


def step_metric(
    name: str, samples: list[float], *, device: Device = Device.GPU, warmup: int | None = None
) -> Metric:
    """One ``step`` metric with per-step samples; warm-up detected unless given."""
    count = len(samples)
    warm = detect_warmup(samples) if warmup is None else warmup
    return Metric(
        kind=MetricKind.STEP,
        name=name,
        device=device,
        calls=count,
        total_ns=float(sum(samples)),
        avg_ns=float(sum(samples) / count) if count else None,
        min_ns=min(samples) if samples else None,
        max_ns=max(samples) if samples else None,
        median_ns=float(statistics.median(samples)) if samples else None,
        std_ns=float(statistics.stdev(samples)) if count > 1 else None,
        samples_ns=list(samples),
        warmup=warm,
    )


def collect_steps(
    ranges: Iterable[tuple[str, float]], *, device: Device = Device.GPU
) -> list[Metric]:
    """Step metrics from ``(range name, duration ns)`` pairs; non-step names are ignored.

    Numbered ranges are grouped by stem and ordered numerically (``#10`` after ``#9``).
    """
    groups: dict[str, list[tuple[int, float]]] = {}
    for name, duration in ranges:
        parsed = step_number(name)
        if parsed is None:
            continue
        stem, number = parsed
        groups.setdefault(stem, []).append((number, duration))
    metrics = []
    for stem, numbered in groups.items():
        numbered.sort(key=lambda item: item[0])
        metrics.append(step_metric(stem, [duration for _, duration in numbered], device=device))
    return metrics
