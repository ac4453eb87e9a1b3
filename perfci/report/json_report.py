"""A comparison as a JSON-ready dict: ``perfci compare --json`` and the HTTP API.

Keys are stable and documented here; new keys may be added, none renamed or removed without
bumping :data:`SCHEMA_VERSION`. Floats that JSON cannot hold (NaN, ±inf) become ``null``.

Top level: ``schema_version``, ``benchmark``, ``verdict``, ``run_id``, ``commit``, ``branch``,
``pr_number``, ``ci_url``, ``counts`` (metrics per verdict), ``metrics`` (every
:class:`~perfci.model.MetricComparison` field, ``series`` as an object), ``contributions``,
``shared_factor`` (a metric or ``null``), ``baseline`` (or ``null``), ``environment``, ``notes``,
``primary_step`` (the key of the step series the verdict was about, or ``null``).
"""

from __future__ import annotations

import dataclasses
import math
import numbers
from typing import Any

from perfci.model import (
    BaselineInfo,
    Contribution,
    Device,
    MetricComparison,
    MetricKind,
    RunComparison,
    SeriesKey,
    Verdict,
)

__all__ = ["SCHEMA_VERSION", "comparison_from_dict", "comparison_to_dict", "metric_to_dict"]

SCHEMA_VERSION = 1


def comparison_to_dict(result: RunComparison) -> dict[str, Any]:
    """``result`` as plain dicts, lists, strings, numbers and ``None``."""
    counts = {verdict.value: 0 for verdict in Verdict}
    for metric in result.metrics:
        counts[metric.verdict.value] += 1
    return {
        "schema_version": SCHEMA_VERSION,
        "benchmark": result.benchmark,
        "verdict": result.verdict.value,
        "run_id": result.run_id,
        "commit": result.commit,
        "branch": result.branch,
        "pr_number": result.pr_number,
        "ci_url": result.ci_url,
        "counts": counts,
        "metrics": [metric_to_dict(m) for m in result.metrics],
        "contributions": [_contribution(c) for c in result.contributions],
        "shared_factor": metric_to_dict(result.shared_factor) if result.shared_factor else None,
        "baseline": _baseline(result.baseline),
        "environment": dict(sorted(result.environment.items())),
        "notes": list(result.notes),
        "primary_step": result.primary_step,
    }


def metric_to_dict(metric: MetricComparison) -> dict[str, Any]:
    """Every field of ``metric``, in declaration order; the verdict as its string value."""
    out: dict[str, Any] = {}
    for field in dataclasses.fields(metric):
        out[field.name] = _plain(getattr(metric, field.name))
    return out


def _contribution(contribution: Contribution) -> dict[str, Any]:
    return {"key": contribution.key, "delta_ns": _number(contribution.delta_ns),
            "share": _number(contribution.share), "series": _series(contribution.series)}


def _baseline(baseline: BaselineInfo | None) -> dict[str, Any] | None:
    if baseline is None:
        return None
    return {"branch": baseline.branch, "runs": baseline.runs,
            "first_commit": baseline.first_commit, "last_commit": baseline.last_commit,
            "run_ids": list(baseline.run_ids)}


def _series(series: SeriesKey | None) -> dict[str, Any] | None:
    if series is None:
        return None
    return {"kind": series.kind.value, "name": series.name, "device": series.device.value,
            "scope": series.scope, "section": series.section,
            "display_name": series.display_name}


def _plain(value: Any) -> Any:
    if isinstance(value, SeriesKey):
        return _series(value)
    if isinstance(value, Verdict):
        return value.value
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return value
    # numpy scalars are not JSON-serialisable; the analysis layer may hand them through.
    if isinstance(value, numbers.Integral):
        return int(value)
    if isinstance(value, numbers.Real):
        return _number(float(value))
    return value


def _number(value: float | None) -> float | None:
    if value is None:
        return None
    value = float(value)
    return value if math.isfinite(value) else None


def comparison_from_dict(data: dict[str, Any]) -> RunComparison:
    """The inverse of :func:`comparison_to_dict`: a stored comparison, ready to render again.

    Raises ``ValueError`` on a document of another schema version.
    """
    if data.get("schema_version") != SCHEMA_VERSION:
        raise ValueError(f"comparison schema_version {data.get('schema_version')!r} is not "
                         f"{SCHEMA_VERSION}")
    baseline = data.get("baseline")
    shared = data.get("shared_factor")
    return RunComparison(
        benchmark=data["benchmark"], verdict=Verdict(data["verdict"]),
        metrics=[_metric_from(m) for m in data.get("metrics", [])],
        contributions=[Contribution(key=c["key"], delta_ns=c["delta_ns"] or 0.0,
                                    share=c["share"] or 0.0, series=_series_from(c["series"]))
                       for c in data.get("contributions", [])],
        baseline=BaselineInfo(**baseline) if baseline else None,
        environment=dict(data.get("environment", {})), run_id=data.get("run_id"),
        commit=data.get("commit"), branch=data.get("branch"), pr_number=data.get("pr_number"),
        ci_url=data.get("ci_url"), shared_factor=_metric_from(shared) if shared else None,
        notes=list(data.get("notes", [])), primary_step=data.get("primary_step"))


def _metric_from(data: dict[str, Any]) -> MetricComparison:
    values: dict[str, Any] = {f.name: data.get(f.name)
                              for f in dataclasses.fields(MetricComparison) if f.name in data}
    values["verdict"] = Verdict(values["verdict"])
    values["series"] = _series_from(data.get("series"))
    return MetricComparison(**values)


def _series_from(data: dict[str, Any] | None) -> SeriesKey | None:
    if data is None:
        return None
    return SeriesKey(kind=MetricKind(data["kind"]), name=data["name"],
                     device=Device(data["device"]), scope=data.get("scope", ""),
                     section=data.get("section", ""))
