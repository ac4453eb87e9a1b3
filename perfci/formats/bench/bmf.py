"""Bencher Metric Format (BMF): ``{benchmark: {measure: {value, lower_value?, upper_value?}}}``.

Bencher's own JSON, which its adapters turn every harness's output into and which any tool can
write. Benchmark names and measure names are free strings. One metric per (benchmark, measure):

* ``latency`` (nanoseconds by Bencher's convention): a ``BENCH`` metric named by the benchmark,
  ``avg_ns`` = value, ``min_ns`` / ``max_ns`` = the lower / upper values;
* ``throughput`` (operations per second): a ``MEASURE`` scoped by the benchmark, unit ``1/s``,
  higher is better;
* any other measure (``file-size``, dhat's ``Max Bytes``...): a ``MEASURE`` scoped by the
  benchmark, named by the measure and with the measure's name as its unit, lower is better
  (sizes, memory and counts of work are); its lower / upper values stay in ``attrs``.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from perfci.core.model import Better, Device, Metric, MetricKind, Profile
from perfci.formats.bench._detectors import BMF
from perfci.formats.bench._json_doc import ShapeError, describe, load, required_number, shape_errors

NAME = BMF.name
DESCRIPTION = BMF.description
sniff = BMF.sniff

_LATENCY = "latency"
_THROUGHPUT = "throughput"
_LABEL = "bmf"


def parse(path: Path, *, options: Mapping[str, str]) -> list[Profile]:
    """One profile with a metric per (benchmark, measure) of the BMF file ``path``."""
    doc = load(path, format=NAME)
    profile = Profile(label=_LABEL, format=NAME, source=str(path))
    with shape_errors(path, format=NAME):
        if not isinstance(doc, dict) or not doc:
            got = describe(doc) if doc != {} else "an empty object"
            raise ShapeError(
                f"expected a JSON object of benchmarks {{name: {{measure: {{value: ...}}}}}}, "
                f"got {got}"
            )
        for name, measures in doc.items():
            profile.metrics.extend(_benchmark(name, measures, profile.warnings))
    return [profile]


def _benchmark(name: str, measures: Any, warnings: list[str]) -> list[Metric]:
    """The metrics of one benchmark's measures."""
    if not isinstance(measures, dict):
        raise ShapeError(
            f"benchmark {name!r}: expected an object of measures, got {describe(measures)}"
        )
    if not name.strip():
        raise ShapeError("a benchmark has an empty name")
    if not measures:
        warnings.append(f"benchmark {name!r} has no measures")
    metrics: list[Metric] = []
    seen: dict[str, str] = {}
    for measure, fields in measures.items():
        metric = _metric(name, measure, fields)
        earlier = seen.setdefault(metric.key, measure)
        if earlier != measure:  # "latency" and "Latency": one series twice
            raise ShapeError(
                f"benchmark {name!r}: measures {earlier!r} and {measure!r} are the same measure"
            )
        metrics.append(metric)
    return metrics


def _metric(benchmark: str, measure: str, fields: Any) -> Metric:
    where = f"benchmark {benchmark!r}, measure {measure!r}"
    if not isinstance(fields, dict):
        raise ShapeError(
            f"{where}: expected an object with a numeric value, got {describe(fields)}"
        )
    value = required_number(fields, "value", where)
    lower = _bound(fields, "lower_value", where)
    upper = _bound(fields, "upper_value", where)
    slug = measure.strip().lower()
    if slug == _LATENCY:
        if value < 0:
            raise ShapeError(f"{where}: a latency cannot be negative ({value!r})")
        return Metric(
            kind=MetricKind.BENCH,
            name=benchmark,
            device=Device.CPU,
            avg_ns=value,
            min_ns=lower,
            max_ns=upper,
        )
    bounds = (("lower_value", lower), ("upper_value", upper))
    attrs = {key: bound for key, bound in bounds if bound is not None}
    throughput = slug == _THROUGHPUT
    return Metric(
        kind=MetricKind.MEASURE,
        name=_THROUGHPUT if throughput else measure,
        device=Device.CPU,
        scope=benchmark,
        unit="1/s" if throughput else measure,
        better=Better.HIGHER if throughput else Better.LOWER,
        value=value,
        attrs=attrs,
    )


def _bound(fields: dict[str, Any], key: str, where: str) -> float | None:
    """An optional lower / upper value: absent or null means none."""
    return None if fields.get(key) is None else required_number(fields, key, where)
