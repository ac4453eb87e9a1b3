"""The latencies of a vLLM or SGLang benchmark result (``vllm_bench``): which requests
completed, their per-request times, and the summary's statistics (``mean_ttft_ms``,
``p99_itl_ms`` …) as one ``bench`` metric per latency."""

from __future__ import annotations

import re
import statistics
from collections.abc import Mapping
from typing import Any

from perfci.core.model import Metric, MetricKind
from perfci.formats.bench._json_doc import describe, number, scaled

NS_PER_S = 10**9
NS_PER_MS = 10**6
#: The service's cap on one metric's samples: a run with more requests keeps its summary.
_MAX_SAMPLES = 100_000
#: ``mean_ttft_ms``, ``p99.9_itl_ms``, ``median_e2e_latency_ms``...
STAT_KEY = re.compile(
    r"^(?P<stat>mean|median|std|max|p\d+(?:\.\d+)?)_(?P<what>ttft|tpot|itl|e2el|e2e_latency)_ms$"
)


class Outcome:
    """Which requests failed, from ``failed``, ``errors`` or ``num_prompts`` − ``completed``."""

    def __init__(self, doc: Mapping[str, Any], completed: int) -> None:
        errors = doc.get("errors")
        self.errors: list[Any] | None = errors if isinstance(errors, list) else None
        failed = number(doc.get("failed"))
        prompts = number(doc.get("num_prompts"))
        if failed is None and self.errors is not None:
            failed = sum(1 for error in self.errors if error)
        if failed is None and prompts is not None:
            failed = max(prompts - completed, 0)
        self.completed = completed
        self.failed = int(failed or 0)

    def warning(self) -> str:
        first = next((str(e) for e in self.errors or () if e), "")
        lines = [text.strip() for text in first.splitlines() if text.strip()]
        shown = f" (first error: {lines[-1][:200]!r})" if lines else ""
        total = self.failed + self.completed
        return (
            f"{self.failed} of {total} requests failed{shown}; the latencies and throughputs "
            f"are those of the {self.completed} that completed"
        )

    def successes(self, count: int) -> list[bool] | None:
        """Which of ``count`` per-request values are of completed requests; None if unknown."""
        if self.errors is not None and len(self.errors) == count:
            mask = [not error for error in self.errors]
            return mask if sum(mask) == self.completed else None
        return [True] * count if count == self.completed and not self.failed else None


def request_seconds(
    doc: Mapping[str, Any], key: str, outcome: Outcome, warnings: list[str]
) -> list[float] | None:
    """The completed requests' values of the per-request array ``key`` (seconds) in ns."""
    values = doc.get(key)
    if not isinstance(values, list) or not values:
        return None
    mask = outcome.successes(len(values))
    if mask is None:
        warnings.append(
            f"{key} ({len(values)} values) does not line up with the {outcome.completed} "
            "completed requests: the summary is compared instead"
        )
        return None
    kept = [value for value, ok in zip(values, mask, strict=True) if ok]
    if len(kept) > _MAX_SAMPLES:
        warnings.append(f"{key}: {len(kept)} values, over {_MAX_SAMPLES}: the summary is kept")
        return None
    return seconds_in_ns(kept, key, warnings)


def seconds_in_ns(values: list[Any], key: str, warnings: list[str]) -> list[float] | None:
    """``values`` (seconds) in ns; None, with a warning, when one is no time."""
    samples: list[float] = []
    for index, raw in enumerate(values):
        value = number(raw)
        if value is None or value < 0:
            warnings.append(f"{key}[{index}] is {describe(raw)}, not a time: {key} left out")
            return None
        samples.append(scaled(value, NS_PER_S))
    return samples


def latency_stats(doc: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """``{"ttft": {"mean": <ms>, "p99": <ms>, ...}, ...}`` from the summary keys."""
    stats: dict[str, dict[str, Any]] = {}
    for key, value in doc.items():
        match = STAT_KEY.match(key)
        if match:
            name = "e2el" if match["what"] == "e2e_latency" else match["what"]
            stats.setdefault(name, {})[match["stat"]] = value
    return stats


def latency_metric(
    name: str,
    stats: Mapping[str, Any],
    factor: int,
    samples: list[float] | None,
    warnings: list[str],
) -> Metric | None:
    """The ``BENCH`` metric of one latency from its summary ``stats`` (``{"mean": .., "p99":
    ..}`` in a unit of ``factor`` ns) and its per-request ``samples`` (ns)."""
    ns = {stat: scaled(v, factor) for stat, raw in stats.items() if (v := number(raw)) is not None}
    mean = ns.get("mean")
    if mean is None and samples:
        mean = statistics.fmean(samples)
    if mean is None:
        mean = ns.get("median")  # SGLang's first releases: medians only
    if mean is None:
        return None
    if mean < 0 or min(ns.values(), default=0.0) < 0:
        warnings.append(f"{name}: a negative time in its summary: left out")
        return None
    metric = Metric(
        kind=MetricKind.BENCH,
        name=name,
        avg_ns=mean,
        std_ns=ns.get("std"),
        median_ns=ns.get("median"),
        max_ns=ns.get("max"),
        attrs={f"{stat}_ns": v for stat, v in ns.items() if stat.startswith("p")},
    )
    if samples:
        metric.samples_ns, metric.calls = samples, len(samples)
        metric.min_ns = min(samples)
        metric.max_ns = metric.max_ns if metric.max_ns is not None else max(samples)
        if metric.median_ns is None:
            metric.median_ns = statistics.median(samples)
    return metric
