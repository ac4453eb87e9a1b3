"""Attribution of a step-time change to kernels, memory operations, collectives and ranges."""

from __future__ import annotations

import pytest

from perfci.analysis.attribution import MetricDelta, attribute
from perfci.core.model import MetricKind, SeriesKey

STEP = SeriesKey(MetricKind.STEP, "train_step")


def _delta(kind: MetricKind, name: str, base: float | None, cand: float | None) -> MetricDelta:
    return MetricDelta(SeriesKey(kind, name), base, cand)


def test_shares_divide_each_delta_by_the_step_delta() -> None:
    step = MetricDelta(STEP, 10_000.0, 10_600.0)
    metrics = [
        _delta(MetricKind.KERNEL, "ampere_sgemm_128x64_tn", 6_000.0, 6_450.0),
        _delta(MetricKind.MEMORY, "memcpy HtoD", 500.0, 620.0),
        _delta(MetricKind.COMM, "ncclAllReduce", 1_000.0, 1_030.0),
        _delta(MetricKind.KERNEL, "unchanged_kernel", 300.0, 300.0),
        _delta(MetricKind.RANGE, "forward", 7_000.0, 7_500.0),
        _delta(MetricKind.API, "cudaLaunchKernel", 200.0, 190.0),
    ]
    found = attribute(step, metrics)
    assert found is not None and found.step_delta_ns == 600.0
    assert [c.key for c in found.primary] == [
        "kernel:gpu:ampere_sgemm_128x64_tn",
        "memory:gpu:memcpy HtoD",
        "comm:gpu:ncclAllReduce",
    ]
    assert [c.share for c in found.primary] == pytest.approx([450 / 600, 120 / 600, 30 / 600])
    assert found.explained == pytest.approx(1.0)
    # Ranges and API calls overlap the kernels: listed after them, never summed with them.
    assert [c.key for c in found.nested] == ["range:gpu:forward", "api:gpu:cudaLaunchKernel"]
    assert found.nested[1].share == pytest.approx(-10 / 600)
    assert found.contributions == [*found.primary, *found.nested]


def test_new_and_removed_kernels_count_their_whole_time() -> None:
    step = MetricDelta(STEP, 1_000.0, 1_100.0)
    found = attribute(
        step,
        [
            _delta(MetricKind.KERNEL, "new_kernel", None, 150.0),
            _delta(MetricKind.KERNEL, "gone_kernel", 50.0, None),
        ],
    )
    assert found is not None
    assert {c.key: c.delta_ns for c in found.primary} == {
        "kernel:gpu:new_kernel": 150.0,
        "kernel:gpu:gone_kernel": -50.0,
    }


def test_top_limits_each_group_and_unchanged_step_gives_none() -> None:
    step = MetricDelta(STEP, 1_000.0, 1_010.0)
    metrics = [_delta(MetricKind.KERNEL, f"k{i}", 100.0, 100.0 + i) for i in range(1, 6)]
    found = attribute(step, metrics, top=2)
    assert found is not None
    assert [c.key for c in found.primary] == ["kernel:gpu:k5", "kernel:gpu:k4"]
    assert found.explained == pytest.approx(sum(range(1, 6)) / 10)
    assert attribute(MetricDelta(STEP, 1_000.0, 1_000.0), metrics) is None
