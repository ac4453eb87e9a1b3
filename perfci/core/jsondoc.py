"""perfci's own JSON document: what ``perfci parse --json`` writes and any tool can feed back.

::

    {"perfci_version": "0.1.0", "schema_version": 2,
     "profiles": [{"label", "format", "source", "steps", "metadata",
                   "metrics": [{"kind", "name", "device", "unit", "better",
                                "calls", "total_ns", ..., "value", "samples"}]}]}

Absent fields are omitted, except ``unit`` and ``better``, written on every metric. Version 1
had neither: its metrics were all times (``ns``, lower is better), which is how it reads.
``schema_version`` lets readers upgrade older documents by named functions; a document newer
than this reader is rejected with a clear message.
"""

from __future__ import annotations

import dataclasses
import math
import typing
from collections.abc import Mapping
from enum import Enum
from typing import Any

from perfci import __version__
from perfci.core.errors import ParseError
from perfci.core.json_finite import finite_json
from perfci.core.model import Better, Device, Metric, MetricKind, Profile, SeriesKey, default_better

SCHEMA_VERSION = 2

# A metric's fields, derived from the model so that a new one is written without an edit here:
# its identity first (the series key's fields it has), then the rest in declaration order.
_METRIC_FIELDS = {f.name: f for f in dataclasses.fields(Metric)}
_IDENTITY = tuple(f.name for f in dataclasses.fields(SeriesKey) if f.name in _METRIC_FIELDS)
_DETAILS = tuple(
    (name, field.default) for name, field in _METRIC_FIELDS.items() if name not in _IDENTITY
)
_NUMBER_FIELDS = tuple(
    name for name, kind in typing.get_type_hints(Metric).items() if kind == float | None
)


def metric_to_dict(metric: Metric) -> dict[str, Any]:
    """Every field of ``metric`` that says something: identity always, the rest when set."""
    out: dict[str, Any] = {}
    for name in _IDENTITY:
        value = getattr(metric, name)
        if value is not None:
            out[name] = value.value if isinstance(value, Enum) else value
    for name, default in _DETAILS:
        value = getattr(metric, name)
        if value is None or value == default:
            continue
        if isinstance(value, list | dict):
            if not value:
                continue
            value = finite_json(value) if name == "attrs" else value.copy()
        out[name] = value
    return out


def profile_to_dict(profile: Profile) -> dict[str, Any]:
    out: dict[str, Any] = {
        "label": profile.label,
        "format": profile.format,
        "source": profile.source,
    }
    if profile.steps is not None:
        out["steps"] = profile.steps
    if profile.metadata:
        # What the source said, as it said it: a NaN there is no JSON (remote uploads).
        out["metadata"] = finite_json(profile.metadata)  # a new dict
    if profile.warnings:
        out["warnings"] = list(profile.warnings)
    out["metrics"] = [metric_to_dict(m) for m in profile.metrics]
    return out


def to_document(profiles: list[Profile]) -> dict[str, Any]:
    """The JSON-ready document for ``profiles``."""
    return {
        "perfci_version": __version__,
        "schema_version": SCHEMA_VERSION,
        "profiles": [profile_to_dict(p) for p in profiles],
    }


def _number(raw: Any, field: str, where: str) -> float | None:
    if raw is None:
        return None
    if isinstance(raw, bool) or not isinstance(raw, int | float):
        raise ParseError(f"{where}: field {field!r} must be a number, got {type(raw).__name__}")
    try:
        value = float(raw)
    except OverflowError:  # an integer beyond any float
        value = math.inf
    if not math.isfinite(value):
        raise ParseError(f"{where}: field {field!r} must be finite")
    return value


def _numbers(raw: Any, field: str, where: str) -> list[float] | None:
    if raw is None:
        return None
    if not isinstance(raw, list):
        raise ParseError(f"{where}: {field!r} must be a list of numbers")
    out = []
    for item in raw:
        number = _number(item, field, where)
        if number is None:
            raise ParseError(f"{where}: {field!r} must be a list of numbers, not null")
        out.append(number)
    return out


def metric_from_dict(raw: Any, where: str) -> Metric:
    if not isinstance(raw, Mapping):
        raise ParseError(f"{where}: a metric must be an object")
    try:
        kind = MetricKind(raw["kind"])
    except KeyError as exc:
        raise ParseError(f"{where}: metric without 'kind'") from exc
    except ValueError as exc:
        valid = ", ".join(k.value for k in MetricKind)
        raise ParseError(f"{where}: unknown metric kind {raw['kind']!r}; expected {valid}") from exc
    name = raw.get("name")
    if not isinstance(name, str) or not name:
        raise ParseError(f"{where}: metric without a 'name' string")
    try:
        device = Device(raw.get("device", "gpu"))
    except ValueError as exc:
        raise ParseError(f"{where}: device must be 'cpu' or 'gpu'") from exc
    calls = raw.get("calls")
    if calls is not None and (isinstance(calls, bool) or not isinstance(calls, int)):
        raise ParseError(f"{where}: 'calls' must be an integer")
    samples = _numbers(raw.get("samples_ns"), "samples_ns", where)
    unit = raw.get("unit", "ns")
    if not isinstance(unit, str) or not unit.strip() or len(unit) > 32:
        raise ParseError(f"{where}: 'unit' must be a non-empty string of at most 32 characters")
    try:
        better = Better(raw["better"]) if "better" in raw else default_better(unit)
    except ValueError as exc:
        raise ParseError(f"{where}: 'better' must be 'lower' or 'higher'") from exc
    warmup = raw.get("warmup", 0)
    if isinstance(warmup, bool) or not isinstance(warmup, int) or warmup < 0:
        raise ParseError(f"{where}: 'warmup' must be a non-negative integer")
    scope = raw.get("scope")
    attrs = raw.get("attrs", {})
    if not isinstance(attrs, Mapping):
        raise ParseError(f"{where}: 'attrs' must be an object")
    values = {f: _number(raw.get(f), f, where) for f in _NUMBER_FIELDS}
    return Metric(
        kind=kind,
        name=name,
        device=device,
        calls=calls,
        samples_ns=samples,
        samples=_numbers(raw.get("samples"), "samples", where),
        step_totals_ns=_numbers(raw.get("step_totals_ns"), "step_totals_ns", where),
        unit=unit,
        better=better,
        warmup=warmup,
        scope=scope if isinstance(scope, str) else None,
        attrs=dict(attrs),
        **values,
    )


def upgrade_document(doc: Mapping[str, Any]) -> Mapping[str, Any]:
    """Bring an older document to ``SCHEMA_VERSION``.

    Version 1 → 2 added ``unit`` and ``better``; a metric without them is a time, lower is
    better, which is what :func:`metric_from_dict` assumes when they are absent.
    """
    version = doc.get("schema_version", 1)
    if not isinstance(version, int) or version < 1:
        raise ParseError(f"schema_version must be a positive integer, got {version!r}")
    if version > SCHEMA_VERSION:
        raise ParseError(
            f"schema_version {version} is newer than this perfci understands "
            f"({SCHEMA_VERSION}); upgrade perfci"
        )
    return doc


def from_document(doc: Any, *, source: str = "") -> list[Profile]:
    """Profiles from a perfci JSON document (already decoded)."""
    if not isinstance(doc, Mapping) or "profiles" not in doc:
        raise ParseError("expected an object with a 'profiles' list", source=source)
    doc = upgrade_document(doc)
    raw_profiles = doc["profiles"]
    if not isinstance(raw_profiles, list):
        raise ParseError("'profiles' must be a list", source=source)
    profiles = []
    for index, raw in enumerate(raw_profiles):
        where = f"profiles[{index}]"
        if not isinstance(raw, Mapping):
            raise ParseError(f"{where} must be an object", source=source)
        metrics_raw = raw.get("metrics", [])
        if not isinstance(metrics_raw, list):
            raise ParseError(f"{where}.metrics must be a list", source=source)
        try:
            metrics = [
                metric_from_dict(m, f"{where}.metrics[{i}]") for i, m in enumerate(metrics_raw)
            ]
        except ParseError as exc:
            raise ParseError(exc.message, source=source) from exc
        steps = raw.get("steps")
        if steps is not None and (isinstance(steps, bool) or not isinstance(steps, int)):
            raise ParseError(f"{where}.steps must be an integer", source=source)
        metadata = raw.get("metadata", {})
        profiles.append(
            Profile(
                label=str(raw.get("label", f"profile{index}")),
                format=str(raw.get("format", "perfci_json")),
                source=str(raw.get("source", source)),
                metrics=metrics,
                steps=steps,
                metadata=dict(metadata) if isinstance(metadata, Mapping) else {},
                warnings=[str(w) for w in raw.get("warnings", []) if isinstance(w, str)],
            )
        )
    return profiles
