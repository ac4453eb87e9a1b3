"""Metrics beyond time (issue 15): units and direction through the comparator and the reports.

A throughput drop, a peak-memory rise and an accuracy fall are regressions; the machine-wide
factor and the attribution of the step change use times only; every report shows a value in
its unit and says what moved ("−10.0 % throughput").
"""

from __future__ import annotations

import io

import numpy as np
import pytest
from rich.console import Console

from perfci.analysis.compare import compare_run
from perfci.core.model import Better, MetricKind, SeriesKey, Verdict, default_better
from perfci.core.units import format_value
from perfci.report.console import print_comparison
from perfci.report.markdown import render_comment

STEP = SeriesKey(MetricKind.STEP, "train_step")
THROUGHPUT = SeriesKey(MetricKind.MEASURE, "throughput", unit="tokens/s", better=Better.HIGHER)
PEAK = SeriesKey(MetricKind.MEASURE, "peak allocated memory", unit="bytes")
ACCURACY = SeriesKey(MetricKind.MEASURE, "eval_accuracy", unit="%", better=Better.HIGHER)
KERNELS = [SeriesKey(MetricKind.KERNEL, f"kernel_{i}") for i in range(30)]

LEVELS = {STEP: 10e6, THROUGHPUT: 12_000.0, PEAK: 6 * 2**30, ACCURACY: 75.9}
LEVELS.update({k: 3e5 for k in KERNELS})


def _runs(
    change: dict[SeriesKey, float], *, seed: int = 7, runs: int = 20, noise: float = 0.005
) -> tuple[dict[SeriesKey, list[list[float]]], dict[SeriesKey, list[float]]]:
    rng = np.random.default_rng(seed)
    baseline = {
        key: (level * np.exp(rng.normal(0, noise, (runs, 3)))).tolist()
        for key, level in LEVELS.items()
    }
    candidate = {
        key: (level * (1 + change.get(key, 0.0)) * np.exp(rng.normal(0, noise, 5))).tolist()
        for key, level in LEVELS.items()
    }
    return baseline, candidate


def _lines(change: dict[SeriesKey, float]) -> tuple[Verdict, dict[SeriesKey, object]]:
    result = compare_run(*_runs(change), benchmark="llm")
    return result.verdict, {m.series: m for m in result.metrics}


@pytest.mark.parametrize(
    ("series", "change", "verdict"),
    [
        (THROUGHPUT, -0.10, Verdict.REGRESSION),  # fewer tokens per second
        (THROUGHPUT, +0.10, Verdict.IMPROVEMENT),
        (PEAK, +0.10, Verdict.REGRESSION),  # more memory
        (PEAK, -0.10, Verdict.IMPROVEMENT),
        (ACCURACY, -0.05, Verdict.REGRESSION),  # less accurate
        (ACCURACY, +0.05, Verdict.IMPROVEMENT),
    ],
)
def test_direction_decides_regression_or_improvement(
    series: SeriesKey, change: float, verdict: Verdict
) -> None:
    result = compare_run(*_runs({series: change}), benchmark="llm")
    line = next(m for m in result.metrics if m.series == series)
    assert line.verdict is verdict
    assert line.gated  # headline values gate the check like the step time
    assert result.verdict is verdict
    # The printed values keep their unit's own numbers, and the change is this / baseline − 1.
    assert line.candidate_median is not None and line.baseline_median is not None
    assert line.change == pytest.approx(line.candidate_median / line.baseline_median - 1)
    assert line.change == pytest.approx(change, abs=0.02)


def test_non_time_metrics_are_judged_on_their_own_numbers_not_beyond_the_run_factor() -> None:
    # Baseline runs on runners of varying speed (a shared factor on their times, 3 % sd) and a
    # candidate on a 5 % slower one: the factor is estimated from the times and the kernels
    # are judged beyond it; throughput, memory and accuracy are not shifted by it.
    rng = np.random.default_rng(3)
    baseline, candidate = _runs({k: 0.05 for k in [*KERNELS, STEP]})
    for run in range(20):
        factor = float(np.exp(rng.normal(0, 0.03)))
        for key in [*KERNELS, STEP]:
            baseline[key][run] = [v * factor for v in baseline[key][run]]
    result = compare_run(baseline, candidate, benchmark="llm")
    lines = {m.series: m for m in result.metrics}
    assert result.shared_factor is not None and result.shared_factor.change is not None
    assert result.shared_factor.change > 0.02  # the slower runner is seen in the times
    assert lines[KERNELS[0]].adjusted_change is not None
    for series in (THROUGHPUT, PEAK, ACCURACY):
        assert lines[series].adjusted_change is None
        assert lines[series].verdict is Verdict.UNCHANGED
        assert lines[series].share_of_step is None  # a share of step time is for times only


def test_attribution_of_the_step_change_uses_times_only() -> None:
    change = {KERNELS[0]: 0.5, KERNELS[1]: 0.5, STEP: 0.03, PEAK: 0.2, THROUGHPUT: -0.03}
    result = compare_run(*_runs(change), benchmark="llm")
    assert result.contributions, "the step change is explained"
    explained = {c.series for c in result.contributions}
    assert KERNELS[0] in explained
    assert not explained & {THROUGHPUT, PEAK, ACCURACY}


def test_the_comment_and_the_terminal_say_the_change_in_the_metrics_unit() -> None:
    result = compare_run(*_runs({THROUGHPUT: -0.10}), benchmark="llm")
    comment = render_comment(result)
    assert "❌ Regression" in comment
    line = next(m for m in result.metrics if m.series == THROUGHPUT)
    said = f"{round(line.change * 100, 1):+.1f} % throughput"
    assert f"**{said}**" in comment
    assert "higher is better" in comment
    assert f"{format_value(line.baseline_median, 'tokens/s')} → " in comment
    assert "k tokens/s" in comment and "GiB" in comment  # peak memory in its unit too
    out = io.StringIO()
    print_comparison(result, Console(file=out, width=200, color_system=None))
    printed = out.getvalue()
    assert said in printed and "k tokens/s" in printed and "regression" in printed


@pytest.mark.parametrize(
    ("value", "unit", "shown"),
    [
        (4.09e6, "ns", "4.09 ms"),
        (1.5 * 2**30, "bytes", "1.50 GiB"),
        (512, "bytes", "512 B"),
        (12_345, "tokens/s", "12.3 k tokens/s"),
        (12_345, "1/s", "12.3 k/s"),
        (12, "1/s", "12/s"),
        (85.23, "%", "85.2 %"),
        (2.5e9, "flop/s", "2.5 Gflop/s"),
        (0.7523, "accuracy", "0.7523 accuracy"),
        (3, "count", "3"),
    ],
)
def test_values_print_in_their_unit(value: float, unit: str, shown: str) -> None:
    assert format_value(value, unit) == shown


def test_rates_default_to_higher_is_better() -> None:
    assert default_better("tokens/s") is Better.HIGHER
    assert default_better("items_per_second") is Better.HIGHER
    assert default_better("bytes") is Better.LOWER
    assert default_better("ns") is Better.LOWER


def test_schema_1_documents_still_read_as_times_lower_is_better() -> None:
    from perfci.core.jsondoc import from_document, to_document

    old = {
        "perfci_version": "0.1.0",
        "schema_version": 1,
        "profiles": [{"label": "t", "metrics": [{"kind": "kernel", "name": "k", "total_ns": 5.0}]}],
    }
    ((metric,),) = [p.metrics for p in from_document(old)]
    assert metric.unit == "ns" and metric.better is Better.LOWER and metric.total_ns == 5.0
    again = to_document(from_document(old))
    assert again["schema_version"] == 2
    assert again["profiles"][0]["metrics"][0] == {
        "kind": "kernel",
        "name": "k",
        "device": "gpu",
        "unit": "ns",
        "better": "lower",
        "total_ns": 5.0,
    }
