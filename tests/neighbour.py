"""A busy neighbour in some profiled steps of a real trace: the noise shape of a loaded runner.

Used by the A/B and history-mode tests of comparing operators on their fastest step. Each
process is a copy of a real torch-profiler trace of the example with seeded noise of the shapes
measured on the 2-core VM (``benchmarks/RESULTS.md``, "Operators on their fastest step"):
every process its own speed (±2 %) and every metric its own (±1 %), each step ±1 %, and a busy
neighbour in about half of the steps of every process, where every operator taking a
millisecond or more a step ran 1.5–2.5 times as long (one step of each process left alone).
"""

from __future__ import annotations

import copy

import numpy as np

from perfci.core.model import MetricKind, Profile

#: Operators at least this long a step are the ones a neighbour slows.
LARGE_NS = 1e6


def with_neighbour(
    template: Profile, rng: np.random.Generator, change: float = 1.0
) -> list[Profile]:
    """One process (one repeat) of ``template`` beside a neighbour; ``aten::addmm`` ``change``
    times as long."""
    out = copy.deepcopy(template)
    steps = out.steps or 0
    hit = rng.random(steps) < 0.5
    hit[rng.integers(steps)] = False
    neighbour = np.where(hit, rng.uniform(1.5, 2.5, steps), 1.0)
    speed = float(np.exp(rng.normal(0, 0.02)))
    for metric in out.metrics:
        if metric.kind is MetricKind.STEP:
            assert metric.samples_ns is not None
            metric.samples_ns = [
                s * speed * (1 + (n - 1) / 2)
                for s, n in zip(metric.samples_ns, neighbour, strict=True)
            ]
            continue
        own = speed * float(np.exp(rng.normal(0, 0.01)))
        if metric.name == "aten::addmm" and metric.kind is MetricKind.OP:
            own *= change
        if metric.step_totals_ns is None or metric.total_ns is None:
            if metric.total_ns is not None:
                metric.total_ns *= own
            continue
        large = min(metric.step_totals_ns) >= LARGE_NS
        metric.step_totals_ns = [
            total * own * float(np.exp(rng.normal(0, 0.01))) * (n if large else 1.0)
            for total, n in zip(metric.step_totals_ns, neighbour, strict=True)
        ]
        metric.total_ns = sum(metric.step_totals_ns)
    return [out]
