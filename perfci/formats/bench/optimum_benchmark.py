"""optimum-benchmark reports: ``benchmark.json`` = ``{config, report}``, ``benchmark_report.json``.

A report maps each measured target (``load``, ``forward``, ``prefill``, ``decode``,
``per_token``, ``train``...) to ``{memory, latency, throughput, energy, efficiency}``, any of them
null when the scenario did not track it. Per target:

* ``latency`` (``{unit: "s", values[], count, total, mean, p50, p90, p95, p99, stdev, stdev_}``):
  a ``BENCH`` metric named by the target, ``values`` as ``samples_ns``, ``count`` as ``calls``;
* ``throughput`` (``{unit: "samples/s"|"tokens/s"..., value}``): a ``MEASURE`` named
  ``throughput``, scoped by the target, in its unit, higher is better;
* ``memory`` (``{unit: "MB", max_ram, max_global_vram, ...}``): a ``MEASURE`` per peak, in bytes;
  optimum-benchmark's MB are 10^6 bytes (its memory tracker divides bytes by ``1e6``);
* ``energy`` (``{unit: "kWh", cpu, ram, gpu, total}``): ``cpu_energy``... in the unit given;
* ``efficiency`` (``{unit: "samples/kWh"..., value}``): ``efficiency``, higher is better.

The ``config`` becomes small profile metadata (name, backend, scenario, launcher, environment:
their scalar fields). Its ``backend.device`` says the metrics' device (``cpu``, else GPU);
without a config the device is GPU unless the ``device=cpu|gpu`` option says otherwise.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from perfci.core.errors import ConfigError
from perfci.core.model import Better, Device, Metric, MetricKind, Profile
from perfci.core.units import NS_PER_UNIT
from perfci.formats.bench._detectors import OPTIMUM_BENCHMARK
from perfci.formats.bench._detectors import OPTIMUM_SECTIONS as _SECTIONS
from perfci.formats.bench._json_doc import ShapeError, describe, load, number, scaled, shape_errors

NAME = OPTIMUM_BENCHMARK.name
DESCRIPTION = OPTIMUM_BENCHMARK.description
sniff = OPTIMUM_BENCHMARK.sniff

# optimum-benchmark writes decimal megabytes (bytes / 1e6); the others for hand-made reports.
_BYTES_PER = {"B": 1, "bytes": 1, "KB": 10**3, "MB": 10**6, "GB": 10**9, "MiB": 2**20, "GiB": 2**30}
_PERCENTILES = ("p90", "p95", "p99")
_DEVICES = {"cpu": Device.CPU, "gpu": Device.GPU}
_DEFAULT_LABEL = "optimum-benchmark"
#: Metadata keeps nested objects of scalars up to this size (input_shapes), not bigger ones.
_SMALL_OBJECT = 16


def parse(path: Path, *, options: Mapping[str, str]) -> list[Profile]:
    """One profile with the metrics of every target of the report in ``path``."""
    chosen = _device_option(options)
    doc = load(path, format=NAME)
    with shape_errors(path, format=NAME):
        if not isinstance(doc, dict):
            raise ShapeError(
                f"expected a JSON object (a report or {{config, report}}), got {describe(doc)}"
            )
        report, config = _report_and_config(doc)
        device = chosen or _config_device(config)
        profile = Profile(
            label=_label(config), format=NAME, source=str(path), metadata=_metadata(config)
        )
        for target, sections in report.items():
            if sections is None:
                continue
            if not isinstance(sections, dict):
                raise ShapeError(
                    f"target {target!r}: expected an object of {'/'.join(_SECTIONS)}, got "
                    f"{describe(sections)}"
                )
            profile.metrics.extend(_target_metrics(target, sections, device))
    if not profile.metrics:
        profile.warnings.append(
            "no target held a latency, throughput, memory, energy or efficiency measurement"
        )
    return [profile]


def _device_option(options: Mapping[str, str]) -> Device | None:
    raw = options.get("device")
    if not raw:
        return None
    device = _DEVICES.get(raw.strip().lower())
    if device is None:
        raise ConfigError(f"{NAME}: device={raw!r}: expected cpu or gpu")
    return device


def _report_and_config(doc: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """The report and the config (empty for a bare ``benchmark_report.json``)."""
    if "report" not in doc:
        return doc, {}
    report, config = doc["report"], doc.get("config")
    if not isinstance(report, dict):
        raise ShapeError(f"'report' must be an object of targets, got {describe(report)}")
    return report, config if isinstance(config, dict) else {}


def _config_device(config: Mapping[str, Any]) -> Device:
    backend = config.get("backend")
    device = backend.get("device") if isinstance(backend, dict) else None
    return Device.CPU if isinstance(device, str) and device.lower() == "cpu" else Device.GPU


def _label(config: Mapping[str, Any]) -> str:
    name = config.get("name")
    return name if isinstance(name, str) and name.strip() else _DEFAULT_LABEL


def _metadata(config: Mapping[str, Any]) -> dict[str, Any]:
    """The config's name and the scalar fields of its sections, not their big nested parts."""
    meta: dict[str, Any] = {}
    if isinstance(config.get("name"), str):
        meta["name"] = config["name"]
    for section in ("backend", "scenario", "launcher", "environment"):
        part = config.get(section)
        small = _small(part) if isinstance(part, dict) else {}
        if small:
            meta[section] = small
    return meta


def _small(part: Mapping[str, Any]) -> dict[str, Any]:
    """Non-null scalars, lists of scalars and small objects of scalars; no ``_target_``."""
    return {
        key: value
        for key, value in part.items()
        if not key.startswith("_") and value is not None and _small_value(value)
    }


def _small_value(value: Any) -> bool:
    if _scalar(value):
        return True
    if isinstance(value, list):
        return bool(value) and all(map(_scalar, value))
    if isinstance(value, dict) and 0 < len(value) <= _SMALL_OBJECT:
        return all(_scalar(item) or item is None for item in value.values())
    return False


def _scalar(value: Any) -> bool:
    return isinstance(value, str | int | float | bool)


def _target_metrics(target: str, sections: dict[str, Any], device: Device) -> list[Metric]:
    metrics: list[Metric] = []
    for key in _SECTIONS:
        section = sections.get(key)
        if section is None:
            continue
        if not isinstance(section, dict):
            raise ShapeError(
                f"target {target!r}: {key!r} must be an object, got {describe(section)}"
            )
        metrics.extend(_READERS[key](target, section, device))
    return metrics


def _latency(target: str, section: dict[str, Any], device: Device) -> list[Metric]:
    where = f"target {target!r}, latency"
    factor = _time_factor(section, where)
    values = section.get("values")
    if values is not None and not isinstance(values, list):
        raise ShapeError(f"{where}: 'values' must be an array, got {describe(values)}")
    samples = [
        _ns(_number(item, f"{where} values[{i}]"), factor, where)
        for i, item in enumerate(values or [])
    ]

    def field(key: str) -> float | None:
        raw = section.get(key)
        return None if raw is None else _ns(_number(raw, f"{where} {key!r}"), factor, where)

    mean = field("mean")
    if mean is None and samples:
        mean = statistics.fmean(samples)
    if mean is None:
        return []  # a latency section with no measurement in it
    count = section.get("count")
    calls = count if isinstance(count, int) and not isinstance(count, bool) else len(samples)
    attrs: dict[str, Any] = {f"{key}_ns": field(key) for key in _PERCENTILES}
    stdev_pct = number(section.get("stdev_"))
    if stdev_pct is not None:
        attrs["stdev_pct"] = stdev_pct
    return [
        Metric(
            kind=MetricKind.BENCH,
            name=target,
            device=device,
            calls=calls or None,
            total_ns=field("total"),
            avg_ns=mean,
            min_ns=min(samples) if samples else None,
            max_ns=max(samples) if samples else None,
            std_ns=field("stdev"),
            median_ns=field("p50"),
            samples_ns=samples or None,
            attrs={key: value for key, value in attrs.items() if value is not None},
        )
    ]


def _time_factor(section: Mapping[str, Any], where: str) -> int:
    unit = section.get("unit", "s")
    if not isinstance(unit, str) or unit not in NS_PER_UNIT:
        raise ShapeError(f"{where}: unknown time unit {unit!r}")
    return NS_PER_UNIT[unit]


def _ns(value: float, factor: int, where: str) -> float:
    if value < 0:
        raise ShapeError(f"{where}: a latency cannot be negative ({value!r})")
    return scaled(value, factor)


def _number(raw: Any, where: str) -> float:
    value = number(raw)
    if value is None:
        raise ShapeError(f"{where} must be a finite number, got {describe(raw)}")
    return value


def _rate(name: str) -> Callable[[str, dict[str, Any], Device], list[Metric]]:
    """A reader of a ``{unit, value}`` section: throughput or efficiency, higher is better."""

    def read(target: str, section: dict[str, Any], device: Device) -> list[Metric]:
        raw = section.get("value")
        if raw is None:
            return []
        unit = section.get("unit")
        return [
            Metric(
                kind=MetricKind.MEASURE,
                name=name,
                device=device,
                scope=target,
                unit=unit if isinstance(unit, str) and unit else "1/s",
                better=Better.HIGHER,
                value=_number(raw, f"target {target!r}, {name} 'value'"),
            )
        ]

    return read


def _memory(target: str, section: dict[str, Any], device: Device) -> list[Metric]:
    where = f"target {target!r}, memory"
    unit = section.get("unit", "MB")
    if not isinstance(unit, str) or unit not in _BYTES_PER:
        raise ShapeError(f"{where}: unknown size unit {unit!r}")
    return [
        Metric(
            kind=MetricKind.MEASURE,
            name=key,
            device=device,
            scope=target,
            unit="bytes",
            value=scaled(_number(raw, f"{where} {key!r}"), _BYTES_PER[unit], f"{where} {key!r}"),
        )
        for key, raw in section.items()
        if key.startswith("max_") and raw is not None
    ]


def _energy(target: str, section: dict[str, Any], device: Device) -> list[Metric]:
    where = f"target {target!r}, energy"
    unit = section.get("unit", "kWh")
    return [
        Metric(
            kind=MetricKind.MEASURE,
            name=f"{key}_energy",
            device=device,
            scope=target,
            unit=unit if isinstance(unit, str) and unit else "kWh",
            value=_number(raw, f"{where} {key!r}"),
        )
        for key, raw in section.items()
        if key != "unit" and raw is not None
    ]


_READERS: dict[str, Callable[[str, dict[str, Any], Device], list[Metric]]] = {
    "latency": _latency,
    "throughput": _rate("throughput"),
    "memory": _memory,
    "energy": _energy,
    "efficiency": _rate("efficiency"),
}
