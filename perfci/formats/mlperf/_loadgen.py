"""MLPerf inference (LoadGen) results as metrics: one rule for the summary text and the detail log.

LoadGen reports a run twice: ``mlperf_log_summary.txt`` in words (``Samples per second:
1234.5``, ``90.00 percentile latency (ns) : 8434934``) and ``mlperf_log_detail.txt`` as
``:::MLLOG`` keys (``result_samples_per_second``, ``result_90.00_percentile_latency_ns``). Either
way a result is a ``MEASURE`` of the run, named as the file names it:

* a latency (a name with ``(ns)``, ``latency_ns`` or ``_latency_ss``/``_ms`` estimates) is a time
  in ns, lower is better (``early_stopping_latency_ms`` is in ms);
* a rate (``per second``, ``per_sec``, ``tokens_per_second``, ``QPS``) is in 1/s, higher is
  better;
* ``samples per query`` (MultiStream's legacy result) is a count, higher is better.

Everything else (seeds, durations asked for, query counts) is a parameter, not a result, and
goes to the profile's metadata. LoadGen's verdict (``Result is : VALID`` / ``result_validity``)
goes there too, and an INVALID run gets a warning: its numbers are real but LoadGen would not
accept them (too short, too few queries, a latency bound missed).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from perfci.core.model import TIME_UNIT, Better, Metric, MetricKind, Profile

_NS_PER_MS = 1e6
_LATENCY = re.compile(r"\(ns\)|latency_ns$|_latency_ss$", re.I)
_LATENCY_MS = re.compile(r"latency_ms$", re.I)
_RATE = re.compile(r"per[ _]sec|\bQPS\b", re.I)
_PER_QUERY = re.compile(r"samples[ _]per[ _]query", re.I)
#: Detail-log keys whose values are results (the rest are settings and bookkeeping).
RESULT_PREFIXES = ("result_", "early_stopping_")
#: Detail-log keys kept as the profile's metadata, under these names.
_DETAIL_META = {
    "loadgen_version": "loadgen_version",
    "sut_name": "sut",
    "effective_scenario": "scenario",
    "effective_test_mode": "mode",
    "result_validity": "result",
}


def result_metric(name: str, value: float) -> Metric | None:
    """The metric of one LoadGen result, or ``None`` when ``name`` is no result."""
    in_ms = _LATENCY_MS.search(name) is not None
    if in_ms or _LATENCY.search(name):
        ns = value * _NS_PER_MS if in_ms else value
        if ns < 0:
            return None
        return Metric(kind=MetricKind.MEASURE, name=name, unit=TIME_UNIT, avg_ns=ns)
    if _RATE.search(name):
        return Metric(
            kind=MetricKind.MEASURE, name=name, unit="1/s", better=Better.HIGHER, value=value
        )
    if _PER_QUERY.search(name):
        return Metric(
            kind=MetricKind.MEASURE, name=name, unit="count", better=Better.HIGHER, value=value
        )
    return None


def invalid_warning(validity: object, reasons: list[str]) -> list[str]:
    """A warning when LoadGen called the run INVALID, naming what it found unmet."""
    if not isinstance(validity, str) or validity.strip().upper() != "INVALID":
        return []
    unmet = f" ({'; '.join(reasons)})" if reasons else ""
    return [
        f"LoadGen marked this run INVALID{unmet}: its numbers are measured, but MLPerf would "
        "not accept them"
    ]


def detail_profile(values: Mapping[str, Any], *, source: str, format: str) -> Profile:
    """The profile of a detail log's LoadGen keys (the last value of each)."""
    profile = Profile(label="mlperf", format=format, source=source)
    unmet: list[str] = []
    for key, value in values.items():
        if key in _DETAIL_META:
            profile.metadata[_DETAIL_META[key]] = value
        if key.startswith(RESULT_PREFIXES) and key.endswith("_met") and value is False:
            unmet.append(key.removeprefix("result_").removesuffix("_met").replace("_", " "))
            continue
        if isinstance(value, bool) or not isinstance(value, int | float):
            continue
        metric = result_metric(key, float(value)) if key.startswith(RESULT_PREFIXES) else None
        if metric is not None:
            profile.metrics.append(metric)
    scenario = profile.metadata.get("scenario")
    if isinstance(scenario, str) and scenario:
        profile.label = scenario.replace(" ", "")
    profile.warnings.extend(invalid_warning(profile.metadata.get("result"), unmet))
    if not profile.metrics:
        profile.warnings.append("the log holds no throughput or latency result")
    return profile
