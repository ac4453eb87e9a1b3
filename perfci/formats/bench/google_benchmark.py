"""Google Benchmark's JSON (``--benchmark_format=json``, ``--benchmark_out=FILE``).

Each benchmark (its ``run_name``; ``name`` in versions before 1.5) gives:

- a ``BENCH`` metric named ``<run_name>``: ``real_time`` per iteration in ns;
- a ``BENCH`` metric named ``<run_name> (cpu)``: ``cpu_time`` per iteration in ns. Both clocks
  are what the harness prints and either can regress alone (more threads burning CPU for the
  same wall time, or waiting on a device); a report row ``BM_Sort/1024 (cpu)`` reads plainly;
- a ``MEASURE`` metric per user counter, ``scope`` = the benchmark, ``name`` = the counter
  (``items_per_second`` in ``items/s``, ``bytes_per_second`` in ``bytes/s``, ``X_per_second`` in
  ``X/s``, a name ending ``/s`` in itself, the memory manager's bytes in ``bytes``, any other in
  ``count``); MEASURE so that a throughput can fail the check. The JSON does not say which way a
  custom counter is good: rates are higher-better, the rest lower-better, and the parser options
  ``higher=NAME,...`` / ``lower=NAME,...`` say otherwise for the named counters.

Repetitions (``run_type: iteration``, one row per ``repetition_index``) are the samples
(``samples_ns``, ``samples``); ``calls`` is the iterations of one repetition. Aggregate rows
(``run_type: aggregate``: mean, median, stddev, cv, user statistics) are never samples: they fill
avg / median / std only when no repetition was reported (``--benchmark_report_aggregates_only``)
and are kept in ``attrs["aggregates"]`` (times in ns, ``cv`` as a fraction). Complexity rows
(``BigO``, ``RMS``) describe a family (``BM_Sort``, not ``BM_Sort/1024``) and go to the profile
metadata under ``complexity``. A run with ``error_occurred`` or ``skipped`` is left out with a
warning naming the benchmark and its message.
"""

from __future__ import annotations

import re
import statistics
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from perfci.core.errors import ParseError
from perfci.core.limits import MAX_VALUE
from perfci.core.model import Better, Device, Metric, MetricKind, Profile, default_better
from perfci.core.units import scale_to_ns
from perfci.formats.bench import _json_doc
from perfci.formats.bench._detectors import GOOGLE_BENCHMARK

NAME = GOOGLE_BENCHMARK.name
DESCRIPTION = GOOGLE_BENCHMARK.description
sniff = GOOGLE_BENCHMARK.sniff

DEFAULT_LABEL = "google-benchmark"
CPU_SUFFIX = " (cpu)"
#: Fields of a run that are not user counters.
RUN_FIELDS = frozenset(
    {
        "name",
        "family_index",
        "per_family_instance_index",
        "run_name",
        "run_type",
        "repetitions",
        "repetition_index",
        "threads",
        "iterations",
        "real_time",
        "cpu_time",
        "time_unit",
        "aggregate_name",
        "aggregate_unit",
        "error_occurred",
        "error_message",
        "skipped",
        "skip_message",
        "label",
        "cpu_coefficient",
        "real_coefficient",
        "big_o",
        "rms",
    }
)
#: Units of the counters Google Benchmark names itself (SetItemsProcessed, MemoryManager ...).
COUNTER_UNITS = {
    "items_per_second": "items/s",
    "bytes_per_second": "bytes/s",
    "max_bytes_used": "bytes",
    "total_allocated_bytes": "bytes",
    "net_heap_growth": "bytes",
    "allocs_per_iter": "count",
}
#: Aggregates that describe a family's complexity rather than one benchmark's time.
COMPLEXITY = frozenset({"BigO", "RMS"})
#: Name suffixes of aggregate rows in versions that wrote no ``run_type`` (before 1.5).
_OLD_AGGREGATES = ("mean", "median", "stddev", "cv")
_PER_SECOND = "_per_second"
#: The time units Google Benchmark writes (``benchmark::TimeUnit``).
TIME_UNITS = ("ns", "us", "ms", "s")


@dataclass
class _Case:
    """The rows of one benchmark: its repetitions, its aggregates, its failed runs."""

    name: str
    runs: list[dict[str, Any]] = field(default_factory=list)
    aggregates: dict[str, dict[str, Any]] = field(default_factory=dict)
    failures: list[str] = field(default_factory=list)


def parse(path: Path, *, options: Mapping[str, str]) -> list[Profile]:
    """The one profile of a Google Benchmark JSON file."""
    source = str(path)
    doc = _json_doc.load_benchmarks(path, format=NAME, tool="--benchmark_format=json")
    context = doc.get("context")
    context = context if isinstance(context, dict) else {}
    profile = Profile(label=_label(context), format=NAME, source=source)
    if context:
        profile.metadata["context"] = context
    directions = _directions(options)
    reader = _Reader(source)
    complexity: dict[str, dict[str, Any]] = {}
    for case in _cases(doc["benchmarks"], source):
        if case.failures:
            profile.warnings.append(_failure_warning(case))
        times = {k: v for k, v in case.aggregates.items() if k not in COMPLEXITY}
        for aggregate in sorted(COMPLEXITY & case.aggregates.keys()):
            complexity.setdefault(case.name, {}).update(
                reader.complexity(case.name, case.aggregates[aggregate])
            )
        if not case.runs and not times:
            continue
        if not case.runs and "mean" not in times:
            profile.warnings.append(f"{case.name}: only aggregates without a mean; left out")
            continue
        profile.metrics += reader.times(case, times)
        profile.metrics += _counters(case, times, directions)
    if complexity:
        profile.metadata["complexity"] = complexity
    if not profile.metrics:
        profile.warnings.append("the file holds no benchmark with a time")
    return [profile]


def _label(context: dict[str, Any]) -> str:
    executable = context.get("executable")
    if isinstance(executable, str):
        base = re.split(r"[\\/]", executable.rstrip("\\/"))[-1]
        if base:
            return base
    return DEFAULT_LABEL


def _directions(options: Mapping[str, str]) -> dict[str, Better]:
    """Counter names the user says are higher- or lower-better (options ``higher``, ``lower``)."""
    found: dict[str, Better] = {}
    for key, better in (("higher", Better.HIGHER), ("lower", Better.LOWER)):
        for name in (options.get(key) or "").split(","):
            if name.strip():
                found[name.strip()] = better
    return found


def _cases(rows: list[Any], source: str) -> list[_Case]:
    """The rows grouped by benchmark, in the order of their first row."""
    for index, row in enumerate(rows):
        if not isinstance(row, dict) or not isinstance(row.get("name"), str):
            raise ParseError(
                f"benchmarks[{index}] is not an object with a 'name'", source=source, format=NAME
            )
    names = {row["name"] for row in rows}
    cases: dict[str, _Case] = {}
    for row in rows:
        run_name, aggregate = _identity(row, names)
        case = cases.setdefault(run_name, _Case(run_name))
        if row.get("error_occurred") is True or row.get("skipped") is True:
            message = row.get("error_message") or row.get("skip_message") or "no message"
            case.failures.append(str(message))
        elif aggregate is not None:
            case.aggregates.setdefault(aggregate, row)
        else:
            case.runs.append(row)
    return list(cases.values())


def _identity(row: dict[str, Any], names: set[str]) -> tuple[str, str | None]:
    """The benchmark a row belongs to and its aggregate name (None for a repetition)."""
    name: str = row["name"]
    run_name = row.get("run_name")
    run_name = run_name if isinstance(run_name, str) and run_name else None
    aggregate = row.get("aggregate_name")
    aggregate = aggregate if isinstance(aggregate, str) and aggregate else None
    if "big_o" in row or "cpu_coefficient" in row:
        aggregate = aggregate or "BigO"
    elif "rms" in row:
        aggregate = aggregate or "RMS"
    if row.get("run_type") == "aggregate" or aggregate is not None:
        aggregate = aggregate or "aggregate"
        return run_name or name.removesuffix(f"_{aggregate}"), aggregate
    if "run_type" not in row:
        # Before 1.5 an aggregate was only a suffix on its benchmark's name ("BM_x_mean").
        for suffix in _OLD_AGGREGATES:
            base = name.removesuffix(f"_{suffix}")
            if base != name and base in names:
                return base, suffix
    return run_name or name, None


def _failure_warning(case: _Case) -> str:
    messages = "; ".join(dict.fromkeys(case.failures))
    if case.runs or case.aggregates:
        total = len(case.failures) + len(case.runs)
        return (
            f"{case.name}: {len(case.failures)} of {total} repetitions failed ({messages}); "
            f"the others are kept"
        )
    return f"{case.name}: left out, the benchmark reported an error: {messages}"


class _Reader:
    """Reads numbers off rows, with errors naming the file and the benchmark."""

    def __init__(self, source: str) -> None:
        self.source = source

    def _error(self, message: str) -> ParseError:
        return ParseError(message, source=self.source, format=NAME)

    def ns(self, case: str, row: dict[str, Any], key: str) -> float:
        """``row[key]`` (in the row's ``time_unit``) in ns."""
        value = _json_doc.number(row.get(key))
        if value is None:
            raise self._error(f"benchmark {case!r}: {key!r} is not a number: {row.get(key)!r}")
        unit = row.get("time_unit", "ns")
        if not isinstance(unit, str) or unit not in TIME_UNITS:
            raise self._error(f"benchmark {case!r}: unknown time_unit {unit!r}")
        try:
            return scale_to_ns(value, unit)
        except ValueError:  # beyond MAX_VALUE: its means and sums would overflow (issue 31)
            raise self._error(
                f"benchmark {case!r}: {key!r} of {value:g} {unit} is out of range "
                f"(at most {MAX_VALUE:g} ns)"
            ) from None

    def complexity(self, family: str, row: dict[str, Any]) -> dict[str, Any]:
        """A BigO row's fitted coefficients (ns) and order, or an RMS row's fit error."""
        found: dict[str, Any] = {}
        if isinstance(row.get("big_o"), str):
            found["big_o"] = row["big_o"]
        for key in ("real_coefficient", "cpu_coefficient"):
            if _json_doc.number(row.get(key)) is not None:
                found[f"{key}_ns"] = self.ns(family, row, key)
        if (rms := _json_doc.number(row.get("rms"))) is not None:
            found["rms"] = rms  # normalised root-mean-square error of the fit, a fraction
        return found

    def times(self, case: _Case, aggregates: dict[str, dict[str, Any]]) -> list[Metric]:
        """The real-time and the CPU-time metric of one benchmark."""
        metrics = []
        for key, suffix in (("real_time", ""), ("cpu_time", CPU_SUFFIX)):
            samples = [self.ns(case.name, row, key) for row in case.runs]
            summary = {
                name: self._aggregate(case.name, name, row, key) for name, row in aggregates.items()
            }
            metric = _summarise(case, samples, summary)
            metric.name = case.name + suffix
            metrics.append(metric)
        return metrics

    def _aggregate(self, case: str, aggregate: str, row: dict[str, Any], key: str) -> float:
        if _is_fraction(aggregate, row):
            value = _json_doc.number(row.get(key))
            if value is None:
                raise self._error(f"benchmark {case!r}: {key!r} is not a number")
            return value
        return self.ns(case, row, key)


def _is_fraction(aggregate: str, row: dict[str, Any]) -> bool:
    """A percentage-unit aggregate (cv): a fraction, not a time, whatever its time_unit says."""
    unit = row.get("aggregate_unit")
    return unit == "percentage" or (unit is None and aggregate == "cv")


def _summarise(case: _Case, samples: list[float], summary: dict[str, float]) -> Metric:
    """A time metric from the repetitions' times, else from the aggregates."""
    metric = Metric(kind=MetricKind.BENCH, name=case.name, device=Device.CPU)
    metric.calls = _iterations(case.runs)
    if len(samples) > 1:
        metric.samples_ns = samples
        metric.avg_ns = statistics.fmean(samples)
        metric.min_ns, metric.max_ns = min(samples), max(samples)
        metric.median_ns = statistics.median(samples)
        metric.std_ns = statistics.stdev(samples)  # n - 1, as Google Benchmark's stddev
    elif samples:
        metric.avg_ns = samples[0]
    else:
        metric.avg_ns = summary.get("mean")
        metric.median_ns = summary.get("median")
        metric.std_ns = summary.get("stddev")
    metric.attrs = _attrs(case, summary)
    return metric


def _iterations(runs: list[dict[str, Any]]) -> int | None:
    """The iterations of one repetition, when every repetition ran the same number."""
    counts = [row.get("iterations") for row in runs]
    if not counts or any(count != counts[0] for count in counts):
        return None
    count = counts[0]
    return count if isinstance(count, int) and not isinstance(count, bool) else None


def _attrs(case: _Case, summary: dict[str, float]) -> dict[str, Any]:
    attrs: dict[str, Any] = {}
    rows = case.runs or list(case.aggregates.values())
    first = rows[0]
    if case.runs and _iterations(case.runs) is None:
        attrs["iterations"] = [row.get("iterations") for row in case.runs]
    if len(case.runs) > 1:
        attrs["repetitions"] = len(case.runs)
    elif not case.runs and isinstance(first.get("repetitions"), int):
        attrs["repetitions"] = first["repetitions"]
    for key in ("threads", "label"):
        if first.get(key) is not None:
            attrs[key] = first[key]
    if summary:
        attrs["aggregates"] = summary
    return attrs


def _counters(
    case: _Case, aggregates: dict[str, dict[str, Any]], directions: Mapping[str, Better]
) -> list[Metric]:
    """One MEASURE per user counter of the benchmark, scoped by its name."""
    names = dict.fromkeys(
        key
        for row in [*case.runs, *aggregates.values()]
        for key, value in row.items()
        if key not in RUN_FIELDS and _json_doc.number(value) is not None
    )
    metrics = []
    for counter in names:
        samples = [v for row in case.runs if (v := _json_doc.number(row.get(counter))) is not None]
        summary = {
            name: v
            for name, row in aggregates.items()
            if (v := _json_doc.number(row.get(counter))) is not None
        }
        value = statistics.fmean(samples) if samples else summary.get("mean")
        if value is None:
            continue
        unit = counter_unit(counter)
        metric = Metric(
            kind=MetricKind.MEASURE,
            name=counter,
            scope=case.name,
            device=Device.CPU,
            unit=unit,
            better=directions.get(counter, default_better(unit)),
            value=value,
            samples=samples if len(samples) > 1 else None,
        )
        if summary:
            metric.attrs["aggregates"] = summary
        metrics.append(metric)
    return metrics


def counter_unit(counter: str) -> str:
    """The unit of a user counter, from its name (the JSON carries no unit or flags)."""
    if counter in COUNTER_UNITS:
        return COUNTER_UNITS[counter]
    if counter.endswith(_PER_SECOND) and len(counter) > len(_PER_SECOND):
        return counter.removesuffix(_PER_SECOND) + "/s"
    if counter.endswith("/s"):
        return counter
    return "count"
